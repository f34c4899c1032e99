"""``segaudit report OUT``: aggregate the audit in Spark into the small dict ``render`` draws.

Every list is bounded before it reaches the driver: partitions ranked by findings (at most
``MAX_PARTITIONS``), the violating batches counted per partition and verdict with the first offset
of each (at most ``MAX_VIOLATIONS`` such counts, for the Findings table), offset bins and finding
marks for the partitions with findings only, sequence points for the producers with findings (ok
batches thinned to about ``MAX_POINTS`` per producer, every finding kept), the longest pauses, the
unfinished transactions, the first parse errors, snapshot disagreements and record duplicates, one
row per past run; the offending rows of each check are the sample ``validate`` kept in results.json.
"""

from __future__ import annotations

import json
import time

from analytics.contract import (
    ABORTED, AUDIT, SUMMARY, VALIDATE, VALIDATION_DIR, DUP_DUPLICATE, DUPLICATE, FINDING_SEVERITIES, HANGING, NAME_KEY, MATCH, MISMATCH, NOT_IN_LOG, OPEN,
    SEQUENCE_GAP, SEV_EXPLAINED, SEV_OK, SEV_VIOLATION, SEVERITIES, TOPIC_DELETED, TOPIC_ID,
)
from analytics.errors import StageMissing
from analytics.publish import AsOf, Published, published
from analytics.report.history import read_history, verdict_column
from analytics.spark.tables import read_parquet

MAX_PARTITIONS = 200
MAX_TIMELINES = 50
BINS = 200
MAX_MARKS = 500
MAX_PRODUCERS = 30
MAX_POINTS = 1500
MAX_IDLE = 1000
MAX_TRANSACTIONS = 200
MAX_DUPLICATES = 200
MAX_PARSE_ERRORS = 200
MAX_SNAPSHOT_CHECKS = 200
MAX_VIOLATIONS = 500
KEYS = list(NAME_KEY)


def _key(row) -> tuple:
    """The history key (log dir, topic, partition) of a row or dict."""
    return tuple(row[k] for k in KEYS)


def _severity_counts():
    """One count column per severity, named after it: the batches of that severity."""
    from pyspark.sql import functions as F

    return [F.sum((F.col("severity") == s).cast("long")).alias(s) for s in SEVERITIES]


def report_data(spark, out: str, history: str | None = None, *, shown_as: str | None = None, pending=None,
                sections: dict | None = None, as_of: AsOf | None = None) -> dict:
    """Everything the report page shows. ``shown_as``: the OUT the page names (when ``out`` is a
    staging folder); ``pending``: this run's history rows (a DataFrame), not yet appended;
    ``sections``: what :func:`report_sections` returned for ``out``, when the caller has it (computed
    beside the validation: the page reads the validation's results, the sections do not); ``as_of``:
    the page of a past version of ``OUT``, its history up to that version's commit."""
    view = published(out, as_of)  # one commit, resolved once: every section reads the same version
    if sections is None:
        sections = report_sections(spark, out, history, pending=pending, view=view)
    return {
        "title": "segaudit report",
        "out": shown_as or out,
        "version": view.snapshot.version,
        "as_of": {"version": view.snapshot.version, "committed_at_ms": view.snapshot.committed_at_ms}
        if as_of is not None else None,
        "generated_at_ms": int(time.time() * 1000),
        "validation": _validation(view),
        **sections,
    }


def report_sections(spark, out: str, history: str | None = None, *, pending=None, view: Published | None = None) -> dict:
    """The sections of the report that Spark aggregates from the audit (all but the validation's), from
    ``view`` (a version of ``out``; the latest when not given).

    They read the tables independently of each other, so they run at once
    (:func:`analytics.spark.concurrent.concurrently`)."""
    from analytics.spark.columns import with_log_dir
    from analytics.spark.concurrent import concurrently
    from analytics.spark.tables import read_table

    view = view or published(out)
    view.manifest(AUDIT)
    summary = json.loads(view.read_text(SUMMARY))
    until = view.snapshot.committed_at_ms if view.pinned else None
    v = with_log_dir(read_table(spark, view.path("batch_verdicts"), view.size("batch_verdicts")))
    errors = with_log_dir(read_parquet(spark, view.path("parse_errors")))
    sections = concurrently(spark, {
        "partitions": lambda: _partitions(spark, v, errors),
        "producers": lambda: _producers(v),
        "idle": lambda: {"threshold_ms": summary["configuration"].get("producer_id_expiration_ms"),
                         "points": _idle(spark, view, v)},
        "parse_errors": lambda: _parse_errors(errors),
        "snapshot_checks": lambda: _snapshot_checks(spark, view, summary),
        "transactions": lambda: _transactions(spark, view, summary),
        "record_duplicates": lambda: _record_duplicates(spark, view, summary),
        "replicas": lambda: _replicas(spark, view, summary),
        "history": lambda: _history(spark, history, pending, until) if history else [],
    })
    partitions = sections.pop("partitions")
    return {"summary": summary, **partitions, **sections}


