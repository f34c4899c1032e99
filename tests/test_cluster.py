"""The export on a real Spark standalone cluster: a master and a worker in their own JVMs, started
with the ``spark-class`` launcher that ships with PySpark, and the export as a separate driver.

Proves that segment files are read in executor processes (the task log names each reading
process's ancestry, which runs through the worker's executor JVM) and that the tables equal a
local-mode export of the same input.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analytics.contract import EXPORT
from analytics.publish import read_manifest
from analytics.contract import READ_SCHEMAS as TABLE_SCHEMAS
from analytics.kafka.logdir import read_log_dirs
from analytics.spark.standalone import spark_class, standalone_cluster
from tests.commands import assert_own_lines
from tests.conftest import REPO
from tests.outs import table_dir

pytestmark = [pytest.mark.spark, pytest.mark.slow]
SAMPLE = (REPO / "data" / "mixed").resolve()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster")
    with standalone_cluster(work, cores=2, memory="2g") as master_url:
        yield master_url, work


def test_export_on_a_standalone_cluster_reads_in_executors_and_matches_local(cluster, tmp_path):
    master_url, _ = cluster
    out = tmp_path / "out"
    task_log = tmp_path / "tasks.jsonl"
    cmd = [sys.executable, "-m", "analytics", "export", str(SAMPLE), "--out", str(out), "--records",
           "--master", master_url, "--conf", f"spark.executorEnv.SEGAUDIT_TASK_LOG={task_log}",
           "--conf", "spark.executor.memory=1g", "--conf", "spark.ui.enabled=false"]
    driver = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert driver.returncode == 0, driver.stderr[-3000:]
    assert_own_lines(driver.stderr)  # the driver's: the executors log in the worker's folders

    reads = [json.loads(line) for line in task_log.read_text().splitlines()]
    segment_reads = [r for r in reads if r["table"] == "export-segments"]
    assert sorted(r["file"] for r in segment_reads) == sorted(str(p) for p in SAMPLE.rglob("*.log"))
    for r in reads:  # every read ran under the worker's executor JVM, never in the driver
        assert any("CoarseGrainedExecutorBackend" in cmdline for cmdline in r["ancestry"]), r["ancestry"]
        assert not any("analytics export" in cmdline for cmdline in r["ancestry"])

    tables = read_log_dirs([SAMPLE], records=True)
    for table in ("batches", "segments", "parse_errors", "producer_snapshots", "aborted_transactions", "leader_epochs"):
        names = TABLE_SCHEMAS[table].names
        got = sorted(tuple(r[n] for n in names) for r in pq.read_table(str(table_dir(out, table))).to_pylist())
        assert got == sorted(tuple(r[n] for n in names) for r in tables.table(table).to_pylist()), table
    assert read_manifest(str(out), EXPORT)["rows"]["records"] == tables.table("records").num_rows


def test_a_killed_export_leaves_the_previous_output_complete(tmp_path):
    """SIGKILL in the middle of an export: the previous run's tables and manifest stay as they were,
    and the next export removes what the killed one left."""
    from analytics.generate import generate

    big = tmp_path / "big"
    generate(big, "clean", scale=3000)  # ~180k batches: long enough to be killed mid-way
    out = tmp_path / "out"
    base = [sys.executable, "-m", "analytics", "export", "--out", str(out), "--master", "local[2]"]
    first = subprocess.run([*base, str(SAMPLE)], check=True, capture_output=True, text=True, timeout=600)
    assert_own_lines(first.stderr)
    before = read_manifest(str(out), EXPORT)
    batches_before = sorted(p.name for p in (out / "batches").rglob("*.parquet"))

    proc = subprocess.Popen([*base, str(big)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    runs = set(os.listdir(out / "_runs"))
    while not set(os.listdir(out / "_runs")) - runs:  # the run has started writing
        assert proc.poll() is None and time.monotonic() < deadline, "the export ended before it could be killed"
        time.sleep(0.05)
    time.sleep(1.0)  # into the Spark jobs
    assert proc.poll() is None, "the export ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    assert read_manifest(str(out), EXPORT) == before
    assert sorted(p.name for p in (out / "batches").rglob("*.parquet")) == batches_before
    killed = set(os.listdir(out / "_runs")) - runs
    assert killed  # the killed run's leftovers, which no commit names

    again = subprocess.run([*base, str(SAMPLE)], check=True, capture_output=True, text=True, timeout=600)
    assert_own_lines(again.stderr)
    assert not killed & set(os.listdir(out / "_runs"))  # gone with the next run


def test_spark_submit_runs_the_export_job_on_the_cluster(cluster, tmp_path):
    """The worked example of docs/how-to/s3-and-clusters.md: jobs/export.py through spark-submit to the standalone master."""
    master_url, _ = cluster
    _, env = spark_class()
    submit = str(Path(env["SPARK_HOME"]) / "bin" / "spark-submit")
    out = tmp_path / "out"
    proc = subprocess.run(
        [submit, "--master", master_url, "--conf", "spark.executor.memory=1g", "--conf", "spark.ui.enabled=false",
         str(REPO / "jobs" / "export_segments.py"), str(SAMPLE), "--out", str(out)],
        env=dict(env, PYSPARK_DRIVER_PYTHON=sys.executable), capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = read_manifest(str(out), EXPORT)
    assert manifest["rows"]["batches"] == 670 and manifest["files"] == 37
    assert manifest["run_id"] in proc.stdout  # the job names the run it published


@pytest.mark.broker
def test_an_export_over_the_protocol_fetches_in_executors(cluster, tmp_path):
    """A live broker exported through the standalone cluster: every range is fetched by a process under
    the worker's executor JVM, and every record the producer wrote is in the tables."""
    from kafka import KafkaProducer

    from tests.kafka_cluster import VERSIONS, KafkaCluster, require_jars

    require_jars(VERSIONS[0])
    master_url, _ = cluster
    with KafkaCluster(VERSIONS[0], tmp_path / "kafka") as broker:
        broker.create_topic("fetched", partitions=2)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all")
        for i in range(200):
            producer.send("fetched", key=str(i).encode(), value=b"v" * 100, partition=i % 2)
            if i % 25 == 0:
                producer.flush()
        producer.close()
        out, task_log = tmp_path / "out", tmp_path / "tasks.jsonl"
        cmd = [sys.executable, "-m", "analytics", "export", f"kafka://{broker.bootstrap}", "--topics", "fetched",
               "--out", str(out), "--records", "--master", master_url,
               "--conf", f"spark.executorEnv.SEGAUDIT_TASK_LOG={task_log}",
               "--conf", "spark.executor.memory=1g", "--conf", "spark.ui.enabled=false"]
        driver = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert driver.returncode == 0, driver.stderr[-3000:]
    assert_own_lines(driver.stderr)
    reads = [json.loads(line) for line in task_log.read_text().splitlines()]
    assert sorted(r["file"].split("/")[-2] for r in reads) == ["fetched-0", "fetched-1"]
    for r in reads:
        assert r["table"] == "export-fetch" and r["file"].startswith("kafka://")
        assert any("CoarseGrainedExecutorBackend" in cmdline for cmdline in r["ancestry"]), r["ancestry"]
        assert not any("analytics export" in cmdline for cmdline in r["ancestry"])
    records = pq.read_table(str(table_dir(out, "records")), columns=["key"]).column("key").to_pylist()
    assert sorted(int(k) for k in records) == list(range(200))
