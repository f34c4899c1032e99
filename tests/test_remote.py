"""Segments where they live: the reader and the export read an S3 bucket through pyarrow's
filesystem (a real S3 API, served by moto on loopback)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analytics.contract import READ_SCHEMAS as TABLE_SCHEMAS
from analytics.kafka.logdir import read_log_dirs
from tests.commands import assert_own_lines
from tests.conftest import REPO
from tests.outs import table_dir
from tests.ports import free_port

SAMPLE = (REPO / "data" / "mixed").resolve()
BUCKET_URI = "s3://kafka-logs/broker-1"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    port = free_port()
    server = shutil_which("moto_server")
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    try:
        from pyarrow import fs

        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "moto did not start"
                time.sleep(0.2)
        bucket = fs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http", region="us-east-1",
                                 access_key="testing", secret_key="testing", allow_bucket_creation=True)
        bucket.create_dir("kafka-logs")
        for f in SAMPLE.rglob("*"):
            if f.is_file():
                with bucket.open_output_stream(f"kafka-logs/broker-1/{f.relative_to(SAMPLE).as_posix()}") as out:
                    out.write(f.read_bytes())
        yield env
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def shutil_which(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def _local(rows, names):
    """Rows with file names made comparable between the bucket and the local copy."""
    out = []
    for r in rows:
        r = dict(r)
        if r.get("file"):
            r["file"] = r["file"].replace(BUCKET_URI, str(SAMPLE))
        out.append(tuple(r[n] for n in names))
    return sorted(out)


def test_the_pure_reader_reads_a_bucket_as_it_reads_a_disk(s3, monkeypatch):
    for k, v in s3.items():
        monkeypatch.setenv(k, v)
    remote = read_log_dirs([BUCKET_URI], records=True)
    local = read_log_dirs([SAMPLE], records=True)
    for table in ("batches", "segments", "parse_errors", "producer_snapshots", "aborted_transactions",
                  "leader_epochs", "checkpoints", "partition_metadata", "records"):
        names = TABLE_SCHEMAS[table].names
        assert _local(remote.table(table).to_pylist(), names) == _local(local.table(table).to_pylist(), names), table
    assert {e.error_kind for e in remote.parse_errors} == {"crc_mismatch", "truncated", "zero_filled"}


@pytest.mark.spark
@pytest.mark.slow
def test_the_export_reads_segments_from_a_bucket(s3, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "analytics", "export", BUCKET_URI, "--out", str(out), "--master", "local[2]"],
                          env=dict(os.environ, **s3), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_own_lines(proc.stderr)
    local = read_log_dirs([SAMPLE])
    for table in ("batches", "segments", "parse_errors", "producer_snapshots", "leader_epochs"):
        names = TABLE_SCHEMAS[table].names
        assert _local(pq.read_table(str(table_dir(out, table))).to_pylist(), names) == _local(local.table(table).to_pylist(), names), table
