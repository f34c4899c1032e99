"""The main job on a Spark standalone cluster whose only shared storage is a bucket: a master and a
worker in their own JVMs (``spark-class`` from PySpark), versitygw on loopback as the store, and the
job submitted with the README's `spark-submit` line. The worker gets the AWS environment as an
instance role would give it; its executors and the driver share no folder.

Proves that every segment was read in an executor, that the tables, the Data Docs and the report
are in the bucket, and that no table file exists in any local folder the driver or the worker
can see (their working folders and Spark's local folders)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from analytics.contract import AUDIT, EXPORT
from analytics.publish import published
from analytics.spark.objectstore import submit_arguments
from analytics.spark.standalone import spark_class, standalone_cluster
from tests.conftest import REPO
from tests.s3_server import SECRET_KEY

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.s3]
SAMPLE = (REPO / "data" / "mixed").resolve()
CONFIG = str(REPO / "data" / "mixed.truth" / "audit.toml")


@pytest.fixture(scope="module")
def cluster(s3_server, tmp_path_factory):
    """A standalone cluster started with the bucket's AWS environment; Spark's local folders under its
    own folder (``SPARK_LOCAL_DIRS``), so every byte an executor spills is where the test looks."""
    work = tmp_path_factory.mktemp("cluster")
    saved = os.environ.get("SPARK_LOCAL_DIRS")
    os.environ["SPARK_LOCAL_DIRS"] = str(work / "local")
    try:
        with standalone_cluster(work, cores=2, memory="2g") as master_url:
            yield master_url, work
    finally:
        if saved is None:
            os.environ.pop("SPARK_LOCAL_DIRS", None)
        else:
            os.environ["SPARK_LOCAL_DIRS"] = saved


def test_the_main_job_runs_on_a_cluster_whose_only_shared_storage_is_a_bucket(cluster, s3_server, tmp_path):
    master_url, work = cluster
    uri = s3_server.make_bucket("cluster")
    s3_server.upload(SAMPLE, f"{uri}/logs/mixed")
    out, task_log, driver_dir = f"{uri}/out/mixed", tmp_path / "tasks.jsonl", tmp_path / "driver"
    driver_dir.mkdir()
    _, env = spark_class()
    submit = str(Path(env["SPARK_HOME"]) / "bin" / "spark-submit")
    proc = subprocess.run(
        [submit, "--master", master_url, *submit_arguments(),
         "--conf", f"spark.local.dir={driver_dir / 'local'}", "--conf", "spark.executor.memory=1g",
         "--conf", "spark.ui.enabled=false", "--conf", f"spark.executorEnv.SEGAUDIT_TASK_LOG={task_log}",
         str(REPO / "jobs" / "run_audit.py"), f"{uri}/logs/mixed", "--out", out, "--config", CONFIG, "--no-history"],
        env=dict(env, PYSPARK_DRIVER_PYTHON=sys.executable), capture_output=True, text=True, timeout=900,
        cwd=driver_dir,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    assert SECRET_KEY not in proc.stdout + proc.stderr

    # every segment was read by a process under the worker's executor JVM, from the bucket
    reads = [json.loads(line) for line in task_log.read_text().splitlines()]
    segments = sorted(r["file"] for r in reads if r["table"] == "export-segments")
    assert segments == sorted(f"{uri}/logs/mixed/{p.relative_to(SAMPLE).as_posix()}" for p in SAMPLE.rglob("*.log"))
    for r in reads:
        assert any("CoarseGrainedExecutorBackend" in cmdline for cmdline in r["ancestry"]), r["ancestry"]

    # the tables, the Data Docs and the report: in the bucket, as the latest commit names them
    view = published(out)
    assert view.manifest(AUDIT)["built_from"] == {EXPORT: view.manifest(EXPORT)["run_id"]}
    verdicts = ds.dataset(view._p("batch_verdicts"), filesystem=view.fs, format="parquet", partitioning="hive")
    assert verdicts.count_rows() == view.manifest(EXPORT)["rows"]["batches"] == 670
    assert "</html>" in view.read_text("report/index.html")
    assert json.loads(view.read_text("validation/results.json"))["suites"]

    # no table file in any folder the driver or the worker can see
    local = [p for root in (work, driver_dir) for p in root.rglob("*") if p.suffix == ".parquet"
             or p.name.startswith("part-")]
    assert local == []
    assert any((work / "w").rglob("stderr"))  # the executors did run under the worker's folder
