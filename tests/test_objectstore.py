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

from analytics.spark import maven, objectstore
from tests.commands import no_network
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

    monkeypatch.setattr(maven, "fetch", no_fetch)
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


def test_every_jar_segaudit_may_fetch_is_pinned_and_the_cache_matches_the_pins():
    import hashlib

    pins = maven.pins()
    assert set(objectstore.every_coordinate()) <= set(pins)
    assert set(objectstore.coordinates()) <= set(objectstore.every_coordinate())
    for coordinate, path in zip(objectstore.coordinates(), objectstore.s3a_jars()):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == pins[coordinate], coordinate


@pytest.fixture
def mirror(tmp_path):
    """A company's Maven mirror on loopback (plain HTTP) holding the connector's jars in Maven's
    layout, and the paths it was asked for."""
    import shutil
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    root = tmp_path / "mirror"
    for coordinate, jar in zip(objectstore.coordinates(), objectstore.s3a_jars()):
        target = root / "maven2" / maven.path(coordinate)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(jar, target)
    asked: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            asked.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/maven2", root / "maven2", asked
    server.shutdown()


def test_a_mirror_serves_the_jars_and_one_that_does_not_match_its_pin_is_refused(mirror, tmp_path, monkeypatch,
                                                                                   capsys):
    url, root, asked = mirror
    for key, value in no_network().items():  # nothing but the mirror on loopback is reachable
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SEGAUDIT_MAVEN_REPOSITORY", url)
    monkeypatch.setenv("SEGAUDIT_CACHE", str(tmp_path / "cache"))
    paths = objectstore.s3a_jars()
    assert all(p.is_file() for p in paths) and {p.parent for p in paths} == {tmp_path / "cache" / "jars"}
    assert {p for p in asked if p.endswith(".jar")} >= {f"/maven2/{maven.path(c)}" for c in objectstore.coordinates()}
    assert "from 127.0.0.1 into" in capsys.readouterr().err

    # a jar changed on the mirror: refused, and nothing of it is left in the cache
    monkeypatch.setenv("SEGAUDIT_CACHE", str(tmp_path / "other"))
    [aws] = [c for c in objectstore.coordinates() if ":hadoop-aws:" in c]
    (root / maven.path(aws)).write_bytes(b"PK not the jar that was pinned")
    with pytest.raises(objectstore.ConnectorUnavailable, match="does not match the SHA-256 pinned for it"):
        objectstore.s3a_jars()
    assert not (tmp_path / "other" / "jars" / maven.path(aws).rpartition("/")[2]).exists()
    assert not [p for p in (tmp_path / "other" / "jars").iterdir() if p.name.startswith(".")]

    # no mirror and no network: one line naming the repository and how to name another
    monkeypatch.delenv("SEGAUDIT_MAVEN_REPOSITORY")
    monkeypatch.setenv("SEGAUDIT_CACHE", str(tmp_path / "third"))
    with pytest.raises(objectstore.ConnectorUnavailable) as failed:
        objectstore.s3a_jars()
    assert "repo1.maven.org" in str(failed.value) and "SEGAUDIT_MAVEN_REPOSITORY" in str(failed.value)
    assert "\n" not in str(failed.value)


def test_a_jar_without_a_pin_is_not_fetched(monkeypatch, tmp_path):
    monkeypatch.setenv("SEGAUDIT_CACHE", str(tmp_path))
    with pytest.raises(maven.FetchFailed, match="no SHA-256 is pinned for org.example:unpinned:1.0"):
        maven.jars(["org.example:unpinned:1.0"], "a jar")
