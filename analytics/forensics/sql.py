"""``sql``: Spark SQL over every table of an OUT folder, each registered as a view of its name."""

from __future__ import annotations

import re

from analytics.contract import TABLES
from analytics.errors import unknown
from analytics.forensics.tables import NotFound
from analytics.publish import AsOf, published

_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|--[^\n]*|/\*.*?\*/", re.S)
# FROM inside a call (EXTRACT(x FROM y), TRIM(... FROM y), SUBSTRING(s FROM n)) or after DISTINCT
# (a IS DISTINCT FROM b) names no table.
_NOT_A_TABLE = re.compile(r"\b(?:extract|trim|substring|substr|overlay|position)\s*\([^()]*\)|\bdistinct\s+from\b",
                          re.I)
_TABLE = re.compile(r"\b(?:from|join)\s+(`[^`]+`|[A-Za-z_][\w.]*)(\s*\()?", re.I)
_CTE = re.compile(r"(?:\bwith|,)\s*([A-Za-z_]\w*)\s+as\s*\(", re.I)


def referenced_tables(query: str) -> set[str]:
    """The plain names a query reads FROM or JOINs (not its CTEs, functions or qualified paths).

    >>> sorted(referenced_tables("WITH x AS (SELECT * FROM anomalies) SELECT extract(year FROM t) "
    ...                          "FROM x JOIN `segments` s ON true, range(3) WHERE a IS DISTINCT FROM b"))
    ['anomalies', 'segments']
    """
    text = _NOT_A_TABLE.sub(" ", _QUOTED.sub(" ", query))
    ctes = {m.group(1).lower() for m in _CTE.finditer(text)}
    names = set()
    for m in _TABLE.finditer(text):
        name, call = m.group(1).strip("`"), m.group(2)
        if not call and "." not in name and name.lower() not in ctes:
            names.add(name)
    return names


def check_tables(out: str, query: str, as_of: AsOf | None = None) -> None:
    """:class:`NotFound` naming the closest table when the query reads one OUT does not hold
    (before any Spark starts)."""
    view = published(out, as_of)
    present = [name for name in TABLES if view.is_dir(name)]
    for name in sorted(referenced_tables(query)):
        if name.lower() not in present:
            raise NotFound(unknown("table", name, present))


def register_views(spark, out: str, as_of: AsOf | None = None) -> list[str]:
    """Every table present under OUT (at ``as_of``, or the latest commit) as a temporary view of its
    name, all of one commit; returns the names registered."""
    from analytics.spark.tables import read_parquet

    names = []
    view = published(out, as_of)
    for name in TABLES:
        if view.is_dir(name):
            read_parquet(spark, view.path(name)).createOrReplaceTempView(name)
            names.append(name)
    return names


def run_sql(spark, out: str, query: str, as_of: AsOf | None = None):
    """The query's DataFrame, with every table of OUT (at ``as_of``) registered as a view."""
    present = register_views(spark, out, as_of)
    if not present:
        raise NotFound(f"{out} holds no segaudit tables")
    try:
        return spark.sql(query)
    except Exception as exc:  # Spark's own words for a name the query reads that is no view
        missing = re.search(r"The table or view `?([^`\s]+)`? cannot be found", str(exc))
        if getattr(exc, "getCondition", lambda: None)() == "TABLE_OR_VIEW_NOT_FOUND" and missing:
            raise NotFound(unknown("table", missing.group(1), present)) from exc
        raise