def _partitions(spark, v, errors) -> dict:
    """The partitions ranked by findings (at most ``MAX_PARTITIONS``) with their verdicts and parse
    errors, their total, the timelines of those with findings, and the verdict x severity table."""
    from pyspark.sql import functions as F

    # one pass over the verdicts: a row per (partition, verdict, severity), small, computed once and
    # read by the partition ranking, each shown partition's verdicts and the verdict x severity table
    ids = [c for c in (TOPIC_ID, TOPIC_DELETED) if c in v.columns]  # an audit before them has neither
    counts = v.groupBy(*KEYS, *ids, "verdict", "severity").agg(
        F.count("*").alias("batches"),
        F.sum(F.when(~F.col("is_control"), F.col("record_count")).otherwise(0)).cast("long").alias("records"),
        F.min("base_offset").alias("first_offset"), F.max("last_offset").alias("last_offset"),
        F.min("max_timestamp").alias("first_timestamp"), F.max("max_timestamp").alias("last_timestamp"),
    ).localCheckpoint()
    per_partition = counts.groupBy(*KEYS).agg(
        F.sum("batches").alias("batches"), F.sum("records").alias("records"),
        F.min("first_offset").alias("first_offset"), F.max("last_offset").alias("last_offset"),
        F.min("first_timestamp").alias("first_timestamp"), F.max("last_timestamp").alias("last_timestamp"),
        *[F.sum(F.when(F.col("severity") == s, F.col("batches")).otherwise(0)).alias(s) for s in SEVERITIES],
        _incarnations(ids),
    ).withColumn("findings", F.col(SEV_EXPLAINED) + F.col(SEV_VIOLATION))
    ranked = per_partition.orderBy(F.col(SEV_VIOLATION).desc(), F.col(SEV_EXPLAINED).desc(), *KEYS)
    partitions = [named(r.asDict(recursive=True)) for r in ranked.limit(MAX_PARTITIONS).collect()]
    partitions_total = len(partitions) if len(partitions) < MAX_PARTITIONS else per_partition.count()
    verdicts_of = {}
    shown = spark.createDataFrame([_key(p) for p in partitions] or [("", "", -1)],
                                  "log_dir string, topic string, partition int")
    for r in counts.join(F.broadcast(shown), KEYS).groupBy(*KEYS, "verdict").agg(F.sum("batches").alias("count")).collect():
        verdicts_of.setdefault(_key(r), {})[r["verdict"]] = r["count"]
    errors_of = {_key(r): r["count"] for r in errors.groupBy(*KEYS).count().join(F.broadcast(shown), KEYS).collect()}
    for p in partitions:
        p["severities"] = {s: p.pop(s) for s in SEVERITIES}
        p["verdicts"] = verdicts_of.get(_key(p), {})
        p["parse_errors"] = errors_of.get(_key(p), 0)
    with_findings = per_partition.where(F.col("findings") > 0).orderBy(
        F.col(SEV_VIOLATION).desc(), F.col("findings").desc(), *KEYS).limit(MAX_TIMELINES)
    violating = counts.where(F.col("severity") == SEV_VIOLATION).select(
        *KEYS, "verdict", "batches", "first_offset").orderBy(*KEYS, "verdict").limit(MAX_VIOLATIONS)
    return {"partitions": partitions, "partitions_total": partitions_total,
            "violations": [r.asDict() for r in violating.collect()],
            "timelines": _timelines(v, [r.asDict() for r in with_findings.collect()]),
            "verdict_severities": _verdict_severities(counts)}


def _incarnations(ids: list[str]):
    """The incarnations of a partition's rows (its topic ids, each with whether it was deleted), sorted."""
    from pyspark.sql import functions as F

    if len(ids) < 2:
        return F.lit(None).cast("array<struct<topic_id:string,deleted:boolean>>").alias("incarnations")
    return F.array_sort(F.collect_set(F.struct(F.coalesce(TOPIC_ID, F.lit("")).alias(TOPIC_ID),
                                               F.coalesce(TOPIC_DELETED, F.lit(False)).alias("deleted")))
                        ).alias("incarnations")


