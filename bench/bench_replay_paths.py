"""The replay's paths side by side on the same exports, beside the lean window replay.

    .venv/bin/python bench/bench_replay_paths.py [--batches N ...] [--work DIR] [--driver-memory 8g]
                                                 [--paths function windows audit-function audit-windows]

Each size is a cached ``clean`` export (``bench_audit.prepare``). Cases, each run twice in one
application (the steady run counts):

- ``function``, ``windows``: :func:`analytics.audit.rules.replay`'s verdicts written as Parquet
  partitioned by topic (the replay and its write alone, as ``bench_audit``'s ``Spark classify``),
  every history in one range (the ranges the audit's plan sizes), by segaudit's window function on
  Spark's public API (``java/ReplayWindow.java``) and by Spark's window steps;
- ``audit-function``, ``audit-windows``: the whole ``segaudit audit`` on each;
- ``lean``: the lean window replay (``bench/lean_replay.py``), the floor.

With two sizes or more, the marginal µs per batch between the first and the last (which cancels
start-up) and each case's ratio to the lean replay's. The verdict counts of every replay are checked
equal.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_audit import prepare, table  # noqa: E402
from lean_replay import lean_case  # noqa: E402

from analytics.audit.config import AuditConfig  # noqa: E402

REPLAYS = {"function": dict(window_function=True), "windows": dict(window_function=False)}


def replay_case(spark, out: Path, config: AuditConfig, path: str) -> tuple[float, Counter]:
    """Steady seconds of the replay of ``out`` by ``path`` and its write, and the verdict counts."""
    from analytics.audit.rules import replay

    target = out.parent / f"{out.name}.paths-verdicts"
    seconds = []
    for _ in range(2):
        shutil.rmtree(target, ignore_errors=True)
        t0 = time.perf_counter()
        batches = spark.read.parquet(table(out, "batches"))
        starts = spark.read.parquet(table(out, "log_start_offsets"))
        replay(batches, config, starts, **REPLAYS[path]).verdicts.write.partitionBy("topic").parquet(str(target))
        seconds.append(time.perf_counter() - t0)
    read = spark.read.parquet(str(target)).groupBy("verdict").count().collect()
    shutil.rmtree(target, ignore_errors=True)
    return seconds[-1], Counter({r["verdict"]: r["count"] for r in read})


def audit_case(spark, out: Path, path: str) -> float:
    """Steady seconds of the whole audit of ``out`` on ``path``."""
    from analytics.audit.audit_plan import audit_plan
    from analytics.audit.job import audit

    paths = REPLAYS[path.removeprefix("audit-")]
    seconds = 0.0
    for _ in range(2):
        plan = replace(audit_plan(spark, str(out), AuditConfig()), **paths)
        seconds = audit(spark, str(out), AuditConfig(), plan=plan).seconds
    return seconds


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[400_000, 4_000_000])
    ap.add_argument("--work", type=Path, default=Path("/tmp/segaudit-bench"))
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--paths", nargs="+", default=[*REPLAYS, *(f"audit-{p}" for p in REPLAYS)])
    args = ap.parse_args(argv)

    from analytics.audit.audit_plan import range_decision
    from analytics.spark.memory import task_memory
    from analytics.spark.session import get_spark

    spark = get_spark(conf={"spark.driver.memory": args.driver_memory})
    config = AuditConfig(range_batches=range_decision(task_memory(spark))[0])  # as the audit's plan sizes them
    results: dict[tuple[int, str], float] = {}
    print(f"{'batches':>11} {'case':<16} {'seconds':>8} {'µs/batch':>9}")
    for n in args.batches:
        out, total = prepare(args.work, n)
        counts = set()
        for path in [*args.paths, "lean"]:
            if path == "lean":
                lean_case(spark, out)
                seconds = lean_case(spark, out)[0]
            elif path.startswith("audit-"):
                seconds = audit_case(spark, out, path)
            else:
                seconds, verdicts = replay_case(spark, out, config, path)
                assert sum(verdicts.values()) == total, (path, verdicts, total)
                counts.add(tuple(sorted(verdicts.items())))
            results[(total, path)] = seconds
            print(f"{total:>11,} {path:<16} {seconds:>8.1f} {seconds / total * 1e6:>9.2f}", flush=True)
        assert len(counts) <= 1, ("the replays disagree", counts)
    sizes = sorted({n for n, _ in results})
    if len(sizes) > 1:
        n0, n1 = sizes[0], sizes[-1]
        marginal = {p: (results[(n1, p)] - results[(n0, p)]) / (n1 - n0) * 1e6 for p in [*args.paths, "lean"]}
        print(f"\nmarginal µs per batch, {n0:,} to {n1:,} batches")
        for path, us in marginal.items():
            print(f"{path:<16} {us:>6.2f}  {us / marginal['lean']:.2f}x the lean replay")


if __name__ == "__main__":
    main()
