"""A real S3 API for the tests: versitygw on loopback over a temporary folder.

versitygw (Apache-2.0, Go) serves a POSIX folder as S3: each bucket is a folder of ``data_dir``, its
objects are files (metadata in a sidecar folder). ``bash scripts/versitygw.sh`` builds it once into
``~/.cache/segaudit/bin`` (``SEGAUDIT_CACHE`` moves it); ``scripts/test.sh`` runs that first. Unlike
moto it is a real server with real semantics: conditional writes (``If-None-Match: *``) hold under
races, and the S3A committers, boto3 and pyarrow work against it.

``S3Server().start()`` starts it on a free port, waits until it answers, and ``env`` is the standard
AWS environment every client honours (endpoint, keys, region; ``~/.aws`` never read). Stop it with
``stop()`` (or use it as a context manager).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.ports import free_port

CACHE = Path(os.environ.get("SEGAUDIT_CACHE") or Path.home() / ".cache" / "segaudit")
BINARY = CACHE / "bin" / "versitygw"
UNAVAILABLE = "versitygw unavailable"

ACCESS_KEY = "segaudit-test-access"
SECRET_KEY = "segaudit-test-secret-9f3c2a7e51"  # a string the tests look for in logs: it must be nowhere


class S3Server:
    """versitygw serving a temporary folder on ``127.0.0.1``: ``env``, ``make_bucket``, ``upload``."""

    def __init__(self, root: str | os.PathLike | None = None, binary: Path = BINARY):
        self.binary = Path(binary)
        self._own_root = root is None
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="segaudit-s3-"))
        self.data_dir = self.root / "data"  # bucket NAME is data_dir / NAME
        self.meta_dir = self.root / "meta"
        self.port = 0
        self._proc: subprocess.Popen | None = None
        self._log = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The standard AWS environment of this server; no client reads ``~/.aws`` or the EC2
        metadata service with it."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def start(self, timeout: float = 30) -> "S3Server":
        if not self.binary.is_file():
            raise FileNotFoundError(f"{self.binary} is absent: run bash scripts/versitygw.sh")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.meta_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.root / "versitygw.log", "wb")
        for _ in range(3):  # a free port can be taken by someone else before the server binds it
            self.port = free_port()
            self._proc = subprocess.Popen(
                [str(self.binary), "--access", ACCESS_KEY, "--secret", SECRET_KEY,
                 "--port", f"127.0.0.1:{self.port}", "posix", "--sidecar", str(self.meta_dir), str(self.data_dir)],
                stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            if self._wait(timeout):
                return self
            self._kill()
        raise RuntimeError(f"versitygw did not start: {(self.root / 'versitygw.log').read_text(errors='replace')[-2000:]}")

    def _wait(self, timeout: float) -> bool:
        """Whether the server answers HTTP (any status: an unsigned request is refused) before it exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            try:
                urllib.request.urlopen(self.endpoint, timeout=1).close()
                return True
            except urllib.error.HTTPError:
                return True
            except OSError:
                time.sleep(0.05)
        return False

    def client(self):
        import boto3

        env = self.env
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=env["AWS_REGION"],
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def make_bucket(self, name: str) -> str:
        """Create bucket ``name``; its URI (``s3://name``)."""
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    def upload(self, local_dir: str | os.PathLike, uri: str) -> int:
        """Every file under ``local_dir`` put under ``s3://bucket/prefix`` at its relative path; how many."""
        bucket, _, prefix = uri.removeprefix("s3://").removeprefix("s3a://").partition("/")
        prefix = prefix.strip("/")
        client, count = self.client(), 0
        for path in sorted(Path(local_dir).rglob("*")):
            if path.is_file():
                key = path.relative_to(local_dir).as_posix()
                client.upload_file(str(path), bucket, f"{prefix}/{key}" if prefix else key)
                count += 1
        return count

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        self._proc = None

    def stop(self) -> None:
        self._kill()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "S3Server":
        return self.start() if self._proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
