"""The audit's tables derived from ``batch_verdicts``: the per-file rows, producer sessions and
transactions; and record duplicates from ``records`` (the snapshot checks:
:mod:`analytics.audit.snapshots`). Each a function ``DataFrame -> DataFrame`` whose result the
stage (:mod:`analytics.audit.job`) conforms to the contract's schema and writes.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from analytics.audit.config import AuditConfig
from analytics.audit.predicates import checked, has_state, is_data
from analytics.contract import (
    ABORTED,
    CHECK_RECORD_DUPLICATES,
    COMMITTED,
    DEDUP_DELIVERY,
    DEDUP_HEADER_PREFIX,
    DEDUP_KEY_VALUE,
    DUP_ABORTED,
    DUP_AFTER_ABORT,
    DUP_DUPLICATE,
    HANGING,
    LATE_TRANSACTION_BUFFER_MS,
    LOG_APPEND_TIME,
    OPEN,
    TXN_ID_OPEN_STATES,
    VERDICTS,
    VIEW_ENDED,
    VIEW_OPEN,
    VIEW_UNKNOWN,
)
from analytics.spark.columns import with_log_dir


def per_file(v):
    """One row per (topic, partition, producer_id, producer_epoch, file) of the idempotent batches:
    what ``producer_sessions`` sums per log dir, and the offsets of the batches that leave producer
    state (``first_state_offset``, ``last_state_offset``) that ``snapshot_checks`` searches. Small
    (segment files x producers x epochs): one pass over ``batch_verdicts`` serves both tables.
    ``min_base_sequence`` and ``max_base_sequence``, of the data batches that update producer state,
    bound where the duplicate check of a later incremental audit must look back
    (:func:`analytics.audit.increment.increment`). ``last_state``: the state the last of them leaves
    (its offset and position, the last sequence and offset), what ``snapshot_checks`` needs of a
    file that no snapshot falls inside."""

    data = v.where((F.col("producer_id") >= 0) & (F.col("magic") == 2))
    on_data = lambda c: F.when(~F.col("is_control"), F.col(c))  # noqa: E731
    on_state = F.when(F.col("state_last_sequence").isNotNull(), F.col("base_offset"))
    stateful_data = F.when(has_state() & is_data(), F.col("base_sequence"))
    # the latest state row in (base_offset, file_position) order, as one number (a file is under 2^32
    # bytes): every aggregate then has a fixed-width buffer and Spark hashes the groups instead of
    # sorting the verdicts for them (a max of a struct sorts: 4M batches, 10.6 task seconds against 4.6)
    at = F.when(F.col("state_last_sequence").isNotNull(),
                F.col("base_offset").cast(ORDER_TYPE) * F.lit(2**32).cast(ORDER_TYPE) + F.col("file_position"))
    per_file = data.groupBy(*PER_FILE_KEY).agg(
        F.min("base_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.min("max_timestamp").alias("first_timestamp"),
        F.max("max_timestamp").alias("last_timestamp"),
        F.count("*").alias("batches"),
        F.sum(F.when(~F.col("is_control"), F.col("record_count")).otherwise(0)).alias("records"),
        F.min_by(on_data("base_sequence"), on_data("base_offset")).alias("first_sequence"),
        F.min(on_data("base_offset")).alias("first_data_offset"),
        F.max_by(on_data("last_sequence"), on_data("base_offset")).alias("last_sequence"),
        F.max(on_data("base_offset")).alias("last_data_offset"),
        F.min(on_state).alias("first_state_offset"),
        F.max(on_state).alias("last_state_offset"),
        F.min(stateful_data).alias("min_base_sequence"),
        F.max(stateful_data).alias("max_base_sequence"),
        F.max(at).alias("last_at"),
        F.max_by("state_last_sequence", at).alias("last_sequence_left"),
        F.max_by("state_last_offset", at).alias("last_offset_left"),
        *[F.sum((F.col("verdict") == name).cast("long")).alias(name.lower()) for name in VERDICTS],
    )
    last_at = F.col("last_at")
    last_state = F.when(last_at.isNotNull(), F.struct(
        F.floor(last_at / 2**32).cast("long").alias("base_offset"), F.pmod(last_at, F.lit(2**32)).cast("long").alias("file_position"),
        F.col("last_sequence_left").alias("sequence"), F.col("last_offset_left").alias("offset")))
    verdict_counts = [name.lower() for name in VERDICTS]
    return per_file.select(*[c for c in per_file.columns if c not in ("last_at", "last_sequence_left", "last_offset_left",
                                                                       *verdict_counts)],
                           last_state.alias("last_state"), *verdict_counts)


# The groups of :func:`per_file`: a producer's epoch in a segment file.
PER_FILE_KEY = ("topic", "partition", "producer_id", "producer_epoch", "file")

# A decimal wide enough for an offset times 2^32 plus a file position, which Spark's hash aggregate holds.
ORDER_TYPE = "decimal(38,0)"

def _per_file_sums():
    """The aggregates of :func:`per_file`'s rows that give the same rows over coarser groups: the
    lowest and highest, sums, and the sequences at the lowest and highest data offset."""
    return [
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.min("first_timestamp").alias("first_timestamp"),
        F.max("last_timestamp").alias("last_timestamp"),
        F.sum("batches").alias("batches"),
        F.sum("records").alias("records"),
        F.min_by("first_sequence", "first_data_offset").alias("first_sequence"),
        F.min("first_data_offset").alias("first_data_offset"),
        F.max_by("last_sequence", "last_data_offset").alias("last_sequence"),
        F.max("last_data_offset").alias("last_data_offset"),
        F.min("first_state_offset").alias("first_state_offset"),
        F.max("last_state_offset").alias("last_state_offset"),
        F.min("min_base_sequence").alias("min_base_sequence"),
        F.max("max_base_sequence").alias("max_base_sequence"),
        F.max("last_state").alias("last_state"),
        *[F.sum(name.lower()).alias(name.lower()) for name in VERDICTS],
    ]


def per_file_merged(before, after):
    """:func:`per_file` of two parts of the verdicts (a previous audit's ``producer_files`` and the
    rows an incremental audit added): every aggregate composes, so this is :func:`per_file` of both
    (a segment file that grew has a row in each)."""
    both = before.select(*after.columns).unionByName(after)
    return both.groupBy(*PER_FILE_KEY).agg(*_per_file_sums())


def producer_sessions(per_file):
    """One row per (topic, partition, producer_id, producer_epoch), with a count per verdict: the
    per-file rows of ``per_file`` (each file names its log dir, so no batch row is parsed for it)
    merged per log dir (the stage keeps the contract's columns)."""
    return with_log_dir(per_file).groupBy("topic", "partition", "producer_id", "producer_epoch", "log_dir").agg(
        *_per_file_sums())


def record_duplicates(records, dedup_key: str, batches=None, key=None):
    """Every repeated occurrence (not the first) of a dedup key within a partition's data records,
    per log dir: the replicas of a partition are compared with each other by ``replica_divergence``,
    not counted as copies. (Records exported before they named their ``file`` have no log dir.)

    Topics the record-duplicate check does not apply to (``contract.topic_kind``: the coordinators'
    and the controller's logs, Streams changelogs, Connect's topics) are left out. Each row's ``kind``
    says what a read_committed consumer makes of it (``contract.DUPLICATE_KINDS``): ``duplicate``, an
    earlier copy was delivered; ``after_abort``, every earlier copy lies in an aborted transaction;
    ``aborted``, the copy itself does. Aborted transactions are read from ``batches`` (a producer's
    transactional data up to its ABORT marker); without ``batches`` every row is a ``duplicate``.
    ``key``: a function of whether the records carry ``append_time`` giving the key column in place of
    ``dedup_key``'s (bench/dedup_keys.py measures candidates with it)."""

    located = with_log_dir(records) if "file" in records.columns else records.withColumn("log_dir", F.lit(None).cast("string"))
    if (key is not None or dedup_key == DEDUP_DELIVERY) and batches is not None:
        located = with_append_time(located, batches)
    key = (key or (lambda append_time: dedup_expression(dedup_key, append_time)))("append_time" in located.columns)
    data = located.where(~F.coalesce(F.col("is_control"), F.lit(False)) & checked(CHECK_RECORD_DUPLICATES)).withColumn(
        "dedup_key", key).where(F.col("dedup_key").isNotNull())
    w = Window.partitionBy("log_dir", "topic", "partition", "dedup_key").orderBy("offset")
    # every copy of a repeated key, the first included: few rows, which alone meet the aborted ranges
    repeated = data.select(
        "*", F.row_number().over(w).alias("rank"), F.first("offset").over(w).alias("first_offset"),
        F.first("producer_id").over(w).alias("first_producer_id"),
        F.count(F.lit(1)).over(w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)).alias("copies"),
    ).where(F.col("copies") > 1)
    if batches is None:
        flagged = repeated.withColumn("aborted", F.lit(False))
    else:
        keys = ["log_dir", "topic", "partition", "producer_id"] if "file" in records.columns else [
            "topic", "partition", "producer_id"]
        ranges = aborted_ranges(batches).select(*keys, "txn_first", "txn_end")
        inside = [repeated[k] == ranges[k] for k in keys] + [
            repeated["offset"] >= ranges["txn_first"], repeated["offset"] < ranges["txn_end"]]
        flagged = repeated.join(ranges, inside, "left").select(
            repeated["*"], ranges["txn_first"].isNotNull().alias("aborted"))
    delivered_before = F.max((~F.col("aborted")).cast("int")).over(w.rowsBetween(Window.unboundedPreceding, -1))
    kind = (F.when(F.col("aborted"), DUP_ABORTED).when(delivered_before == 1, DUP_DUPLICATE).otherwise(DUP_AFTER_ABORT))
    return flagged.withColumn("kind", kind).where(F.col("rank") > 1).select(
        "topic", "partition", "dedup_key", "offset", "first_offset", "producer_id", "first_producer_id", "log_dir",
        "kind")


