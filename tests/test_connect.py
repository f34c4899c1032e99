"""``--remote sc://...``: commands run on a Spark Connect server started here (from PySpark's own
jars); the command's process starts no JVM of its own (it runs with no Java at all). ``sql`` reuses
the same server from a second command; ``run`` (export, audit, validation and report) writes the
same tables as a local run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from tests.commands import assert_own_lines
from tests.conftest import REPO
from tests.outs import table_dir
from tests.ports import free_port

pytestmark = pytest.mark.spark
QUERY = "SELECT verdict, count(*) AS n FROM batch_verdicts GROUP BY verdict ORDER BY verdict"


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    from analytics.spark.session import INTERPRETED_CONF, QUICK_START_OPTIONS, SMALL_WORK_OPTIONS

    port = free_port()
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    # set up for tiny inputs: interpreted, the quick compiler alone, the serial collector (one `run`
    # over it: 47 CPU-seconds instead of 100, docs/benchmarks.md)
    tiny = [arg for key, value in INTERPRETED_CONF.items() for arg in ("--conf", f"{key}={value}")]
    tiny += ["--driver-java-options", f"{QUICK_START_OPTIONS} {SMALL_WORK_OPTIONS}"]
    log_path = tmp_path_factory.mktemp("connect") / "server.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [str(submit), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]",
             "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false",
             "--conf", "spark.sql.shuffle.partitions=2", *tiny, "spark-internal"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            # the server's Python workers read Kafka files for `export`: they need segaudit
            env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 120
        while "Spark Connect server started" not in log_path.read_text():
            assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)


def without_java() -> dict:
    """The environment with no Java to find: a command that tried to start a local JVM would fail."""
    java = shutil.which("java")
    hidden = {str(Path(java).resolve().parent), str(Path(java).parent)} if java else set()
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p not in hidden)
    return {**os.environ, "PATH": path, "JAVA_HOME": "/nonexistent", "PYTHONPATH": str(REPO)}


def segaudit(*args: str) -> subprocess.CompletedProcess:
    """The command run in a process of its own, its stderr checked to hold segaudit's own lines only."""
    done = subprocess.run([sys.executable, "-m", "analytics", *args], capture_output=True, text=True, cwd=REPO,
                          env=without_java(), timeout=300)
    assert_own_lines(done.stderr)
    return done


def test_sql_runs_on_a_running_spark_connect_server(connect_server, audited, spark):
    out = audited["fenced-zombie"][1]
    local = {r["verdict"]: r["n"] for r in spark.read.parquet(str(table_dir(out, "batch_verdicts")))
             .groupBy("verdict").count().withColumnRenamed("count", "n").collect()}
    for _ in range(2):  # the second command finds the same server, nothing to start
        done = segaudit("sql", out, QUERY, "--remote", connect_server, "--format", "csv")
        assert done.returncode == 0, done.stderr
        rows = [line.split(",") for line in done.stdout.splitlines()[1:]]
        assert {v: int(n) for v, n in rows} == local
        assert done.stderr == ""
    # with no Java here, a command that needs a local Spark says so in one line
    done = segaudit("sql", out, QUERY)
    assert done.returncode == 2 and "JAVA_HOME is /nonexistent, which holds no bin/java" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_query_error_over_connect_is_one_line(connect_server, audited):
    out = audited["fenced-zombie"][1]
    done = segaudit("sql", out, "SELECT no_such_column FROM batch_verdicts", "--remote", connect_server)
    assert done.returncode == 2
    assert done.stderr.startswith("segaudit: ") and len(done.stderr.strip().splitlines()) == 1
    assert "no_such_column" in done.stderr


TABLES = ("batches", "records", "segments", "parse_errors", "batch_verdicts", "anomalies", "producer_sessions",
          "transactions", "snapshot_checks", "record_duplicates")


def test_run_over_connect_writes_what_a_local_audit_wrote(connect_server, audited, spark, tmp_path):
    g, local = audited["transactions"]  # exported with records and audited in this process
    remote = tmp_path / "remote"
    done = segaudit("run", str(g.log_dir), "--out", str(remote), "--config", str(g.truth_dir / "audit.toml"),
                    "--no-history", "--remote", connect_server)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr, done.stderr
    assert "Did the broker keep its rules?" in done.stdout and "Is the data sound?" in done.stdout
    for table in TABLES:
        ours, theirs = (spark.read.parquet(str(table_dir(out, table))) for out in (local, str(remote)))
        assert ours.count() > 0 or table in ("parse_errors", "record_duplicates"), table
        assert ours.exceptAll(theirs).count() == 0 and theirs.exceptAll(ours).count() == 0, table
    assert (remote / "report" / "index.html").is_file()
    assert (remote / "validation" / "data_docs" / "index.html").is_file()


def test_an_incremental_run_over_connect_continues_the_previous_one(connect_server, audited, spark, tmp_path, capsys):
    """``run --incremental --remote``: the export reads only the grown segment, the audit continues
    every history from the state the previous (local) run left, and the tables are a full local run's."""
    import json
    import struct

    g, local = audited["transactions"]
    logs = tmp_path / "logs"
    shutil.copytree(g.log_dir, logs)
    grown = max(logs.glob("*/*.log"), key=lambda p: p.stat().st_size)  # cut to its first batch, then restored
    data = grown.read_bytes()
    grown.write_bytes(data[:12 + struct.unpack(">i", data[8:12])[0]])
    out = tmp_path / "out"
    common = ("--out", str(out), "--config", str(g.truth_dir / "audit.toml"), "--no-history")
    from analytics.cli import main

    capsys.readouterr()
    assert main(["run", str(logs), *common]) in (0, 1)  # the first night, in this process's Spark
    assert_own_lines(capsys.readouterr().err)
    grown.write_bytes(data)
    done = segaudit("run", str(logs), *common, "--incremental", "--remote", connect_server)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    export, summary = (json.loads((out / name).read_text()) for name in ("_export.json", "summary.json"))
    assert export["incremental"]["files_read"] == 1 and export["incremental"]["files_kept"] == export["files"] - 1
    histories = spark.read.parquet(str(table_dir(out, "partition_state"))).count()
    assert summary["incremental"]["continued_histories"] == histories > 0
    from pyspark.sql import functions as F

    for table in TABLES:
        ours = spark.read.parquet(str(table_dir(local, table)))
        theirs = spark.read.parquet(str(table_dir(out, table)))
        theirs = theirs.select(*[F.regexp_replace(c, str(logs), str(g.log_dir)).alias(c) if t == "string" else c
                                 for c, t in theirs.dtypes])  # the log dir's copy, named as the original
        assert ours.exceptAll(theirs).count() == 0 and theirs.exceptAll(ours).count() == 0, table
