"""``snapshot_checks``: each broker snapshot entry against the state the replay leaves its producer
just below the snapshot's offset (:func:`snapshot_checks`), from ``batch_verdicts`` and the per-file
rows (:func:`analytics.audit.tables.per_file`). What it reads of the export alone
(:class:`Snapshots`) is taken apart, so that an audit takes it beside its replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Window
from pyspark.sql import functions as F

from analytics.audit.steps import log_starts_of
from analytics.contract import MATCH, MISMATCH, NOT_IN_LOG, NOT_IN_SNAPSHOT, TOPIC_ID
from analytics.spark.columns import with_log_dir, with_topic_id

# snapshot_checks reads the verdicts of the files named in a filter (which Parquet's statistics
# prune) up to this many; beyond, of a broadcast list of them
MAX_LISTED_FILES = 1000

@dataclass(frozen=True)
class Snapshots:
    """The broker's snapshots as :func:`snapshot_checks` reads them: ``entries`` (a row per producer a
    snapshot holds), ``points`` (per log dir's partition, its snapshot offsets in order; small, held)
    and ``most`` (the most snapshots of one partition). They read the export only: an audit takes
    them beside its replay (:func:`snapshot_points`)."""
    entries: object
    points: object
    most: int


def snapshot_points(snapshots, ids=None) -> Snapshots:
    """:class:`Snapshots` of the export's ``producer_snapshots`` (two small jobs: the points, held,
    and their most); ``ids``: each partition folder's topic id (:func:`~analytics.spark.columns.topic_ids`)."""
    files = with_log_dir(with_topic_id(snapshots, ids))
    entries = files.where(F.col("producer_id").isNotNull()).select(
        *_KEYS, "snapshot_offset", F.lit(True).alias("in_snapshot"), "producer_epoch", "last_sequence", "last_offset")
    # every snapshot file's offset, an empty one's (its marker row) included
    points = files.groupBy(*_HISTORY).agg(F.array_sort(F.collect_set("snapshot_offset")).alias("points")).localCheckpoint()
    most = points.agg(F.max(F.size("points"))).first()[0] or 0  # one number: the most snapshots of a partition
    return Snapshots(entries, points, most)


def snapshot_checks(v, per_file, snapshots, log_starts=None):
    """Each broker snapshot entry against the replayed state of its producer just below the snapshot offset.

    The replayed state after a batch is on its row (``producer_epoch``, ``state_last_sequence``,
    ``state_last_offset``), so the state at a snapshot offset S is that of the producer's last batch
    below S. That batch is either the producer's last in its segment file, whose state the per-file
    rows of ``per_file`` keep (``last_state``), or in a file whose offsets straddle S: the per-file
    rows find those, a scan of these files' verdicts only fetches their rows (snapshots are taken
    where segments roll: few files straddle one), and the search runs on these few rows (a binary search in
    the partition's sorted snapshot offsets, in native expressions): no sort of the log. The small
    remainder (producers x snapshots) carries each state forward to later snapshots. Producers the
    log shows before a snapshot but the snapshot lacks are ``not_in_snapshot`` (expired, or state
    lost); entries of producers with no batch below the snapshot are ``not_in_log`` (their batches
    are gone, or never were). Entries from a live broker (an export over the protocol) carry no last
    offset and are compared by epoch and last sequence.

    A ``.snapshot`` file with no entry is one marker row of ``snapshots`` (null ``producer_id``): its
    offset is a snapshot offset like any other, so every producer the replay holds there is
    ``not_in_snapshot``. Except, with ``log_starts`` (the export's ``log_start_offsets``): a producer
    whose replayed last offset lies below its partition's log start offset is expected absent and
    gets no row (the broker drops the producers whose last offset falls below the log start,
    ``ProducerStateManager``; the snapshots written after it lack them); an entry of such a producer
    the snapshot holds is still compared.

    ``snapshots``: the export's ``producer_snapshots``, or the :class:`Snapshots` taken of them already.
    """
    if not isinstance(snapshots, Snapshots):
        snapshots = snapshot_points(snapshots)
    entries, points, most = snapshots.entries, snapshots.points, snapshots.most
    spans = _state_spans(per_file, points)
    state = _state_at_snapshots(_state_rows(v, spans), most)
    producers = spans.select(*_KEYS).distinct()
    absent = points.select(*_HISTORY, F.explode("points").alias("snapshot_offset")).join(producers, _HISTORY).join(
        entries, [*_KEYS, "snapshot_offset"], "left_anti").select(
        *_KEYS, "snapshot_offset", F.lit(False).alias("in_snapshot"), F.lit(None).cast("short").alias("producer_epoch"),
        F.lit(None).cast("int").alias("last_sequence"), F.lit(None).cast("long").alias("last_offset"))
    probes = entries.unionByName(absent).select(
        *_KEYS, F.col("snapshot_offset").alias("at"), F.lit(1).alias("kind"), "snapshot_offset", "in_snapshot",
        "producer_epoch", "last_sequence", "last_offset")
    stream = state.unionByName(probes, allowMissingColumns=True)
    upto = Window.partitionBy(*_KEYS).orderBy("at", "kind").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    replayed = stream.select(
        "*",
        F.last("s_epoch", True).over(upto).alias("replayed_epoch"),
        F.last("s_seq", True).over(upto).alias("replayed_last_sequence"),
        F.last("s_offset", True).over(upto).alias("replayed_last_offset"),
    ).where(F.col("kind") == 1)
    if log_starts is not None:  # small: one row per partition with snapshots
        starts = log_starts_of(points.select(*_HISTORY).distinct(), log_starts).select(*_HISTORY, "log_start_offset")
        replayed = replayed.join(F.broadcast(starts), _HISTORY, "left")
        below_start = F.coalesce(F.col("replayed_last_offset") < F.col("log_start_offset"), F.lit(False))
    else:
        below_start = F.lit(False)
    return replayed.withColumn("status", _snapshot_status(below_start)).where(F.col("status").isNotNull()).select(
        "topic", "partition", "snapshot_offset", "producer_id", "status",
        F.col("producer_epoch").alias("expected_epoch"), "replayed_epoch",
        F.col("last_sequence").alias("expected_last_sequence"), "replayed_last_sequence",
        F.col("last_offset").alias("expected_last_offset"), "replayed_last_offset", "log_dir", TOPIC_ID,
    )


