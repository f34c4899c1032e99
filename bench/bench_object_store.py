"""What an OUT in object storage costs: the same commands with OUT on the local disk and in a bucket of
a real S3 server on loopback (versitygw over a local folder: the store's own cost, without a network),
side by side, in one session on the same machine.

    .venv/bin/python bench/bench_object_store.py [--batches N] [--repeat R]

Rows: the sample's cold `segaudit run` (input in the bucket for both, so only OUT differs); an
`audit` of a generated log of N batches (default 4M) exported from the local disk to each OUT; a
cold `explain` from each OUT. Medians of R runs. Needs versitygw (bash scripts/versitygw.sh).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.s3_server import S3Server  # noqa: E402

SAMPLE = REPO / "data" / "mixed"
CONFIG = str(REPO / "data" / "mixed.truth" / "audit.toml")


def timed(*argv: str) -> float:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "analytics", *argv], capture_output=True, text=True, cwd=REPO)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return time.monotonic() - started


def median(runs: list[float]) -> str:
    return f"{statistics.median(runs):6.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=4_000_000, help="batches of the generated log to audit")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the sample and of explain (medians)")
    parser.add_argument("--audit-repeat", type=int, default=1, help="audits of the generated log (medians)")
    args = parser.parse_args()
    from analytics.generate import generate

    work = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    with S3Server(work / "s3") as server:
        os.environ.update(server.env)
        bucket = server.make_bucket("bench")
        server.upload(SAMPLE, f"{bucket}/logs/mixed")
        big = work / "big"
        g = generate(big, "clean", scale=max(1, args.batches // 60))
        rows = []
        for where, out in (("local disk", str(work / "out")), ("bucket", f"{bucket}/out")):
            runs = [timed("run", f"{bucket}/logs/mixed", "--out", f"{out}/mixed-{i}", "--config", CONFIG, "--no-history")
                    for i in range(args.repeat)]
            timed("export", str(g.log_dir), "--out", f"{out}/big", "--master", "local[*]")
            audits = [timed("audit", f"{out}/big", "--no-history") for _ in range(args.audit_repeat)]
            explains = [timed("explain", f"{out}/mixed-0", "--topic", "clean", "--partition", "0", "--offset", "3")
                        for _ in range(args.repeat)]
            rows.append((where, runs, audits, explains))
    print(f"{'OUT':<12} {'sample run':>12} {f'audit {args.batches:,}':>16} {'explain':>10}")
    for where, runs, audits, explains in rows:
        print(f"{where:<12} {median(runs):>12} {median(audits):>16} {median(explains):>10}")


if __name__ == "__main__":
    main()
