"""``segaudit audit OUT``: replay and classify an export; publish the audit tables beside it.

Tables: ``batch_verdicts`` (partitioned by topic), ``anomalies`` (severity not ``ok``),
``producer_sessions``, ``transactions``, ``snapshot_checks``, ``record_duplicates`` (when the
export has records), ``producer_state`` and ``partition_state`` (what the audit leaves for the next,
:mod:`analytics.audit.state`) and ``summary.json``, each conformed to its schema in
:mod:`analytics.contract.schemas` at the write. Published as one stage
(:mod:`analytics.publish`): a failed audit leaves the previous one.

An incremental audit continues the audit already in OUT (:mod:`analytics.audit.increment`), when there is
one made with the same configuration; its tables are those a full audit writes.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass

from analytics import reuse
from analytics.audit import tables
from analytics.audit.config import AuditConfig
from analytics.audit.settings import resolved
from analytics.contract import (
    AUDIT,
    DUP_DUPLICATE,
    DUPLICATE_KINDS,
    EXPORT,
    SEV_OK,
    SEVERITIES,
    SNAPSHOT_STATUSES,
    SUMMARY,
    TXN_STATUSES,
    VERDICTS,
)
from analytics.publish import publication, published, read_manifest
from analytics.spark.columns import conform, count_of, observed
from analytics.spark.session import default_parallelism, settings, single_plan_conf
from analytics.spark.tables import read_parquet
from analytics.tuning import FEW_BATCHES

# Columns of batch_verdicts with (nearly) one value per row: Parquet would build a dictionary for
# each row group and drop it when it overflows; they are written plain from the start.
UNIQUE_COLUMNS = ("file_position", "base_offset", "last_offset", "base_timestamp", "max_timestamp", "crc",
                  "base_sequence", "last_sequence", "expected_sequence", "prev_base_offset",
                  "state_last_sequence", "state_last_offset")


@dataclass(frozen=True)
class AuditResult:
    out: str
    run_id: str
    verdicts: dict[str, int]
    severities: dict[str, int]
    transactions: dict[str, int]
    record_duplicates: int | None
    snapshot_checks: dict[str, int]
    seconds: float
    finished_at_ms: int


def audit(spark, out: str, config: AuditConfig, *, continue_from: str | None = None,
          progress=None) -> AuditResult:
    """Replay and classify the export under OUT and publish the audit tables. ``continue_from``: the
    OUT holding the audit to continue (an incremental audit; OUT itself, or the published OUT of a
    run staged elsewhere)."""
    from pyspark.sql import functions as F

    from analytics.audit.increment import increment, read_since
    from analytics.audit.replicas import held_in_several, replica_divergence
    from analytics.audit.rules import replay
    from analytics.audit.state import merged
    from analytics.spark.concurrent import concurrently
    from analytics.spark.tables import read_table

    started = time.monotonic()
    store = published(out)
    export_manifest = read_manifest(out, EXPORT)
    config, provenance = resolved(store, config)  # the data dir's and server.properties' settings
    batches = read_parquet(spark, store.path("batches"))
    log_starts = read_parquet(spark, store.path("log_start_offsets"))
    previous = None if continue_from is None else _previous(spark, continue_from, config,
                                                             progress or (lambda _msg: None))
    with publication(out, AUDIT, built_from={EXPORT: export_manifest["run_id"]}) as run, ExitStack() as quick:
        def write(name: str, df):
            """Write ``name``; the schema it was written with."""
            conformed = conform(df, name)
            conformed.write.parquet(run.path(name))
            return conformed.schema

        def write_counted(name: str, df, counts: dict) -> dict:
            """Write ``name``; ``counts`` (name -> aggregate Column) of its rows, taken by the write."""
            watched, result = observed(conform(df, name), counts)
            watched.write.parquet(run.path(name))
            return result()

        held: list = []  # what the replay persisted for its result, released once it is written
        records = read_parquet(spark, store.path("records")) if store.is_dir("records") else None
        linked = False
        if previous is None:
            replayed = replay(batches, config, log_starts, held)
            verdicts, producers, partitions = replayed.verdicts, replayed.producer_state, replayed.partition_state
            files = replayed.file_state
            continued = since = None
        else:
            since = read_since(spark, store.path("batches"), batches.schema, export_manifest.get("segment_files") or {},
                               export_manifest["run_id"], previous.file_state)
            if since is not None and since.batches <= FEW_BATCHES:
                quick.enter_context(settings(spark, single_plan_conf(default_parallelism(spark))))
            step = increment(batches, log_starts, previous, since)
            # every audited history continues: its verdict files are kept as they are (hard links)
            linked = step.every and reuse.can_link(continue_from)
            if (not linked or step.prior.look_back  # the earlier verdicts are read again
                    or (records is not None and reuse.parquet_rows(store.path("records")) > FEW_BATCHES)):
                quick.close()  # the whole log is read: Spark's own planning
            replayed = replay(step.batches, config, log_starts, held, step.prior)
            producers = merged(step.prior.producer_state, replayed.producer_state, "producer_state")
            partitions = merged(step.prior.partition_state, replayed.partition_state, "partition_state")
            files = (replayed.file_state if step.file_state is None
                     else merged(step.file_state, replayed.file_state, "file_state"))
            continued = step.continuing
            verdicts = replayed.verdicts if linked else replayed.verdicts.unionByName(
                step.prior.earlier.select(*replayed.verdicts.columns))

        new_files: list[str] = []  # linked: the Parquet files of the new verdict rows

        def write_verdicts():
            """The verdicts as written (held when small), and the counts of the rows written now."""
            path = run.path("batch_verdicts")
            conformed = conform(verdicts, "batch_verdicts")
            watched, counted = observed(conformed, _verdict_counts())
            plain_columns(watched.write, UNIQUE_COLUMNS).partitionBy("topic").parquet(path)
            if linked:  # the new rows (perhaps none) beside the previous files
                new_files.extend(reuse.parquet_files(path))
                reuse.link_tree(published(continue_from).path("batch_verdicts"), path)
            return read_table(spark, path, run.store.size(f"{run.folder}/batch_verdicts"), conformed.schema), counted()

        def write_beside(name: str, df):
            """``name``'s new rows, then the previous audit's files of it (a linked incremental audit)."""
            conform(df, name).write.parquet(run.path(name))
            reuse.link_tree(published(continue_from).path(name), run.path(name))

        replay_tables = {
            "batch_verdicts": write_verdicts,
            "producer_state": lambda: write("producer_state", producers),
            "partition_state": lambda: write("partition_state", partitions),
            "file_state": lambda: write("file_state", _read_by(spark, files, export_manifest)),
        }
        if records is not None:  # record duplicates read records only: they run beside the replay
            replay_tables["record_duplicates"] = lambda: write_counted(
                "record_duplicates", tables.record_duplicates(records, config.dedup_key, batches), count_of("kind", DUPLICATE_KINDS))
        try:
            tables_written = concurrently(spark, replay_tables)
        finally:
            for frame in held:
                frame.unpersist()
        (written, now), duplicate_kinds = tables_written["batch_verdicts"], tables_written.get("record_duplicates")
        duplicates = None if duplicate_kinds is None else duplicate_kinds.get(DUP_DUPLICATE, 0)  # copies delivered twice
        # the counts of the verdict rows written now: every verdict, unless an incremental audit linked
        # the previous audit's files beside them
        counted_now = ({v: now[f"verdict:{v}"] for v in VERDICTS}, {s: now[f"severity:{s}"] for s in SEVERITIES})
        # Linked, with the previous audit's per-file rows: the derived tables that compose (anomalies,
        # the per-file rows, the transactions, the counts, the log's newest timestamp) take the previous
        # audit's and add the new rows' instead of reading every verdict again. The others read them all.
        added = None
        if linked and previous.producer_files is not None and "last_state" in previous.producer_files.columns:
            added = _rows_of(spark, run.path("batch_verdicts"), new_files, written.schema)
        live = export_manifest.get("cluster") or {}  # an export of a live cluster: its capture
        export_time, export_time_source = config.export_time_ms, "configuration"
        if export_time is None and live.get("captured_at_ms"):
            export_time, export_time_source = live["captured_at_ms"], "capture"
        if export_time is None:
            export_time_source = "log"  # the newest batch's timestamp
            if not linked:
                export_time = now["newest"] or 0
            elif added is not None and previous.summary.get("export_time_source") == "log":
                export_time = max(previous.summary["configuration"]["export_time_ms"], now["newest"] or 0)
            else:
                export_time = written.agg(F.max("max_timestamp")).first()[0] or 0
        coordinator = (read_parquet(spark, store.path("coordinator_transactions"))
                       if live.get("coordinator_transactions") == "complete" else None)
        if added is None:  # small, read twice: one pass over the verdicts
            per_file = tables.per_file(written).localCheckpoint()
        else:
            per_file = tables.per_file_merged(previous.producer_files, tables.per_file(added)).localCheckpoint()
        unusual = F.col("severity") != "ok"
        snapshots = read_parquet(spark, store.path("producer_snapshots"))

        def replicas() -> tuple[int, dict]:
            """The topic-partitions held in several log dirs, and the divergent ranges by severity."""
            replicated, divergent = replica_divergence(
                spark, batches, read_parquet(spark, store.path("segments")),
                read_parquet(spark, store.path("leader_epochs")), log_starts, config)
            return replicated, write_counted("replica_divergence", divergent, count_of("severity", SEVERITIES))

        if held_in_several(export_manifest.get("segment_files") or {}):
            quick.close()  # the replicas' batches are compared: Spark's own planning
        derived = concurrently(spark, {
            "anomalies": lambda: (write("anomalies", written.where(unusual)) if added is None
                                  else write_beside("anomalies", added.where(unusual))),
            "producer_files": lambda: write("producer_files", per_file),
            "producer_sessions": lambda: write("producer_sessions", tables.producer_sessions(per_file)),
            "transactions": lambda: write_counted("transactions", (
                tables.transactions(written, config, export_time, coordinator) if added is None
                else tables.transactions_merged(read_parquet(spark, published(continue_from).path("transactions")),
                                                added, config, export_time, coordinator)), count_of("status", TXN_STATUSES)),
            "snapshot_checks": lambda: write_counted("snapshot_checks", tables.snapshot_checks(
                written, per_file, snapshots, log_starts), count_of("status", SNAPSHOT_STATUSES)),
            "replica_divergence": replicas,
        })
        replicated, divergence = derived["replica_divergence"]
        if not linked:
            counts, severities = counted_now
        elif added is not None:
            counts, severities = _plus((previous.summary["verdicts"], previous.summary["severities"]), counted_now)
        else:  # linked beside an audit that kept no per-file state: counted from every verdict
            counts, severities = _verdict_and_severity_counts(written)
        txns, checks = derived["transactions"], derived["snapshot_checks"]
        seconds = time.monotonic() - started
        summary = {
            "run_id": run.run_id,
            "export_run_id": export_manifest["run_id"],
            "inputs": export_manifest["inputs"],
            "verdicts": {v: counts.get(v, 0) for v in VERDICTS},
            "severities": {s: severities.get(s, 0) for s in SEVERITIES},
            "transactions": {s: txns.get(s, 0) for s in TXN_STATUSES},
            "record_duplicates": duplicates,
            "record_duplicate_kinds": None if duplicate_kinds is None else {k: duplicate_kinds.get(k, 0) for k in DUPLICATE_KINDS},
            "snapshot_checks": {s: checks.get(s, 0) for s in SNAPSHOT_STATUSES},
            # topic-partitions exported from several log dirs, and their divergent offset ranges by severity
            "replicated_partitions": replicated,
            "replica_divergence": {s: divergence.get(s, 0) for s in SEVERITIES if s != SEV_OK},
            # the values used: the profile as given, the expiration its default when not configured
            "configuration": _configuration(config) | {"export_time_ms": export_time,
                                                       "producer_id_expiration_ms": config.expiration_ms},
            # each broker and topic setting's value and where it came from (analytics.audit.settings)
            "settings": provenance,
            # where export_time_ms came from: the configuration, a live cluster's capture, or the log
            "export_time_source": export_time_source,
            "seconds": round(seconds, 3),
            # an incremental audit: the audit it continued and the histories that continued from it
            "incremental": None if previous is None else {
                "continued_audit": previous.run_id, "continued_histories": continued,
                # the segment files read into Parquet since the previous audit: the only ones scanned
                # (None: every file was), besides the whole of a history that did not continue
                "files_read": None if since is None else since.files},
            "finished_at_ms": int(time.time() * 1000),
        }
        run.store.write_text(f"{run.folder}/{SUMMARY}", json.dumps(summary, indent=2, sort_keys=True) + "\n")
        run.publish({"summary": SUMMARY})
    return AuditResult(out, run.run_id, summary["verdicts"], summary["severities"], summary["transactions"],
                       duplicates, summary["snapshot_checks"], seconds, summary["finished_at_ms"])


def _previous(spark, out: str, config: AuditConfig, say):
    """The audit in OUT that an incremental audit continues (:class:`~analytics.audit.increment.Previous`),
    or None when there is none, or it lacks the state tables, or its configuration differs (then the
    audit is a full one, and ``say`` says why)."""
    from analytics.audit.increment import Previous
    from analytics.errors import StageMissing

    store = published(out)
    try:
        manifest = read_manifest(out, AUDIT)
        summary = json.loads(store.read_text(SUMMARY))
    except (StageMissing, FileNotFoundError, ValueError):
        say("no complete audit in OUT to continue: a full audit")
        return None
    if not all(store.is_dir(t) for t in ("batch_verdicts", "producer_state", "partition_state")):
        say("the audit in OUT has no producer state: a full audit")
        return None
    before = dict(summary.get("configuration") or {})
    now = _configuration(config) | {"producer_id_expiration_ms": config.expiration_ms}
    if _verdict_settings(before) != _verdict_settings(now):
        say("the audit in OUT was made with another configuration: a full audit")
        return None
    local = reuse.can_link(out)  # footers read with pyarrow: a local OUT (an incremental audit's)
    return Previous(manifest["run_id"], read_parquet(spark, store.path("batch_verdicts")),
                    read_parquet(spark, store.path("producer_state")), read_parquet(spark, store.path("partition_state")),
                    summary, *(read_parquet(spark, store.path(t)) if store.is_dir(t) else None
                               for t in ("producer_files", "file_state")),
                    *((reuse.parquet_rows(store.path(t)) if local else None)
                      for t in ("partition_state", "producer_state")))


def _verdict_settings(configuration: dict) -> dict:
    """The configuration a verdict depends on: not the export time (transactions only) nor the ranges."""
    return {k: v for k, v in configuration.items() if k not in ("export_time_ms", "range_batches")}


def _read_by(spark, files, export_manifest: dict):
    """``file_state`` rows with the export run that read each file (the export's own run for a file
    its manifest does not fingerprint: other inputs than segment files)."""
    from pyspark.sql import functions as F

    runs = [(path, entry.get("read_by", export_manifest["run_id"]))
            for path, entry in (export_manifest.get("segment_files") or {}).items()]
    by = spark.createDataFrame(runs, "file string, read_by string")
    return files.join(F.broadcast(by), on="file", how="left").withColumn(
        "read_by", F.coalesce(F.col("read_by"), F.lit(export_manifest["run_id"])))


def _rows_of(spark, folder: str, files: list[str], schema):
    """The rows of some of a partitioned table's Parquet files (none: no rows), with its ``schema``."""
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("basePath", folder).parquet(*files)


