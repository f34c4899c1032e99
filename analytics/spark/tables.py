"""Reading the Parquet tables under ``OUT`` for many small queries.

A stage that asks many questions of a table (the validation's checks, the report's sections) pays
Spark's per-query cost once per question: a scan split into several tasks, and for ``limit`` a
job per round of partitions it tries. A table below ``SMALL_TABLE_BYTES`` is read once into one
in-memory partition, so every query after is one task over memory; a larger one is read as Spark
splits it, and every query scans it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

SMALL_TABLE_BYTES = 16 * 1024 * 1024


def read_table(spark: SparkSession, path: str, size_bytes: int, schema=None) -> DataFrame:
    """The Parquet table at ``path`` (``size_bytes`` on disk): held in memory as one partition when
    small. ``schema``: the schema it was written with, when known (else Spark infers it, with a job)."""
    df = (spark.read if schema is None else spark.read.schema(schema)).parquet(path)
    if size_bytes > SMALL_TABLE_BYTES:
        return df
    return df.coalesce(1).localCheckpoint()
