"""The files and histories of an export, numbered, and each history cut into offset ranges.

A history (``HISTORY_KEY``: one broker's log of a topic-partition) is replayed in order, but not in
one task: a history of more than ``AuditConfig.range_batches`` batches is cut at base offsets into
ranges of about that many batches, each replayed in a task of its own with the state its producers
carry in from the ranges before it (:mod:`analytics.audit.carry`). Where a history is cut comes from
the files alone (one row per segment: its batch count and first and last base offset, batches
assumed evenly spread over a file's offsets), so planning the ranges reads no batch twice. Ranges
only decide where work is done: a verdict is the same whatever the cut.

``rid`` numbers the ranges of every history in (history, offset) order, 0 to ``RangePlan.ranges - 1``;
``task`` says which task replays a range (:func:`task_of`), and every window of the replay
partitions by (``task``, ``rid``) first, so one exchange of ``task`` clusters them all.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analytics.contract.vocabulary import HISTORY_KEY, TOPIC_ID
from analytics.spark.columns import with_log_dir, with_topic_id
from analytics.spark.partitioning import task_keys

# Every (log_dir, topic, partition, topic_id) history gets a small integer id, ``history``, and every file a
# ``file_id``: the exchange, the window sorts and the join back key on integers instead of comparing
# path strings row by row.
HISTORY = "history"
RANGE = "rid"
# A history's batches in replay order; ranges cut it at base offsets, so this order is also theirs.
ORDER = ("base_offset", "file_position")
# The task a range is replayed in: every window partitions by (task, rid, ...), so one exchange of
# ``task`` clusters them all (a range's ``task`` is a function of its ``rid``).
TASK = "task"

# The dictionary numbers its rows with windows over the whole (small) table; a Spark Connect client
# warns of any such window on stderr, which is the command's one line for failures.
warnings.filterwarnings("ignore", message="WARN WindowExpression: No Partition Defined", category=UserWarning)


@dataclass(frozen=True)
class RangePlan:
    """What the dictionary says about the cut: the ranges of all histories, the histories, the
    batches. ``split``: some history has more than one range."""
    ranges: int
    histories: int
    batches: int

    @property
    def split(self) -> bool:
        return self.ranges > self.histories


def file_dictionary(batches: DataFrame, range_batches: int, per_file: dict | None = None) -> DataFrame:
    """One row per file of ``batches``: ``file``, the ``history`` id of its (log_dir, topic,
    partition, topic_id), a ``file_id``, the file's ``log_dir``, ``topic``, ``partition`` and
    ``topic_id``; and for the cut,
    ``rid0`` (the range of the file's first batch), ``bounds`` (the base offsets inside the file where
    a later range starts), ``ranges`` (its history's count of ranges) and ``batch_count``; then the
    aggregates ``per_file`` (name -> aggregate Column) of each file's batches, taken in the same pass
    (the state an audit leaves per file, :func:`analytics.audit.state.per_file`).

    Small (one row per segment file): an aggregate of (topic, partition, file), which partial
    aggregation reduces to a few rows per scan task, taken once (checkpointed) for the numbering
    and the cut that read it twice (the cut reads fewer of its columns: left to the optimizer, the
    two would each scan every batch). The numbering and the cut, over those few rows, are planned
    once as one job (``small_queries``) instead of a job per shuffle, and checkpointed.
    """
    from analytics.spark.session import small_queries

    files = with_log_dir(with_topic_id(batches, None).groupBy("topic", "partition", TOPIC_ID, "file").agg(
        F.count(F.lit(1)).alias("batch_count"), F.min("base_offset").alias("first"),
        F.max("base_offset").alias("last"), *(c.alias(name) for name, c in (per_file or {}).items()))
    ).localCheckpoint()
    with small_queries(batches.sparkSession):
        return _numbered(files, range_batches, per_file or {}).localCheckpoint()


def _numbered(files: DataFrame, range_batches: int, per_file: dict) -> DataFrame:
    """:func:`file_dictionary` of the per-file aggregate ``files``."""
    files = files.select(
        "*",
        F.dense_rank().over(Window.orderBy(*HISTORY_KEY)).alias(HISTORY),
        F.row_number().over(Window.orderBy("file")).alias("file_id"),
    )
    # the batches of the history before the file: a range starts at every multiple of range_batches
    before = F.coalesce(F.sum("batch_count").over(
        Window.partitionBy(HISTORY).orderBy("first", "file").rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))
    files = files.withColumn("before", before)
    size = F.lit(range_batches).cast("long")
    first_k = F.greatest((F.ceil(F.col("before") / size) * size) - F.col("before"),
                         F.when(F.col("before") == 0, size).otherwise(F.lit(0)))
    ks = F.when(first_k < F.col("batch_count"), F.sequence(first_k, F.col("batch_count") - 1, size)) \
        .otherwise(F.array().cast("array<long>"))
    spread = (F.col("last") - F.col("first") + 1) / F.col("batch_count")
    starts = F.transform(ks, lambda k: (F.col("first") + F.floor(k * spread)).cast("long"))
    files = files.withColumn("starts", starts)
    histories = files.groupBy(HISTORY).agg(
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("starts")))).alias("history_bounds"))
    histories = histories.select(
        HISTORY, "history_bounds", (F.size("history_bounds") + 1).alias("ranges"),
        F.coalesce(F.sum(F.size("history_bounds") + 1).over(
            Window.orderBy(HISTORY).rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)).alias("rid_base"))
    files = files.join(histories, on=HISTORY)
    first, last = F.col("first"), F.col("last")
    return files.select(
        "file", HISTORY, "file_id", *HISTORY_KEY, "batch_count", "ranges",
        (F.col("rid_base") + F.size(F.filter("history_bounds", lambda b: b <= first))).alias("rid0"),
        F.filter("history_bounds", lambda b: (b > first) & (b <= last)).alias("bounds"),
        *per_file,
    )


def range_plan(dictionary: DataFrame) -> RangePlan:
    """The counts of the cut, from the dictionary (one row reaches the driver), in one job."""
    from analytics.spark.session import small_queries

    per_history = dictionary.groupBy(HISTORY).agg(F.first("ranges").alias("ranges"),
                                                  F.sum("batch_count").alias("batches"))
    with small_queries(dictionary.sparkSession):
        row = per_history.agg(F.sum("ranges"), F.count(F.lit(1)), F.sum("batches")).first()
    return RangePlan(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))


def range_of() -> "F.Column":
    """``rid`` of a batch row joined with its file's dictionary row: the file's first range plus the
    range starts inside the file at or below its base offset."""
    offset = F.col("base_offset")
    return F.col("rid0") + F.size(F.filter("bounds", lambda b: b <= offset))


def task_of(plan: RangePlan, tasks: int) -> "F.Column":
    """``task`` of a row with its ``rid``: the ranges in order, in ``tasks`` contiguous runs of
    about equal count, each run's key one that Spark's hash partitioning into ``tasks`` sends to
    its own task (:func:`analytics.spark.partitioning.task_keys`)."""
    keys = F.array(*[F.lit(k) for k in task_keys(tasks)])
    run = F.floor(F.col(RANGE) * tasks / max(plan.ranges, 1)).cast("int")
    return F.element_at(keys, run + 1).cast("int")
