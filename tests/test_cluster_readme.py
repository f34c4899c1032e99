"""The documentation's block for a cluster without a shared disk (docs/how-to/s3-and-clusters.md, which
the README links), run as written: the environment built and
packed with the block's own lines (once per version of the package, cached), a standalone master
and worker started with the block's daemon lines, and the main job submitted with the block's
``spark-submit`` line from this checkout, which holds no ``env``. Only the host, the port, the
environment's folder and the bucket's names are replaced; versitygw on loopback is the store.

The worker gets the AWS environment as an instance role would give it; Spark's own variables
(``SPARK_WORKER_DIR``, ``SPARK_LOCAL_DIRS``, ...) keep every folder under the test's. Proves that
every segment was read in an executor, that the tables, the Data Docs and the report are in the
bucket, that the audit replayed with segaudit's window function (its jar shipped to the executors),
that no table file is in any local folder the driver or the worker can see, and that the terminal
held segaudit's lines only, Spark's log being in its file."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from analytics.contract import AUDIT, EXPORT
from analytics.publish import published
from analytics.spark import jvmlog
from analytics.spark.session import SMALL_WORK_OPTIONS
from analytics.spark.standalone import free_port, wait_for_worker
from tests.commands import assert_submitted_lines
from tests.conftest import REPO
from tests.s3_server import SECRET_KEY

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.s3]
SAMPLE = (REPO / "data" / "mixed").resolve()
CLUSTER_PAGE = REPO / "docs" / "how-to" / "s3-and-clusters.md"
MARK = "<!-- the cluster block: tests/test_cluster_readme.py runs it as written -->"
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def cluster_block() -> list[tuple[str, str]]:
    """The page's block as its parts: (the comment that opens a part, its lines); the lines before
    the first comment are the part ``""``."""
    text = CLUSTER_PAGE.read_text()
    block = text[text.index(MARK):].split("```bash\n", 1)[1].split("```", 1)[0]
    parts: list[tuple[str, str]] = [("", "")]
    for line in block.splitlines(keepends=True):
        if line.startswith("# "):
            parts.append((line[2:].strip(), ""))
        else:
            parts[-1] = (parts[-1][0], parts[-1][1] + line)
    return parts


def _package_key() -> str:
    """What the packed environment depends on: the package's files and its build configuration."""
    digest = hashlib.sha256()
    for path in sorted([REPO / "pyproject.toml", *(p for p in (REPO / "analytics").rglob("*")
                                                   if p.is_file() and "__pycache__" not in p.parts)]):
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="module")
def readme_run(s3_server, tmp_path_factory):
    work = tmp_path_factory.mktemp("readme-cluster")
    cache = Path(os.environ.get("SEGAUDIT_CACHE") or Path.home() / ".cache" / "segaudit") / "readme-env"
    environment = cache / _package_key()
    uri = s3_server.make_bucket("readme")
    s3_server.upload(SAMPLE, f"{uri}/logs/mixed")
    port = free_port()
    replaced = {"https://s3.example.internal": s3_server.endpoint, "/tmp/segaudit-env": f"{environment}/segaudit-env",
                "spark-master": "127.0.0.1", "7077": str(port), "s3://kafka-logs/broker-1": f"{uri}/logs/mixed",
                "s3://audit/broker-1": f"{uri}/out/mixed"}
    parts = cluster_block()
    assert [title.split(":")[0] for title, _ in parts] == ["", "once", "a standalone master and worker, with the "
                                                           "daemon script that ships in PySpark", "the main job"]
    texts = []
    for _, lines in parts:
        for old, new in replaced.items():
            lines = lines.replace(old, new)
        texts.append(lines)
    assert all(old in "".join(lines for _, lines in parts) for old in replaced)
    aws, once, daemons, job = texts
    env = dict(os.environ, **s3_server.env, SPARK_PID_DIR=str(work / "pids"), SPARK_LOG_DIR=str(work / "logs"),
               SPARK_WORKER_DIR=str(work / "w"), SPARK_LOCAL_DIRS=str(work / "local"), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_MASTER_WEBUI_PORT=str(free_port()), SPARK_WORKER_WEBUI_PORT=str(free_port()),
               SPARK_WORKER_CORES="2", SPARK_WORKER_MEMORY="2g", SPARK_DAEMON_JAVA_OPTS=SMALL_WORK_OPTIONS,
               SEGAUDIT_TASK_LOG=str(work / "tasks.jsonl"))  # the executors inherit the worker's
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    if not (environment / "segaudit-env.tar.gz").is_file():
        shutil.rmtree(cache, ignore_errors=True)  # one environment cached: the current package's
        environment.mkdir(parents=True)
        built = _bash(aws + once, env, timeout=1200)
        assert built.returncode == 0, built.stderr[-3000:]
    assert not (REPO / "env").exists()
    home = next(line for line in daemons.splitlines() if line.startswith("export SPARK_HOME="))
    started = _bash(aws + daemons, env, timeout=300)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        wait_for_worker(int(env["SPARK_MASTER_WEBUI_PORT"]), sorted((work / "logs").glob("*.out")))
        since = time.time()
        submitted = _bash(aws + home + "\n" + job, env, timeout=1200)
        yield submitted, uri, work, since
    finally:
        stop = "\n".join(f'"$SPARK_HOME"/sbin/spark-daemon.sh stop {c} 1' for c in (WORKER, MASTER))
        _bash(aws + home + "\n" + stop, env, timeout=120)


