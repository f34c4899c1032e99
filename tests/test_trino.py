"""Trino opens OUT's Delta tables where they are: its Delta Lake connector registers every table at
``OUT/<table>``, and the metrics history at ``OUT.history``, on a local disk and in a bucket of a real S3
server (versitygw on loopback), knowing nothing of segaudit, and counts the rows segaudit's own commit
resolves.

Trino is trino-server from Maven Central, which ``bash scripts/trino.sh`` fetches once into
``~/.cache/segaudit/trino/<version>`` (``SEGAUDIT_CACHE`` moves it): one coordinator that is its own
worker on loopback, run by a JDK 24 or newer (``SEGAUDIT_TRINO_JAVA_HOME``, ``JAVA_HOME`` or the newest
under ``/usr/lib/jvm``; without one the tests fail, saying so), queried over its HTTP API
(``/v1/statement``). Its catalog ``delta`` keeps its metastore in a local folder and reads local files
(``file://``) and the S3 server's buckets (``s3://``)."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from analytics.contract.vocabulary import TABLES
from analytics.publish import Store, published, tables
from analytics.report.history import default_history_path
from tests.commands import assert_own_lines
from tests.ports import free_port
from tests.s3_server import ACCESS_KEY, SECRET_KEY

pytestmark = [pytest.mark.s3, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "mixed"
CONFIG = str(REPO / "data" / "mixed.truth" / "audit.toml")
VERSION = "476"  # scripts/trino.sh fetches this release
JAVA = 24  # the oldest Java that Trino VERSION runs on
HOME = Path(os.environ.get("SEGAUDIT_CACHE") or Path.home() / ".cache" / "segaudit") / "trino" / VERSION
NO_JDK = (f"Trino {VERSION} needs a JDK {JAVA} or newer, and none was found (SEGAUDIT_TRINO_JAVA_HOME, "
          f"JAVA_HOME, /usr/lib/jvm/*): install one, e.g. Eclipse Temurin 25 "
          f"(https://adoptium.net/installation/linux/), or name its folder in SEGAUDIT_TRINO_JAVA_HOME")


def java_major(home: Path) -> int:
    """The feature release of the JDK at ``home`` (``JAVA_VERSION`` of its ``release`` file); 0 when it is
    none."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("JAVA_VERSION="):
            first = line.partition("=")[2].strip('"').split(".")[0]
            return int(first) if first.isdigit() else 0
    return 0


def trino_java() -> Path:
    """The JDK Trino runs on: ``SEGAUDIT_TRINO_JAVA_HOME`` when set, else ``JAVA_HOME`` or the newest under
    ``/usr/lib/jvm`` that is :data:`JAVA` or newer; the test fails, saying so, when there is none."""
    named = os.environ.get("SEGAUDIT_TRINO_JAVA_HOME")
    candidates = [Path(named)] if named else [
        *([Path(os.environ["JAVA_HOME"])] if os.environ.get("JAVA_HOME") else []),
        *sorted((Path(p) for p in glob.glob("/usr/lib/jvm/*")), key=java_major, reverse=True)]
    for home in candidates:
        if java_major(home) >= JAVA and (home / "bin" / "java").is_file():
            return home
    pytest.fail(NO_JDK + (f" ({named} is Java {java_major(Path(named)) or 'nothing'})" if named else ""),
                pytrace=False)


