"""Time ``explain`` and ``producer`` on an audited export, against a full scan of ``batch_verdicts``.

    .venv/bin/python bench/bench_forensics.py OUT [--repeat 3]

Each question runs in a fresh Spark session of one process (the first call pays for the JVM's
warm-up; the table reports the best of ``--repeat`` calls after one warm-up call). The baseline
is the cost of the question without pruning: counting one column over every row of
``batch_verdicts``. The offsets and producers asked about are picked from the table: the middle
offset of the largest partition, and its busiest producer.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def best(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from analytics.forensics import explain, producer_history
    from analytics.spark.session import get_spark

    spark = get_spark(conf={"spark.driver.memory": "4g"})
    verdicts = spark.read.parquet(os.path.join(args.out, "producer_sessions"))
    biggest = verdicts.groupBy("topic", "partition").agg(F.sum("batches").alias("n"), F.min("first_offset").alias("lo"),
                                                          F.max("last_offset").alias("hi")).orderBy(F.desc("n")).first()
    busiest = verdicts.where((F.col("topic") == biggest["topic"]) & (F.col("partition") == biggest["partition"])) \
        .orderBy(F.desc("batches")).first()["producer_id"]
    offset = (biggest["lo"] + biggest["hi"]) // 2
    total = spark.read.parquet(os.path.join(args.out, "batch_verdicts")).count()
    cases = {
        f"explain {biggest['topic']}-{biggest['partition']}@{offset}":
            lambda: explain(spark, args.out, biggest["topic"], biggest["partition"], offset),
        f"producer {busiest}": lambda: producer_history(spark, args.out, busiest),
        "full scan (count idle_ms)": lambda: spark.read.parquet(os.path.join(args.out, "batch_verdicts"))
        .where(F.col("idle_ms") > 0).count(),
    }
    print(f"{total:,} batches in {args.out}; best of {args.repeat} after a warm-up")
    for label, fn in cases.items():
        print(f"{label:<44} {best(fn, args.repeat):>7.2f} s", flush=True)


if __name__ == "__main__":
    main()
