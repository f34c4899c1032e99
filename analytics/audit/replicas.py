"""``replica_divergence``: the replicas of a partition compared offset by offset.

A topic-partition exported from several log dirs (its replicas on several brokers) is replayed as
several histories; here each pair of its log dirs is compared. Batches are matched by base offset
inside the range both replicas hold (from the higher log start to the lower end):

- the same base offset and the same batch (CRC, last offset, producer, epoch, sequence) is sound,
  whatever leader epoch each copy is stamped with: a batch the old leader appended and never
  replicated, which the producer sent again to the new leader and that one appended at the same
  offsets, holds the same records under the new epoch (the epoch field lies outside the CRC), and the
  old leader's copy is truncated when it follows. On a compacted topic a batch the cleaner thinned on one replica and not yet on
  the other (same offsets, producer and sequence, fewer records) is sound too;
- a batch whose offsets the other replica holds in a batch that differs is ``different_batch``,
  reported under the pair's first log dir;
- a batch whose offsets are in no batch of the other replica is ``missing`` there (``explained`` by
  compaction on a compacted topic, whose cleaner removes emptied batches on each replica alone);
- a batch past the other replica's end is ``truncated_tail``: ``info`` when the other replica is
  only behind, a ``violation`` when the other replica's leader epoch at that offset is newer than
  the batch's: a broker truncates such a tail when it follows (the unclean-election case).

A replica's leader epochs at an offset come from its ``leader-epoch-checkpoint`` and from its
batches' ``partition_leader_epoch``. Divergent batches of one kind whose offsets touch or overlap
form one row. Only partitions held in several log dirs are read past their ``segments`` rows.
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analytics.audit.config import AuditConfig
from analytics.audit.predicates import on_compacted_topic
from analytics.contract import (
    TOPIC_ID,
    COMPACTION,
    DIFFERENT_BATCH,
    MISSING,
    SEV_EXPLAINED,
    SEV_INFO,
    SEV_VIOLATION,
    TRUNCATED_TAIL,
)
from analytics.spark.columns import with_log_dir, with_topic_id

# A partition: its name, and the incarnation of the topic (topic_id: "" where a folder does not say);
# a folder of another incarnation (a topic deleted and created again) is no replica of it.
TP = ["topic", "partition", TOPIC_ID]
PAIR = [*TP, "log_dir", "other_log_dir"]
# what makes two copies of a batch the same batch
SAME = ("last_offset", "crc", "crc_valid", "producer_id", "producer_epoch", "base_sequence", "record_count")
COMPARED = (*SAME, "partition_leader_epoch")  # what each side of a pair carries
COLUMNS = ("log_dir", *TP, "base_offset", *COMPARED, "is_control")


def replicated(segments: DataFrame) -> DataFrame:
    """``(topic, partition, topic_id, log_dir)`` of every topic-partition held in more than one log
    dir (``segments`` with their folders' ``topic_id``)."""
    held = with_log_dir(segments).select(*TP, "log_dir").distinct()
    many = held.groupBy(*TP).agg(F.count("*").alias("replicas")).where(F.col("replicas") > 1)
    return held.join(many.select(*TP), on=TP, how="left_semi")


def held_in_several(segment_files) -> bool:
    """Whether some partition folder is among the segment files (paths ``LOGDIR/TOPIC-PARTITION/FILE``)
    of more than one log dir: what :func:`replicated` finds, from the export's manifest alone.

    >>> held_in_several(["/a/t-0/0.log", "/a/t-1/0.log"]), held_in_several(["/a/t-0/0.log", "/b/t-0/9.log"])
    (False, True)
    """
    dirs: dict[str, str] = {}
    for path in segment_files:
        log_dir, folder = os.path.split(os.path.dirname(path))
        if dirs.setdefault(folder, log_dir) != log_dir:
            return True
    return False


def replica_divergence(spark, batches: DataFrame, segments: DataFrame, leader_epochs: DataFrame,
                       log_starts: DataFrame, config: AuditConfig, ids: DataFrame | None = None) -> tuple[int, DataFrame]:
    """The number of topic-partitions held in several log dirs, and :func:`divergence` (no rows,
    without reading the batches, when there is none). ``ids``: each partition folder's topic id
    (:func:`~analytics.spark.columns.topic_ids`), which ``batches`` carry already."""
    segments, leader_epochs = with_topic_id(segments, ids), with_topic_id(leader_epochs, ids)
    batches = with_topic_id(batches, ids)
    partitions = replicated(segments).select(*TP).distinct().count()
    if not partitions:
        from analytics.contract import OUT_SCHEMAS
        from analytics.spark.source import spark_schema

        return 0, spark.createDataFrame([], spark_schema(OUT_SCHEMAS["replica_divergence"]))
    return partitions, divergence(batches, segments, leader_epochs, log_starts, config)


def divergence(batches: DataFrame, segments: DataFrame, leader_epochs: DataFrame, log_starts: DataFrame,
               config: AuditConfig) -> DataFrame:
    """One row per divergent offset range, kind and pair of log dirs (the ``replica_divergence`` columns)."""
    # each input is read by several joins: held once (lineage cut) so the plan stays small
    replicas = replicated(segments).localCheckpoint()
    pairs = replicas.alias("a").join(replicas.alias("b"), on=TP).where(F.col("a.log_dir") < F.col("b.log_dir")).select(
        *TP, F.col("a.log_dir").alias("log_dir"), F.col("b.log_dir").alias("other_log_dir"))
    held = with_log_dir(batches).join(replicas, on=[*TP, "log_dir"], how="left_semi").select(*COLUMNS).localCheckpoint()
    extents = _extents(held, log_starts).localCheckpoint()
    epochs = _epochs(held, leader_epochs).localCheckpoint()

    a, b = _side(held, pairs, "log_dir", "a"), _side(held, pairs, "other_log_dir", "b")
    joined = a.join(b, on=[*PAIR, "base_offset"], how="full_outer")
    joined = _with_extent(_with_extent(joined, extents, "log_dir", "a"), extents, "other_log_dir", "b").localCheckpoint()
    compacted = on_compacted_topic(config)
    rows = _both_sides_differ(joined, compacted).unionByName(_one_side_only(joined, held)).localCheckpoint()
    return _ranges(rows, epochs, compacted)


def _both_sides_differ(joined: DataFrame, compacted) -> DataFrame:
    """``different_batch`` rows of the offsets both sides start a batch at, with batches that differ
    (not a compacted topic's batch the cleaner thinned on one side only)."""
    both = F.col("a_last_offset").isNotNull() & F.col("b_last_offset").isNotNull()
    same = F.lit(True)
    for c in SAME:
        same = same & F.col(f"a_{c}").eqNullSafe(F.col(f"b_{c}"))
    thinned = compacted
    for c in ("last_offset", "producer_id", "producer_epoch", "base_sequence", "crc_valid"):
        thinned = thinned & F.col(f"a_{c}").eqNullSafe(F.col(f"b_{c}"))
    return joined.where(both & ~same & ~thinned).select(*PAIR, "base_offset", *_as_rows("a", "b", DIFFERENT_BATCH))


def _one_side_only(joined: DataFrame, held: DataFrame) -> DataFrame:
    """The rows of batches one side holds and the other does not start a batch at: ``missing`` inside
    the common range where no batch of the other side covers their offsets, ``different_batch`` where
    one does, ``truncated_tail`` past the other side's end."""
    # a batch of one side only: the side that holds it is "here", the other "there"
    alone = []
    for here, there in (("a", "b"), ("b", "a")):
        only = joined.where(F.col(f"{here}_last_offset").isNotNull() & F.col(f"{there}_last_offset").isNull()
                            & (F.col(f"{there}_start").isNull()  # below the other's start: its retention
                               | (F.col("base_offset") >= F.col(f"{there}_start"))))
        alone.append(only.select(
            *TP, F.col("log_dir" if here == "a" else "other_log_dir").alias("here"),
            F.col("other_log_dir" if here == "a" else "log_dir").alias("there"),
            "base_offset", *[F.col(f"{here}_{c}").alias(c) for c in ("last_offset", "record_count",
                                                                        "partition_leader_epoch")],
            (F.col(f"{there}_end").isNull() | (F.col("base_offset") > F.col(f"{there}_end"))).alias("past_end")))
    alone_rows = alone[0].unionByName(alone[1]).localCheckpoint()
    inside = alone_rows.where(~F.col("past_end"))
    # inside the common range: offsets the other side holds in another batch are a different batch
    # matched through offset buckets: a batch meets only the other side's batches of its own buckets
    mine = inside.withColumn("bucket", F.explode(_buckets("base_offset", "last_offset")))
    theirs = held.select(*TP, F.col("log_dir").alias("there"), F.col("base_offset").alias("t_base"),
                         F.col("last_offset").alias("t_last")).withColumn("bucket", F.explode(_buckets("t_base", "t_last")))
    theirs = theirs.join(mine.select(*TP, "there", "bucket").distinct(), on=[*TP, "there", "bucket"], how="left_semi")
    overlap = mine.join(theirs, on=(mine["topic"] == theirs["topic"]) & (mine["partition"] == theirs["partition"])
                        & (mine["there"] == theirs["there"]) & (mine["bucket"] == theirs["bucket"])
                        & (F.col("t_base") <= F.col("last_offset")) & (F.col("t_last") >= F.col("base_offset")),
                        how="left").select(*[mine[c] for c in inside.columns], "t_base")
    covered = overlap.groupBy(*TP, "here", "there", "base_offset", "last_offset", "record_count",
                              "partition_leader_epoch").agg(F.count("t_base").alias("covering"))
    missing = covered.where(F.col("covering") == 0).select(
        *TP, F.col("here").alias("log_dir"), F.col("there").alias("other_log_dir"), "base_offset",
        *_one_side_rows(MISSING))
    one_sided_differs = covered.where(F.col("covering") > 0).select(
        *TP, F.least("here", "there").alias("log_dir"), F.greatest("here", "there").alias("other_log_dir"),
        "base_offset", F.lit(DIFFERENT_BATCH).alias("kind"), F.col("last_offset"),
        *[F.when(F.col("here") < F.col("there"), v).otherwise(F.lit(0)).alias(n) for n, v in
          (("batches", F.lit(1)), ("records", F.col("record_count")))],
        *[F.when(F.col("here") > F.col("there"), v).otherwise(F.lit(0)).alias(n) for n, v in
          (("other_batches", F.lit(1)), ("other_records", F.col("record_count")))],
        F.when(F.col("here") < F.col("there"), F.col("partition_leader_epoch")).alias("leader_epoch"),
        F.when(F.col("here") > F.col("there"), F.col("partition_leader_epoch")).alias("other_leader_epoch"))
    tail = alone_rows.where(F.col("past_end")).select(
        *TP, F.col("here").alias("log_dir"), F.col("there").alias("other_log_dir"), "base_offset",
        *_one_side_rows(TRUNCATED_TAIL))

    return one_sided_differs.unionByName(missing).unionByName(tail)


BUCKET = 4096  # offsets per bucket of the coverage match


def _buckets(first: str, last: str):
    return F.sequence(F.floor(F.col(first) / BUCKET), F.floor(F.col(last) / BUCKET))


def _side(held: DataFrame, pairs: DataFrame, role: str, prefix: str) -> DataFrame:
    """The batches of one side of every pair, their columns prefixed."""
    side = held.withColumnRenamed("log_dir", role).join(pairs, on=[*TP, role])
    return side.select(*PAIR, "base_offset", *[F.col(c).alias(f"{prefix}_{c}") for c in (*COMPARED, "is_control")])


def _extents(held: DataFrame, log_starts: DataFrame) -> DataFrame:
    """Each replica's range: from its log start (checkpoint or first batch) to its last offset."""
    span = held.groupBy("log_dir", *TP).agg(F.min("base_offset").alias("first"), F.max("last_offset").alias("end"))
    if "file" in log_starts.columns:
        # the log dir's checkpoint names partitions by name: the live folder's incarnation when the rows
        # carry its topic id (columns.with_live_topic_id), else every incarnation of it in the log dir
        key = ["log_dir", "topic", "partition", *([TOPIC_ID] if TOPIC_ID in log_starts.columns else [])]
        starts = with_log_dir(log_starts, levels=1).groupBy(*key).agg(F.max("log_start_offset").alias("checkpoint"))
        span = span.join(starts, on=key, how="left")
    else:
        span = span.withColumn("checkpoint", F.lit(None).cast("long"))
    return span.select("log_dir", *TP, F.greatest("first", F.coalesce("checkpoint", "first")).alias("start"), "end")


def _with_extent(df: DataFrame, extents: DataFrame, role: str, prefix: str) -> DataFrame:
    e = extents.select(F.col("log_dir").alias(role), *TP, F.col("start").alias(f"{prefix}_start"),
                       F.col("end").alias(f"{prefix}_end"))
    return df.join(F.broadcast(e), on=[role, *TP], how="left")


def _epochs(held: DataFrame, leader_epochs: DataFrame) -> DataFrame:
    """``(log_dir, topic, partition, leader_epoch, start_offset)``: where each replica's epochs start,
    from its checkpoint and from its batches."""
    seen = held.where(F.col("partition_leader_epoch") >= 0).groupBy("log_dir", *TP, "partition_leader_epoch").agg(
        F.min("base_offset").alias("start_offset")).withColumnRenamed("partition_leader_epoch", "leader_epoch")
    if "file" in leader_epochs.columns:
        seen = seen.unionByName(with_log_dir(leader_epochs).select("log_dir", *TP, "leader_epoch", "start_offset"))
    return seen.groupBy("log_dir", *TP, "leader_epoch").agg(F.min("start_offset").alias("start_offset"))


def _as_rows(here: str, there: str, kind: str) -> list:
    return [F.lit(kind).alias("kind"), F.greatest(f"{here}_last_offset", f"{there}_last_offset").alias("last_offset"),
            F.lit(1).alias("batches"), F.col(f"{here}_record_count").alias("records"),
            F.lit(1).alias("other_batches"), F.col(f"{there}_record_count").alias("other_records"),
            F.col(f"{here}_partition_leader_epoch").alias("leader_epoch"),
            F.col(f"{there}_partition_leader_epoch").alias("other_leader_epoch")]


def _one_side_rows(kind: str) -> list:
    return [F.lit(kind).alias("kind"), "last_offset", F.lit(1).alias("batches"), F.col("record_count").alias("records"),
            F.lit(0).alias("other_batches"), F.lit(0).alias("other_records"),
            F.col("partition_leader_epoch").alias("leader_epoch"), F.lit(None).cast("int").alias("other_leader_epoch")]


def _ranges(rows: DataFrame, epochs: DataFrame, compacted) -> DataFrame:
    """Divergent batches with their severity, merged into ranges (per pair, kind and severity, offsets
    that touch or overlap). Where the other replica holds no batch, its leader epoch is the one its
    epochs say was current at the batch's offset."""
    spans = epochs.withColumn("until", F.lead("start_offset").over(
        Window.partitionBy("log_dir", *TP).orderBy("start_offset", "leader_epoch")))
    e = spans.select(F.col("log_dir").alias("e_log_dir"), F.col("topic").alias("e_topic"),
                     F.col("partition").alias("e_partition"), F.col(TOPIC_ID).alias("e_topic_id"),
                     F.col("leader_epoch").alias("epoch_there"), "start_offset", "until")
    at = rows.join(F.broadcast(e), on=(F.col("other_log_dir") == F.col("e_log_dir")) & (F.col("topic") == F.col("e_topic"))
                   & (F.col("partition") == F.col("e_partition")) & (F.col(TOPIC_ID) == F.col("e_topic_id"))
                   & (F.col("start_offset") <= F.col("base_offset"))
                   & (F.col("until").isNull() | (F.col("base_offset") < F.col("until"))), how="left")
    there = F.coalesce("other_leader_epoch", "epoch_there")
    severity = (F.when(F.col("kind") == TRUNCATED_TAIL,
                       F.when((F.col("leader_epoch") >= 0) & (there > F.col("leader_epoch")), SEV_VIOLATION)
                       .otherwise(SEV_INFO))
                .when((F.col("kind") == MISSING) & compacted, SEV_EXPLAINED)
                .otherwise(SEV_VIOLATION))
    judged = at.select(*PAIR, "kind", "base_offset", "last_offset", "batches", "records", "other_batches",
                       "other_records", "leader_epoch", there.alias("other_leader_epoch"), severity.alias("severity"))
    key = [*PAIR, "kind", "severity"]
    w = Window.partitionBy(*key).orderBy("base_offset", "last_offset")
    reach = F.max("last_offset").over(w.rowsBetween(Window.unboundedPreceding, -1))
    grouped = judged.withColumn("starts", F.when(reach.isNull() | (F.col("base_offset") > reach + 1), 1).otherwise(0)) \
        .withColumn("range_id", F.sum("starts").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    ranges = grouped.groupBy(*key, "range_id").agg(
        F.min("base_offset").alias("first_offset"), F.max("last_offset").alias("last_offset"),
        F.max("leader_epoch").alias("leader_epoch"), F.max("other_leader_epoch").alias("other_leader_epoch"),
        F.sum("batches").alias("batches"), F.sum("records").alias("records"),
        F.sum("other_batches").alias("other_batches"), F.sum("other_records").alias("other_records"))
    return ranges.select(
        *TP, "log_dir", "other_log_dir", "kind", "first_offset", "last_offset",
        F.col("leader_epoch").cast("int").alias("leader_epoch"),
        F.col("other_leader_epoch").cast("int").alias("other_leader_epoch"), "severity",
        "batches", "records", "other_batches", "other_records",
        F.when(F.col("severity") == SEV_EXPLAINED, F.lit(COMPACTION)).alias("explained_by"))
