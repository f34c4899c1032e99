"""Jars from a Maven repository, fetched once into segaudit's cache (``~/.cache/segaudit/jars``;
``SEGAUDIT_CACHE`` moves it) with the standard library (no Maven needed). The repository is Maven
Central unless ``SEGAUDIT_MAVEN_REPOSITORY`` names another (a company's mirror, ``http`` or
``https``; the standard proxy variables apply, ``NO_PROXY`` included). Each jar is checked against
the SHA-256 pinned in this package (``jars.sha256``, written by ``scripts/pin_jars.py`` from jars
whose ``.sha1`` Central served), never against what the repository serves beside it, and a jar
without a pin is not fetched. A jar is written under a temporary name and renamed, so a file in
the cache is whole; later calls only look at the files, so nothing is fetched once the cache holds
them (``scripts/setup.sh`` fills it at install). The S3 connector
(:mod:`analytics.spark.objectstore`) fetches through here.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import queue
import sys
import tempfile
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from functools import cache, partial
from pathlib import Path
from urllib.parse import urlsplit

from analytics.errors import SegauditError

MAVEN = "https://repo1.maven.org/maven2/"
REPOSITORY_VARIABLE = "SEGAUDIT_MAVEN_REPOSITORY"
PINS = Path(__file__).resolve().parent / "jars.sha256"


class FetchFailed(SegauditError):
    """A jar could not be fetched, or did not match its pinned SHA-256."""


def cache_dir() -> Path:
    return Path(os.environ.get("SEGAUDIT_CACHE") or Path.home() / ".cache" / "segaudit") / "jars"


def repository() -> str:
    """The repository's URL, ending in a slash: ``$SEGAUDIT_MAVEN_REPOSITORY``, else Maven Central."""
    return (os.environ.get(REPOSITORY_VARIABLE) or MAVEN).rstrip("/") + "/"


def path(coordinate: str) -> str:
    """The jar of ``group:artifact:version`` in a Maven repository's layout.

    >>> path("org.apache.hadoop:hadoop-aws:3.4.1")
    'org/apache/hadoop/hadoop-aws/3.4.1/hadoop-aws-3.4.1.jar'
    """
    group, artifact, version = coordinate.split(":")
    return f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"


@cache
def pins() -> dict[str, str]:
    """Coordinate -> the SHA-256 of its jar, from ``jars.sha256`` (``sha256sum``'s layout)."""
    found = {}
    for line in PINS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, coordinate = line.split()
            found[coordinate] = digest
    return found


def jars(coordinates: list[str], what: str) -> list[Path]:
    """The jars of ``coordinates`` in the cache, fetched the first time (``what`` names them on
    stderr while they are fetched); :class:`FetchFailed` when some cannot be."""
    folder = cache_dir()
    paths = [folder / path(c).rpartition("/")[2] for c in coordinates]
    missing = [(c, p) for c, p in zip(coordinates, paths) if not p.is_file()]
    if missing:
        unpinned = [c for c, _ in missing if c not in pins()]
        if unpinned:
            raise FetchFailed(f"no SHA-256 is pinned for {', '.join(unpinned)} (scripts/pin_jars.py pins them)")
        fetch([c for c, _ in missing], [p for _, p in missing], folder, what)
    return paths


class Repository:
    """Connections to the repository, kept open across requests and opened one after another (name
    lookups made in parallel stalled 5 s each with this machine's resolver); through ``urllib``
    when a proxy is configured for it."""

    def __init__(self, base: str, count: int):
        self.base = base
        parts = urlsplit(base)
        self.proxied = bool(urllib.request.getproxies().get(parts.scheme)) and not urllib.request.proxy_bypass(
            parts.hostname or "")
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._opener = urllib.request.build_opener()  # the proxies of the environment now (urlopen's are its first use's)
        self._idle: queue.Queue = queue.Queue()
        for _ in range(count):
            connection = None if self.proxied else kind(parts.hostname, parts.port, timeout=60)
            if connection is not None:
                connection.connect()
            self._idle.put(connection)

    def request(self, method: str, url: str, write=None) -> int:
        """The Content-Length of ``url``; the body goes to ``write`` in pieces when given."""
        headers = {"User-Agent": "segaudit"}
        connection = self._idle.get()
        try:
            if connection is None:
                answer = self._opener.open(urllib.request.Request(url, method=method, headers=headers), timeout=60)
            else:
                for attempt in (1, 2):  # the server may have closed a connection left idle
                    try:
                        connection.request(method, urlsplit(url).path, headers=headers)
                        answer = connection.getresponse()
                        break
                    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                        connection.close()
                        if attempt == 2:
                            raise
            with answer:
                if answer.status != 200:
                    raise OSError(f"HTTP {answer.status} for {url}")
                size = int(answer.headers.get("Content-Length") or 0)
                if method == "HEAD" or write is None:
                    answer.read()
                    return size
                while chunk := answer.read(1 << 20):
                    write(chunk)
                return size
        except BaseException:
            if connection is not None:
                connection.close()  # opened again by its next request
            raise
        finally:
            self._idle.put(connection)

    def close(self) -> None:
        while not self._idle.empty():
            connection = self._idle.get()
            if connection is not None:
                connection.close()


def _download(repo: Repository, coordinate: str, target: Path) -> None:
    """``coordinate``'s jar into ``target``, through a temporary file renamed once its SHA-256 is
    the pinned one."""
    url = repo.base + path(coordinate)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            def write(chunk: bytes) -> None:
                digest.update(chunk)
                out.write(chunk)

            repo.request("GET", url, write)
        if digest.hexdigest() != pins()[coordinate]:
            raise FetchFailed(f"{url} does not match the SHA-256 pinned for it "
                              f"({digest.hexdigest()} != {pins()[coordinate]})")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def fetch(coordinates: list[str], targets: list[Path], folder: Path, what: str) -> None:
    """The jars of ``coordinates`` into ``targets`` in ``folder``, four at a time; :class:`FetchFailed`
    when one fails."""
    folder.mkdir(parents=True, exist_ok=True)
    base = repository()
    repo = None
    try:
        repo = Repository(base, min(4, len(coordinates)))
        with ThreadPoolExecutor(max_workers=min(4, len(coordinates))) as pool:
            sizes = list(pool.map(lambda c: repo.request("HEAD", base + path(c)), coordinates))
            shown = str(folder).replace(str(Path.home()), "~", 1)
            print(f"segaudit: fetching {what} ({sum(sizes) / 2**20:.0f} MiB, once) from {urlsplit(base).hostname}"
                  f" into {shown}", file=sys.stderr, flush=True)
            list(pool.map(partial(_download, repo), coordinates, targets))
    except (OSError, http.client.HTTPException) as e:  # URLError and HTTPError are OSErrors
        raise FetchFailed(f"{e} (from {base}; {REPOSITORY_VARIABLE} names another repository)") from e
    finally:
        if repo is not None:
            repo.close()