def named(partition: dict) -> dict:
    """A ranked partition with its ``incarnations`` only where the report names them: more than one
    topic id under its name in its log dir, or a deleted one.

    >>> named({"topic": "t", "incarnations": [{"topic_id": "A", "deleted": False}]})
    {'topic': 't'}
    >>> named({"incarnations": [{"topic_id": "A", "deleted": True}, {"topic_id": "B", "deleted": False}]})
    {'incarnations': [{'topic_id': 'A', 'deleted': True}, {'topic_id': 'B', 'deleted': False}]}
    """
    seen = partition.pop("incarnations", None) or []
    if len(seen) > 1 or any(i["deleted"] for i in seen):
        partition["incarnations"] = seen
    return partition


def _verdict_severities(counts) -> dict:
    """verdict -> severity -> batches: which of a verdict's batches the broker was right to accept."""
    from pyspark.sql import functions as F

    table: dict = {}
    for r in counts.groupBy("verdict", "severity").agg(F.sum("batches").alias("count")).collect():  # verdicts x severities
        table.setdefault(r["verdict"], {})[r["severity"]] = r["count"]
    return table


def _parse_errors(errors) -> dict:
    """The first ``MAX_PARSE_ERRORS`` parse errors by file and position, with the count and bytes of each kind."""
    from pyspark.sql import functions as F

    kinds = {r["error_kind"]: {"errors": r["errors"], "bytes": r["bytes"]} for r in errors.groupBy("error_kind").agg(
        F.count("*").alias("errors"), F.sum("bytes_affected").alias("bytes")).collect()}
    rows = errors.orderBy("file", "file_position").limit(MAX_PARSE_ERRORS).select(
        "topic", "partition", "file", "file_position", "error_kind", "message", "bytes_affected")
    return {"kinds": kinds, "rows": [r.asDict() for r in rows.collect()],
            "rows_total": sum(k["errors"] for k in kinds.values())}


def _snapshot_checks(spark, view: Published, summary: dict) -> dict | None:
    """The producers whose replayed state disagrees with a broker snapshot, mismatches first."""
    from pyspark.sql import functions as F

    path = view.path("snapshot_checks")
    if not view.is_dir("snapshot_checks"):
        return None
    status = F.col("status")
    order = F.when(status == MISMATCH, 0).when(status == NOT_IN_LOG, 1).otherwise(2)
    rows = read_parquet(spark, path).where(status != MATCH).orderBy(
        order, "topic", "partition", "snapshot_offset", "producer_id").limit(MAX_SNAPSHOT_CHECKS)
    counts = summary.get("snapshot_checks") or {}
    return {"counts": counts, "rows": [r.asDict() for r in rows.collect()],
            "rows_total": sum(n for k, n in counts.items() if k != MATCH)}


