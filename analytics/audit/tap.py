"""The per-file rows (:func:`analytics.audit.tables.per_file`) taken by the verdicts' write: its tasks
aggregate the rows' groups as they pass to the Parquet writer (``java/FileTap.java``) and keep them
as blocks, so the audit does not read the written verdicts again for them. The aggregates are
:func:`~analytics.audit.tables.per_file`'s, over columns Spark adds to each row first (its predicates
stay Column expressions), after the verdicts' own: the rows go on to the write as rows of those first
columns, the added ones unread, so no projection copies every row to drop them. The same groups
give the counts of every row written (:meth:`Tap.counts`), so the write observes nothing of its own.
``tests/test_replay_pass.py`` holds both equal to Spark's.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import functions as F

from analytics.audit.predicates import has_state, is_data
from analytics.audit.tables import PER_FILE_KEY, per_file
from analytics.contract import SEVERITIES, VERDICTS
from analytics.spark.session import settings

# The column saying a row is one :func:`per_file` counts (an idempotent batch of magic 2), a key of
# the tap's groups beside ``PER_FILE_KEY``.
_TAKE = "_pf_take"
# The parts of ``last_state``, aggregated apart.
_LAST_STATE = {"_last_base": "base_offset", "_last_position": "file_position", "_last_sequence": "sequence",
               "_last_offset": "offset"}
# The aggregates counting a group's rows of each severity (for :meth:`Tap.counts`, not per_file's).
_SEVERITY = "_severity:"


@dataclass(frozen=True)
class Tap:
    """What the tap of the verdicts' write leaves: the per-file rows (``files``), the tap's groups
    and their ``spec`` (:func:`per_file_tap`'s), and what keeps the groups (``kept``, ``unpersist``
    once read)."""

    files: object
    groups: object
    spec: list
    kept: object

    def counts(self) -> dict:
        """The rows the write passed: per verdict (``verdict:<name>``), per severity
        (``severity:<name>``) and the newest ``max_timestamp`` (``newest``), from the groups (one
        small job)."""
        a = {name: F.col(f"a{i}") for i, (name, *_) in enumerate(self.spec)}
        row = self.groups.agg(*[F.sum(a[v.lower()]).alias(f"verdict:{v}") for v in VERDICTS],
                              *[F.sum(a[_SEVERITY + s]).alias(f"severity:{s}") for s in SEVERITIES],
                              F.max(a["last_timestamp"]).alias("newest")).first().asDict()
        return {name: n if name == "newest" else n or 0 for name, n in row.items()}


def per_file_tap(v):
    """``v`` with the columns the tap of :func:`per_file` reads, and the tap's groups (its keys) and
    aggregates: (name, kind, value column, ordering columns), one per column of :func:`per_file`
    (``last_state`` in its four parts), then the rows of each severity (:meth:`Tap.counts`)."""
    control = F.col("is_control")
    at = [F.when(F.col("state_last_sequence").isNotNull(), F.col(c)) for c in ("base_offset", "file_position")]
    helpers = {
        _TAKE: (F.col("producer_id") >= 0) & (F.col("magic") == 2),
        "_pf_records": F.when(~control, F.col("record_count")).otherwise(0),
        "_pf_data_seq": F.when(~control, F.col("base_sequence")),
        "_pf_data_last_seq": F.when(~control, F.col("last_sequence")),
        "_pf_data_offset": F.when(~control, F.col("base_offset")),
        "_pf_state_offset": at[0],
        "_pf_state_position": at[1],
        "_pf_stateful_seq": F.when(has_state() & is_data(), F.col("base_sequence")),
        "_pf_verdict": _number("verdict", VERDICTS),
        "_pf_severity": _number("severity", SEVERITIES),
    }
    by_data, by_state = ["_pf_data_offset"], ["_pf_state_offset", "_pf_state_position"]
    spec = [  # (name, kind, value column, ordering columns), per_file's columns in its order
        ("first_offset", "min", "base_offset", []), ("last_offset", "max", "last_offset", []),
        ("first_timestamp", "min", "max_timestamp", []), ("last_timestamp", "max", "max_timestamp", []),
        ("batches", "count", None, []), ("records", "sum", "_pf_records", []),
        ("first_sequence", "min_by", "_pf_data_seq", by_data), ("first_data_offset", "min", "_pf_data_offset", []),
        ("last_sequence", "max_by", "_pf_data_last_seq", by_data), ("last_data_offset", "max", "_pf_data_offset", []),
        ("first_state_offset", "min", "_pf_state_offset", []), ("last_state_offset", "max", "_pf_state_offset", []),
        ("min_base_sequence", "min", "_pf_stateful_seq", []), ("max_base_sequence", "max", "_pf_stateful_seq", []),
        ("_last_base", "max_by", "_pf_state_offset", by_state),
        ("_last_position", "max_by", "_pf_state_position", by_state),
        ("_last_sequence", "max_by", "state_last_sequence", by_state),
        ("_last_offset", "max_by", "state_last_offset", by_state),
        *[(name.lower(), f"count_eq:{number}", "_pf_verdict", []) for number, name in enumerate(VERDICTS)],
        *[(_SEVERITY + name, f"count_eq:{number}", "_pf_severity", []) for number, name in enumerate(SEVERITIES)],
    ]
    return v.select("*", *[c.alias(n) for n, c in helpers.items()]), ([*PER_FILE_KEY, _TAKE], spec)


def _number(column: str, names: tuple):
    """The row's ``column`` as its position in ``names`` (each name's count is a ``count_eq`` of it,
    one column for all): tested in ``names``' order, the likeliest (``OK``, ``ok``) first."""
    number = F.when(F.col(column) == names[0], 0)
    for i, name in enumerate(names[1:], 1):
        number = number.when(F.col(column) == name, i)
    return number


