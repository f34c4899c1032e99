"""What a bucket costs a sample `segaudit run`: wall time and S3 requests, against a local disk.

    .venv/bin/python bench/bench_bucket_requests.py [--code DIR]

Runs the sample's `run` twice into a local OUT and twice into a bucket of versitygw on loopback (a
new OUT each), then an incremental night into the second bucket OUT with nothing new; prints each
command's wall time and the requests versitygw logged while it ran (its request log: one line per
request). ``--code DIR`` runs another checkout of segaudit (the same venv), for a side-by-side of
two versions. Needs versitygw (bash scripts/versitygw.sh).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.s3_server import S3Server  # noqa: E402

SAMPLE = str(REPO / "data" / "mixed")
CONFIG = str(REPO / "data" / "mixed.truth" / "audit.toml")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--code", default=str(REPO), help="the checkout of segaudit to run")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-requests-"))
    with S3Server(work / "s3") as server:
        os.environ.update(server.env)
        server.make_bucket("bench")
        log = server.root / "versitygw.log"
        runs = [("disk", ["--out", str(work / "d1")]), ("disk", ["--out", str(work / "d2")]),
                ("bucket", ["--out", "s3://bench/o1"]), ("bucket", ["--out", "s3://bench/o2"]),
                ("bucket, incremental, nothing new", ["--out", "s3://bench/o2", "--incremental"])]
        print(f"{'OUT':<34} {'exit':>4} {'seconds':>8} {'requests':>9}")
        for where, out in runs:
            before, started = log.read_text(errors="replace").count("\n"), time.monotonic()
            done = subprocess.run([sys.executable, "-m", "analytics", "run", SAMPLE, *out, "--config", CONFIG,
                                   "--no-history"], capture_output=True, text=True, cwd=args.code)
            seconds = time.monotonic() - started
            requests = log.read_text(errors="replace").count("\n") - before
            print(f"{where:<34} {done.returncode:>4} {seconds:>8.1f} {requests:>9}")


if __name__ == "__main__":
    main()