class Trino:
    """One Trino node on ``127.0.0.1`` (the coordinator, which also runs the tasks) over ``root``: its
    configuration, data and log there, its catalog ``delta`` reading local files and the S3 server at
    ``endpoint``. :meth:`start` returns at once; :meth:`query` waits until the node has started."""

    def __init__(self, root: Path, java_home: Path, endpoint: str):
        self.root, self.java_home, self.endpoint = root, java_home, endpoint
        self.port = 0
        self._proc: subprocess.Popen | None = None
        self._log = None
        self._ready = False
        self._starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _configure(self) -> Path:
        etc = self.root / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        (self.root / "metastore").mkdir(exist_ok=True)
        files = {
            "node.properties": {
                "node.environment": "segaudit", "node.id": str(uuid.uuid4()),
                "node.data-dir": self.root / "data", "node.bind-ip": "127.0.0.1",
                "node.internal-address": "127.0.0.1"},
            "config.properties": {
                "coordinator": "true", "node-scheduler.include-coordinator": "true",
                "http-server.http.port": self.port, "discovery.uri": self.url, "plugin.dir": HOME / "plugin",
                "query.max-memory": "512MB", "query.max-memory-per-node": "512MB", "task.concurrency": "2",
                "web-ui.enabled": "false", "http-server.log.enabled": "false"},
            "log.properties": {"io.trino": "WARN", "io.airlift": "WARN"},
            "catalog/delta.properties": {
                "connector.name": "delta_lake", "hive.metastore": "file",
                "hive.metastore.catalog.dir": f"local://{self.root / 'metastore'}",
                "delta.register-table-procedure.enabled": "true",
                "fs.native-local.enabled": "true", "local.location": "/",  # file:///a/b is /a/b
                "fs.native-s3.enabled": "true", "s3.endpoint": self.endpoint, "s3.region": "us-east-1",
                "s3.path-style-access": "true", "s3.aws-access-key": ACCESS_KEY,
                "s3.aws-secret-key": SECRET_KEY},
        }
        for name, properties in files.items():
            (etc / name).write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        # a small heap beside the suite's other JVMs; tiny queries: HotSpot's quick compiler alone
        (etc / "jvm.config").write_text("\n".join([
            "-Xmx1G", "-XX:+ExitOnOutOfMemoryError", "-XX:TieredStopAtLevel=1", "-Dfile.encoding=UTF-8",
            "-XX:+EnableDynamicAgentLoading", "-Djdk.attach.allowAttachSelf=true"]) + "\n")
        return etc

    def start(self) -> "Trino":
        self.port = free_port()
        etc = self._configure()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JAVA_TOOL_", "_JAVA_"))}
        env |= {"JAVA_HOME": str(self.java_home),
                "PATH": f"{self.java_home / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
        if self._log is not None:
            self._log.close()
        self._log = open(self.root / "server.log", "wb")
        self._proc = subprocess.Popen(
            [str(HOME / "bin" / "launcher"), "run", f"--etc-dir={etc}", f"--data-dir={self.root / 'data'}"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
        self._starts += 1
        return self

    def wait(self, timeout: float = 240) -> None:
        """Until ``/v1/info`` says the node is no longer starting (its catalogs loaded). A free port
        taken by someone else before Trino bound it: started again on another, up to three times."""
        deadline = time.monotonic() + timeout
        while not self._ready:
            if self._proc.poll() is not None and self._starts < 3 and self._port_taken():
                self.start()
            assert self._proc.poll() is None, f"Trino exited ({self._proc.returncode}):\n{self.log()}"
            assert time.monotonic() < deadline, f"Trino did not start in {timeout:.0f} s:\n{self.log()}"
            try:
                with urllib.request.urlopen(f"{self.url}/v1/info", timeout=5) as answer:
                    self._ready = json.load(answer).get("starting") is False
            except (OSError, ValueError):
                pass
            if not self._ready:
                time.sleep(0.25)

    def _port_taken(self) -> bool:
        log = (self.root / "server.log").read_text(errors="replace")
        return "BindException: Address already in use" in log

    def log(self) -> str:
        return (self.root / "server.log").read_text(errors="replace")[-4000:]

    def query(self, sql: str) -> list[list]:
        """The rows of ``sql``, following the statement's ``nextUri`` to its end; a failed query fails
        the test with Trino's message."""
        self.wait()
        headers = {"X-Trino-User": "segaudit", "X-Trino-Source": "segaudit-tests"}
        request = urllib.request.Request(f"{self.url}/v1/statement", data=sql.encode(), headers=headers)
        rows: list[list] = []
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(request, timeout=120) as answer:
                    doc = json.load(answer)
            except urllib.error.HTTPError as exc:
                if exc.code in (502, 503, 504) and time.monotonic() < deadline:
                    time.sleep(0.1)  # busy: asked again, as Trino's clients do
                    continue
                raise AssertionError(f"Trino answered {exc.code} to {sql}: {exc.read()[:2000]!r}") from None
            rows += doc.get("data", [])
            if "error" in doc:
                error = doc["error"]
                raise AssertionError(f"Trino failed {sql}: {error.get('errorName')}: {error.get('message')}")
            if "nextUri" not in doc:
                return rows
            request = urllib.request.Request(doc["nextUri"], headers=headers)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        if self._log is not None:
            self._log.close()


@pytest.fixture(scope="module")
def trino(s3_server, tmp_path_factory):
    """Trino started for the module (fetched first when it is not yet: ``scripts/trino.sh``), its
    catalog reading the S3 server's buckets; stopped, its process group, at the end."""
    java_home = trino_java()
    fetched = subprocess.run(["bash", str(REPO / "scripts" / "trino.sh")], capture_output=True, text=True,
                             timeout=1800)
    if fetched.returncode != 0:
        pytest.fail(f"Trino {VERSION} unavailable: {fetched.stderr.strip()[-2000:]}", pytrace=False)
    server = Trino(tmp_path_factory.mktemp("trino"), java_home, s3_server.endpoint).start()
    try:
        yield server
    finally:
        server.stop()


def segaudit(*argv: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "analytics", *argv], capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    assert_own_lines(done.stderr)
    assert done.returncode in (0, 1), done.stderr
    return done


@pytest.fixture(scope="module")
def outs(s3_server, tmp_path_factory):
    """The sample's ``segaudit run`` once onto a local disk and once into a bucket (two processes at once,
    while Trino starts), each with its metrics history beside OUT: where -> OUT."""
    bucket = s3_server.make_bucket("trino")
    found = {"disk": str(tmp_path_factory.mktemp("disk") / "mixed"), "bucket": f"{bucket}/out/mixed"}
    subprocess.run([sys.executable, "-m", "analytics.spark.objectstore"], cwd=REPO, capture_output=True,
                   check=True)  # the install's fetch of the S3 connector
    with ThreadPoolExecutor(2) as both:  # each mostly waits on its own JVM
        list(both.map(lambda out: segaudit("run", str(SAMPLE), "--out", out, "--config", CONFIG),
                      found.values()))
    return found


def outputs(out: str) -> list[str]:
    """The Delta tables of OUT's latest commit."""
    return sorted({n for e in published(out).snapshot.stages.values() for n in e["outputs"]} & set(TABLES))


def segaudit_rows(out: str, name: str) -> int:
    """The rows of a table as segaudit's own commit resolves it (its run's files, Hive folders and all)."""
    view = published(out)
    return ds.dataset(view._p(name), filesystem=view.fs, format="parquet", partitioning="hive").count_rows()


def history_rows(history: str) -> int:
    """The rows of the metrics history as segaudit reads it: the files of its Delta table's latest version."""
    files = tables.file_uris(history)
    assert files is not None, f"{history} is not a Delta table"
    paths = [f.split("://", 1)[-1] for f in files]
    return ds.dataset(paths, filesystem=Store(history).fs, format="parquet").count_rows() if paths else 0


def location(path: str) -> str:
    """``path`` as Trino names it: a URI (``file://`` on a local disk)."""
    return path if "://" in path else f"file://{path}"


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_trino_opens_every_table_at_its_stable_path(trino, outs, where):
    """Trino's Delta Lake connector registers every table at ``OUT/<table>`` and the metrics history at
    ``OUT.history`` (``system.register_table``: the Delta log alone, no metastore of segaudit's) and
    counts the rows segaudit's own commit resolves, table for table; its verdicts per batch are
    summary.json's, and the history's one run is the run's."""
    out = outs[where]
    names = outputs(out)
    assert len(names) >= 20
    paths = {name: f"{out}/{name}" for name in names} | {"history": default_history_path(out)}
    expected = {name: segaudit_rows(out, name) for name in names}
    expected["history"] = history_rows(paths["history"])
    assert expected["batch_verdicts"] > 0 and expected["history"] > 0
    trino.query(f"CREATE SCHEMA delta.{where}")
    found = {}
    for name, path in paths.items():
        trino.query(f"CALL delta.system.register_table(schema_name => '{where}', table_name => '{name}', "
                    f"table_location => '{location(path)}')")
        found[name] = trino.query(f'SELECT count(*) FROM delta.{where}."{name}"')[0][0]
    assert found == expected
    summary = json.loads(published(out).read_text("summary.json"))
    verdicts = trino.query(f"SELECT verdict, count(*) FROM delta.{where}.batch_verdicts GROUP BY verdict")
    assert dict(verdicts) == {verdict: n for verdict, n in summary["verdicts"].items() if n}
    assert trino.query(f"SELECT DISTINCT run_id FROM delta.{where}.history") == [[summary["run_id"]]]
