"""``segaudit audit OUT``: replay and classify an export; write the audit tables beside it.

Tables: ``batch_verdicts`` (partitioned by topic), ``anomalies`` (severity not ``ok``),
``producer_sessions``, ``transactions``, ``record_duplicates`` (when the export has records)
and ``summary.json``. They are staged and moved into
place like the export's (``OUT/_audit.json`` last), so a failed audit leaves the previous one.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from analytics.audit.config import AuditConfig
from analytics.export import ExportError, read_manifest

AUDIT_MANIFEST = "_audit.json"
AUDIT_TABLES = ("batch_verdicts", "anomalies", "producer_sessions", "transactions", "snapshot_checks")
VERDICTS = (
    "OK", "EPOCH_BUMP", "NON_IDEMPOTENT", "CONTROL_MARKER", "DUPLICATE", "SEQUENCE_GAP", "SEQUENCE_REGRESSION",
    "EPOCH_BUMP_NONZERO", "FENCED_ZOMBIE_WRITE", "FIRST_SEEN_NONZERO", "INVALID_TXN_STATE",
    "MARKER_EPOCH_REGRESSION", "COORDINATOR_EPOCH_REGRESSION", "CORRUPT",
)
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000  # ProducerStateManager.LATE_TRANSACTION_BUFFER_MS
# Columns of batch_verdicts with (nearly) one value per row: Parquet would build a dictionary for
# each row group and drop it when it overflows; they are written plain from the start.
UNIQUE_COLUMNS = ("file_position", "base_offset", "last_offset", "base_timestamp", "max_timestamp", "crc",
                  "base_sequence", "last_sequence", "expected_sequence", "prev_base_offset",
                  "state_last_sequence", "state_last_offset")


@dataclass(frozen=True)
class AuditResult:
    out: str
    verdicts: dict[str, int]
    severities: dict[str, int]
    transactions: dict[str, int]
    seconds: float


def audit(spark, out: str, config: AuditConfig, history: str | None = None,
          prometheus_file: str | None = None) -> AuditResult:
    """Replay and classify the export under OUT and write the audit tables.

    ``history``: a folder the run's counts per topic-partition are appended to
    (``analytics.report.history``); ``prometheus_file``: the same counts in the Prometheus text format.
    """
    from pyspark.sql import functions as F

    from analytics.audit.rules import classify

    started = time.monotonic()
    out = os.path.abspath(out)
    export_manifest = read_manifest(out)
    batches = spark.read.parquet(os.path.join(out, "batches"))
    log_starts = spark.read.parquet(os.path.join(out, "log_start_offsets"))
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
    staging = os.path.join(out, f".audit-staging-{run_id}")
    os.makedirs(staging)
    try:
        verdicts = classify(batches, config, log_starts)
        plain_columns(verdicts.write, UNIQUE_COLUMNS).partitionBy("topic").parquet(os.path.join(staging, "batch_verdicts"))
        written = spark.read.parquet(os.path.join(staging, "batch_verdicts"))
        written.where(F.col("severity") != "ok").write.parquet(os.path.join(staging, "anomalies"))
        export_time = config.export_time_ms
        if export_time is None:
            export_time = written.agg(F.max("max_timestamp")).first()[0] or 0
        per_file = _per_file(written).localCheckpoint()  # small, read twice: one pass over the verdicts
        _sessions(per_file).write.parquet(os.path.join(staging, "producer_sessions"))
        _transactions(written, config, export_time).write.parquet(os.path.join(staging, "transactions"))
        counts = {r["verdict"]: r["count"] for r in written.groupBy("verdict").count().collect()}
        severities = {r["severity"]: r["count"] for r in written.groupBy("severity").count().collect()}
        txns = {r["status"]: r["count"] for r in spark.read.parquet(os.path.join(staging, "transactions")).groupBy("status").count().collect()}
        snapshots_path = os.path.join(out, "producer_snapshots")
        _snapshot_checks(written, per_file, spark.read.parquet(snapshots_path)).write.parquet(
            os.path.join(staging, "snapshot_checks"))
        checks = {r["status"]: r["count"] for r in
                  spark.read.parquet(os.path.join(staging, "snapshot_checks")).groupBy("status").count().collect()}
        duplicates = None
        if os.path.isdir(os.path.join(out, "records")):
            records = spark.read.parquet(os.path.join(out, "records"))
            _record_duplicates(records, config.dedup_key).write.parquet(os.path.join(staging, "record_duplicates"))
            duplicates = spark.read.parquet(os.path.join(staging, "record_duplicates")).count()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    seconds = time.monotonic() - started
    summary = {
        "run_id": run_id,
        "export_run_id": export_manifest["run_id"],
        "inputs": export_manifest["inputs"],
        "verdicts": {v: counts.get(v, 0) for v in VERDICTS},
        "severities": {s: severities.get(s, 0) for s in ("ok", "info", "explained", "violation")},
        "transactions": {s: txns.get(s, 0) for s in ("COMMITTED", "ABORTED", "OPEN", "HANGING")},
        "record_duplicates": duplicates,
        "snapshot_checks": {s: checks.get(s, 0) for s in ("match", "mismatch", "not_in_log", "not_in_snapshot")},
        # the values used: the profile as given, the expiration its default when not configured
        "configuration": _jsonable(asdict(config)) | {"export_time_ms": export_time,
                                                      "producer_id_expiration_ms": config.expiration_ms},
        "seconds": round(seconds, 3),
        "finished_at_ms": int(time.time() * 1000),
    }
    _swap_audit(out, staging, summary)
    if history or prometheus_file:
        from analytics.report.history import append_history, partition_metrics, prometheus_text, write_prometheus

        metrics = partition_metrics(spark, out, run_id, summary["finished_at_ms"])
        if history:
            append_history(spark, metrics, history)
        if prometheus_file:
            rows = [r.asDict() for r in metrics.collect()]  # one row per topic-partition
            write_prometheus(prometheus_file, prometheus_text(rows, summary["finished_at_ms"]))
    return AuditResult(out, summary["verdicts"], summary["severities"], summary["transactions"], seconds)


def plain_columns(writer, columns):
    """``writer`` with Parquet dictionary encoding off for ``columns``."""
    for c in columns:
        writer = writer.option(f"parquet.enable.dictionary#{c}", "false")
    return writer


def _per_file(v):
    """One row per (topic, partition, producer_id, producer_epoch, file) of the idempotent batches:
    what ``producer_sessions`` sums per log dir, and the offsets of the batches that leave producer
    state (``first_state_offset``, ``last_state_offset``) that ``snapshot_checks`` searches. Small
    (segment files x producers x epochs): one pass over ``batch_verdicts`` serves both tables."""
    from pyspark.sql import functions as F

    data = v.where((F.col("producer_id") >= 0) & (F.col("magic") == 2))
    on_data = lambda c: F.when(~F.col("is_control"), F.col(c))  # noqa: E731
    on_state = F.when(F.col("state_last_sequence").isNotNull(), F.col("base_offset"))
    return data.groupBy("topic", "partition", "producer_id", "producer_epoch", "file").agg(
        F.min("base_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.min("max_timestamp").alias("first_timestamp"),
        F.max("max_timestamp").alias("last_timestamp"),
        F.count("*").alias("batches"),
        F.sum(F.when(~F.col("is_control"), F.col("record_count")).otherwise(0)).alias("records"),
        F.min_by(on_data("base_sequence"), on_data("base_offset")).alias("first_sequence"),
        F.min(on_data("base_offset")).alias("first_data_offset"),
        F.max_by(on_data("last_sequence"), on_data("base_offset")).alias("last_sequence"),
        F.max(on_data("base_offset")).alias("last_data_offset"),
        F.min(on_state).alias("first_state_offset"),
        F.max(on_state).alias("last_state_offset"),
        *[F.sum((F.col("verdict") == name).cast("long")).alias(name.lower()) for name in VERDICTS],
    )


def _sessions(per_file):
    """One row per (topic, partition, producer_id, producer_epoch), with a count per verdict: the
    per-file rows of ``_per_file`` (each file names its log dir, so no batch row is parsed for it)
    merged per log dir."""
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir

    return with_log_dir(per_file).groupBy("topic", "partition", "producer_id", "producer_epoch", "log_dir").agg(
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.min("first_timestamp").alias("first_timestamp"),
        F.max("last_timestamp").alias("last_timestamp"),
        F.sum("batches").alias("batches"),
        F.sum("records").alias("records"),
        F.min_by("first_sequence", "first_data_offset").alias("first_sequence"),
        F.max_by("last_sequence", "last_data_offset").alias("last_sequence"),
        *[F.sum(name.lower()).alias(name.lower()) for name in VERDICTS],
    )


def _snapshot_checks(v, per_file, snapshots):
    """Each broker snapshot entry against the replayed state of its producer just below the snapshot offset.

    The replayed state after a batch is on its row (``producer_epoch``, ``state_last_sequence``,
    ``state_last_offset``), so the state at a snapshot offset S is that of the producer's last batch
    below S. That batch is either the producer's last in its segment file, or in a file whose
    offsets straddle S: the per-file rows of ``_per_file`` (shared with ``producer_sessions``) find
    those, one filtered scan fetches them, and the search runs on these few rows (a binary search in
    the partition's sorted snapshot offsets, in native expressions): no sort of the log. The small
    remainder (producers x snapshots) carries each state forward to later snapshots. Producers the
    log shows before a snapshot but the snapshot lacks are ``not_in_snapshot`` (expired, or state
    lost); entries of producers with no batch below the snapshot are ``not_in_log`` (their batches
    are gone, or never were).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir

    history, keys = ["log_dir", "topic", "partition"], ["log_dir", "topic", "partition", "producer_id"]
    entries = with_log_dir(snapshots).select(
        *keys, "snapshot_offset", F.lit(True).alias("in_snapshot"), "producer_epoch", "last_sequence", "last_offset")
    points = entries.groupBy(*history).agg(F.array_sort(F.collect_set("snapshot_offset")).alias("points"))
    most = points.agg(F.max(F.size("points"))).first()[0] or 0  # one number: the most snapshots of a partition
    stateful = v.where(F.col("state_last_sequence").isNotNull())
    spans = with_log_dir(per_file.where(F.col("first_state_offset").isNotNull()).groupBy(
        "file", "topic", "partition", "producer_id").agg(
        F.min("first_state_offset").alias("first"), F.max("last_state_offset").alias("last"))).join(F.broadcast(points), history)
    spans = spans.select("file", *keys, "points", "last", F.exists(
        "points", lambda s: (F.col("first") < s) & (s <= F.col("last"))).alias("straddles")).localCheckpoint()  # small, read twice: computed once
    rows = stateful.select("file", "topic", "partition", "producer_id", "base_offset", "file_position", "producer_epoch",
                           "state_last_sequence", "state_last_offset").join(
        F.broadcast(spans.drop("topic", "partition")), ["file", "producer_id"])
    rows = rows.where(F.col("straddles") | (F.col("base_offset") == F.col("last")))
    # lo = how many snapshot offsets are <= base_offset; the batch's state counts from the next one on
    lo, hi = F.lit(0), F.size("points")
    for step in range(max(most, 1).bit_length()):
        rows = rows.select("*", lo.alias(f"lo{step}"), hi.alias(f"hi{step}"))
        lo_, hi_ = F.col(f"lo{step}"), F.col(f"hi{step}")
        mid = F.shiftright(lo_ + hi_, 1)
        right = (lo_ < hi_) & (F.try_element_at("points", mid + 1) <= F.col("base_offset"))
        lo = F.when(right, mid + 1).otherwise(lo_)
        hi = F.when((lo_ < hi_) & ~right, mid).otherwise(hi_)
    # past the last snapshot: a position after every probe (no filter here: Spark would push it down
    # through the search steps, inlining each into the next)
    rows = rows.withColumn("at", F.coalesce(F.try_element_at("points", lo + 1), F.lit(2**63 - 1)))
    last = rows.groupBy(*keys, "at").agg(F.max_by(
        F.struct(F.col("producer_epoch").alias("s_epoch"), F.col("state_last_sequence").alias("s_seq"),
                 F.col("state_last_offset").alias("s_offset")),
        F.struct("base_offset", "file_position")).alias("s"))
    state = last.select(*keys, "at", F.lit(0).alias("kind"), "s.s_epoch", "s.s_seq", "s.s_offset")
    producers = spans.select(*keys).distinct()
    absent = points.select(*history, F.explode("points").alias("snapshot_offset")).join(producers, history).join(
        entries, [*keys, "snapshot_offset"], "left_anti").select(
        *keys, "snapshot_offset", F.lit(False).alias("in_snapshot"), F.lit(None).cast("short").alias("producer_epoch"),
        F.lit(None).cast("int").alias("last_sequence"), F.lit(None).cast("long").alias("last_offset"))
    probes = entries.unionByName(absent).select(
        *keys, F.col("snapshot_offset").alias("at"), F.lit(1).alias("kind"), "snapshot_offset", "in_snapshot",
        "producer_epoch", "last_sequence", "last_offset")
    stream = state.unionByName(probes, allowMissingColumns=True)
    upto = Window.partitionBy(*keys).orderBy("at", "kind").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    replayed = stream.select(
        "*",
        F.last("s_epoch", True).over(upto).alias("replayed_epoch"),
        F.last("s_seq", True).over(upto).alias("replayed_last_sequence"),
        F.last("s_offset", True).over(upto).alias("replayed_last_offset"),
    ).where(F.col("kind") == 1)
    seen = F.col("replayed_epoch").isNotNull()
    same = ((F.col("producer_epoch") == F.col("replayed_epoch")) & (F.col("last_sequence") == F.col("replayed_last_sequence"))
            & (F.col("last_offset") == F.col("replayed_last_offset")))
    status = (F.when(F.col("in_snapshot") & ~seen, "not_in_log")
              .when(~F.col("in_snapshot") & seen, "not_in_snapshot")
              .when(F.col("in_snapshot") & same, "match")
              .when(F.col("in_snapshot"), "mismatch"))
    return replayed.withColumn("status", status).where(F.col("status").isNotNull()).select(
        "topic", "partition", "snapshot_offset", "producer_id", "status",
        F.col("producer_epoch").alias("expected_epoch"), "replayed_epoch",
        F.col("last_sequence").alias("expected_last_sequence"), "replayed_last_sequence",
        F.col("last_offset").alias("expected_last_offset"), "replayed_last_offset", "log_dir",
    )


def _record_duplicates(records, dedup_key: str):
    """Every repeated occurrence (not the first) of a dedup key within a partition's data records."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if dedup_key == "key_value":
        key = F.concat_ws(":", F.coalesce(F.hex("key"), F.lit("null")), F.coalesce(F.col("value_hash").cast("string"), F.lit("null")))
    else:
        name = dedup_key[len("header:"):]
        key = F.hex(F.element_at(F.filter("headers", lambda h: h["key"] == F.lit(name)), 1)["value"])
    data = records.where(~F.coalesce(F.col("is_control"), F.lit(False))).withColumn("dedup_key", key).where(F.col("dedup_key").isNotNull())
    w = Window.partitionBy("topic", "partition", "dedup_key").orderBy("offset")
    ranked = data.withColumn("rank", F.row_number().over(w)).withColumn(
        "first_offset", F.first("offset").over(w)).withColumn("first_producer_id", F.first("producer_id").over(w))
    return ranked.where(F.col("rank") > 1).select(
        "topic", "partition", "dedup_key", "offset", "first_offset", "producer_id", "first_producer_id")


def _transactions(v, config: AuditConfig, export_time: int):
    """A transaction opens at a producer's first transactional data batch and closes at its next marker."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir

    # only transactional data batches open transactions and only markers close them: the rest of the
    # log (most of it, for idempotent producers) never enters the window's sort
    replayed = with_log_dir(v).where(F.col("crc_valid") & (F.col("producer_id") >= 0) & (F.col("magic") == 2)
                                     & ~(F.col("is_control") & (F.col("record_count") == 0))
                                     & (F.col("is_transactional") | F.col("is_control")))
    w = Window.partitionBy("log_dir", "topic", "partition", "producer_id").orderBy("base_offset", "file_position")
    numbered = replayed.withColumn(
        "markers_before", F.coalesce(F.sum(F.col("is_control").cast("int")).over(w.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))
    )
    keys = ["log_dir", "topic", "partition", "producer_id", "markers_before"]
    opened = numbered.where(F.col("is_transactional") & ~F.col("is_control")).groupBy(*keys).agg(
        F.min("base_offset").alias("first_offset"),
        F.min_by("producer_epoch", "base_offset").alias("producer_epoch"),
        F.max("max_timestamp").alias("last_timestamp"),
    )
    markers = numbered.where("is_control").select(
        *keys, F.col("base_offset").alias("end_offset"), "control_type", "coordinator_epoch"
    )
    late = F.lit(export_time) - F.col("last_timestamp") > config.transaction_max_timeout_ms + LATE_TRANSACTION_BUFFER_MS
    return opened.join(markers, keys, "left").select(
        "topic", "partition", "producer_id", "producer_epoch", "first_offset", "end_offset",
        F.when(F.col("control_type") == "COMMIT", "COMMITTED")
        .when(F.col("control_type") == "ABORT", "ABORTED")
        .when(late, "HANGING")
        .otherwise("OPEN").alias("status"),
        "coordinator_epoch",
        "last_timestamp",
        "log_dir",
    )


def _jsonable(value):
    if isinstance(value, dict):
        return {(":".join(map(str, k)) if isinstance(k, tuple) else k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _swap_audit(out: str, staging: str, summary: dict) -> None:
    marker = os.path.join(out, AUDIT_MANIFEST)
    if os.path.exists(marker):
        os.remove(marker)
    for name in (*AUDIT_TABLES, "record_duplicates"):
        target = os.path.join(out, name)
        if os.path.isdir(target):
            shutil.rmtree(target)
        if os.path.isdir(os.path.join(staging, name)):
            os.replace(os.path.join(staging, name), target)
    Path(out, "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    tmp = marker + ".tmp"
    Path(tmp).write_text(json.dumps({"run_id": summary["run_id"]}) + "\n")
    os.replace(tmp, marker)
    shutil.rmtree(staging, ignore_errors=True)


def read_audit(out: str) -> dict:
    """The summary of a complete audit; raises ExportError when there is none."""
    if not os.path.isfile(os.path.join(out, AUDIT_MANIFEST)):
        raise ExportError(f"{out} holds no complete audit; run `segaudit audit {out}` first")
    return json.loads(Path(out, "summary.json").read_text())
