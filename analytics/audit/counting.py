"""The counts of an audit's verdicts that its summary gives: taken by the verdicts' write
(:func:`verdict_counts`), counted from a table (:func:`verdict_and_severity_counts`), or added to an
earlier audit's (:func:`plus`)."""

from __future__ import annotations

from analytics.contract import SEVERITIES, VERDICTS
from analytics.spark.columns import count_of


def plus(before: tuple[dict, dict], after: tuple[dict, dict]) -> tuple[dict, dict]:
    """Counts by verdict and by severity of two parts of the verdicts."""
    return tuple({k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}} for a, b in zip(before, after))


def verdict_counts() -> dict:
    """What the write of ``batch_verdicts`` counts of its rows: each verdict, each severity, and the
    newest batch's ``max_timestamp`` (the export time when nothing else gives it)."""
    from pyspark.sql import functions as F

    return {**{f"verdict:{k}": c for k, c in count_of("verdict", VERDICTS).items()},
            **{f"severity:{k}": c for k, c in count_of("severity", SEVERITIES).items()},
            "newest": F.max("max_timestamp")}


def verdict_and_severity_counts(verdicts) -> tuple[dict, dict]:
    """Batches per verdict and per severity, from one aggregate (verdicts x severities rows)."""
    by_verdict: dict = {}
    by_severity: dict = {}
    for r in verdicts.groupBy("verdict", "severity").count().collect():
        by_verdict[r["verdict"]] = by_verdict.get(r["verdict"], 0) + r["count"]
        by_severity[r["severity"]] = by_severity.get(r["severity"], 0) + r["count"]
    return by_verdict, by_severity