def _bash(script: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_readme_block_runs_the_main_job_on_a_cluster_whose_only_shared_storage_is_a_bucket(readme_run):
    submitted, uri, work, since = readme_run
    assert submitted.returncode in (0, 1), submitted.stderr[-3000:]  # 1: the sample's planted violations
    assert SECRET_KEY not in submitted.stdout + submitted.stderr

    # every segment was read by a process under the worker's executor JVM, from the bucket
    reads = [json.loads(line) for line in (work / "tasks.jsonl").read_text().splitlines()]
    segments = sorted(r["file"] for r in reads if r["table"] == "export-segments")
    assert segments == sorted(f"{uri}/logs/mixed/{p.relative_to(SAMPLE).as_posix()}" for p in SAMPLE.rglob("*.log"))
    for r in reads:
        assert any("CoarseGrainedExecutorBackend" in cmdline for cmdline in r["ancestry"]), r["ancestry"]

    # the tables, the Data Docs and the report: in the bucket, as the latest commit names them
    view = published(f"{uri}/out/mixed")
    assert view.manifest(AUDIT)["built_from"] == {EXPORT: view.manifest(EXPORT)["run_id"]}
    verdicts = ds.dataset(view._p("batch_verdicts"), filesystem=view.fs, format="parquet", partitioning="hive")
    assert verdicts.count_rows() == view.manifest(EXPORT)["rows"]["batches"] == 670
    assert "</html>" in view.read_text("report/index.html")
    assert json.loads(view.read_text("validation/results.json"))["suites"]
    # the replay ran segaudit's window function, its jar shipped to the executors by the block's --jars
    # (kept beside the S3 connector's the job adds for its s3:// paths), and no task of it failed
    summary = json.loads(view.read_text("summary.json"))
    assert "window function failed" not in submitted.stderr
    assert summary["replay"] == "window_function" and summary["replay_note"] is None, summary

    # no table file in any folder the driver or the worker can see; the executors ran in the worker's
    local = [p for p in work.rglob("*") if (p.suffix == ".parquet" or p.name.startswith("part-"))
             and "env" not in p.relative_to(work).parts]  # pyarrow's own test files in the unpacked environment
    assert local == []
    assert any((work / "w").rglob("stderr"))

    # the terminal: segaudit's lines (and the launcher's one); Spark's log in its file
    assert_submitted_lines(submitted.stderr)
    logs = [p for p in jvmlog.folder().glob("submit-*.log") if p.stat().st_mtime >= since]
    assert any("Running Spark version" in p.read_text(errors="replace") for p in logs), logs
