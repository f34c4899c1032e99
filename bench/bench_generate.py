"""Scenario generator throughput and peak memory at --scale.

    .venv/bin/python bench/bench_generate.py [--scale N ...] [--scenario clean]

Each run is a separate `segaudit generate` process (so its peak RSS is its own), writing to a
temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--scenario", default="clean")
    args = ap.parse_args(argv)
    print(f"{'scenario':<10} {'scale':>8} {'batches':>12} {'seconds':>8} {'batches/s':>10} {'MB written':>10} {'MB/s':>6} {'peak RSS MB':>11}")
    for scale in args.scale:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "logs"
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "analytics", "generate", str(out), "--scenario", args.scenario,
                            "--scale", str(scale)], check=True, stdout=subprocess.DEVNULL)
            seconds = time.perf_counter() - t0
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            batches = sum(json.loads((Path(tmp) / "logs.truth" / "scenario.json").read_text())["verdicts"].values())
            size = sum(p.stat().st_size for p in out.rglob("*.log"))
            rss = f"{peak / 1024:,.0f}" if peak > before else "<= previous"
            print(f"{args.scenario:<10} {scale:>8,} {batches:>12,} {seconds:>8.1f} {batches / seconds:>10,.0f} "
                  f"{size / 1e6:>10,.0f} {size / 1e6 / seconds:>6.1f} {rss:>11}")


if __name__ == "__main__":
    main()
