"""OUT on S3: Spark writes Parquet to a real S3 server (versitygw) through S3A with the magic
committer, reads it back, lists and deletes; pyarrow reads what Spark wrote; no secret reaches the
Spark configuration, the JVM's log or the output; the connector's jars are fetched once.

The jars must be on the JVM when it starts, so Spark runs in a subprocess of its own (one JVM, about
20 s), as ``segaudit`` would with ``get_spark(storage=[...])``; the suite's ``spark`` fixture has no
S3 connector."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from analytics.spark import objectstore
from tests.conftest import REPO
from tests.s3_server import SECRET_KEY

BUCKET = "segaudit-out"
USER_PROVIDER = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"

CHILD = r"""
import json, sys
from analytics.spark.session import get_spark

uri = sys.argv[1]
spark = get_spark("local[2]", input_bytes=0, storage=[uri],
                  conf={"spark.ui.enabled": "false", "spark.hadoop.fs.s3a.aws.credentials.provider": sys.argv[2]})
rows = [(i, f"value-{i}") for i in range(50)]
spark.createDataFrame(rows, "id long, v string").repartition(3).write.mode("overwrite").parquet(uri + "/table")
back = sorted(tuple(r) for r in spark.read.parquet(uri + "/table").collect())
jvm = spark._jvm
Path = jvm.org.apache.hadoop.fs.Path
fs = Path(uri).getFileSystem(spark._jsc.hadoopConfiguration())
spark.createDataFrame([(1,)], "x int").write.parquet(uri + "/scratch")
deleted = fs.delete(Path(uri + "/scratch"), True)
print(json.dumps({
    "same": back == rows,
    "listed": sorted(str(s.getPath().getName()) for s in fs.listStatus(Path(uri + "/table"))),
    "deleted": deleted and not fs.exists(Path(uri + "/scratch")),
    "filesystem": fs.getClass().getName(),
    "conf": dict(spark.sparkContext.getConf().getAll()),
}))
spark.stop()
"""


@pytest.mark.s3
@pytest.mark.spark
def test_spark_writes_and_reads_parquet_on_s3_with_the_magic_committer(s3_server, tmp_path, monkeypatch, capsys):
    import pyarrow.parquet as pq

    from analytics.kafka.fs import open_uri

    s3_server.make_bucket(BUCKET)
    uri = f"s3://{BUCKET}/out"
    log = tmp_path / "jvm.log"
    # INFO, not the quiet default (ERROR): the log says what S3A and Spark do, and still no secret.
    env = os.environ | {"SEGAUDIT_JVM_LOG": str(log), "SEGAUDIT_SPARK_LOG_LEVEL": "INFO", "PYTHONPATH": str(REPO)}
    child = subprocess.run([sys.executable, "-c", CHILD, uri, USER_PROVIDER], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-4000:] + log.read_text(errors="replace")[-4000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])

    assert result["same"] and result["deleted"]
    assert result["filesystem"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"  # s3:// served by S3A
    conf = result["conf"]
    assert conf["spark.hadoop.fs.s3a.committer.name"] == "magic"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == s3_server.endpoint
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == USER_PROVIDER  # the user's conf wins
    assert not [key for key in conf if "secret" in key.lower() or "access.key" in key or "session.token" in key]

    parts = [name for name in result["listed"] if name.endswith(".parquet")]
    assert len(parts) == 3 and sorted(result["listed"]) == sorted([*parts, "_SUCCESS"])
    # The committer's manifest, not Hadoop's empty marker: the job's files, written at its commit.
    success = json.loads((s3_server.data_dir / BUCKET / "out" / "table" / "_SUCCESS").read_text())
    assert success["committer"] == "magic" and success["success"] is True
    assert sorted(name.rpartition("/")[2] for name in success["filenames"]) == sorted(parts)
    assert not any(p.name.startswith("__magic") for p in (s3_server.data_dir / BUCKET).rglob("*"))

    # pyarrow reads what Spark wrote, from the standard environment alone.
    filesystem, path = open_uri(uri + "/table")
    table = pq.read_table(path, filesystem=filesystem).sort_by("id")
    assert [tuple(r.values()) for r in table.to_pylist()] == [(i, f"value-{i}") for i in range(50)]

    # No secret anywhere: not in the configuration (above), the JVM's log, or the output.
    assert "S3A" in log.read_text(errors="replace") or "s3a" in log.read_text(errors="replace")
    for text in (log.read_text(errors="replace"), child.stdout, child.stderr):
        assert SECRET_KEY not in text

    # The jars are fetched once: a second call only looks at the files.
    def no_fetch(*args):
        raise AssertionError("fetched again")

    monkeypatch.setattr(objectstore, "_fetch", no_fetch)
    capsys.readouterr()
    assert all(p.is_file() for p in objectstore.s3a_jars())
    assert capsys.readouterr().err == ""


ENVIRONMENT = {"AWS_ENDPOINT_URL": "https://s3.example.net:9000", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9999",
               "AWS_REGION": "eu-west-3", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
               "AWS_SESSION_TOKEN": "token-" + SECRET_KEY, "AWS_PROFILE": "team"}


def test_spark_conf_only_for_s3_paths_and_never_a_secret(monkeypatch, tmp_path):
    monkeypatch.setattr(objectstore, "s3a_jars", lambda jars=None: [tmp_path / "a.jar", tmp_path / "b.jar"])
    assert objectstore.spark_conf(["/data/logs", "file:///out", "gs://b/x"], ENVIRONMENT) == {}

    conf = objectstore.spark_conf(["/data/logs", "s3://bucket/out"], ENVIRONMENT)
    assert conf == objectstore.spark_conf(["s3a://bucket/out"], ENVIRONMENT)
    assert conf["spark.jars"] == f"{tmp_path / 'a.jar'},{tmp_path / 'b.jar'}"
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.hadoop.fs.AbstractFileSystem.s3.impl"] == "org.apache.hadoop.fs.s3a.S3A"
    for scheme in ("s3", "s3a"):
        assert conf[f"spark.hadoop.mapreduce.outputcommitter.factory.scheme.{scheme}"] == objectstore.COMMITTER_FACTORY
    assert conf["spark.sql.sources.commitProtocolClass"].endswith(".PathOutputCommitProtocol")
    assert conf["spark.sql.parquet.output.committer.class"].endswith(".BindingParquetOutputCommitter")
    # The S3-specific endpoint before the general one; plain HTTP as its URL says; path-style.
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9999"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-3"
    assert "DefaultCredentialsProvider" in conf["spark.hadoop.fs.s3a.aws.credentials.provider"]
    assert not [v for v in conf.values() if SECRET_KEY in v or "AKIDEXAMPLE" in v]

    aws = objectstore.spark_conf(["s3://bucket/out"], {"AWS_DEFAULT_REGION": "us-west-2"})
    assert aws["spark.hadoop.fs.s3a.endpoint.region"] == "us-west-2"
    assert not [k for k in aws if k.endswith((".endpoint", "path.style.access", "ssl.enabled"))]


def test_the_connector_matches_the_installed_spark():
    found = objectstore.coordinates()
    hadoop = found[0].rpartition(":")[2]
    assert found[0] == f"org.apache.hadoop:hadoop-aws:{hadoop}" and hadoop in objectstore.SDK_VERSIONS
    sdk = {c.rpartition(":")[2] for c in found if c.startswith("software.amazon.awssdk:")}
    assert sdk == {objectstore.SDK_VERSIONS[hadoop]}
    assert "software.amazon.awssdk:bundle" not in " ".join(found)
