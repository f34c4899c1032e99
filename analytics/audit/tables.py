"""The audit's tables derived from ``batch_verdicts``: the per-file rows and producer sessions; and
record duplicates from ``records`` (the snapshot checks: :mod:`analytics.audit.snapshots`, the
transactions: :mod:`analytics.audit.transactions`). Each a function ``DataFrame -> DataFrame`` whose result the
stage (:mod:`analytics.audit.job`) conforms to the contract's schema and writes.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from analytics.audit.predicates import checked, has_state, is_data
from analytics.audit.transactions import aborted_ranges
from analytics.contract import (
    TOPIC_ID,
    CHECK_RECORD_DUPLICATES,
    DEDUP_DELIVERY,
    DEDUP_HEADER_PREFIX,
    DEDUP_KEY_VALUE,
    DUP_ABORTED,
    DUP_AFTER_ABORT,
    DUP_DUPLICATE,
    LOG_APPEND_TIME,
    VERDICTS,
)
from analytics.spark.columns import with_log_dir, with_topic_id


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

    # verdicts as written (a null id) or as replayed (""): grouped as they come
    v = v if TOPIC_ID in v.columns else v.withColumn(TOPIC_ID, F.lit(""))
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
PER_FILE_KEY = ("topic", "partition", "producer_id", "producer_epoch", "file", TOPIC_ID)

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
    both = with_topic_id(before).select(*after.columns).unionByName(after)
    return both.groupBy(*PER_FILE_KEY).agg(*_per_file_sums())


def producer_sessions(per_file):
    """One row per (topic, partition, producer_id, producer_epoch), with a count per verdict: the
    per-file rows of ``per_file`` (each file names its log dir, so no batch row is parsed for it)
    merged per log dir (the stage keeps the contract's columns)."""
    return with_log_dir(per_file).groupBy("topic", "partition", "producer_id", "producer_epoch", "log_dir",
                                          TOPIC_ID).agg(*_per_file_sums())


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
    if TOPIC_ID not in located.columns:  # records read without their folders' ids: one incarnation per name
        located = located.withColumn(TOPIC_ID, F.lit(""))
    if (key is not None or dedup_key == DEDUP_DELIVERY) and batches is not None:
        located = with_append_time(located, batches)
    key = (key or (lambda append_time: dedup_expression(dedup_key, append_time)))("append_time" in located.columns)
    data = located.where(~F.coalesce(F.col("is_control"), F.lit(False)) & checked(CHECK_RECORD_DUPLICATES)).withColumn(
        "dedup_key", key).where(F.col("dedup_key").isNotNull())
    w = Window.partitionBy("log_dir", "topic", "partition", TOPIC_ID, "dedup_key").orderBy("offset")
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
        keys += [TOPIC_ID] if TOPIC_ID in batches.columns else []
        ranges = aborted_ranges(batches).select(*keys, "txn_first", "txn_end")
        inside = [repeated[k] == ranges[k] for k in keys] + [
            repeated["offset"] >= ranges["txn_first"], repeated["offset"] < ranges["txn_end"]]
        flagged = repeated.join(ranges, inside, "left").select(
            repeated["*"], ranges["txn_first"].isNotNull().alias("aborted"))
    delivered_before = F.max((~F.col("aborted")).cast("int")).over(w.rowsBetween(Window.unboundedPreceding, -1))
    kind = (F.when(F.col("aborted"), DUP_ABORTED).when(delivered_before == 1, DUP_DUPLICATE).otherwise(DUP_AFTER_ABORT))
    return flagged.withColumn("kind", kind).where(F.col("rank") > 1).select(
        "topic", "partition", "dedup_key", "offset", "first_offset", "producer_id", "first_producer_id", "log_dir",
        "kind", TOPIC_ID)


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
