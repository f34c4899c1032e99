"""Shared fixtures. Pure-Python tests need no JVM; Spark tests take the one session-scoped ``spark``."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("SEGAUDIT_CORPUS", REPO.parent / "shared" / "corpus"))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """A real S3 server on loopback for a test module (versitygw, :mod:`tests.s3_server`), its AWS
    environment in ``os.environ`` while the module runs (every other ``AWS_*`` variable out of the
    way: no profile, no ``~/.aws``), put back afterwards. Skips, saying how to get it, when
    ``bash scripts/versitygw.sh`` has not built versitygw; ``.ci/run`` fails when it sees that."""
    from tests.s3_server import BINARY, UNAVAILABLE, S3Server

    if not BINARY.is_file():
        pytest.skip(f"{UNAVAILABLE}: run bash scripts/versitygw.sh")
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    saved = {key: value for key, value in os.environ.items() if key.startswith("AWS_")}
    for key in saved:
        del os.environ[key]
    os.environ.update(server.env)
    try:
        yield server
    finally:
        for key in [key for key in os.environ if key.startswith("AWS_")]:
            del os.environ[key]
        os.environ.update(saved)
        server.stop()


@pytest.fixture(scope="session")
def spark():
    """The one Spark session of the test run: local, two cores, few shuffle partitions, no UI. Its
    inputs are tiny, so it starts as ``segaudit`` does for a tiny input: HotSpot's quick compiler
    alone (``session.jit_options``) and evaluation without generated code
    (``session.evaluation_conf``). The ``audited`` fixture took 213 s with Spark's defaults, 151 s
    interpreted (309 CPU-seconds), 132 s with the quick compiler as well (261 CPU-seconds);
    ``test_audit_differential`` audits the sample both ways.

    It lives as long as a test process and runs hundreds of audits, whose plans Spark's status
    store keeps (a thousand SQL executions and jobs by default, each audit's plans hundreds of
    nodes) even without a UI: here it keeps only the newest few, and the JVM gets 2 GiB (a 1 GiB heap
    ran out late in a CI run, serializing a task)."""
    from analytics.spark.session import get_spark

    _class_archive()
    session = get_spark(
        "local[2]", input_bytes=0,
        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.default.parallelism": "2",
              "spark.driver.memory": "2g", "spark.sql.ui.retainedExecutions": "20", "spark.ui.retainedJobs": "50",
              "spark.ui.retainedStages": "50"},
    )
    yield session
    session.stop()


def _class_archive() -> None:
    """Spark's class-data archive (``analytics.spark.classdata``) written before the suite's first
    JVM starts, so that every JVM maps Spark's classes from it (the commands run as processes, the
    clusters' drivers, this session)."""
    from analytics.spark import classdata
    from analytics.spark.session import class_archive

    class_archive()  # none yet: its writer starts
    classdata.wait_for_writers(300)


RECORD_SCENARIOS = ("plain-retries", "missed-dedup", "state-loss-retry", "transactions")


