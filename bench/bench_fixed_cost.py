"""The fixed cost of an audit: ``segaudit run`` on the bundled sample (642 batches) from a cold
process, against a baseline commit side by side.

    .venv/bin/python bench/bench_fixed_cost.py [--repeat 3] [--baseline REV] [--remote sc://HOST:PORT]

Each repeat starts a fresh ``python -m analytics run data/mixed`` (JVM start included) for the
working tree and, with ``--baseline``, for that commit checked out in a temporary worktree (same
virtual environment), alternating so that both see the same machine. Prints every run's wall time
and the stage lines of its progress, then the median of each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_run(tree: Path, work: Path, remote: str | None) -> float:
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work / "out.history", ignore_errors=True)
    command = [sys.executable, "-m", "analytics", "run", str(ROOT / "data" / "mixed"), "--out", str(out),
               "--config", str(ROOT / "data" / "mixed.truth" / "audit.toml")]
    if remote:
        command += ["--remote", remote]
    started = time.monotonic()
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    seconds = time.monotonic() - started
    if done.returncode != 1:  # the sample's planted anomalies fail their checks
        raise SystemExit(f"{tree}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", default=None, help="a commit to time beside the working tree")
    parser.add_argument("--remote", default=None, help="run on this Spark Connect server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="segaudit-fixed-cost-") as tmp:
        trees = {"working tree": ROOT}
        if args.baseline:
            base = Path(tmp) / "baseline"
            subprocess.run(["git", "worktree", "add", "--detach", str(base), args.baseline], cwd=ROOT, check=True,
                           capture_output=True)
            trees[f"baseline {args.baseline}"] = base
        try:
            times: dict[str, list[float]] = {name: [] for name in trees}
            for i in range(args.repeat):
                for name, tree in trees.items():
                    work = Path(tmp) / name.replace(" ", "-")
                    work.mkdir(exist_ok=True)
                    seconds = one_run(tree, work, args.remote)
                    times[name].append(seconds)
                    print(f"run {i + 1}  {name:28s} {seconds:6.1f} s", flush=True)
            print()
            for name, values in times.items():
                print(f"median  {name:28s} {statistics.median(values):6.1f} s  (runs: "
                      f"{', '.join(f'{v:.1f}' for v in values)})")
        finally:
            if args.baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(Path(tmp) / "baseline")], cwd=ROOT,
                               capture_output=True)


if __name__ == "__main__":
    main()