def _timelines(v, partitions: list[dict]) -> list[dict]:
    """Severity counts in ``BINS`` equal offset ranges, and up to ``MAX_MARKS`` findings, per partition."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not partitions:
        return []
    spark = v.sparkSession
    ranges = spark.createDataFrame([(*_key(p), p["first_offset"], p["last_offset"]) for p in partitions],
                                   "log_dir string, topic string, partition int, lo long, hi long")
    rows = v.join(F.broadcast(ranges), KEYS)
    width = F.greatest((F.col("hi") - F.col("lo") + 1) / BINS, F.lit(1.0))
    binned = rows.withColumn("bin", F.least(F.floor((F.col("base_offset") - F.col("lo")) / width), F.lit(BINS - 1)).cast("int"))
    counts = binned.groupBy(*KEYS, "bin", "lo", "hi").agg(*_severity_counts())
    bins: dict[tuple, list[dict]] = {}
    for r in counts.collect():
        w = max((r["hi"] - r["lo"] + 1) / BINS, 1.0)
        start = r["lo"] + int(r["bin"] * w)
        end = min(r["lo"] + int((r["bin"] + 1) * w) - 1, r["hi"])
        bins.setdefault(_key(r), []).append(
            {"start": start, "end": max(end, start)} | {s: r[s] for s in SEVERITIES})
    found = rows.where(F.col("severity").isin(*FINDING_SEVERITIES))
    numbered = found.withColumn("n", F.row_number().over(Window.partitionBy(*KEYS).orderBy("base_offset", "file_position")))
    marks: dict[tuple, list[dict]] = {}
    for r in numbered.where(F.col("n") <= MAX_MARKS).select(
            *KEYS, F.col("base_offset").alias("offset"), F.col("max_timestamp").alias("timestamp"), "verdict", "severity",
            "producer_id", "explained_by", "explanation").orderBy(*KEYS, "offset").collect():
        d = r.asDict()
        marks.setdefault(tuple(d.pop(k) for k in KEYS), []).append(d)
    out = []
    for p in partitions:
        k = _key(p)
        out.append({"log_dir": p["log_dir"], "topic": p["topic"], "partition": p["partition"],
                    "first_offset": p["first_offset"], "last_offset": p["last_offset"],
                    "bins": sorted(bins.get(k, []), key=lambda b: b["start"]), "marks": marks.get(k, []),
                    "marks_total": p["findings"]})
    return out


def _producers(v) -> list[dict]:
    """The producers with the most findings, each with its batches in one partition (ok ones thinned)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    pkeys = [*KEYS, "producer_id"]
    worst = (v.where(F.col("severity").isin(*FINDING_SEVERITIES) & (F.col("producer_id") >= 0))
             .groupBy(*pkeys).agg(F.count("*").alias("findings"),
                                  F.sum((F.col("severity") == SEV_VIOLATION).cast("long")).alias("violations"))
             .orderBy(F.col("violations").desc(), F.col("findings").desc(), *pkeys).limit(MAX_PRODUCERS))
    chosen = [r.asDict() for r in worst.collect()]
    if not chosen:
        return []
    spark = v.sparkSession
    pick = spark.createDataFrame([(c["log_dir"], c["topic"], c["partition"], c["producer_id"]) for c in chosen],
                                 "log_dir string, topic string, partition int, producer_id long")
    rows = v.join(F.broadcast(pick), pkeys)
    w = Window.partitionBy(*pkeys)
    ordered = Window.partitionBy(*pkeys).orderBy("base_offset", "file_position")
    thinned = rows.withColumn("total", F.count("*").over(w)).withColumn("n", F.row_number().over(ordered)).where(
        (F.col("severity") != SEV_OK) | (F.col("n") % F.greatest(F.ceil(F.col("total") / MAX_POINTS), F.lit(1)) == 0)
        | (F.col("n") == 1) | (F.col("n") == F.col("total")))
    points: dict[tuple, list[dict]] = {}
    totals: dict[tuple, int] = {}
    for r in thinned.select(*pkeys, "total", "base_offset", F.col("max_timestamp").alias("timestamp"),
                            F.col("producer_epoch").alias("epoch"), "base_sequence", "last_sequence", "verdict",
                            "severity").orderBy(*pkeys, "base_offset").collect():
        d = r.asDict()
        k = tuple(d.pop(c) for c in pkeys)
        totals[k] = d.pop("total")
        points.setdefault(k, []).append(d)
    result = []
    for c in chosen:
        k = tuple(c[x] for x in pkeys)
        pts = points.get(k, [])
        result.append({"log_dir": c["log_dir"], "topic": c["topic"], "partition": c["partition"],
                       "producer_id": c["producer_id"], "points": pts, "points_total": totals.get(k, len(pts)),
                       "epochs": sorted({p["epoch"] for p in pts if p["epoch"] is not None})})
    return result