def per_file_of_tap(groups, spec: list, v):
    """:func:`per_file` of ``v`` from the tap's ``groups`` (its keys, then aggregates ``a0``, ``a1``, ...
    in the order of ``spec``, :func:`per_file_tap`'s), in :func:`per_file`'s schema (which leaves out
    the severities' counts)."""
    named = groups.where(F.col(_TAKE)).select(
        *PER_FILE_KEY, *[F.col(f"a{i}").alias(name) for i, (name, *_) in enumerate(spec)])
    last_state = F.when(F.col("_last_base").isNotNull(),
                        F.struct(*[F.col(part).alias(field) for part, field in _LAST_STATE.items()]))
    return named.select(*[(last_state if f.name == "last_state" else F.col(f.name)).cast(f.dataType).alias(f.name)
                          for f in per_file(v).schema.fields])


def per_file_tapped(spark, conformed, tapped: list):
    """``conformed`` (the verdicts to write, each Spark partition sorted by topic) as they pass through
    the tap of the per-file rows (``java/FileTap.java``): each task aggregates its rows' groups as the
    write reads them and keeps them as a block, which the per-file rows read instead of the written
    verdicts (a block lost or not yet made aggregates its task's rows again). Appends the
    :class:`Tap` to ``tapped``."""
    from pyspark.sql import DataFrame as Frame

    from analytics.audit.rules import LAZY_PLAN_CONF

    helpers, (keys, spec) = per_file_tap(conformed)
    _, kinds, values, orders = (list(x) for x in zip(*spec))
    with settings(spark, LAZY_PLAN_CONF):  # the tap takes the plan's RDD: planned, not run
        java = spark._jvm.segaudit.FileTap.tap(helpers._jdf, keys, kinds, values, orders, ["topic"])
        rows = Frame(java.rows(len(conformed.columns)), spark)
        groups = Frame(java.groups(), spark)
        tapped.append(Tap(per_file_of_tap(groups, spec, conformed), groups, spec, java))
    return rows
