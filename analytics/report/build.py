"""``segaudit report OUT``: aggregate the audit in Spark into the small dict ``render`` draws.

Every list is bounded before it reaches the driver: partitions ranked by findings (at most
``MAX_PARTITIONS``), offset bins and finding marks for the partitions with findings only, sequence
points for the producers with findings (ok batches thinned to about ``MAX_POINTS`` per producer,
every finding kept), the longest pauses, the unfinished transactions, one row per past run.
"""

from __future__ import annotations

import os
import time

from analytics.audit.job import read_audit
from analytics.report.history import default_history_path, read_history
from analytics.report.render import write_report

MAX_PARTITIONS = 200
MAX_TIMELINES = 50
BINS = 200
MAX_MARKS = 500
MAX_PRODUCERS = 30
MAX_POINTS = 1500
MAX_IDLE = 1000
MAX_TRANSACTIONS = 200
MAX_DUPLICATES = 200
FINDING = ("explained", "violation")


def report_data(spark, out: str, history: str | None = None) -> dict:
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir

    summary = read_audit(out)
    keys = ["log_dir", "topic", "partition"]
    v = with_log_dir(spark.read.parquet(os.path.join(out, "batch_verdicts")))
    sev = {s: F.sum((F.col("severity") == s).cast("long")).alias(s) for s in ("ok", "info", "explained", "violation")}
    per_partition = v.groupBy(*keys).agg(
        F.count("*").alias("batches"),
        F.sum(F.when(~F.col("is_control"), F.col("record_count")).otherwise(0)).cast("long").alias("records"),
        F.min("base_offset").alias("first_offset"), F.max("last_offset").alias("last_offset"),
        F.min("max_timestamp").alias("first_timestamp"), F.max("max_timestamp").alias("last_timestamp"),
        *sev.values(),
    )
    verdict_counts = v.groupBy(*keys, "verdict").count()
    per_partition = per_partition.withColumn("findings", F.col("explained") + F.col("violation")).cache()
    try:
        partitions_total = per_partition.count()
        ranked = per_partition.orderBy(F.col("violation").desc(), F.col("explained").desc(), *keys).limit(MAX_PARTITIONS)
        partitions = [r.asDict() for r in ranked.collect()]
        verdicts_of = {}
        shown = spark.createDataFrame([(p["log_dir"], p["topic"], p["partition"]) for p in partitions] or [("", "", -1)],
                                      "log_dir string, topic string, partition int")
        for r in verdict_counts.join(F.broadcast(shown), keys).collect():
            verdicts_of.setdefault((r["log_dir"], r["topic"], r["partition"]), {})[r["verdict"]] = r["count"]
        for p in partitions:
            p["severities"] = {s: p.pop(s) for s in ("ok", "info", "explained", "violation")}
            p["verdicts"] = verdicts_of.get((p["log_dir"], p["topic"], p["partition"]), {})
        with_findings = per_partition.where(F.col("findings") > 0).orderBy(
            F.col("violation").desc(), F.col("findings").desc(), *keys).limit(MAX_TIMELINES)
        timelines = _timelines(v, [r.asDict() for r in with_findings.collect()], keys)
    finally:
        per_partition.unpersist()
    producers = _producers(v, keys)
    expiration = summary["configuration"].get("producer_id_expiration_ms")
    idle = _idle(spark, out, v)
    return {
        "title": "segaudit report",
        "out": out,
        "generated_at_ms": int(time.time() * 1000),
        "summary": summary,
        "validation": _validation(out),
        "partitions": partitions,
        "partitions_total": partitions_total,
        "timelines": timelines,
        "producers": producers,
        "idle": {"threshold_ms": expiration, "points": idle},
        "transactions": _transactions(spark, out, summary),
        "record_duplicates": _record_duplicates(spark, out, summary),
        "history": _history(spark, history) if history else [],
    }