def _idle(spark, view: Published, v) -> list[dict]:
    """Resumptions with findings, and the longest pauses of all (a top-k, not a sort of the table)."""
    from pyspark.sql import functions as F

    cols = ["topic", "partition", "producer_id", F.col("base_offset").alias("offset"), "idle_ms", "verdict", "severity",
            "explained_by"]
    found = read_parquet(spark, view.path("anomalies")).where(
        F.col("severity").isin(*FINDING_SEVERITIES) & F.col("idle_ms").isNotNull()
    ).select(*cols).limit(MAX_IDLE // 2)
    longest = v.where(F.col("idle_ms").isNotNull()).select(*cols).orderBy(F.col("idle_ms").desc()).limit(MAX_IDLE // 2)
    rows = found.union(longest).distinct().orderBy("topic", "partition", "offset").collect()
    return [r.asDict() for r in rows]


def _transactions(spark, view: Published, summary: dict) -> dict:
    from pyspark.sql import functions as F

    t = read_parquet(spark, view.path("transactions"))
    status = F.col("status")  # the unfinished first
    order = F.when(status == HANGING, 0).when(status == OPEN, 1).when(status == ABORTED, 2).otherwise(3)
    rows = t.orderBy(order, "topic", "partition", "first_offset").limit(MAX_TRANSACTIONS).select(
        "topic", "partition", "producer_id", "producer_epoch", "first_offset", "end_offset", "status", "last_timestamp")
    return {"counts": summary["transactions"], "rows": [r.asDict() for r in rows.collect()],
            "rows_total": sum(summary["transactions"].values())}


def _record_duplicates(spark, view: Published, summary: dict) -> dict | None:
    """The first copies in offset order, each with its key decoded for reading (the dedup key is hex)."""
    path = view.path("record_duplicates")
    if not view.is_dir("record_duplicates"):
        return None
    from pyspark.sql import functions as F

    copies = read_parquet(spark, path)
    if "kind" not in copies.columns:  # an audit before kinds: every copy counted
        copies = copies.withColumn("kind", F.lit(DUP_DUPLICATE))
    twice = F.col("kind") == DUP_DUPLICATE
    # the copies consumers receive twice; apart, fewer of those around aborted transactions (information)
    rows = [r for part, most in ((twice, MAX_DUPLICATES), (~twice, MAX_DUPLICATES // 4))
            for r in copies.where(part).orderBy("topic", "partition", "log_dir", "offset").limit(most).collect()]
    return {"dedup_key": summary["configuration"].get("dedup_key"), "rows_total": summary.get("record_duplicates"),
            "kinds": summary.get("record_duplicate_kinds"),
            "rows": [r.asDict() | {"key_text": key_text(r["dedup_key"])} for r in rows]}


def _replicas(spark, view: Published, summary: dict) -> dict | None:
    """The divergent ranges between replicas, violations first (None: no partition has replicas)."""
    from pyspark.sql import functions as F

    if not summary.get("replicated_partitions") or not view.is_dir("replica_divergence"):
        return None
    rank = F.when(F.col("severity") == SEV_VIOLATION, 0).when(F.col("severity") == SEV_EXPLAINED, 1).otherwise(2)
    rows = read_parquet(spark, view.path("replica_divergence")).orderBy(
        rank, "topic", "partition", "log_dir", "other_log_dir", "first_offset").limit(MAX_DUPLICATES).collect()
    counts = summary.get("replica_divergence") or {}
    return {"partitions": summary["replicated_partitions"], "counts": counts,
            "rows_total": sum(v for v in counts.values() if isinstance(v, int)), "rows": [r.asDict() for r in rows]}


def key_text(dedup_key: str | None) -> str:
    """The bytes before the first ``:`` of a dedup key (hex), as UTF-8 with replacement characters.

    >>> key_text("3c623e:17")
    '<b>'
    >>> key_text("null:5")
    'null'
    """
    head = (dedup_key or "").split(":", 1)[0]
    try:
        return bytes.fromhex(head).decode("utf-8", "replace")
    except ValueError:
        return head


def _validation(view: Published) -> dict | None:
    try:
        view.manifest(VALIDATE)
        doc = json.loads(view.read_text(f"{VALIDATION_DIR}/results.json"))
    except (StageMissing, OSError, ValueError):  # not validated yet, or results unreadable: no section
        return None
    checks = []
    for suite, body in doc.get("suites", {}).items():
        for c in body.get("checks", []):
            status = "pass" if c["success"] else ("warn" if c.get("severity") == "warning" else "fail")
            checks.append({"suite": suite, "check": c["id"], "description": c["description"], "success": c["success"],
                           "unexpected": c["unexpected_count"], "status": status, "rows": c.get("sample") or []})
    return {"success": doc.get("success"), "run_id": doc.get("run_id"), "checks": checks}


def _history(spark, path: str, pending=None, until_ms: int | None = None) -> list[dict]:
    """One row per past run (and this one, ``pending``), those up to ``until_ms`` when given."""
    from pyspark.sql import functions as F

    h = read_history(spark, path)
    if pending is not None:
        h = pending if h is None else h.unionByName(pending, allowMissingColumns=True)
    if h is None:
        return []
    if until_ms is not None:
        h = h.where(F.col("run_time_ms") <= until_ms)
    runs = h.groupBy("run_time_ms", "run_id").agg(
        F.sum("batches").alias("batches"), F.sum("records").alias("records"),
        F.sum("violations").alias(SEV_VIOLATION), F.sum("explained").alias(SEV_EXPLAINED),
        F.sum(verdict_column(DUPLICATE)).alias("duplicates"),
        F.sum(verdict_column(SEQUENCE_GAP)).alias("gaps"),
        F.sum("hanging_transactions").alias("hanging"),
    ).orderBy("run_time_ms", "run_id")
    return [r.asDict() for r in runs.collect()]
