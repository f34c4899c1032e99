"""Column expressions every Spark reader and writer of the tables shares: the key of a partition's
history, and a table conformed to its contract schema at the write (``conform``).

The history key (``analytics.contract.HISTORY_KEY``) is (log_dir, topic, partition): the same
topic-partition in two log dirs is two histories. ``with_log_dir`` is the Spark expression of
:func:`analytics.contract.log_dir_of`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.contract import OUT_SCHEMAS


def log_dir_column(levels: int = 2):
    """``file`` without its last ``levels`` path components."""
    return F.expr(f"substring(file, 1, greatest(length(file) - length(substring_index(file, '/', -{levels})) - 1, 0))")


def with_log_dir(df: DataFrame, levels: int = 2) -> DataFrame:
    """``df`` with ``log_dir``: ``file`` without its last ``levels`` components (a segment's: the
    partition folder and the file name; a log-dir checkpoint's: the file name)."""
    return df.withColumn("log_dir", log_dir_column(levels))


def conform(df: DataFrame, table: str) -> DataFrame:
    """``df`` as the contract declares ``table``: its columns, in order, with their types (a cast that
    changes nothing is free). A missing column fails here, at the write, not in a reader."""
    from pyspark.sql.pandas.types import from_arrow_type

    return df.select(*[F.col(f.name).cast(from_arrow_type(f.type)).alias(f.name) for f in OUT_SCHEMAS[table]])
