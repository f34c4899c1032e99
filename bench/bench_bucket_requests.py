"""What a bucket costs a sample `segaudit run`: wall time and S3 requests, against a local disk.

    .venv/bin/python bench/bench_bucket_requests.py [--code DIR]

Runs the sample's `run` twice into a local OUT and twice into a bucket of versitygw on loopback (a
new OUT each), then an incremental night into the second bucket OUT with nothing new; prints each
command's wall time and the requests versitygw logged while it ran (its request log: one line per
request). ``--code DIR`` runs another checkout of segaudit (the same venv), for a side-by-side of
two versions. ``--top N`` also prints, per bucket run, its N largest kinds of request (method, and
the table or folder under OUT it touched, run folders left out). Needs versitygw (bash scripts/versitygw.sh).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
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
    parser.add_argument("--top", type=int, default=0, help="print each bucket run's N largest kinds of request")
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
            before, started = len(log.read_text(errors="replace").splitlines()), time.monotonic()
            done = subprocess.run([sys.executable, "-m", "analytics", "run", SAMPLE, *out, "--config", CONFIG,
                                   "--no-history"], capture_output=True, text=True, cwd=args.code)
            seconds = time.monotonic() - started
            lines = log.read_text(errors="replace").splitlines()[before:]
            print(f"{where:<34} {done.returncode:>4} {seconds:>8.1f} {len(lines):>9}")
            for (method, table), n in kinds(lines).most_common(args.top if where != "disk" else 0):
                print(f"    {n:>6}  {method:<16} {table}")


RUN_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]{8}$")


def kinds(lines: list[str]) -> collections.Counter:
    """The requests of versitygw's log lines by (method, the first folder under OUT that is not a run's).

    A listing is ``GET(list)``, a multipart upload's parts ``PUT(part)``, its start and end ``POST(start)``
    and ``POST(end)``."""
    counted: collections.Counter = collections.Counter()
    for line in lines:
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 9:
            continue
        method, path, query = fields[5], fields[6], fields[8]
        if "list-type" in query:
            method, prefix = "GET(list)", re.search(r"prefix=([^&]*)", query)
            path = "/bucket/" + (prefix.group(1).replace("%2F", "/") if prefix else "")
        elif "partNumber" in query:
            method += "(part)"
        elif "uploadId" in query:
            method += "(end)"
        elif "uploads" in query:
            method += "(start)"
        parts = [p for p in path.split("/")[3:] if p and p != "_runs" and not RUN_ID.match(p)]
        counted[(method, parts[0] if parts else "-")] += 1
    return counted


if __name__ == "__main__":
    main()