def dedup_expression(dedup_key: str, append_time: bool = False):
    """The dedup key of a record (``contract.DEDUP_KEYS``), as a string whose part before the first
    ``:`` is the record key in hex. ``delivery``: the key, the value's hash, the headers' hash and, for
    a CreateTime batch, the producer's timestamp, which a retry re-sends unchanged and two sends of one
    payload rarely share; a LogAppendTime batch's timestamp is the broker's, new at each append, so it
    is left out (``append_time``: the records carry the column of :func:`with_append_time`; without
    it every timestamp counts)."""
    key_value = [F.coalesce(F.hex("key"), F.lit("null")), F.coalesce(F.col("value_hash").cast("string"), F.lit("null"))]
    if dedup_key == DEDUP_KEY_VALUE:
        return F.concat_ws(":", *key_value)
    if dedup_key == DEDUP_DELIVERY:
        stamp = F.col("timestamp").cast("string")
        if append_time:
            stamp = F.when(F.col("append_time"), F.lit("append")).otherwise(stamp)
        return F.concat_ws(":", *key_value, F.when(F.size("headers") > 0, F.xxhash64("headers")).otherwise(0).cast("string"),
                           F.coalesce(stamp, F.lit("null")))
    name = dedup_key[len(DEDUP_HEADER_PREFIX):]
    return F.hex(F.element_at(F.filter("headers", lambda h: h["key"] == F.lit(name)), 1)["value"])


