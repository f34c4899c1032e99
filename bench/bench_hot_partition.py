"""One hot partition: how the replay of a single long history spreads over tasks, from Spark's task metrics.

    .venv/bin/python bench/bench_hot_partition.py [--batches 4000000] [--producers 8] [--work DIR]
                                                  [--driver-memory 1g] [--baseline-memory 8g]

A ``batches`` table of one topic-partition (``--batches`` single-record batches from
``--producers`` idempotent producers taking turns, one segment file per million batches) is written
once with Spark into ``--work``. Then, each in a fresh Spark application with its event log on,
``classify`` runs over it and its rows are written to Spark's ``noop`` sink:

- ``ranges``: the audit as it runs, the history cut into ranges of ``range_batches`` (default
  250,000), at ``--driver-memory`` (Spark's default 1 GiB);
- ``one range`` (the baseline): the whole history in one window group, as before the cut, at
  ``--baseline-memory`` (at 1 GiB it does not complete).

For each, the seconds of ``classify``, then every stage of at least a second of task time, longest first: its tasks, the longest task's run time and its share of the
stage's task time, and the records the smallest and the largest task read. The replay's window
stages are those where the cut shows: one task for the whole history in the baseline.
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ONE_RANGE = 10**12


def write_batches(spark, path: Path, batches: int, producers: int) -> None:
    """The hot partition's ``batches`` table, in the export's schema."""
    from pyspark.sql import functions as F

    from analytics.contract import schemas
    from analytics.spark.source import spark_schema

    per_file = 1_000_000
    i = F.col("id")
    base = (F.floor(i / per_file) * per_file).cast("long")
    columns = {
        "topic": F.lit("hot"), "partition": F.lit(0),
        "file": F.concat(F.lit("/bench/hot/hot-0/"), F.lpad(base.cast("string"), 20, "0"), F.lit(".log")),
        "file_position": (i - base) * 70, "batch_size": F.lit(70), "magic": F.lit(2), "crc_valid": F.lit(True),
        "base_offset": i, "last_offset": i, "record_count": F.lit(1), "partition_leader_epoch": F.lit(0),
        "compression": F.lit("none"), "timestamp_type": F.lit("CreateTime"), "is_transactional": F.lit(False),
        "is_control": F.lit(False), "base_timestamp": 1_767_225_600_000 + i, "max_timestamp": 1_767_225_600_000 + i,
        "producer_id": i % producers, "producer_epoch": F.lit(0), "base_sequence": F.floor(i / producers),
        "last_sequence": F.floor(i / producers), "control_type": F.lit(None), "coordinator_epoch": F.lit(None),
        "attributes": F.lit(0), "delete_horizon_ms": F.lit(None), "crc": F.lit(0),
    }
    schema = spark_schema(schemas.BATCHES)
    rows = spark.range(batches).select(*[columns[f.name].cast(f.dataType).alias(f.name) for f in schema.fields])
    rows.write.mode("overwrite").parquet(str(path))


def child(args) -> None:
    """One case in this process: classify the hot partition, print the stage metrics as JSON."""
    from analytics.audit.config import AuditConfig
    from analytics.audit.rules import classify
    from analytics.spark.session import get_spark

    events = Path(tempfile.mkdtemp(prefix="hot-events-", dir=args.work))
    spark = get_spark(conf={"spark.driver.memory": args.memory, "spark.eventLog.enabled": "true",
                            "spark.eventLog.dir": str(events), "spark.eventLog.compress": "false"})
    table = args.work / f"hot-{args.batches}x{args.producers}"
    if not (table / "_SUCCESS").exists():
        write_batches(spark, table, args.batches, args.producers)
    batches = spark.read.parquet(str(table))
    started = time.perf_counter()
    classify(batches, AuditConfig(range_batches=args.range_batches)).write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - started
    spark.stop()
    print(json.dumps({"seconds": seconds, "stages": stage_metrics(events, args.batches)}))


def stage_metrics(events: Path, batches: int) -> list[dict]:
    """Stages of at least a second of task time, by task time (a stage reading held rows reads no
    input or shuffle records: ``reads`` counts only those)."""
    tasks = defaultdict(list)
    for name in glob.glob(str(events / "*" / "events_*")):  # Spark 4: a folder of rolled files per application
        with open(name) as f:
            for line in f:
                e = json.loads(line)
                if e["Event"] == "SparkListenerTaskEnd" and e.get("Task Metrics"):
                    m = e["Task Metrics"]
                    read = m["Input Metrics"]["Records Read"] + m["Shuffle Read Metrics"]["Total Records Read"]
                    tasks[e["Stage ID"]].append((m["Executor Run Time"], read))
    stages = []
    for stage, ts in tasks.items():
        total = sum(t for t, _ in ts)
        if total >= 1000:
            longest = max(t for t, _ in ts)
            stages.append({"stage": stage, "tasks": len(ts), "task_seconds": total / 1000, "longest": longest / 1000,
                           "share": longest / total, "min_read": min(r for _, r in ts), "max_read": max(r for _, r in ts)})
    return sorted(stages, key=lambda s: -s["task_seconds"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=4_000_000)
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--work", type=Path, default=Path("/tmp/segaudit-bench"))
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--baseline-memory", default="8g")
    ap.add_argument("--range-batches", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--memory", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.child:
        child(args)
        return
    from analytics.tuning import DEFAULT_RANGE_BATCHES

    print(f"one partition, {args.batches:,} batches from {args.producers} producers")
    print(f"{'case':<30} {'seconds':>8} {'stage':>6} {'tasks':>6} {'task s':>7} {'longest':>8} {'share':>6} "
          f"{'reads min..max':>22}")
    for label, size, memory in ((f"ranges of {DEFAULT_RANGE_BATCHES:,}", DEFAULT_RANGE_BATCHES, args.driver_memory),
                                ("one range (baseline)", ONE_RANGE, args.baseline_memory)):
        run = subprocess.run([sys.executable, __file__, "--child", "--batches", str(args.batches), "--producers",
                              str(args.producers), "--work", str(args.work), "--range-batches", str(size),
                              "--memory", memory], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{label + ', ' + memory:<30} failed: {(run.stderr.strip().splitlines() or ['?'])[-1][:120]}")
            continue
        result = json.loads(run.stdout.strip().splitlines()[-1])
        for i, s in enumerate(result["stages"]):
            head = f"{label + ', ' + memory:<30} {result['seconds']:>8.1f}" if i == 0 else f"{'':<30} {'':>8}"
            print(f"{head} {s['stage']:>6} {s['tasks']:>6} {s['task_seconds']:>7.1f} {s['longest']:>8.1f} "
                  f"{s['share']:>6.1%} {s['min_read']:>10,}..{s['max_read']:<11,}", flush=True)


if __name__ == "__main__":
    main()
