"""Column expressions every Spark reader of the tables shares: the key of a partition's history.

The history key (``analytics.contract.HISTORY_KEY``) is (log_dir, topic, partition): the same
topic-partition in two log dirs is two histories. ``with_log_dir`` is the Spark expression of
:func:`analytics.contract.log_dir_of`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def log_dir_column(levels: int = 2):
    """``file`` without its last ``levels`` path components."""
    return F.expr(f"substring(file, 1, greatest(length(file) - length(substring_index(file, '/', -{levels})) - 1, 0))")


def with_log_dir(df: DataFrame, levels: int = 2) -> DataFrame:
    """``df`` with ``log_dir``: ``file`` without its last ``levels`` components (a segment's: the
    partition folder and the file name; a log-dir checkpoint's: the file name)."""
    return df.withColumn("log_dir", log_dir_column(levels))
