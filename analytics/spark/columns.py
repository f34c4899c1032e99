"""Column expressions every Spark reader and writer of the tables shares: the key of a partition's
history, a table conformed to its contract schema at the write (``conform``), and counts a write
takes of the rows it writes (``observed``, ``count_of``).

The history key (``analytics.contract.HISTORY_KEY``) is (log_dir, topic, partition, topic_id): the
same topic-partition in two log dirs is two histories, and so are two incarnations of a topic name.
``with_log_dir`` is the Spark expression of :func:`analytics.contract.log_dir_of`; ``with_topic_id``
gives each row its partition folder's topic id. Inside the audit an unknown id is ``""``, so that
the key joins as it is; ``conform`` writes it as null. A leftover folder kept apart from a live one
of the same id (:func:`analytics.audit.audit_plan.apart`) has the id, ``APART`` and its suffix
inside the audit; ``conform`` writes the id alone. So does a deleted incarnation's
(:mod:`analytics.audit.incarnations`), with ``topic_deleted`` true.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.contract import APART, DELETED, OUT_SCHEMAS, TOPIC_DELETED, TOPIC_ID


def log_dir_column(levels: int = 2):
    """``file`` without its last ``levels`` path components."""
    return F.expr(f"substring(file, 1, greatest(length(file) - length(substring_index(file, '/', -{levels})) - 1, 0))")


def with_log_dir(df: DataFrame, levels: int = 2) -> DataFrame:
    """``df`` with ``log_dir``: ``file`` without its last ``levels`` components (a segment's: the
    partition folder and the file name; a log-dir checkpoint's: the file name)."""
    return df.withColumn("log_dir", log_dir_column(levels))


FOLDER = "_folder"


def topic_ids(spark, folders: dict[str, str | None] | None) -> DataFrame | None:
    """``(_folder, topic_id)``: each partition folder's topic id (``folders``, read once from the
    export's ``partition_metadata``: :func:`analytics.audit.audit_plan.folder_topic_ids`), a small
    frame of the driver's that every join broadcasts; None: no ids known."""
    if folders is None:
        return None
    return spark.createDataFrame(sorted(folders.items()), f"{FOLDER} string, topic_id string")


def with_topic_id(df: DataFrame, ids: DataFrame | None = None) -> DataFrame:
    """``df`` (rows with their segment's or sidecar's ``file``) with ``topic_id``: the id of the
    partition folder the file sits in (``ids``: :func:`topic_ids`), ``""`` where the folder has none
    (:func:`conform` writes it as null). A ``df`` that has the column keeps it, its nulls as ``""``
    (a table written by an audit, read back)."""
    if TOPIC_ID in df.columns:
        return df.fillna("", subset=[TOPIC_ID])
    if ids is None:
        return df.withColumn(TOPIC_ID, F.lit(""))
    return (df.withColumn(FOLDER, log_dir_column(1)).join(F.broadcast(ids), on=FOLDER, how="left").drop(FOLDER)
            .withColumn(TOPIC_ID, F.coalesce(TOPIC_ID, F.lit(""))))


def with_live_topic_id(log_starts: DataFrame, ids: DataFrame | None) -> DataFrame:
    """``log_starts`` (rows of a log dir's ``log-start-offset-checkpoint``, each with the checkpoint's
    ``file``) with ``topic_id``: the id of the folder the entry names in that log dir,
    ``<log dir>/<topic>-<partition>``, the live log the broker keeps the entry for (``""`` where it
    has none). The checkpoint names a partition by topic name, so a leftover folder of another
    incarnation (``-delete``, ``-stray``, a folder kept apart) takes no entry of it. Unchanged when
    no ids are known or the rows do not name their file: every incarnation of the name then takes
    the entry."""
    if ids is None or "file" not in log_starts.columns:
        return log_starts
    live = F.concat(log_dir_column(1), F.lit("/"), F.col("topic"), F.lit("-"), F.col("partition").cast("string"))
    return (log_starts.withColumn(FOLDER, live).join(F.broadcast(ids), on=FOLDER, how="left").drop(FOLDER)
            .withColumn(TOPIC_ID, F.coalesce(TOPIC_ID, F.lit(""))))


def with_apart(df: DataFrame, kept_apart: dict[str, str]) -> DataFrame:
    """``df`` (rows of a table the audit wrote and reads again, each with its ``file``) with the key's
    id inside the audit again for the leftover folders kept apart (``kept_apart``: folder -> that id,
    :func:`analytics.audit.audit_plan.apart`), which the write showed as the topic id alone."""
    if not kept_apart:
        return df
    ids = F.create_map(*[F.lit(x) for pair in sorted(kept_apart.items()) for x in pair])
    return df.withColumn(TOPIC_ID, F.coalesce(ids[log_dir_column(1)], F.col(TOPIC_ID)))


def deleted_key():
    """Whether a row's key inside the audit is a deleted incarnation's
    (:func:`analytics.audit.incarnations.marked`); null for a null id."""
    return F.col(TOPIC_ID).endswith(APART + DELETED)


def conform(df: DataFrame, table: str) -> DataFrame:
    """``df`` as the contract declares ``table``: its columns, in order, with their types (a cast that
    changes nothing is free). A missing column fails here, at the write, not in a reader."""
    from pyspark.sql.pandas.types import from_arrow_type

    def column(name: str):  # the topic id alone: a leftover kept apart shows its folder's id (APART)
        if name == TOPIC_ID:
            return F.nullif(F.substring_index(F.col(name), APART, 1), F.lit(""))
        if name == TOPIC_DELETED and name not in df.columns:  # the audit's key says it (incarnations.marked)
            return F.coalesce(deleted_key(), F.lit(False))
        return F.col(name)

    return df.select(*[column(f.name).cast(from_arrow_type(f.type)).alias(f.name) for f in OUT_SCHEMAS[table]])


def observed(df: DataFrame, aggregates: dict) -> tuple[DataFrame, Callable[[], dict]]:
    """``df`` with ``aggregates`` (name -> aggregate Column) computed while its next action runs it,
    and a function that returns them (name -> value) once that action has run: a table's counts
    taken by the job that writes it, without a query of their own."""
    if type(df).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect.observation import Observation
    else:
        from pyspark.sql.observation import Observation
    observation = Observation()
    watched = df.observe(observation, *[column.alias(name) for name, column in aggregates.items()])
    return watched, lambda: observation.get


def count_of(column: str, values) -> dict:
    """One aggregate per value of ``column``: the rows holding it, named after it (for :func:`observed`)."""
    return {value: F.count_if(F.col(column) == F.lit(value)) for value in values}
