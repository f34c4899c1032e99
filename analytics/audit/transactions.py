"""The ``transactions`` table and the aborted transactions' offset ranges, read from the batches'
columns alone (``batches``, or ``batch_verdicts``, which carries them): the audit finds them beside
the replay, from the export (:func:`transactions_found`), and judges them once the export time is
known (:func:`transactions_judged`).

A transaction opens at a producer's first transactional data batch and closes at its next marker:
numbered by the markers before it, a transaction is the group of its data batches and the marker
that ends it, one aggregate after one window over the transactional batches and markers.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from analytics.audit.config import AuditConfig
from analytics.contract import (
    ABORTED,
    APART,
    TOPIC_ID,
    COMMITTED,
    HANGING,
    LATE_TRANSACTION_BUFFER_MS,
    OPEN,
    TXN_ID_OPEN_STATES,
    VIEW_ENDED,
    VIEW_OPEN,
    VIEW_UNKNOWN,
)
from analytics.spark.columns import with_log_dir, with_topic_id

TXN_PRODUCER = ["log_dir", "topic", "partition", TOPIC_ID, "producer_id"]
TXN_KEYS = [*TXN_PRODUCER, "markers_before"]  # a transaction: its producer's markers before it


def transactions(v, config: AuditConfig, export_time: int, coordinator=None):
    """A transaction opens at a producer's first transactional data batch and closes at its next marker.

    ``coordinator``: a live cluster's ``coordinator_transactions``, asked right after the log's offsets
    were captured: each transaction the log shows open gets ``coordinator_view`` (open, ended, unknown;
    see the contract). Without it the column is null."""
    return transactions_judged(transactions_found(v, coordinator), config, export_time)


def transactions_merged(before, v, config: AuditConfig, export_time: int, coordinator=None):
    """:func:`transactions` of a log audited in two parts: ``before``, the transactions of the first
    part, and ``v``, the batches after it. The ended transactions of ``before`` stay as they are; its
    open one of each producer (there is at most one: the last) continues into the batches after, as
    their first transaction (no marker between), and is judged again (a marker after may end it, and
    the export time has moved)."""
    return transactions_judged(transactions_found(v, coordinator, before), config, export_time, before)


def transactions_found(v, coordinator=None, before=None):
    """The transactions of ``v`` (``TXN_KEYS``; first offset, epoch and last timestamp of the data;
    end offset, control type and coordinator epoch of the marker that ended it, if any), with the
    coordinator's view of those open when ``coordinator`` is given: everything of a row of
    ``transactions`` but its status, which the export time decides (:func:`transactions_judged`).
    ``before``: the transactions of the log's first part, whose open ones continue in ``v``."""
    found = _grouped(v, before)
    if coordinator is None:
        return found.withColumn("coordinator_view", F.lit(None).cast("string"))
    held = coordinator.select("log_dir", "producer_id", F.col("producer_epoch").alias("c_epoch"),
                              F.col("state").alias("c_state"), F.col("partitions").alias("c_partitions"))
    found = found.join(F.broadcast(held), ["log_dir", "producer_id"], "left")
    holds = ((F.col("c_epoch") == F.col("producer_epoch")) & F.col("c_state").isin(*TXN_ID_OPEN_STATES)
             & F.array_contains("c_partitions", F.concat_ws("-", "topic", F.col("partition").cast("string"))))
    view = (F.when(F.col("control_type").isNotNull(), None).when(F.col("c_state").isNull(), VIEW_UNKNOWN)
            .when(holds, VIEW_OPEN).otherwise(VIEW_ENDED))
    return found.withColumn("coordinator_view", view).drop("c_epoch", "c_state", "c_partitions")


