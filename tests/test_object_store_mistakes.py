"""Every mistake a user makes with a bucket is one line and exit 2, answered before any JVM starts:
no credentials, a wrong secret, a wrong endpoint, a bucket or prefix that does not exist, for an input
and for OUT, against a real S3 server (versitygw). Exit 3 stays for segaudit's own bugs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands import assert_own_lines
from tests.s3_server import SECRET_KEY

pytestmark = pytest.mark.s3
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bucket(s3_server):
    uri = s3_server.make_bucket("mistakes")
    s3_server.upload(REPO / "data" / "mixed", f"{uri}/logs/mixed")
    return uri


def segaudit(env: dict, *argv: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "analytics", *argv], env={**clean, **env}, capture_output=True,
                          text=True, cwd=REPO, timeout=120)


CASES = {
    "no credentials": (lambda env: {k: v for k, v in env.items() if "ACCESS_KEY" not in k}, "access denied"),
    "a wrong secret": (lambda env: {**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}, "access denied"),
    "a wrong endpoint": (lambda env: {**env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
                                      **({"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9"} if "AWS_ENDPOINT_URL_S3" in env
                                         else {})}, "cannot be reached at http://127.0.0.1:9"),
}


@pytest.mark.parametrize("where", ["input", "OUT"])
@pytest.mark.parametrize("mistake", sorted(CASES))
def test_a_misconfigured_store_is_one_line_and_exit_2(bucket, s3_server, tmp_path, mistake, where):
    change, says = CASES[mistake]
    argv = (["export", f"{bucket}/logs/mixed", "--out", str(tmp_path / "out")] if where == "input"
            else ["export", str(REPO / "data" / "mixed"), "--out", f"{bucket}/out"])
    done = segaudit(change(dict(s3_server.env)), *argv)
    assert_own_lines(done.stderr)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("segaudit: ")]
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert "please report" not in done.stderr and "jars" not in done.stderr  # answered before any JVM
    assert SECRET_KEY not in done.stderr and "not-the-secret" not in done.stderr


@pytest.mark.parametrize("missing", ["s3://no-such-bucket/logs", "PREFIX"])
def test_a_missing_bucket_or_prefix_is_one_line_and_exit_2(bucket, s3_server, tmp_path, missing):
    uri = f"{bucket}/no-such-prefix" if missing == "PREFIX" else missing
    done = segaudit(dict(s3_server.env), "run", uri, "--out", str(tmp_path / "out"))
    assert_own_lines(done.stderr)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == f"segaudit: no such file or directory: {uri}"
    into_missing_bucket = segaudit(dict(s3_server.env), "export", str(REPO / "data" / "mixed"), "--out",
                                   "s3://no-such-bucket/out")
    assert into_missing_bucket.returncode == 2 and "no such bucket" in into_missing_bucket.stderr
