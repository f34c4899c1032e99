"""The state carried from one offset range of a history into the next (:mod:`analytics.audit.ranges`).

Every fact the replay's windows compute over a batch's predecessors is a max, a sum or the latest
non-null value of something, and each of those composes: the fact over a whole history is the fact
over the batch's own range combined with the same fact over the ranges before it. So each range is
replayed in a task of its own, and what it needs from the ranges before it is one small aggregate
per (range, producer), combined over the earlier ranges by a window over that small table:

- :func:`partition_carry`, per (range, valid or corrupt): the spans and the highest last offset of
  the earlier ranges, and the history's first offset, for :func:`~analytics.audit.steps.partition_facts`;
- :func:`producer_carry`, per (range, producer): its latest batch before the range (epoch, timestamp,
  offset, ``cum_holes``), its highest coordinator epoch, its latest transactional data batch, marker
  and data sequence, for :func:`~analytics.audit.steps.producer_state`;
- :func:`running_carry`, per (range, producer): its latest expiry point and the sequence and offset
  its earlier batches left, its epoch runs and sequence wraps so far, its sequence mark, which
  :func:`carry_in` adds to what :func:`~analytics.audit.steps.running_state` and
  :func:`~analytics.audit.steps.sequence_mark` computed inside the range.

A range's own facts are computed with what the ranges before it carry (the producer carry is joined
in before its windows run), so each aggregate is taken over final values. The carried columns are
named ``carry_*``; a history in one range has none (the steps then read nothing carried).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analytics.audit.predicates import epoch_changed, is_data, offset_left, sequence_left, wrap_crossing
from analytics.audit.ranges import HISTORY, ORDER, RANGE
from analytics.contract.vocabulary import SEQ_SPACE

PRODUCER = "state_pid"
# The ``rid`` of what a previous audit of the history left (:mod:`analytics.audit.state`): before
# every range of the history, whose ids are 0 and up.
PRIOR_RANGE = -1


def _earlier(*key: str) -> "Window":
    """The (small) carry table's rows of the same ``key`` in earlier ranges."""
    return Window.partitionBy(HISTORY, *key).orderBy(RANGE).rowsBetween(Window.unboundedPreceding, -1)


def _latest(*fields: Column, when: Column | None = None) -> Column:
    """The fields of the latest row (in offset order) where ``when`` holds, as one struct."""
    value = F.struct(*(F.col(c) for c in ORDER), *fields)
    return F.max(value if when is None else F.when(when, value))


def partition_ranges(rows: DataFrame, by: tuple[str, ...] = (HISTORY, RANGE)) -> DataFrame:
    """Per ``by`` and ``crc_valid``: ``span`` (the offsets the batches span), ``top`` (their highest
    last offset) and ``low`` (their lowest base offset)."""
    span = F.col("last_offset") - F.col("base_offset") + 1
    return rows.groupBy(*by, "crc_valid").agg(
        F.sum(span).alias("span"), F.max("last_offset").alias("top"), F.min("base_offset").alias("low"))


def partition_carry(rows: DataFrame, prior: DataFrame | None = None) -> DataFrame:
    """Per (``rid``, ``crc_valid``): ``carry_span`` (the offsets the earlier ranges' batches span),
    ``carry_top`` (their highest last offset) and ``carry_first`` (the history's first base offset).
    ``prior``: :func:`partition_ranges` of what a previous audit replayed, at ``PRIOR_RANGE``."""
    per_range = _with_prior(partition_ranges(rows), prior)
    earlier = _earlier("crc_valid")
    return _ranges_only(per_range.select(
        RANGE, "crc_valid",
        F.coalesce(F.sum("span").over(earlier), F.lit(0)).alias("carry_span"),
        F.max("top").over(earlier).alias("carry_top"),
        F.min("low").over(Window.partitionBy(HISTORY, "crc_valid")).alias("carry_first"),
    ))


def producer_ranges(rows: DataFrame, by: tuple[str, ...] = (HISTORY, RANGE)) -> DataFrame:
    """Per ``by`` and stateful producer: ``last`` (ORDER, epoch, max timestamp, cum_holes of its
    latest batch), its highest ``coordinator_epoch``, its latest transactional data batch
    (``txn_data``) and marker (``marker``), its latest data batch's last sequence (``data_seq``)."""
    return rows.where(F.col(PRODUCER).isNotNull()).groupBy(*by, PRODUCER).agg(*_producer_aggregates())