def _plus(before: tuple[dict, dict], after: tuple[dict, dict]) -> tuple[dict, dict]:
    """Counts by verdict and by severity of two parts of the verdicts."""
    return tuple({k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}} for a, b in zip(before, after))


def plain_columns(writer, columns):
    """``writer`` with Parquet dictionary encoding off for ``columns``."""
    for c in columns:
        writer = writer.option(f"parquet.enable.dictionary#{c}", "false")
    return writer


def _verdict_counts() -> dict:
    """What the write of ``batch_verdicts`` counts of its rows: each verdict, each severity, and the
    newest batch's ``max_timestamp`` (the export time when nothing else gives it)."""
    from pyspark.sql import functions as F

    return {**{f"verdict:{k}": c for k, c in count_of("verdict", VERDICTS).items()},
            **{f"severity:{k}": c for k, c in count_of("severity", SEVERITIES).items()},
            "newest": F.max("max_timestamp")}


def _verdict_and_severity_counts(verdicts) -> tuple[dict, dict]:
    """Batches per verdict and per severity, from one aggregate (verdicts x severities rows)."""
    by_verdict: dict = {}
    by_severity: dict = {}
    for r in verdicts.groupBy("verdict", "severity").count().collect():
        by_verdict[r["verdict"]] = by_verdict.get(r["verdict"], 0) + r["count"]
        by_severity[r["severity"]] = by_severity.get(r["severity"], 0) + r["count"]
    return by_verdict, by_severity


def _configuration(config: AuditConfig) -> dict:
    """The settings of ``config`` as ``summary.json`` records them (not who gave them: ``settings``)."""
    return _jsonable({k: v for k, v in asdict(config).items() if k != "given"})


def _jsonable(value):
    if isinstance(value, dict):
        return {(":".join(map(str, k)) if isinstance(k, tuple) else k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def read_audit(out: str) -> dict:
    """The summary of the complete audit under ``out``; :class:`~analytics.errors.StageMissing` when there is none."""
    read_manifest(out, AUDIT)
    return json.loads(published(out).read_text(SUMMARY))
