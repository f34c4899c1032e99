"""The per-file rows (:func:`analytics.audit.tables.per_file`) taken by the verdicts' write: its tasks
aggregate the rows' groups as they pass to the Parquet writer (``java/FileTap.java``) and keep them
as blocks, so the audit does not read the written verdicts again for them. The aggregates are
:func:`~analytics.audit.tables.per_file`'s, over columns Spark adds to each row first (its predicates
stay Column expressions); ``tests/test_replay_pass.py`` holds both equal.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from analytics.audit.predicates import has_state, is_data
from analytics.audit.tables import per_file
from analytics.contract import VERDICTS
from analytics.spark.session import settings

# The groups of per_file, and the columns of a verdict row the tap of the verdicts' write
# (``java/FileTap.java``) aggregates for it: the same aggregates as :func:`per_file`, each
# (name, kind, value column, ordering columns); ``_pf_take`` says a row is one per_file counts.
PER_FILE_KEY = ("topic", "partition", "producer_id", "producer_epoch", "file")
_TAKE = "_pf_take"


def per_file_tap(v):
    """``v`` with the columns the tap of :func:`per_file` reads, and the tap's spec: (keys, kinds,
    value columns, ordering columns), one aggregate each per :func:`per_file` column."""
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
        **{f"_pf_{name.lower()}": (F.col("verdict") == name).cast("long") for name in VERDICTS},
    }
    by_data, by_state = ["_pf_data_offset"], ["_pf_state_offset", "_pf_state_position"]
    spec = [
        ("min", "base_offset", []), ("max", "last_offset", []), ("min", "max_timestamp", []),
        ("max", "max_timestamp", []), ("count", None, []), ("sum", "_pf_records", []),
        ("min_by", "_pf_data_seq", by_data), ("min", "_pf_data_offset", []),
        ("max_by", "_pf_data_last_seq", by_data), ("max", "_pf_data_offset", []),
        ("min", "_pf_state_offset", []), ("max", "_pf_state_offset", []),
        ("min", "_pf_stateful_seq", []), ("max", "_pf_stateful_seq", []),
        ("max_by", "_pf_state_offset", by_state), ("max_by", "_pf_state_position", by_state),
        ("max_by", "state_last_sequence", by_state), ("max_by", "state_last_offset", by_state),
        *[("sum", f"_pf_{name.lower()}", []) for name in VERDICTS],
    ]
    kinds, values, orders = (list(x) for x in zip(*spec))
    return v.select("*", *[c.alias(n) for n, c in helpers.items()]), ([*PER_FILE_KEY, _TAKE], kinds, values, orders)


def per_file_of_tap(groups, v):
    """:func:`per_file` of ``v`` from the tap's ``groups`` (its keys, then aggregates ``a0``, ``a1``, ...
    in :func:`per_file_tap`'s order), in :func:`per_file`'s schema."""
    a = [F.col(f"a{i}") for i in range(18 + len(VERDICTS))]
    last_state = F.when(a[14].isNotNull(), F.struct(
        a[14].alias("base_offset"), a[15].alias("file_position"), a[16].alias("sequence"), a[17].alias("offset")))
    names = ["first_offset", "last_offset", "first_timestamp", "last_timestamp", "batches", "records",
             "first_sequence", "first_data_offset", "last_sequence", "last_data_offset", "first_state_offset",
             "last_state_offset", "min_base_sequence", "max_base_sequence"]
    rows = groups.where(F.col(_TAKE)).select(
        *PER_FILE_KEY, *[c.alias(n) for c, n in zip(a, names)], last_state.alias("last_state"),
        *[c.alias(name.lower()) for c, name in zip(a[18:], VERDICTS)])
    return rows.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in per_file(v).schema.fields])


def per_file_tapped(spark, conformed, tapped: list):
    """``conformed`` (the verdicts to write, each Spark partition sorted by topic) as they pass through
    the tap of the per-file rows (``java/FileTap.java``): each task aggregates its rows' groups as the
    write reads them and keeps them as a block, which the per-file rows read instead of the written
    verdicts (a block lost or not yet made aggregates its task's rows again). Appends (the per-file
    rows, the tap) to ``tapped``."""
    from pyspark.sql import DataFrame as Frame

    from analytics.audit.rules import LAZY_PLAN_CONF

    helpers, (keys, kinds, values, orders) = per_file_tap(conformed)
    with settings(spark, LAZY_PLAN_CONF):  # the tap takes the plan's RDD: planned, not run
        java = spark._jvm.segaudit.FileTap.tap(helpers._jdf, keys, kinds, values, orders, ["topic"])
        rows = Frame(java.rows(), spark).select(*conformed.columns)
        tapped.append((per_file_of_tap(Frame(java.groups(), spark), conformed), java))
    return rows