def _producer_aggregates() -> list[Column]:
    data = is_data()
    return [
        _latest(F.col("producer_epoch").alias("epoch"), "max_timestamp", "cum_holes").alias("last"),
        F.max("coordinator_epoch").alias("coordinator_epoch"),
        F.max(F.when(data & F.col("is_transactional"), F.col("base_offset"))).alias("txn_data"),
        F.max(F.when(F.col("is_control"), F.col("base_offset"))).alias("marker"),
        _latest(F.col("last_sequence").alias("seq"), when=data).alias("data_seq"),
    ]


def producer_and_running_ranges(rows: DataFrame, by: tuple[str, ...] = (HISTORY, RANGE)) -> DataFrame:
    """:func:`producer_ranges` and :func:`running_ranges` side by side, in one aggregate of ``rows``
    (the same groups: one pass over the held rows instead of two and a join)."""
    return rows.where(F.col(PRODUCER).isNotNull()).groupBy(*by, PRODUCER).agg(
        *_producer_aggregates(), *_running_aggregates())


def producer_carry(rows: DataFrame, prior: DataFrame | None = None) -> DataFrame:
    """Per (``rid``, ``state_pid``) of a stateful producer, its facts over the earlier ranges:
    ``carry_last`` (epoch, max timestamp, base offset, cum_holes of its latest batch),
    ``carry_coordinator_epoch``, ``carry_txn_data``, ``carry_marker`` and ``carry_data_seq``.
    ``prior``: :func:`producer_ranges` of a previous audit, at ``PRIOR_RANGE``."""
    per_range = _with_prior(producer_ranges(rows), prior)
    earlier = _earlier(PRODUCER)
    return _ranges_only(per_range.select(
        RANGE, PRODUCER,
        F.max("last").over(earlier).alias("carry_last"),
        F.max("coordinator_epoch").over(earlier).alias("carry_coordinator_epoch"),
        F.max("txn_data").over(earlier).alias("carry_txn_data"),
        F.max("marker").over(earlier).alias("carry_marker"),
        F.max("data_seq").over(earlier)["seq"].alias("carry_data_seq"),
    ))


def mark_of(run: Column, seq: Column, offset: Column) -> Column:
    """The sequence mark's struct: (epoch run, sequence on the producer's line, last offset)."""
    return F.struct(run.cast("long").alias("run"), seq.cast("long").alias("seq"), offset.cast("long").alias("offset"))


def _shifted(mark: Column, runs: Column, wraps: Column) -> Column:
    """A range's mark seen from the whole history: its runs and wraps after the earlier ranges'."""
    return F.when(mark.isNotNull(), mark_of(mark["run"] + runs, mark["seq"] + wraps * SEQ_SPACE, mark["offset"]))


def running_ranges(rows: DataFrame, by: tuple[str, ...] = (HISTORY, RANGE)) -> DataFrame:
    """Per ``by`` and stateful producer: its latest expiry point (``expired``), the sequence and
    offset its latest batch that set them left (``left``), its epoch runs and INT_MAX crossings
    (``runs``, ``wraps``), its sequence ``mark``; over the facts of
    :func:`~analytics.audit.steps.running_state` and :func:`~analytics.audit.steps.sequence_mark`."""
    return rows.where(F.col(PRODUCER).isNotNull()).groupBy(*by, PRODUCER).agg(*_running_aggregates())


def _running_aggregates() -> list[Column]:
    return [
        F.max("expired_offset").alias("expired"),
        _latest(sequence_left().alias("seq"), offset_left().alias("off"), when=sequence_left().isNotNull())
        .alias("left"),
        F.coalesce(F.sum(epoch_changed().cast("int")), F.lit(0)).cast("long").alias("runs"),
        F.coalesce(F.sum(wrap_crossing()), F.lit(0)).cast("long").alias("wraps"),
        F.max(F.when(is_data(), mark_of(F.col("epoch_run"), F.col("last_sequence") + F.col("seq_wraps") * SEQ_SPACE,
                                        F.col("last_offset")))).alias("mark"),
    ]


