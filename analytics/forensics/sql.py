"""``sql``: Spark SQL over every table of an OUT folder, each registered as a view of its name."""

from __future__ import annotations

from analytics.contract import TABLES
from analytics.forensics.tables import NotFound
from analytics.publish import Store


def register_views(spark, out: str) -> list[str]:
    """Every table present under OUT as a temporary view of its name; returns the names registered."""
    names = []
    for name in TABLES:
        path = Store(out).path(name)
        if Store(out).is_dir(name):
            spark.read.parquet(path).createOrReplaceTempView(name)
            names.append(name)
    return names


def run_sql(spark, out: str, query: str):
    """The query's DataFrame, with every table of OUT registered as a view."""
    if not register_views(spark, out):
        raise NotFound(f"{out} holds no segaudit tables")
    return spark.sql(query)
