"""Time the forensic commands as an operator runs them: a cold ``segaudit`` process per question.

    .venv/bin/python bench/bench_forensics.py --scale 200 [--workdir /tmp/segaudit-forensics] [--repeat 5]
    .venv/bin/python bench/bench_forensics.py --out OUT [--repeat 5] [--code /tmp/old-checkout]

Without ``--out`` it builds an audited OUT first (``segaudit generate`` the ``--scenario`` at
``--scale``, then ``segaudit export`` and ``segaudit audit`` with the scenario's ``audit.toml``;
kept in ``--workdir`` and reused by the next run). Each question runs in fresh ``python -m
analytics`` processes; the table shows the median, least and most wall time of ``--repeat`` runs
and the median CPU time (the process and the children it waited for: not the JVM a Spark-based
checkout starts, which it never waits for). The questions: ``explain`` the middle offset of the
largest partition, ``producer`` of its busiest producer, ``inspect`` the export and the log dir it read,
and ``explain`` a misspelled topic (an error, exit 2). ``--code`` times another checkout of
segaudit (first on ``PYTHONPATH``) on the same OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def segaudit(args: list[str], code: Path = ROOT) -> tuple[float, float, int]:
    """The wall time, CPU time (seconds) and exit code of one ``segaudit`` process running the
    checkout ``code``. On a shared machine the CPU time is the steadier number."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    cpu, started = cpu_of_children(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "analytics", *args], env=env, cwd=code,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, cpu_of_children() - cpu, done.returncode


def build(workdir: Path, scenario: str, scale: int) -> Path:
    """An audited OUT of ``scenario`` at ``scale`` under ``workdir`` (built once, then reused)."""
    logs, out = workdir / f"{scenario}-x{scale}", workdir / f"{scenario}-x{scale}.out"
    if not (out / "_audit.json").exists():
        workdir.mkdir(parents=True, exist_ok=True)
        steps = ([] if logs.exists() else [["generate", str(logs), "--scenario", scenario, "--scale", str(scale)]]) + [
            ["export", str(logs), "--out", str(out)],
            ["audit", str(out), "--config", str(logs.with_name(logs.name + ".truth") / "audit.toml")],
        ]
        for step in steps:
            print("segaudit " + " ".join(step), file=sys.stderr, flush=True)
            seconds, _, code = segaudit(step)
            if code != 0:
                raise SystemExit(f"segaudit {step[0]} failed (exit {code})")
            print(f"  {seconds:.1f} s", file=sys.stderr, flush=True)
    return out


def questions(out: Path) -> dict[str, list[str]]:
    """The commands to time, with the offset and producer picked from the audit's small tables."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    segments = ds.dataset(out / "segments", format="parquet").to_table(
        columns=["topic", "partition", "batch_count", "first_offset", "last_offset"]).group_by(
        ["topic", "partition"]).aggregate([("batch_count", "sum"), ("first_offset", "min"), ("last_offset", "max")])
    biggest = segments.take(pc.sort_indices(segments, [("batch_count_sum", "descending")])[:1]).to_pylist()[0]
    topic, partition = biggest["topic"], biggest["partition"]
    offset = (biggest["first_offset_min"] + biggest["last_offset_max"]) // 2
    sessions = ds.dataset(out / "producer_sessions", format="parquet").to_table(
        columns=["producer_id", "batches"], filter=(pc.field("topic") == topic) & (pc.field("partition") == partition))
    busiest = sessions.take(pc.sort_indices(sessions, [("batches", "descending")])[:1])["producer_id"][0].as_py()
    logdirs = json.loads((out / "_export.json").read_text())["inputs"]
    where = ["--partition", str(partition), "--offset", str(offset)]
    return {
        f"explain {topic}-{partition} offset {offset}": ["explain", str(out), "--topic", topic, *where],
        f"producer {busiest}": ["producer", str(out), "--producer-id", str(busiest)],
        "inspect the export (OUT)": ["inspect", str(out)],
        "inspect the log dir (every batch header read)": ["inspect", *logdirs],
        f"explain a misspelled topic ({topic[:-1]})": ["explain", str(out), "--topic", topic[:-1], *where],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="an audited OUT (default: build one)")
    ap.add_argument("--scenario", default="clean")
    ap.add_argument("--scale", type=int, default=200, help="segaudit generate --scale of the OUT built")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/segaudit-forensics"))
    ap.add_argument("--repeat", type=int, default=5, help="cold processes per question (the median is shown)")
    ap.add_argument("--code", type=Path, default=ROOT, help="the segaudit checkout to time (default: this one)")
    args = ap.parse_args(argv)

    out = args.out or build(args.workdir, args.scenario, args.scale)
    batches = json.loads((out / "summary.json").read_text())["verdicts"]
    print(f"{sum(batches.values()):,} batches in {out}; {args.code}; median of {args.repeat} cold processes")
    print(f"{'question':<48} {'median s':>9} {'min s':>7} {'max s':>7} {'cpu s':>7} {'exit':>5}")
    for label, command in questions(out).items():
        wall, cpu, codes = zip(*(segaudit(command, args.code) for _ in range(args.repeat)))
        print(f"{label:<48} {statistics.median(wall):>9.2f} {min(wall):>7.2f} {max(wall):>7.2f} "
              f"{statistics.median(cpu):>7.2f} {','.join(map(str, sorted(set(codes)))):>5}", flush=True)


if __name__ == "__main__":
    main()