# A snapshot check's partition (a log dir's) and producer.
_HISTORY = ["log_dir", "topic", "partition", TOPIC_ID]
_KEYS = [*_HISTORY, "producer_id"]
# The state a batch leaves, as a row of batch_verdicts has it.
_STATE_ROW = ["base_offset", "file_position", "producer_epoch", "state_last_sequence", "state_last_offset"]


def _state_spans(per_file, points):
    """Per (file, producer) with state: its last state (``s``), its partition's snapshot offsets
    (``points``) and whether one falls inside the file's state offsets (``straddles``). Small, read
    twice: computed once."""
    last = F.struct(F.col("last_state.base_offset").alias("base_offset"),
                    F.col("last_state.file_position").alias("file_position"), "producer_epoch",
                    F.col("last_state.sequence").alias("state_last_sequence"),
                    F.col("last_state.offset").alias("state_last_offset"))
    spans = with_log_dir(with_topic_id(per_file, None).where(F.col("first_state_offset").isNotNull()).groupBy(
        "file", "topic", "partition", TOPIC_ID, "producer_id").agg(
        F.min("first_state_offset").alias("first"), F.max("last_state_offset").alias("last"),
        F.max(last).alias("s"))).join(F.broadcast(points), _HISTORY)
    return spans.select("file", *_KEYS, "points", "s", F.exists(
        "points", lambda s: (F.col("first") < s) & (s <= F.col("last"))).alias("straddles")).localCheckpoint()


def _state_rows(v, spans):
    """The states that may be a producer's at a snapshot: each file's last (from the per-file rows),
    and every state of a file a snapshot falls inside, from the verdicts of those files only (few:
    snapshots are taken where segments roll)."""
    lasts = spans.select(*_KEYS, "points", *[F.col(f"s.{c}").alias(c) for c in _STATE_ROW])
    inside = spans.where("straddles").select("file", "producer_id", "log_dir", "points")
    files = [r["file"] for r in inside.select("file").distinct().limit(MAX_LISTED_FILES + 1).collect()]
    stateful = with_topic_id(v).where(F.col("state_last_sequence").isNotNull())
    stateful = (stateful.where(F.col("file").isin(files)) if len(files) <= MAX_LISTED_FILES
                else stateful.join(F.broadcast(inside.select("file").distinct()), "file", "left_semi"))
    return lasts.unionByName(stateful.select("file", "topic", "partition", TOPIC_ID, "producer_id", *_STATE_ROW).join(
        F.broadcast(inside), ["file", "producer_id"]).drop("file"))


def _state_at_snapshots(rows, most: int):
    """Per producer and ``at`` (the first snapshot offset above a state row's batch, found by a binary
    search of ``points`` in ``most``'s bits of steps, native expressions), the latest state below it:
    ``s_epoch``, ``s_seq``, ``s_offset``, ``kind`` 0."""
    # lo = how many snapshot offsets are <= base_offset; the batch's state counts from the next one on
    lo, hi = F.lit(0), F.size("points")
    for step in range(max(most, 1).bit_length()):
        rows = rows.select("*", lo.alias(f"lo{step}"), hi.alias(f"hi{step}"))
        lo_, hi_ = F.col(f"lo{step}"), F.col(f"hi{step}")
        mid = F.shiftright(lo_ + hi_, 1)
        right = (lo_ < hi_) & (F.try_element_at("points", mid + 1) <= F.col("base_offset"))
        lo = F.when(right, mid + 1).otherwise(lo_)
        hi = F.when((lo_ < hi_) & ~right, mid).otherwise(hi_)
    # past the last snapshot: a position after every probe (no filter here: Spark would push it down
    # through the search steps, inlining each into the next)
    rows = rows.withColumn("at", F.coalesce(F.try_element_at("points", lo + 1), F.lit(2**63 - 1)))
    last = rows.groupBy(*_KEYS, "at").agg(F.max_by(
        F.struct(F.col("producer_epoch").alias("s_epoch"), F.col("state_last_sequence").alias("s_seq"),
                 F.col("state_last_offset").alias("s_offset")),
        F.struct("base_offset", "file_position")).alias("s"))
    return last.select(*_KEYS, "at", F.lit(0).alias("kind"), "s.s_epoch", "s.s_seq", "s.s_offset")


def _snapshot_status(below_start):
    """A probe's status: the entry against the state replayed up to its snapshot offset
    (``below_start``: the producer's replayed last offset is below its partition's log start)."""
    seen = F.col("replayed_epoch").isNotNull()
    # a live broker's entry (DescribeProducers) has no last offset: its epoch and sequence are compared
    same = ((F.col("producer_epoch") == F.col("replayed_epoch")) & (F.col("last_sequence") == F.col("replayed_last_sequence"))
            & (F.col("last_offset").isNull() | (F.col("last_offset") == F.col("replayed_last_offset"))))
    return (F.when(F.col("in_snapshot") & ~seen, NOT_IN_LOG)
            .when(~F.col("in_snapshot") & seen & ~below_start, NOT_IN_SNAPSHOT)
            .when(F.col("in_snapshot") & same, MATCH)
            .when(F.col("in_snapshot"), MISMATCH))
