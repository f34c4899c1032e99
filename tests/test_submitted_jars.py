"""Under ``spark-submit`` the session of a command whose input or OUT is on S3 ships every jar the
submission gave (``--jars`` of ``python -m analytics.spark.submit --s3``: segaudit's and the S3
connector's), and the audit's replay runs segaudit's window function in executors of JVMs of their
own, its jar shipped to them.

A real ``spark-submit`` on a ``local-cluster`` master (a worker and an executor in JVMs apart from the
driver's, no daemons to start) with versitygw as the store; the replay's window function runs on a
few batches in the executor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.spark import javacode, submit
from analytics.spark.session import joined_jars
from analytics.spark.standalone import spark_class
from tests.commands import assert_own_lines, assert_submitted_lines
from tests.conftest import REPO


CHILD = r"""
import json, sys
from analytics.audit.config import AuditConfig
from analytics.spark import javacode
from analytics.spark.session import get_spark
from tests.test_audit_differential import _row, _spark_schema
from tests.test_replay_pass import _replayed

spark = get_spark(storage=[sys.argv[1]])
context = spark.sparkContext
shipped = [j.rpartition("/")[2] for j in str(context._jsc.sc().listJars().mkString("\n")).splitlines()]
loaded = javacode.load(spark)
ran = None
if loaded:
    rows = [_row("t", o, 1, pid=7, epoch=0, seq=o % 5, ts=1_000 + o) for o in range(20)]
    replayed, _ = _replayed(spark.createDataFrame(rows, schema=_spark_schema()), AuditConfig(), True)
    ran = len(replayed.collect())  # every column: the function evaluated (a count would prune it)
print(json.dumps({"master": context.master, "shipped": shipped, "loaded": loaded, "why_not": javacode.why_not,
                  "ran": ran}))
spark.stop()
"""


@pytest.mark.spark
@pytest.mark.s3
@pytest.mark.slow  # three JVMs: the driver, the local cluster's worker and its executor
def test_a_submitted_job_on_s3_ships_segaudits_jar_and_replays_with_the_window_function(s3_server, tmp_path):
    uri = f"{s3_server.make_bucket('shipped')}/out"
    arguments = submit.arguments(s3=True)
    assert str(javacode.jar()) in arguments[arguments.index("--jars") + 1].split(",")
    (tmp_path / "child.py").write_text(CHILD)
    _, env = spark_class()
    python = sys.executable
    command = [str(Path(env["SPARK_HOME"]) / "bin" / "spark-submit"), "--master", "local-cluster[1,1,1024]",
               *arguments, "--conf", "spark.ui.enabled=false", "--conf", f"spark.pyspark.python={python}",
               "--conf", f"spark.pyspark.driver.python={python}", str(tmp_path / "child.py"), uri]
    env |= {"PYTHONPATH": str(REPO), "SPARK_LOCAL_DIRS": str(tmp_path / "local")}
    child = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-4000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    assert result["master"].startswith("local-cluster[")
    assert "segaudit.jar" in result["shipped"] and "hadoop-aws" in " ".join(result["shipped"]), result
    assert result["loaded"], result["why_not"]
    assert result["ran"] == 20  # the executor, a JVM of its own, had segaudit's classes


@pytest.mark.spark
@pytest.mark.s3
def test_a_job_submitted_on_s3_without_the_connector_says_how_to_submit_it(s3_server, tmp_path):
    """The main job submitted with ``python -m analytics.spark.submit``'s arguments but not ``--s3``, OUT
    in a bucket: the driver cannot make a session whose settings name the connector's classes, and the
    job says so in one line with the argument to add, exit 2, before any Spark work. (``spark-submit``
    runs the Python driver with its stderr joined to stdout.)"""
    uri = f"{s3_server.make_bucket('forgotten')}/out"
    _, env = spark_class()
    env |= {"PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_DIRS": str(tmp_path / "local")}
    command = [str(Path(env["SPARK_HOME"]) / "bin" / "spark-submit"), "--master", "local[1]", *submit.arguments(),
               str(REPO / "jobs" / "run.py"), str(REPO / "data" / "mixed"), "--out", uri]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.strip()]
    assert line.startswith("segaudit: a path is on S3 and this spark-submit put no S3 connector on the driver's")
    assert line.endswith("submit with $(python -m analytics.spark.submit --s3)")
    assert_own_lines(done.stdout)
    assert_submitted_lines(done.stderr)


def test_jar_lists_join_with_each_file_name_once():
    assert joined_jars("file:///opt/a/segaudit.jar,local:///x/y.jar", "", None, "/c/y.jar, /c/z.jar") == \
        "file:///opt/a/segaudit.jar,local:///x/y.jar,/c/z.jar"
    assert joined_jars(None, "/c/z.jar") == "/c/z.jar"
