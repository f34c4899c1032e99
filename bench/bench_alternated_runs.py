"""The sample's `segaudit run` on a local disk, two checkouts alternated: the cost of a change measured
where identical runs vary by a quarter on this machine.

    .venv/bin/python bench/bench_alternated_runs.py BEFORE_DIR [AFTER_DIR] [--pairs N]

Each pair runs both checkouts (the same venv), the first of the pair alternating; each run a new
local OUT, the input the sample on the local disk. Prints every run and each checkout's median.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = str(REPO / "data" / "mixed")
CONFIG = str(REPO / "data" / "mixed.truth" / "audit.toml")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", help="a checkout of segaudit (git worktree add DIR COMMIT)")
    parser.add_argument("after", nargs="?", default=str(REPO), help="another checkout (default: this one)")
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    codes = {"before": args.before, "after": args.after}
    seconds: dict[str, list[float]] = {name: [] for name in codes}
    work = Path(tempfile.mkdtemp(prefix="bench-alternated-"))
    for pair in range(args.pairs):
        order = list(codes.items()) if pair % 2 == 0 else list(reversed(codes.items()))
        for name, code in order:
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "analytics", "run", SAMPLE, "--out", str(work / f"{name}-{pair}"),
                                   "--config", CONFIG, "--no-history"], capture_output=True, text=True, cwd=code)
            seconds[name].append(time.monotonic() - started)
            print(f"pair {pair} {name:<6} exit {done.returncode} {seconds[name][-1]:6.1f} s", flush=True)
    for name, runs in seconds.items():
        print(f"{name:<6} median {statistics.median(runs):.1f} s  runs {', '.join(f'{s:.1f}' for s in runs)}")


if __name__ == "__main__":
    main()
