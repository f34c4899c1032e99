"""What a bucket costs a sample `segaudit run`: wall time and S3 requests, against a local disk.

    .venv/bin/python bench/bench_bucket_requests.py [--code DIR] [--top N] [--pairs N]

Runs the sample's `run` into a new local OUT, then into a new OUT in a bucket of versitygw on
loopback, then an incremental night with nothing new into each, ``--pairs`` times; prints each
command's wall time and the requests versitygw logged while it ran (its request log: one line per
request), then each place's medians and their ratios. ``--code DIR`` runs another checkout of
segaudit (the same venv), for a side-by-side of two versions. ``--top N`` also prints, per bucket
run, its N largest kinds of request (method, and the table or folder under OUT it touched, run
folders left out). Needs versitygw (bash scripts/versitygw.sh).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
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
    parser.add_argument("--pairs", type=int, default=2,
                        help="disk and bucket runs and nights, alternated N times; their medians printed")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-requests-"))
    with S3Server(work / "s3") as server:
        os.environ.update(server.env)
        server.make_bucket("bench")
        log = server.root / "versitygw.log"
        again = ["--incremental"]
        runs = [run for n in range(1, args.pairs + 1)
                for run in (("disk", ["--out", str(work / f"d{n}")]), ("bucket", ["--out", f"s3://bench/o{n}"]),
                            (NIGHT_DISK, ["--out", str(work / f"d{n}"), *again]),
                            (NIGHT_BUCKET, ["--out", f"s3://bench/o{n}", *again]))]
        print(f"{'OUT':<34} {'exit':>4} {'seconds':>8} {'requests':>9}")
        seconds: dict[str, list[float]] = collections.defaultdict(list)
        for where, out in runs:
            before, started = len(log.read_text(errors="replace").splitlines()), time.monotonic()
            done = subprocess.run([sys.executable, "-m", "analytics", "run", SAMPLE, *out, "--config", CONFIG,
                                   "--no-history"], capture_output=True, text=True, cwd=args.code)
            seconds[where].append(time.monotonic() - started)
            lines = log.read_text(errors="replace").splitlines()[before:]
            print(f"{where:<34} {done.returncode:>4} {seconds[where][-1]:>8.1f} {len(lines):>9}", flush=True)
            for (method, table), n in kinds(lines).most_common(args.top if "bucket" in where else 0):
                print(f"    {n:>6}  {method:<16} {table}")
        for disk_runs, bucket_runs in (("disk", "bucket"), (NIGHT_DISK, NIGHT_BUCKET)):
            disk, bucket = statistics.median(seconds[disk_runs]), statistics.median(seconds[bucket_runs])
            print(f"median of {args.pairs}, {disk_runs} / {bucket_runs}: {disk:.1f} s / {bucket:.1f} s, "
                  f"bucket / disk {bucket / disk:.2f}x")


NIGHT_DISK, NIGHT_BUCKET = "disk, incremental, nothing new", "bucket, incremental, nothing new"


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
