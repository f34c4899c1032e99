"""Jars from Maven Central, fetched once into segaudit's cache (``~/.cache/segaudit/jars``;
``SEGAUDIT_CACHE`` moves it) with ``urllib`` (no Maven needed): each file checked against the
``.sha1`` Central serves, written under a temporary name and renamed, so a file in the cache is
whole. Later calls only look at the files. The S3 connector (:mod:`analytics.spark.objectstore`)
fetches through here.
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
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

from analytics.errors import SegauditError

MAVEN = "https://repo1.maven.org/maven2/"


class FetchFailed(SegauditError):
    """A jar could not be fetched from Maven Central, or did not match its checksum."""


def cache_dir() -> Path:
    return Path(os.environ.get("SEGAUDIT_CACHE") or Path.home() / ".cache" / "segaudit") / "jars"


def url(coordinate: str) -> str:
    """The jar of ``group:artifact:version`` on Central."""
    group, artifact, version = coordinate.split(":")
    return f"{MAVEN}{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"


def jars(coordinates: list[str], what: str) -> list[Path]:
    """The jars of ``coordinates`` in the cache, fetched the first time (``what`` names them on
    stderr while they are fetched); :class:`FetchFailed` when some cannot be."""
    folder = cache_dir()
    paths = [folder / url(c).rpartition("/")[2] for c in coordinates]
    missing = [(c, p) for c, p in zip(coordinates, paths) if not p.is_file()]
    if missing:
        fetch([url(c) for c, _ in missing], [p for _, p in missing], folder, what)
    return paths


class Central:
    """HTTPS connections to Maven Central, kept open across requests and opened one after another
    (name lookups made in parallel stalled 5 s each with this machine's resolver); through
    ``urllib`` when an HTTPS proxy is configured."""

    def __init__(self, count: int):
        self.host = urlsplit(MAVEN).hostname
        self.proxied = bool(urllib.request.getproxies().get("https"))
        self._idle: queue.Queue = queue.Queue()
        for _ in range(count):
            connection = None if self.proxied else http.client.HTTPSConnection(self.host, timeout=60)
            if connection is not None:
                connection.connect()
            self._idle.put(connection)

    def request(self, method: str, url: str, write=None) -> tuple[int, bytes]:
        """(Content-Length, body) of ``url``; the body goes to ``write`` in pieces when given."""
        headers = {"User-Agent": "segaudit"}
        connection = self._idle.get()
        try:
            if connection is None:
                answer = urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers),
                                                timeout=60)
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
                    return size, answer.read()
                while chunk := answer.read(1 << 20):
                    write(chunk)
                return size, b""
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


def _expected(central: Central, url: str) -> tuple[str, int]:
    """The SHA-1 Central serves for ``url`` and the file's size."""
    sha1 = central.request("GET", url + ".sha1")[1].decode("ascii", "replace").split()[0].lower()
    return sha1, central.request("HEAD", url)[0]


def _download(central: Central, url: str, sha1: str, target: Path) -> None:
    """``url`` into ``target``, through a temporary file renamed once its SHA-1 is ``sha1``."""
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        digest = hashlib.sha1()
        with os.fdopen(fd, "wb") as out:
            def write(chunk: bytes) -> None:
                digest.update(chunk)
                out.write(chunk)

            central.request("GET", url, write)
        if digest.hexdigest() != sha1:
            raise FetchFailed(f"{url} does not match its .sha1 ({digest.hexdigest()} != {sha1})")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def fetch(urls: list[str], targets: list[Path], folder: Path, what: str) -> None:
    """``urls`` into ``targets`` in ``folder``, four at a time; :class:`FetchFailed` when one fails."""
    folder.mkdir(parents=True, exist_ok=True)
    central = None
    try:
        central = Central(min(4, len(urls)))
        with ThreadPoolExecutor(max_workers=min(4, len(urls))) as pool:
            expected = list(pool.map(partial(_expected, central), urls))
            shown = str(folder).replace(str(Path.home()), "~", 1)
            print(f"segaudit: fetching {what} ({sum(size for _, size in expected) / 2**20:.0f} MiB, "
                  f"once) into {shown}", file=sys.stderr, flush=True)
            list(pool.map(partial(_download, central), urls, [sha1 for sha1, _ in expected], targets))
    except (OSError, http.client.HTTPException) as e:  # URLError and HTTPError are OSErrors
        raise FetchFailed(str(e)) from e
    finally:
        if central is not None:
            central.close()