class Scenarios(Mapping):
    """Scenario name -> (GeneratedLogDir, OUT): each generated, exported and audited when first asked
    for, once, so that a test process builds only the scenarios its tests read."""

    def __init__(self, build: Callable[[str], tuple], names: list[str]):
        self._build, self._names = build, names
        self._built: dict[str, tuple] = {}
        self._locks = {name: threading.Lock() for name in names}

    def __getitem__(self, name: str) -> tuple:
        with self._locks[name]:
            if name not in self._built:
                self._built[name] = self._build(name)
        return self._built[name]

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def prepare(self) -> None:
        """Build every scenario not built yet, three at a time: their small jobs leave the cores idle
        between them (about 15% faster than one at a time)."""
        with ThreadPoolExecutor(max_workers=3) as pool:
            list(pool.map(self.__getitem__, self._names))


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory, worker_id) -> Path:
    """A folder every process of this test run sees (pytest-xdist runs one per core)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base if worker_id == "master" else base.parent) / "shared"
    shared.mkdir(exist_ok=True)
    return shared


@contextmanager
def _built_once(folder: Path) -> Iterator[bool]:
    """Held by one process of the test run at a time: whether ``folder`` is still to be built (a
    build that did not finish is removed first). The build marks it done by leaving the context."""
    done = folder.with_name(folder.name + ".done")
    with open(folder.with_name(folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                yield True
                done.touch()
            else:
                yield False
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def audited(spark, tmp_path_factory, shared_dir) -> Scenarios:
    """Every scenario but ``mixed``, generated (seed 1), exported (with records where they matter)
    and audited with its own audit.toml, each when a test first reads it (:class:`Scenarios`), once
    for the test run: the process that first reads it builds it, and each process then takes a copy
    of the audit to read and write (the generated log dir is shared, and read only). The exports run
    in the building process, as ``segaudit`` runs a small one (the data source in Spark is tested in
    test_export)."""
    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from analytics.export import export
    from analytics.generate import Generated, generate, truth_dir_for
    from analytics.generate.scenarios import SCENARIO_NAMES

    root = tmp_path_factory.mktemp("audit")

    def one(name: str) -> tuple:
        built = shared_dir / f"scenario-{name}"
        with _built_once(built) as building:
            if building:
                g = generate(built / "logs", name, seed=1)
                export(None, [str(g.log_dir)], str(built / "out"), records=name in RECORD_SCENARIOS)
                audit(spark, str(built / "out"), load_config(g.truth_dir / "audit.toml"))
                (built / "generated.json").write_text(json.dumps([g.batches, g.verdicts]))
        batches, verdicts = json.loads((built / "generated.json").read_text())
        target = root / name / "out"
        shutil.copytree(built / "out", target, symlinks=True)
        return Generated(built / "logs", truth_dir_for(built / "logs"), batches, verdicts), str(target)

    return Scenarios(one, [name for name in SCENARIO_NAMES if name != "mixed"])


@pytest.fixture(scope="session")
def corpus_export(spark, corpus_dir, tmp_path_factory):
    """The corpus exported once, in Spark (the data source over real brokers' bytes): (ExportResult, OUT)."""
    from analytics.export import export

    out = str(tmp_path_factory.mktemp("corpus") / "out")
    return export(spark, [str(corpus_dir)], out), out


@pytest.fixture(scope="session")
def corpus_audited(spark, corpus_export):
    """``corpus_export`` audited without a configuration (the newest profile): (AuditResult, OUT). The
    audit adds its tables beside the export's, which it leaves as they are."""
    from analytics.audit.config import load_config
    from analytics.audit.job import audit

    _, out = corpus_export
    return audit(spark, out, load_config(None)), out


def pytest_terminal_summary(terminalreporter):
    """The suite's time by module (setup, call and teardown summed over its tests, on whichever worker
    ran it), the largest first: where the suite's budget goes, in every run's log."""
    seconds: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) in ("setup", "call", "teardown"):
                module = report.nodeid.split("::", 1)[0]
                seconds[module] = seconds.get(module, 0.0) + report.duration
    if not seconds:
        return
    total = sum(seconds.values())
    terminalreporter.write_sep("=", f"time by module: {total:,.0f} s in all")
    for module, spent in sorted(seconds.items(), key=lambda item: -item[1])[:20]:
        terminalreporter.write_line(f"{spent:8,.0f} s {spent / total:6.1%}  {module}")


def pytest_collection_modifyitems(config, items):
    """The longest modules first, so that with one worker per core none of them starts near the end
    and leaves the other cores idle (xdist takes modules in this order: ``--no-loadscope-reorder``).
    Their marks say which they are: ``slow``, then ``broker``, then ``s3``; the rest keep their order."""
    order = ("slow", "broker", "s3")
    weight: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        marks = {mark.name for mark in item.iter_markers()}
        rank = min((order.index(name) for name in marks & set(order)), default=len(order))
        weight[module] = min(weight.get(module, rank), rank)
    items.sort(key=lambda item: weight[item.nodeid.split("::", 1)[0]])