def transactions_judged(found, config: AuditConfig, export_time: int, before=None, ended=None):
    """The ``transactions`` rows of the transactions ``found`` (:func:`transactions_found`): committed
    or aborted by their marker, else hanging when the export time is past the transaction timeout
    (and a buffer), else open; ``before``'s ended transactions first, as they were.

    ``ended``: the deleted incarnations' ids (:func:`analytics.audit.incarnations.ended`), judged as
    of the end of their log rather than the export: when the controller removed the topic, else (not
    known) the partition's last transactional write. A deleted topic's transaction can never end; it
    is hanging only when it already was then: a violation of its own, not one the deletion made."""
    now = F.lit(export_time)
    if ended:
        plain = F.substring_index(F.col(TOPIC_ID), APART, 1)
        known = {i: t for i, t in ended.items() if t is not None}
        at = F.create_map(*[F.lit(x) for pair in sorted(known.items()) for x in pair])[plain] if known else F.lit(None)
        last = F.max("last_timestamp").over(Window.partitionBy("log_dir", "topic", "partition", TOPIC_ID))
        now = F.when(plain.isin(*ended), F.least(now, F.coalesce(at.cast("long"), last))).otherwise(now)
    late = now - F.col("last_timestamp") > config.transaction_max_timeout_ms + LATE_TRANSACTION_BUFFER_MS
    judged = found.select(
        "topic", "partition", "producer_id", "producer_epoch", "first_offset", "end_offset",
        F.when(F.col("control_type") == "COMMIT", COMMITTED)
        .when(F.col("control_type") == "ABORT", ABORTED)
        .when(late, HANGING)
        .otherwise(OPEN).alias("status"),
        "coordinator_epoch", "last_timestamp", "log_dir", "coordinator_view", TOPIC_ID,
    )
    if before is None:
        return judged
    return with_topic_id(before).where(F.col("end_offset").isNotNull()).select(
        *judged.columns).unionByName(judged)


def aborted_ranges(batches):
    """The offsets of each aborted transaction: ``TXN_PRODUCER``, ``txn_first`` (its first data batch's
    base offset) and ``txn_end`` (its ABORT marker's offset): the producer's records from ``txn_first``
    up to before ``txn_end`` are what a read_committed consumer never receives."""
    return _grouped(batches).where(F.col("control_type") == "ABORT").select(
        *TXN_PRODUCER, F.col("first_offset").alias("txn_first"), F.col("end_offset").alias("txn_end"))


def _grouped(v, before=None):
    """Per transaction of ``v`` (``TXN_KEYS``): its data's first offset, epoch (at the first offset)
    and last timestamp, and its marker's offset (``end_offset``), control type and coordinator epoch
    (null: none ended it yet). ``before``: its open transactions join the first of ``v``'s."""
    # only transactional data batches open transactions and only markers close them: the rest of the
    # log (most of it, for idempotent producers) never enters the window's sort
    replayed = with_log_dir(with_topic_id(v, None)).where(F.col("crc_valid") & (F.col("producer_id") >= 0) & (F.col("magic") == 2)
                                     & ~(F.col("is_control") & (F.col("record_count") == 0))
                                     & (F.col("is_transactional") | F.col("is_control")))
    w = Window.partitionBy(*TXN_PRODUCER).orderBy("base_offset", "file_position")
    markers_before = F.coalesce(F.sum(F.col("is_control").cast("long")).over(
        w.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0).cast("long"))
    numbered = replayed.select(*TXN_PRODUCER, markers_before.alias("markers_before"), "base_offset",
                               "producer_epoch", "max_timestamp", "is_control",
                               (F.col("is_transactional") & ~F.col("is_control")).alias("is_data"),
                               "control_type", "coordinator_epoch")
    if before is not None:  # an open transaction continued: data before the first marker of v
        before = with_topic_id(before)
        numbered = numbered.unionByName(before.where(F.col("end_offset").isNull()).select(
            *TXN_PRODUCER, F.lit(0).cast("long").alias("markers_before"), F.col("first_offset").alias("base_offset"),
            "producer_epoch", F.col("last_timestamp").alias("max_timestamp"), F.lit(False).alias("is_control"),
            F.lit(True).alias("is_data"), F.lit(None).cast("string").alias("control_type"),
            F.lit(None).cast("int").alias("coordinator_epoch")))

    def of(column: str, when):
        return F.when(when, F.col(column))

    data, marker = F.col("is_data"), F.col("is_control")
    return numbered.groupBy(*TXN_KEYS).agg(
        F.min(of("base_offset", data)).alias("first_offset"),
        F.min_by(of("producer_epoch", data), of("base_offset", data)).alias("producer_epoch"),
        F.max(of("max_timestamp", data)).alias("last_timestamp"),
        F.max(of("base_offset", marker)).alias("end_offset"),
        F.max(of("control_type", marker)).alias("control_type"),
        F.max(of("coordinator_epoch", marker)).alias("coordinator_epoch"),
        F.bool_or(data).alias("opened"),
    ).where("opened").drop("opened")
