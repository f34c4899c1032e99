"""What an audit leaves for the next one: ``producer_state`` and ``partition_state``.

Every fact the replay carries from one offset range into the next composes (a max, a sum, the
latest of something: :mod:`analytics.audit.carry`), so the state after a whole history is the same
aggregate taken over the history as one range. An audit writes it:

- ``producer_state``, per (log_dir, topic, partition, producer_id) of a stateful producer: what the
  broker would hold for it (``producer_epoch``, ``last_sequence``, ``last_offset``,
  ``last_timestamp``, ``txn_open``) and the carried aggregates of :func:`~analytics.audit.carry.producer_ranges`
  and :func:`~analytics.audit.carry.running_ranges`;
- ``partition_state``, per (log_dir, topic, partition): the batches audited (``batches``, their
  highest base offset ``end_offset`` and a fingerprint of their identities and checksums,
  ``fingerprint_a`` and ``fingerprint_b``), the ``log_start_offset`` the audit used, and the
  :func:`~analytics.audit.carry.partition_ranges` of the valid and the corrupt batches (``valid``,
  ``corrupt``), aggregated from the batches alone.

An incremental audit (:mod:`analytics.audit.increment`) replays a history's new batches after this
state as if it were one range before them (``PRIOR_RANGE``), once the fingerprint proves the
batches up to ``end_offset`` are the ones audited before.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analytics.audit.carry import PRIOR_RANGE, PRODUCER, producer_and_running_ranges
from analytics.audit.ranges import HISTORY, RANGE
from analytics.contract.vocabulary import HISTORY_KEY

# A batch's identity and content as the fingerprint sees it: where it is, its offsets, its checksum.
IDENTITY = ("file", "file_position", "crc", "base_offset", "last_offset", "crc_valid")
PRODUCER_CARRY = ("last", "coordinator_epoch", "txn_data", "marker", "data_seq")
RUNNING_CARRY = ("expired", "left", "runs", "wraps", "mark")
SPANS = ("span", "top", "low")
FILE_PRINT = ("batches", "end_offset", "fingerprint_a", "fingerprint_b")


def fingerprint() -> list[Column]:
    """The aggregates that say which batches a history holds: their count, their highest base
    offset, and two sums of 31-bit hashes of their identities (a sum, so two parts of a history add
    up to the whole; two independent hashes, so a changed batch goes unnoticed with odds near 2^-62)."""
    ident = [F.col(c) for c in IDENTITY]
    low31 = F.lit(0x7FFFFFFF)
    return [
        F.count(F.lit(1)).alias("batches"),
        F.max("base_offset").alias("end_offset"),
        F.coalesce(F.sum(F.xxhash64(*ident).bitwiseAND(low31)), F.lit(0)).cast("long").alias("fingerprint_a"),
        F.coalesce(F.sum(F.hash(*ident).cast("long").bitwiseAND(low31)), F.lit(0)).cast("long").alias("fingerprint_b"),
    ]


def per_file() -> dict[str, Column]:
    """The aggregates of a file's batches that the state keeps (name -> Column): its
    :func:`fingerprint` and the :func:`~analytics.audit.carry.partition_ranges` of its valid and its
    corrupt batches. Taken in the pass that numbers the files
    (:func:`analytics.audit.ranges.file_dictionary`), and read by :func:`left_by`."""
    return {
        **{c: agg for c, agg in zip(FILE_PRINT, fingerprint())},
        "valid": _spans(F.col("crc_valid")), "corrupt": _spans(~F.col("crc_valid")),
    }


def left_by(replayed: DataFrame, histories: DataFrame, by_file: DataFrame,
            starts: DataFrame | None, producers: DataFrame | None = None) -> tuple[DataFrame, DataFrame, DataFrame]:
    """``(producer_state, partition_state, file_state)`` of the ``replayed`` rows (the replay's facts,
    counted from each history's start). ``histories``: ``(history, log_dir, topic, partition)``;
    ``by_file``: ``(file, history)`` and the :func:`per_file` aggregates of each file's batches (small:
    a row per file, held), summed per history (no scan, no replay); ``starts``: ``(history,
    log_start_offset)``. ``file_state``: the fingerprint of each file's batches (without ``read_by``,
    which the export's manifest gives). ``producers``: the
    :func:`~analytics.audit.carry.producer_and_running_ranges` per history when the replay gave them
    (segaudit's window function), else aggregated from ``replayed``."""
    if producers is None:
        producers = producer_and_running_ranges(replayed, by=(HISTORY,))
    partitions = by_file.groupBy(HISTORY).agg(*fingerprint_sum(), _spans_sum("valid"), _spans_sum("corrupt"))
    if starts is None:
        partitions = partitions.withColumn("log_start_offset", F.lit(None).cast("long"))
    else:
        partitions = partitions.join(starts.select(HISTORY, "log_start_offset"), on=HISTORY, how="left")
    keyed = F.broadcast(histories)
    return (_producer_columns(producers.join(keyed, on=HISTORY).drop(HISTORY)),
            partitions.join(keyed, on=HISTORY).select(*HISTORY_KEY, *(c for c in partitions.columns if c != HISTORY)),
            by_file.join(keyed, on=HISTORY).select(*HISTORY_KEY, "file", *FILE_PRINT))


def _spans(among: Column) -> Column:
    """:func:`~analytics.audit.carry.partition_ranges` of the batches ``among`` selects, as one struct
    (null when there are none)."""
    span = F.struct(
        F.sum(F.when(among, F.col("last_offset") - F.col("base_offset") + 1)).alias("span"),
        F.max(F.when(among, F.col("last_offset"))).alias("top"),
        F.min(F.when(among, F.col("base_offset"))).alias("low"),
    )
    return F.when(F.count(F.when(among, F.lit(1))) > 0, span)


def _producer_columns(producers: DataFrame) -> DataFrame:
    """The state a broker would hold for each producer, then the carried aggregates."""
    return producers.select(
        *HISTORY_KEY,
        F.col(PRODUCER).alias("producer_id"),
        F.col("last.epoch").alias("producer_epoch"),
        F.col("left.seq").alias("last_sequence"),
        F.col("left.off").alias("last_offset"),
        F.col("last.max_timestamp").alias("last_timestamp"),
        (F.col("txn_data").isNotNull() & (F.col("marker").isNull() | (F.col("txn_data") > F.col("marker"))))
        .alias("txn_open"),
        *PRODUCER_CARRY, *RUNNING_CARRY,
    )


def fingerprint_sum() -> list[Column]:
    """:func:`fingerprint` of several parts of a history (files, or audits) from theirs."""
    return [F.sum("batches").alias("batches"), F.max("end_offset").alias("end_offset"),
            F.sum("fingerprint_a").alias("fingerprint_a"), F.sum("fingerprint_b").alias("fingerprint_b")]


def merged(before: DataFrame, after: DataFrame, table: str) -> DataFrame:
    """The state of histories audited in two parts: ``before`` (a previous audit's) and ``after``
    (of the batches replayed after it, counted from the history's start); a history or producer in
    one part only keeps that part's row."""
    if table == "partition_state":
        key = list(HISTORY_KEY)
        aggs = [*fingerprint_sum(), F.max("log_start_offset").alias("log_start_offset"),
                _spans_sum("valid"), _spans_sum("corrupt")]
        return before.unionByName(after).groupBy(*key).agg(*aggs).select(*after.columns)
    if table == "file_state":
        return (before.select(*after.columns).unionByName(after).groupBy(*HISTORY_KEY, "file")
                .agg(*fingerprint_sum()).select(*after.columns))
    key = [*HISTORY_KEY, "producer_id"]
    both = before.unionByName(after).groupBy(*key).agg(
        *[F.max(c).alias(c) for c in ("last", "coordinator_epoch", "txn_data", "marker", "data_seq",
                                      "expired", "left", "mark")],
        F.sum("runs").alias("runs"), F.sum("wraps").alias("wraps"))
    return _producer_columns(both.withColumnRenamed("producer_id", PRODUCER)).select(*after.columns)


def _spans_sum(name: str) -> Column:
    """The spans of two parts of a history: spans add up, the top is the higher, the low the lower."""
    spans = F.struct(
        F.sum(F.col(f"{name}.span")).alias("span"), F.max(F.col(f"{name}.top")).alias("top"),
        F.min(F.col(f"{name}.low")).alias("low"),
    )
    return F.when(F.count(F.col(name)) > 0, spans).alias(name)


def prior_ranges(producer_state: DataFrame, partition_state: DataFrame, histories: DataFrame
                 ) -> tuple[DataFrame, DataFrame, DataFrame]:
    """A previous audit's state as the per-range aggregates of a range before every other
    (``PRIOR_RANGE``) of the ``histories`` (``(history, log_dir, topic, partition)``): for
    :func:`~analytics.audit.carry.partition_carry`, :func:`~analytics.audit.carry.producer_carry`
    and :func:`~analytics.audit.carry.running_carry`."""
    keyed = F.broadcast(histories)
    prior = F.lit(PRIOR_RANGE).cast("long").alias(RANGE)
    producers = producer_state.join(keyed, on=list(HISTORY_KEY)).select(
        HISTORY, prior, F.col("producer_id").alias(PRODUCER), *PRODUCER_CARRY, *RUNNING_CARRY)
    parts = partition_state.join(keyed, on=list(HISTORY_KEY))
    spans = parts.select(HISTORY, prior, F.lit(True).alias("crc_valid"), *[F.col(f"valid.{c}").alias(c) for c in SPANS]) \
        .where(F.col("span").isNotNull()) \
        .unionByName(parts.select(HISTORY, prior, F.lit(False).alias("crc_valid"),
                                  *[F.col(f"corrupt.{c}").alias(c) for c in SPANS]).where(F.col("span").isNotNull()))
    return (spans, producers.select(HISTORY, RANGE, PRODUCER, *PRODUCER_CARRY),
            producers.select(HISTORY, RANGE, PRODUCER, *RUNNING_CARRY))