def with_append_time(records, batches):
    """``records`` with ``append_time``: its partition has LogAppendTime batches (the broker stamped
    their timestamps). Those partitions are few (one row each, broadcast), so the records are not
    shuffled; a partition whose topic changed its timestamp type counts as LogAppendTime throughout
    (the timestamp is then left out of every key: a retry is never missed)."""
    appended = batches.where(F.col("timestamp_type") == LOG_APPEND_TIME).select("topic", "partition").distinct()
    return records.join(F.broadcast(appended.withColumn("append_time", F.lit(True))), ["topic", "partition"], "left") \
        .withColumn("append_time", F.coalesce(F.col("append_time"), F.lit(False)))


def aborted_ranges(batches):
    """The offsets of each aborted transaction: ``TXN_PRODUCER``, ``txn_first`` (its first data batch's
    base offset) and ``txn_end`` (its ABORT marker's offset): the producer's records from ``txn_first``
    up to before ``txn_end`` are what a read_committed consumer never receives."""
    opened, markers = _opened_and_markers(batches)
    return opened.join(markers.where(F.col("control_type") == "ABORT"), TXN_KEYS).select(
        *TXN_PRODUCER, F.col("first_offset").alias("txn_first"), F.col("end_offset").alias("txn_end"))


TXN_PRODUCER = ["log_dir", "topic", "partition", "producer_id"]
TXN_KEYS = [*TXN_PRODUCER, "markers_before"]  # a transaction: its producer's markers before it


def transactions(v, config: AuditConfig, export_time: int, coordinator=None):
    """A transaction opens at a producer's first transactional data batch and closes at its next marker.

    ``coordinator``: a live cluster's ``coordinator_transactions``, asked right after the log's offsets
    were captured: each transaction the log shows open gets ``coordinator_view`` (open, ended, unknown;
    see the contract). Without it the column is null."""
    opened, markers = _opened_and_markers(v)
    return _transactions_of(opened, markers, config, export_time, coordinator)


