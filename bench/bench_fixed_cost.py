"""The fixed cost of an audit: ``segaudit run`` on the bundled sample (642 batches) from a cold
process, against a baseline commit side by side.

    .venv/bin/python bench/bench_fixed_cost.py [--repeat 3] [--baseline REV] [--remote sc://HOST:PORT]

Each repeat starts a fresh ``python -m analytics run data/mixed`` (JVM start included) for the
working tree and, with ``--baseline``, for that commit checked out in a temporary worktree (same
virtual environment), alternating so that both see the same machine. Prints every run's wall time
until the command returned, and until every process it started was gone (Spark's JVM shuts down
after the Python process ends; the next run starts only then), then the median of each.
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
sys.path.insert(0, str(ROOT))

from analytics.processes import group_alive  # noqa: E402


# seconds until every process a run started was gone, by tree
gone: dict[Path, list[float]] = {}


def one_run(tree: Path, work: Path, remote: str | None) -> float:
    """Seconds until the command returned (its JVM may still be shutting down: see ``gone``)."""
    gone.setdefault(tree, [])
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work / "out.history", ignore_errors=True)
    command = [sys.executable, "-m", "analytics", "run", str(ROOT / "data" / "mixed"), "--out", str(out),
               "--config", str(ROOT / "data" / "mixed.truth" / "audit.toml")]
    if remote:
        command += ["--remote", remote]
    started = time.monotonic()
    done = subprocess.Popen(command, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(tree)}, start_new_session=True)
    _, stderr = done.communicate()
    seconds = time.monotonic() - started
    while group_alive(done.pid):  # the JVM outlives the command by its shutdown: the next run must not share the machine with it
        time.sleep(0.02)
    gone[tree].append(time.monotonic() - started)
    if done.returncode != 1:  # the sample's planted anomalies fail their checks
        raise SystemExit(f"{tree}: exit {done.returncode}: {stderr.strip()[-500:]}")
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
                    print(f"run {i + 1}  {name:28s} {seconds:6.1f} s  (every process gone: {gone[tree][-1]:.1f} s)",
                          flush=True)
            print()
            for name, values in times.items():
                print(f"median  {name:28s} {statistics.median(values):6.1f} s  (runs: "
                      f"{', '.join(f'{v:.1f}' for v in values)}; every process gone: "
                      f"{statistics.median(gone[trees[name]]):.1f} s)")
        finally:
            if args.baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(Path(tmp) / "baseline")], cwd=ROOT,
                               capture_output=True)


if __name__ == "__main__":
    main()
