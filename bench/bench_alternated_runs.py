"""The sample's `segaudit run` on a local disk, two checkouts alternated: the cost of a change measured
where identical runs vary by a quarter on this machine.

    .venv/bin/python bench/bench_alternated_runs.py BEFORE_DIR [AFTER_DIR] [--pairs N]

Each pair runs both checkouts (the same venv), the first of the pair alternating; each run a new
local OUT, the input the sample on the local disk. Prints every run and each checkout's median.
"""
import argparse
import subprocess, sys, time, tempfile, statistics
from pathlib import Path
REPO = Path(__file__).resolve().parents[1]
parser = argparse.ArgumentParser()
parser.add_argument("before")
parser.add_argument("after", nargs="?", default=str(REPO))
parser.add_argument("--pairs", type=int, default=5)
args = parser.parse_args()
codes = {"before": args.before, "after": args.after}
times = {k: [] for k in codes}
work = Path(tempfile.mkdtemp(prefix="alt-"))
for i in range(args.pairs):
    for name, code in (list(codes.items()) if i % 2 == 0 else list(reversed(codes.items()))):
        out = work / f"{name}-{i}"
        t = time.monotonic()
        d = subprocess.run([sys.executable, "-m", "analytics", "run", str(REPO / "data/mixed"), "--out", str(out),
                            "--config", str(REPO / "data/mixed.truth/audit.toml"), "--no-history"],
                           capture_output=True, text=True, cwd=code)
        times[name].append(time.monotonic() - t)
        print(i, name, d.returncode, round(times[name][-1], 1), flush=True)
for k, v in times.items():
    print(k, "median", round(statistics.median(v), 1), "mean", round(statistics.mean(v), 1), [round(x, 1) for x in v])