def transactions_merged(before, v, config: AuditConfig, export_time: int, coordinator=None):
    """:func:`transactions` of a log audited in two parts: ``before``, the transactions of the first
    part, and ``v``, the verdicts of the batches after it. The ended transactions of ``before`` stay as
    they are; its open one of each producer (there is at most one: the last) continues into the
    batches after, as their first transaction (no marker between), and is judged again (a marker
    after may end it, and the export time has moved)."""
    opened, markers = _opened_and_markers(v)
    still = before.where(F.col("end_offset").isNull()).select(
        *TXN_PRODUCER, F.lit(0).cast("long").alias("markers_before"), "first_offset", "producer_epoch", "last_timestamp")
    opened = opened.unionByName(still).groupBy(*TXN_KEYS).agg(
        F.min("first_offset").alias("first_offset"),
        F.min_by("producer_epoch", "first_offset").alias("producer_epoch"),
        F.max("last_timestamp").alias("last_timestamp"),
    )
    ended = before.where(F.col("end_offset").isNotNull())
    merged = _transactions_of(opened, markers, config, export_time, coordinator)
    return ended.select(*merged.columns).unionByName(merged)


def _opened_and_markers(v):
    """The transactions of ``v`` opened (``TXN_KEYS``, first offset, epoch, last timestamp) and the
    markers (``TXN_KEYS``, end offset, control type, coordinator epoch), numbered by the markers
    before them."""
    # only transactional data batches open transactions and only markers close them: the rest of the
    # log (most of it, for idempotent producers) never enters the window's sort
    replayed = with_log_dir(v).where(F.col("crc_valid") & (F.col("producer_id") >= 0) & (F.col("magic") == 2)
                                     & ~(F.col("is_control") & (F.col("record_count") == 0))
                                     & (F.col("is_transactional") | F.col("is_control")))
    w = Window.partitionBy(*TXN_PRODUCER).orderBy("base_offset", "file_position")
    numbered = replayed.withColumn(
        "markers_before", F.coalesce(F.sum(F.col("is_control").cast("long")).over(
            w.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0).cast("long"))
    )
    opened = numbered.where(F.col("is_transactional") & ~F.col("is_control")).groupBy(*TXN_KEYS).agg(
        F.min("base_offset").alias("first_offset"),
        F.min_by("producer_epoch", "base_offset").alias("producer_epoch"),
        F.max("max_timestamp").alias("last_timestamp"),
    )
    markers = numbered.where("is_control").select(
        *TXN_KEYS, F.col("base_offset").alias("end_offset"), "control_type", "coordinator_epoch"
    )
    return opened, markers


def _transactions_of(opened, markers, config: AuditConfig, export_time: int, coordinator):
    """The ``transactions`` rows of the transactions ``opened``, each ended by its marker in ``markers``
    if any (see :func:`transactions`)."""
    late = F.lit(export_time) - F.col("last_timestamp") > config.transaction_max_timeout_ms + LATE_TRANSACTION_BUFFER_MS
    found = opened.join(markers, TXN_KEYS, "left")
    ended = F.col("control_type").isNotNull()
    if coordinator is None:
        view = F.lit(None).cast("string")
    else:
        held = coordinator.select("log_dir", "producer_id", F.col("producer_epoch").alias("c_epoch"),
                                  F.col("state").alias("c_state"), F.col("partitions").alias("c_partitions"))
        found = found.join(F.broadcast(held), ["log_dir", "producer_id"], "left")
        holds = ((F.col("c_epoch") == F.col("producer_epoch")) & F.col("c_state").isin(*TXN_ID_OPEN_STATES)
                 & F.array_contains("c_partitions", F.concat_ws("-", "topic", F.col("partition").cast("string"))))
        view = (F.when(ended, None).when(F.col("c_state").isNull(), VIEW_UNKNOWN)
                .when(holds, VIEW_OPEN).otherwise(VIEW_ENDED))
    return found.select(
        "topic", "partition", "producer_id", "producer_epoch", "first_offset", "end_offset",
        F.when(F.col("control_type") == "COMMIT", COMMITTED)
        .when(F.col("control_type") == "ABORT", ABORTED)
        .when(late, HANGING)
        .otherwise(OPEN).alias("status"),
        "coordinator_epoch",
        "last_timestamp",
        "log_dir",
        view.alias("coordinator_view"),
    )
