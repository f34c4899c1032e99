"""Reading the Parquet tables under ``OUT``.

Spark infers a Parquet folder's schema with a job of its own (listing, then a task reading a
footer); when Spark wrote the folder, that footer holds Spark's schema as it was written, and
:func:`read_parquet` reads it in the driver instead and hands it to the reader: the same schema,
one job fewer for every table a stage reads.

A stage that asks many questions of a table (the validation's checks, the report's sections) pays
Spark's per-query cost once per question: a scan split into several tasks, and for ``limit`` a
job per round of partitions it tries. A table below ``SMALL_TABLE_BYTES`` is read once into one
in-memory partition, so every query after is one task over memory; a larger one is read as Spark
splits it, and every query scans it.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession

from analytics.kafka.fs import open_uri
from analytics.tuning import SMALL_TABLE_BYTES

SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"  # where Spark's writer stores its schema


def written_schema(path: str):
    """The schema a Spark write stored in the footer of the Parquet folder at ``path``, which is what
    Spark's inference reads; None when it is partitioned (its columns are also in folder names), has
    no data file, or was not written by Spark."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    fs, folder = open_uri(path)
    try:
        entries = fs.get_file_info(pafs.FileSelector(folder))
    except (FileNotFoundError, NotADirectoryError):
        return None
    if any(e.type == pafs.FileType.Directory and "=" in e.base_name for e in entries):
        return None
    files = sorted(e.path for e in entries if e.type == pafs.FileType.File and e.base_name.startswith("part-")
                   and e.base_name.endswith(".parquet"))
    if not files:
        return None
    stored = (pq.read_metadata(files[0], filesystem=fs).metadata or {}).get(SPARK_SCHEMA_KEY)
    return None if stored is None else StructType.fromJson(json.loads(stored))


def read_parquet(spark: SparkSession, path: str) -> DataFrame:
    """``spark.read.parquet(path)``, with the schema Spark wrote there when it wrote the folder."""
    schema = written_schema(path)
    return (spark.read if schema is None else spark.read.schema(schema)).parquet(path)


def read_table(spark: SparkSession, path: str, size_bytes: int, schema=None) -> DataFrame:
    """The Parquet table at ``path`` (``size_bytes`` on disk): held in memory as one partition when
    small. ``schema``: the schema it was written with, when known (else :func:`read_parquet`'s).

    A small table this process holds already (the audit's verdicts, which the validation and the
    report read next in a ``segaudit run``) is the one held: a run folder's files never change once
    written, and in a bucket each read lists every folder and opens every file again. The last
    :data:`KEPT` tables held are remembered, by path and size."""
    known = _held.get((path, size_bytes))
    if known is not None and known.sparkSession is spark:
        return known
    table = held(read_parquet(spark, path) if schema is None else spark.read.schema(schema).parquet(path), size_bytes)
    if size_bytes <= SMALL_TABLE_BYTES:
        _held[(path, size_bytes)] = table
        while len(_held) > KEPT:
            _held.pop(next(iter(_held)))
    return table


KEPT = 8  # small tables remembered by read_table (each at most SMALL_TABLE_BYTES of Parquet)
_held: dict[tuple[str, int], DataFrame] = {}


def held(df: DataFrame, size_bytes: int) -> DataFrame:
    """``df``, read from ``size_bytes`` of Parquet: held in memory as one partition when that is small
    (every query after reads memory, not the files again: in a bucket, requests), else as it is."""
    if size_bytes > SMALL_TABLE_BYTES:
        return df
    return df.coalesce(1).localCheckpoint()
