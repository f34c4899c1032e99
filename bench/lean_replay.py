"""The floor the audit is measured against (issue 46): a lean Spark window replay of an export's
``batches`` table.

One sort in producer order (topic, partition, producer id by offset) and one duplicate sort (the
same producer, epoch and sequences), the lags, a running high-water mark of the sequence and the
verdict, with every ``batches`` column carried through both sorts and written as Parquet,
partitioned by topic: the replay's core without the audit's offset ranges, join back, derived
tables, observations or 38-column contract. Its verdicts are the broker's main ones only (no
explanations, severities, transactions, expiration or snapshots), so on the ``clean`` logs the
benchmark writes they match the audit's; it is a cost floor, not a second audit.

    .venv/bin/python bench/bench_audit.py --batches 400000 4000000   # side by side with the audit
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

LABEL = "lean window replay"


def lean_verdicts(batches):
    """``batches`` with ``verdict``, ``dup_rank``, ``prev_epoch``, ``prev_last_sequence``, ``idle_ms``
    and ``sequence_high_water`` added, every input column kept."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    producer = ["topic", "partition", "producer_id"]
    order = ["base_offset", "file_position"]
    in_order = Window.partitionBy(*producer).orderBy(*order)
    before = in_order.rowsBetween(Window.unboundedPreceding, -1)
    same_batch = Window.partitionBy(*producer, "producer_epoch", "base_sequence", "last_sequence").orderBy(*order)
    idempotent = (F.col("magic") == 2) & (F.col("producer_id") >= 0) & F.col("crc_valid")
    data = idempotent & ~F.col("is_control")
    replayed = (
        batches
        .withColumn("dup_rank", F.when(data, F.row_number().over(same_batch)))
        .withColumn("prev_epoch", F.lag("producer_epoch").over(in_order))
        .withColumn("prev_last_sequence", F.lag("last_sequence").over(in_order))
        .withColumn("idle_ms", F.col("max_timestamp") - F.lag("max_timestamp").over(in_order))
        .withColumn("sequence_high_water", F.max(F.when(~F.col("is_control"), F.col("last_sequence"))).over(before))
    )
    epoch, prev_epoch, base = F.col("producer_epoch"), F.col("prev_epoch"), F.col("base_sequence")
    verdict = (
        F.when(~idempotent, F.lit("NOT_IDEMPOTENT"))
        .when(F.col("is_control"), F.when(prev_epoch.isNotNull() & (epoch < prev_epoch), "MARKER_EPOCH_REGRESSION")
              .otherwise("CONTROL_MARKER"))
        .when(F.col("dup_rank") > 1, "DUPLICATE")
        .when(prev_epoch.isNull(), F.when(base == 0, "OK").otherwise("FIRST_SEEN_NONZERO"))
        .when(epoch > prev_epoch, F.when(base == 0, "EPOCH_BUMP").otherwise("EPOCH_BUMP_NONZERO"))
        .when(epoch < prev_epoch, "FENCED_ZOMBIE_WRITE")
        .when((base.cast("long") == F.col("prev_last_sequence").cast("long") + 1)
              | ((base == 0) & (F.col("prev_last_sequence") == 2147483647)), "OK")
        .when(base <= F.col("sequence_high_water"), "SEQUENCE_REGRESSION")
        .otherwise("SEQUENCE_GAP")
    )
    return replayed.withColumn("verdict", verdict)


def lean_case(spark, out: Path) -> tuple[float, Counter]:
    """Seconds of the lean replay of ``out``'s ``batches`` written as Parquet partitioned by topic,
    and its verdict counts (read back after the clock stops)."""
    from analytics.publish import published

    target = out.parent / f"{out.name}.lean-verdicts"
    shutil.rmtree(target, ignore_errors=True)
    t0 = time.perf_counter()
    lean_verdicts(spark.read.parquet(published(str(out)).path("batches"))).write.partitionBy("topic").parquet(str(target))
    seconds = time.perf_counter() - t0
    counts = Counter({r["verdict"]: r["count"] for r in spark.read.parquet(str(target)).groupBy("verdict").count().collect()})
    shutil.rmtree(target, ignore_errors=True)
    return seconds, counts


def print_side_by_side(rows: list[tuple[int, float, float]], audit_label: str) -> None:
    """The audit against the lean replay, per size (``rows``: batches, audit seconds, lean seconds):
    seconds, µs per batch of the whole run, and between consecutive sizes the marginal µs per
    batch (the difference of the times over the difference of the sizes, which cancels the fixed
    cost of a run), with the audit's ratio to the lean replay."""
    print(f"\n{audit_label} against the {LABEL}")
    print(f"{'batches':>11} {'audit s':>9} {'lean s':>8} {'audit µs/b':>11} {'lean µs/b':>10} {'ratio':>7}")
    for total, audit, lean in rows:
        print(f"{total:>11,} {audit:>9.1f} {lean:>8.1f} {audit / total * 1e6:>11.2f} {lean / total * 1e6:>10.2f} "
              f"{audit / lean:>6.2f}x", flush=True)
    for (n0, a0, l0), (n1, a1, l1) in zip(rows, rows[1:]):
        span = n1 - n0
        if span <= 0:
            continue
        audit_us, lean_us = (a1 - a0) / span * 1e6, (l1 - l0) / span * 1e6
        ratio = (f"{audit_us / lean_us:.2f}x" if audit_us > 0 and lean_us > 0
                 else "n/a (a time fell as the size grew: a busy machine?)")
        print(f"marginal {n0:,} -> {n1:,} batches: audit {audit_us:.2f} µs/batch, lean {lean_us:.2f} µs/batch, "
              f"ratio {ratio}", flush=True)