def running_carry(rows: DataFrame, prior: DataFrame | None = None) -> DataFrame:
    """Per (``rid``, ``state_pid``), over the producer's earlier ranges: ``carry_expired``,
    ``carry_left`` (the sequence and offset its latest batch that set them left), ``carry_runs`` and
    ``carry_wraps`` (its epoch runs and INT_MAX crossings), ``carry_mark`` (its sequence mark, runs
    and wraps counted from the history's start). ``rows``: the range's facts of
    :func:`~analytics.audit.steps.running_state` and :func:`~analytics.audit.steps.sequence_mark`;
    ``prior``: :func:`running_ranges` of a previous audit (counted from the history's start), at
    ``PRIOR_RANGE``."""
    per_range = _with_prior(running_ranges(rows), prior)
    earlier = _earlier(PRODUCER)
    per_range = per_range.select(
        "*",
        F.coalesce(F.sum("runs").over(earlier), F.lit(0)).alias("runs_before"),
        F.coalesce(F.sum("wraps").over(earlier), F.lit(0)).alias("wraps_before"),
    )
    return _ranges_only(per_range.select(
        RANGE, PRODUCER,
        F.max("expired").over(earlier).alias("carry_expired"),
        F.max("left").over(earlier).alias("carry_left"),
        F.col("runs_before").alias("carry_runs"),
        F.col("wraps_before").alias("carry_wraps"),
        F.max(_shifted(F.col("mark"), F.col("runs_before"), F.col("wraps_before"))).over(earlier).alias("carry_mark"),
    ))


def prior_carry(spans: DataFrame, producers: DataFrame, running: DataFrame
                ) -> tuple[DataFrame, DataFrame, DataFrame]:
    """What a previous audit carries into histories replayed after it in one range each: the columns
    of :func:`partition_carry`, :func:`producer_carry` and :func:`running_carry` of a range whose
    only earlier range is ``PRIOR_RANGE``, keyed by ``history`` (the history's one range) and taken
    from the previous audit's aggregates alone (``spans``, ``producers``, ``running``:
    :func:`analytics.audit.state.prior_ranges`), so no row is aggregated for them. A history or
    producer the previous audit did not see has no row: the steps then compute over the range alone."""
    return (
        spans.select(HISTORY, "crc_valid", F.col("span").alias("carry_span"), F.col("top").alias("carry_top"),
                     F.col("low").alias("carry_first")),
        producers.select(HISTORY, PRODUCER, *(F.col(c).alias(f"carry_{c}") for c in
                                              ("last", "coordinator_epoch", "txn_data", "marker")),
                         F.col("data_seq")["seq"].alias("carry_data_seq")),
        running.select(HISTORY, PRODUCER, *(F.col(c).alias(f"carry_{c}") for c in
                                            ("expired", "left", "runs", "wraps", "mark"))),
    )


def _with_prior(per_range: DataFrame, prior: DataFrame | None) -> DataFrame:
    """The per-range aggregates with a previous audit's, which sort before every range of its history."""
    return per_range if prior is None else per_range.unionByName(prior.select(*per_range.columns))


def _ranges_only(carried: DataFrame) -> DataFrame:
    return carried.where(F.col(RANGE) != PRIOR_RANGE)


def carry_in(rows: DataFrame) -> DataFrame:
    """The range's running facts made the history's: ``expired_offset``, ``state_last_seq`` and
    ``state_last_off`` fall back on the carried ones, ``epoch_run`` and ``seq_wraps`` count the
    earlier ranges', and ``mark`` is the higher of the range's (shifted) and the carried one."""
    runs, wraps = F.coalesce(F.col("carry_runs"), F.lit(0)), F.coalesce(F.col("carry_wraps"), F.lit(0))
    rows = rows.withColumns({
        "expired_offset": F.coalesce(F.col("expired_offset"), F.col("carry_expired")),
        "state_last_seq": F.coalesce(F.col("state_last_seq"), F.col("carry_left")["seq"]),
        "state_last_off": F.coalesce(F.col("state_last_off"), F.col("carry_left")["off"]),
        "mark": F.greatest(_shifted(F.col("mark"), runs, wraps), F.col("carry_mark")),
        "epoch_run": F.col("epoch_run") + runs,
        "seq_wraps": F.col("seq_wraps") + wraps,
    })
    return rows.drop("carry_expired", "carry_left", "carry_runs", "carry_wraps", "carry_mark")