def _timelines(v, partitions: list[dict], keys: list[str]) -> list[dict]:
    """Severity counts in ``BINS`` equal offset ranges, and up to ``MAX_MARKS`` findings, per partition."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not partitions:
        return []
    spark = v.sparkSession
    ranges = spark.createDataFrame([(p["log_dir"], p["topic"], p["partition"], p["first_offset"], p["last_offset"])
                                    for p in partitions],
                                   "log_dir string, topic string, partition int, lo long, hi long")
    rows = v.join(F.broadcast(ranges), keys)
    width = F.greatest((F.col("hi") - F.col("lo") + 1) / BINS, F.lit(1.0))
    binned = rows.withColumn("bin", F.least(F.floor((F.col("base_offset") - F.col("lo")) / width), F.lit(BINS - 1)).cast("int"))
    counts = binned.groupBy(*keys, "bin", "lo", "hi").agg(
        *[F.sum((F.col("severity") == s).cast("long")).alias(s) for s in ("ok", "info", "explained", "violation")])
    bins: dict[tuple, list[dict]] = {}
    for r in counts.collect():
        w = max((r["hi"] - r["lo"] + 1) / BINS, 1.0)
        start = r["lo"] + int(r["bin"] * w)
        end = min(r["lo"] + int((r["bin"] + 1) * w) - 1, r["hi"])
        bins.setdefault((r["log_dir"], r["topic"], r["partition"]), []).append(
            {"start": start, "end": max(end, start), "ok": r["ok"], "info": r["info"], "explained": r["explained"],
             "violation": r["violation"]})
    found = rows.where(F.col("severity").isin(*FINDING))
    numbered = found.withColumn("n", F.row_number().over(Window.partitionBy(*keys).orderBy("base_offset", "file_position")))
    marks: dict[tuple, list[dict]] = {}
    for r in numbered.where(F.col("n") <= MAX_MARKS).select(
            *keys, F.col("base_offset").alias("offset"), F.col("max_timestamp").alias("timestamp"), "verdict", "severity",
            "producer_id", "explained_by", "explanation").orderBy(*keys, "offset").collect():
        d = r.asDict()
        marks.setdefault((d.pop("log_dir"), d.pop("topic"), d.pop("partition")), []).append(d)
    out = []
    for p in partitions:
        k = (p["log_dir"], p["topic"], p["partition"])
        out.append({"log_dir": p["log_dir"], "topic": p["topic"], "partition": p["partition"],
                    "first_offset": p["first_offset"], "last_offset": p["last_offset"],
                    "bins": sorted(bins.get(k, []), key=lambda b: b["start"]), "marks": marks.get(k, []),
                    "marks_total": p["findings"]})
    return out


def _producers(v, keys: list[str]) -> list[dict]:
    """The producers with the most findings, each with its batches in one partition (ok ones thinned)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    pkeys = [*keys, "producer_id"]
    worst = (v.where(F.col("severity").isin(*FINDING) & (F.col("producer_id") >= 0))
             .groupBy(*pkeys).agg(F.count("*").alias("findings"),
                                  F.sum((F.col("severity") == "violation").cast("long")).alias("violations"))
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
        (F.col("severity") != "ok") | (F.col("n") % F.greatest(F.ceil(F.col("total") / MAX_POINTS), F.lit(1)) == 0)
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


def _idle(spark, out: str, v) -> list[dict]:
    """Resumptions with findings, and the longest pauses of all (a top-k, not a sort of the table)."""
    from pyspark.sql import functions as F

    cols = ["topic", "partition", "producer_id", F.col("base_offset").alias("offset"), "idle_ms", "verdict", "severity",
            "explained_by"]
    found = spark.read.parquet(os.path.join(out, "anomalies")).where(
        F.col("severity").isin(*FINDING) & F.col("idle_ms").isNotNull()).select(*cols).limit(MAX_IDLE // 2)
    longest = v.where(F.col("idle_ms").isNotNull()).select(*cols).orderBy(F.col("idle_ms").desc()).limit(MAX_IDLE // 2)
    rows = found.union(longest).distinct().orderBy("topic", "partition", "offset").collect()
    return [r.asDict() for r in rows]


def _transactions(spark, out: str, summary: dict) -> dict:
    from pyspark.sql import functions as F

    t = spark.read.parquet(os.path.join(out, "transactions"))
    order = F.when(F.col("status") == "HANGING", 0).when(F.col("status") == "OPEN", 1).when(
        F.col("status") == "ABORTED", 2).otherwise(3)
    rows = t.orderBy(order, "topic", "partition", "first_offset").limit(MAX_TRANSACTIONS).select(
        "topic", "partition", "producer_id", "producer_epoch", "first_offset", "end_offset", "status", "last_timestamp")
    return {"counts": summary["transactions"], "rows": [r.asDict() for r in rows.collect()],
            "rows_total": sum(summary["transactions"].values())}


def _record_duplicates(spark, out: str, summary: dict) -> dict | None:
    """The first copies in offset order, each with its key decoded for reading (the dedup key is hex)."""
    path = os.path.join(out, "record_duplicates")
    if not os.path.isdir(path):
        return None
    rows = spark.read.parquet(path).orderBy("topic", "partition", "offset").limit(MAX_DUPLICATES).collect()
    return {"dedup_key": summary["configuration"].get("dedup_key"), "rows_total": summary.get("record_duplicates"),
            "rows": [r.asDict() | {"key_text": key_text(r["dedup_key"])} for r in rows]}


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


def _validation(out: str) -> dict | None:
    from expectations.validate import read_results

    try:
        doc = read_results(out)
    except (OSError, ValueError):
        return None
    checks = []
    for suite, body in doc.get("suites", {}).items():
        for c in body.get("checks", []):
            status = "pass" if c["success"] else ("warn" if c.get("severity") == "warning" else "fail")
            checks.append({"suite": suite, "check": c["id"], "description": c["description"], "success": c["success"],
                           "unexpected": c["unexpected_count"], "status": status})
    return {"success": doc.get("success"), "checks": checks}


def _history(spark, path: str) -> list[dict]:
    from pyspark.sql import functions as F

    h = read_history(spark, path)
    if h is None:
        return []
    runs = h.groupBy("run_time_ms", "run_id").agg(
        F.sum("batches").alias("batches"), F.sum("records").alias("records"),
        F.sum("violations").alias("violation"), F.sum("explained").alias("explained"),
        F.sum("duplicate").alias("duplicates"), F.sum("sequence_gap").alias("gaps"),
        F.sum("hanging_transactions").alias("hanging"),
    ).orderBy("run_time_ms", "run_id")
    return [r.asDict() for r in runs.collect()]


def write(spark, out: str, history: str | None = None) -> str:
    """Write ``OUT/report/index.html``; ``history`` defaults to the folder beside OUT."""
    data = report_data(spark, out, history if history is not None else default_history_path(out))
    return write_report(data, os.path.join(out, "report", "index.html"))
