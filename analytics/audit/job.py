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
from dataclasses import dataclass, replace

from analytics import reuse
from analytics.audit import counting, tables
from analytics.audit.config import AuditConfig
from analytics.audit.audit_plan import AuditPlan, audit_plan, configuration
from analytics.contract import (AUDIT, DUP_DUPLICATE, DUPLICATE_KINDS, EXPORT, OUT_SCHEMAS, SEV_OK, SEVERITIES,
                                SNAPSHOT_STATUSES, SUMMARY, TXN_STATUSES, VERDICTS)
from analytics.kafka import sinks
from analytics.publish import publication, published, read_manifest
from analytics.spark import javacode
from analytics.spark.columns import conform, count_of, observed, with_apart
from analytics.spark.concurrent import once
from analytics.spark.session import settings
from analytics.spark.tables import read_parquet, read_table
from analytics.tuning import VERDICT_ROW_GROUP_BYTES

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


def audit(spark, out: str, config: AuditConfig, *, incremental: bool = False,
          progress=None, plan: AuditPlan | None = None) -> AuditResult:
    """Replay and classify the export under OUT and publish the audit tables. ``incremental``:
    continue the audit already there (:func:`analytics.audit.audit_plan.audit_plan`, which it and
    ``progress`` are given to); ``plan``: the audit's plan when the caller made it already."""
    started = time.monotonic()
    plan = plan or audit_plan(spark, out, config, incremental=incremental, progress=progress)
    try:
        return _audited(spark, out, plan, started)
    except Exception as e:
        failed = javacode.failure(e) if plan.window_function else None
        if failed is None:
            raise
    # segaudit's Java failed on this Spark: the run it began is gone, and the audit runs again on
    # Spark's window steps, which give the same verdicts
    (progress or (lambda _line: None))(f"segaudit's window function failed on this Spark ({failed}): "
                                       "replaying with Spark's window steps")
    return _audited(spark, out, replace(plan, window_function=False), started)


def _audited(spark, out: str, plan: AuditPlan, started: float) -> AuditResult:
    """:func:`audit` of ``plan``: one publication of the audit stage."""
    with publication(out, AUDIT, built_from={EXPORT: plan.export_manifest["run_id"]}) as run, ExitStack() as tuned:
        if plan.replay_conf:  # the plan's session settings, kept to the end unless the derived tables differ
            tuned.enter_context(settings(spark, plan.replay_conf))
        target = _Target(spark, run, plan.continued_out)
        replayed = _replay(plan)
        written = _write_replayed(spark, target, plan, replayed, _beside_replay(spark, target, plan))
        added = _added(spark, target, plan, written)
        export_time = _export_time(plan, written, added)
        per_file = once(lambda: _per_file(plan, written, added))  # taken by the first derived table that reads it
        if plan.derived_conf != plan.replay_conf:  # the derived tables' own settings, if any
            tuned.close()
            if plan.derived_conf:
                tuned.enter_context(settings(spark, plan.derived_conf))
        derived = _derive(spark, target, plan, written, added, per_file, export_time[0]) | written.beside
        counts = _counts(plan, written, added)
        seconds = time.monotonic() - started
        summary = _summary(run.run_id, plan, replayed, written, derived, counts, export_time, seconds)
        run.store.write_text(f"{run.folder}/{SUMMARY}", json.dumps(summary, indent=2, sort_keys=True) + "\n")
        for name in (n for n in run.written() if n in OUT_SCHEMAS):  # no rows: still the contract's columns
            sinks.fill_empty(run.path(name), OUT_SCHEMAS[name])
        run.publish({"summary": SUMMARY})
    return AuditResult(out, run.run_id, summary["verdicts"], summary["severities"], summary["transactions"],
                       summary["record_duplicates"], summary["snapshot_checks"], seconds, summary["finished_at_ms"])


@dataclass(frozen=True)
class _Replayed:
    """The replay's tables: every verdict to write (``verdicts``), the state it leaves, what it
    persisted (``held``, released once written) and the histories that continued (incremental)."""

    verdicts: object
    producers: object
    partitions: object
    files: object
    held: list
    continued: object = None


@dataclass(frozen=True)
class _Written:
    """``batch_verdicts`` as written (``table``), the counts of the rows written now (``now``), the
    kinds of record duplicates (None: no records), linked, the Parquet files of the new rows, and
    what ran beside the replay (:func:`_beside_replay`) by name."""

    table: object
    now: dict
    duplicate_kinds: dict | None
    new_files: list
    beside: dict


class _Target:
    """The run folder the audit writes its tables to, each conformed to its schema."""

    def __init__(self, spark, run, continued_out: str | None):
        self.spark, self.run, self.continued_out = spark, run, continued_out

    def write(self, name: str, df):
        """Write ``name``; the schema it was written with."""
        conformed = conform(df, name)
        conformed.write.parquet(self.run.path(name))
        return conformed.schema

    def write_counted(self, name: str, df, counts: dict) -> dict:
        """Write ``name``; ``counts`` (name -> aggregate Column) of its rows, taken by the write."""
        watched, result = observed(conform(df, name), counts)
        watched.write.parquet(self.run.path(name))
        return result()

    def write_beside(self, name: str, df):
        """``name``'s new rows, then the previous audit's files of it (a linked incremental audit)."""
        conform(df, name).write.parquet(self.run.path(name))
        reuse.link_tree(published(self.continued_out).path(name), self.run.path(name))

    def verdicts(self, verdicts):
        """The verdicts to write, conformed."""
        return conform(verdicts, "batch_verdicts")

    def write_verdicts(self, conformed, linked: bool, new_files: list):
        """The verdicts (:meth:`verdicts`) as written, and the counts of the rows written now (the
        write's own); ``linked``: the new rows beside the previous audit's files, whose names go to
        ``new_files``."""
        path = self.run.path("batch_verdicts")
        watched, counted = observed(conformed, counting.verdict_counts())
        writer = watched.write.option("parquet.block.size", VERDICT_ROW_GROUP_BYTES)
        plain_columns(writer, UNIQUE_COLUMNS).partitionBy("topic").parquet(path)
        if linked:  # the new rows (perhaps none) beside the previous files
            new_files.extend(reuse.parquet_files(path))
            reuse.link_tree(published(self.continued_out).path("batch_verdicts"), path)
        table = read_table(self.spark, path, self.run.store.size(f"{self.run.folder}/batch_verdicts"),
                           conformed.schema)
        return table, counted()


def _replay(plan: AuditPlan) -> _Replayed:
    """The replay of every batch (a full audit) or of what is left to replay, merged with the state
    of the audit it continues."""
    from analytics.audit.rules import replay
    from analytics.audit.sequence_reuse import records_differ
    from analytics.audit.state import merged

    held: list = []  # what the replay persisted for its result, released once it is written
    reused = records_differ(plan.batches, plan.records, None if plan.step is None else plan.step.batches)
    if plan.step is None:
        done = replay(plan.batches, plan.config, plan.log_starts, held, unread=plan.unread,
                      window_function=plan.window_function, reused=reused)
        return _Replayed(done.verdicts, done.producer_state, done.partition_state, done.file_state, held)
    step = plan.step
    done = replay(step.batches, plan.config, plan.log_starts, held, step.prior, unread=plan.unread,
                  window_function=plan.window_function, reused=reused)
    files = (done.file_state if step.file_state is None
             else merged(step.file_state, done.file_state, "file_state"))
    verdicts = done.verdicts if plan.linked else done.verdicts.unionByName(
        step.prior.earlier.select(*done.verdicts.columns))
    return _Replayed(verdicts, merged(step.prior.producer_state, done.producer_state, "producer_state"),
                     merged(step.prior.partition_state, done.partition_state, "partition_state"), files, held,
                     step.continuing)


def _beside_replay(spark, target: _Target, plan: AuditPlan) -> dict:
    """The work of the derived tables that reads the export alone, run beside the verdicts' write
    (whose last task leaves a core idle) instead of after it: the broker's snapshot points, the
    transactions as found (``transactions_found``: (the earlier audit's transactions continued,
    the found ones held), judged once the export time is known), and the replicas' comparison and
    its table (``replica_divergence``), unless the plan gives the derived tables settings of their
    own (``AuditPlan.replicas_with_replay``)."""
    from analytics.audit.snapshots import snapshot_points

    store = published(plan.out)
    snapshots = "producer_snapshots"  # small: held once, its joins read no file again
    work = {"snapshots": lambda: snapshot_points(read_table(spark, store.path(snapshots), store.size(snapshots)),
                                                 plan.topic_ids),
            "transactions_found": lambda: _transactions_found(spark, plan)}
    if plan.replicas_with_replay:
        work["replica_divergence"] = lambda: _replicas(spark, target, plan)
    return work


def _transactions_found(spark, plan: AuditPlan) -> tuple:
    """The transactions of the batches whose verdicts the audit writes now, read from the export (the
    same columns): every batch, or a linked audit's new ones beside the earlier audit's transactions
    (returned first, None for none); held, before their status."""
    from analytics.audit.transactions import transactions_found

    live = plan.export_manifest.get("cluster") or {}
    coordinator = (read_parquet(spark, published(plan.out).path("coordinator_transactions"))
                   if live.get("coordinator_transactions") == "complete" else None)
    if not plan.adds:
        return None, transactions_found(plan.batches, coordinator).localCheckpoint()
    earlier = read_parquet(spark, published(plan.continued_out).path("transactions"))
    return earlier, transactions_found(plan.step.batches, coordinator, earlier).localCheckpoint()


def _replicas(spark, target: _Target, plan: AuditPlan) -> tuple[int, dict]:
    """The topic-partitions held in several log dirs, and the divergent ranges by severity (written)."""
    from analytics.audit.replicas import replica_divergence

    store = published(plan.out)
    replicated, divergent = replica_divergence(
        spark, plan.batches, read_parquet(spark, store.path("segments")),
        read_parquet(spark, store.path("leader_epochs")), plan.log_starts, plan.config, plan.topic_ids)
    return replicated, target.write_counted("replica_divergence", divergent, count_of("severity", SEVERITIES))


def _write_replayed(spark, target: _Target, plan: AuditPlan, replayed: _Replayed, beside: dict) -> _Written:
    """Write the replay's tables: the verdicts at once with the tables that do not read the replayed
    rows (and the record duplicates, which read records only), and ``producer_state``: beside the
    verdicts when the replay holds nothing (segaudit's window function: the state from a replay of
    the narrow columns of its own), after them when their write holds the rows. Written beside a
    held replay, its tasks took cores
    only to wait for held blocks the verdicts' tasks were still computing (8 task seconds of a 4M
    audit on 2 cores), and the join back's scan queued behind them: 2 to 3 s of a 30 to 60 s audit
    (docs/benchmarks.md). ``beside``: more work (name -> callable) run with the writes, its results
    ``_Written.beside``."""
    from analytics.spark.concurrent import concurrently

    new_files: list[str] = []
    verdicts = target.verdicts(replayed.verdicts)
    writes = {
        "batch_verdicts": lambda: target.write_verdicts(verdicts, plan.linked, new_files),
        "partition_state": lambda: target.write("partition_state", replayed.partitions),
        "file_state": lambda: target.write("file_state", _read_by(spark, replayed.files, plan.export_manifest)),
    }
    if plan.records is not None:  # record duplicates read records only: they run beside the replay
        writes["record_duplicates"] = lambda: target.write_counted(
            "record_duplicates", tables.record_duplicates(plan.records, plan.config.dedup_key, plan.batches),
            count_of("kind", DUPLICATE_KINDS))
    if not replayed.held:
        writes["producer_state"] = lambda: target.write("producer_state", replayed.producers)
    try:
        done = concurrently(spark, writes | beside)
        if replayed.held:
            target.write("producer_state", replayed.producers)
    finally:
        for frame in replayed.held:
            frame.unpersist()
    table, now = done["batch_verdicts"]
    table = with_apart(table, plan.kept_apart)
    return _Written(table, now, done.get("record_duplicates"), new_files, {name: done[name] for name in beside})


def _added(spark, target: _Target, plan: AuditPlan, written: _Written):
    """Linked, with the previous audit's per-file rows (``AuditPlan.adds``): the new verdict rows,
    which the derived tables that compose (anomalies, the per-file rows, the counts, the log's
    newest timestamp) add to the previous audit's instead of reading every verdict again. Else None."""
    if plan.adds:
        return _rows_of(spark, target.run.path("batch_verdicts"), written.new_files, written.table.schema)
    return None


def _export_time(plan: AuditPlan, written: _Written, added) -> tuple[int, str]:
    """The export time and where it came from: the configuration, a live cluster's capture, or the
    newest batch's timestamp."""
    from pyspark.sql import functions as F

    live = plan.export_manifest.get("cluster") or {}  # an export of a live cluster: its capture
    if plan.config.export_time_ms is not None:
        return plan.config.export_time_ms, "configuration"
    if live.get("captured_at_ms"):
        return live["captured_at_ms"], "capture"
    newest = written.now["newest"] or 0
    if not plan.linked:
        return newest, "log"
    if added is not None and plan.previous.summary.get("export_time_source") == "log":
        return max(plan.previous.summary["configuration"]["export_time_ms"], newest), "log"
    return written.table.agg(F.max("max_timestamp")).first()[0] or 0, "log"


def _per_file(plan: AuditPlan, written: _Written, added):
    """The verdicts per producer and file: small, read twice, so one pass over the verdicts."""
    now = tables.per_file(written.table if added is None else added)
    return (now if added is None else tables.per_file_merged(plan.previous.producer_files, now)).localCheckpoint()


def _derive(spark, target: _Target, plan: AuditPlan, written: _Written, added, per_file, export_time: int) -> dict:
    """Write the tables derived from the verdicts at once; the counts of those counted. ``per_file``:
    the per-file rows (:func:`_per_file`), taken by the first table that reads them while the
    tables that do not (anomalies, the transactions found beside the replay, judged) run beside
    it; the replicas' comparison here too when it did not run beside the replay."""
    from pyspark.sql import functions as F

    from analytics.audit.snapshots import snapshot_checks
    from analytics.audit.incarnations import ended
    from analytics.audit.transactions import transactions_judged
    from analytics.spark.concurrent import concurrently

    verdicts, unusual = written.table, F.col("severity") != "ok"
    earlier, found = written.beside["transactions_found"]
    transactions = transactions_judged(found, plan.config, export_time, earlier, ended(plan.identity))
    work = {
        "producer_files": lambda: target.write("producer_files", per_file()),
        "anomalies": lambda: (target.write("anomalies", verdicts.where(unusual)) if added is None
                              else target.write_beside("anomalies", added.where(unusual))),
        "transactions": lambda: target.write_counted("transactions", transactions, count_of("status", TXN_STATUSES)),
        "producer_sessions": lambda: target.write("producer_sessions", tables.producer_sessions(per_file())),
        "snapshot_checks": lambda: target.write_counted("snapshot_checks", snapshot_checks(
            verdicts, per_file(), written.beside["snapshots"], plan.log_starts), count_of("status", SNAPSHOT_STATUSES)),
    }
    if "replica_divergence" not in written.beside:  # compared under the derived tables' settings
        work["replica_divergence"] = lambda: _replicas(spark, target, plan)
    return concurrently(spark, work)


def _counts(plan: AuditPlan, written: _Written, added) -> tuple[dict, dict]:
    """Batches per verdict and per severity: those counted at the write, unless an incremental audit
    linked the previous audit's files beside them (then added to the previous audit's counts, or,
    beside an audit that kept no per-file state, counted from every verdict)."""
    now = written.now
    counted_now = ({v: now[f"verdict:{v}"] for v in VERDICTS}, {s: now[f"severity:{s}"] for s in SEVERITIES})
    if not plan.linked:
        return counted_now
    if added is not None:
        return counting.plus((plan.previous.summary["verdicts"], plan.previous.summary["severities"]), counted_now)
    return counting.verdict_and_severity_counts(written.table)


def _summary(run_id: str, plan: AuditPlan, replayed: _Replayed, written: _Written, derived: dict,
             counts: tuple[dict, dict], export_time: tuple[int, str], seconds: float) -> dict:
    """``summary.json``: the audit's counts, configuration and what it continued."""
    (verdicts, severities), kinds, manifest = counts, written.duplicate_kinds, plan.export_manifest
    replicated, divergence = derived["replica_divergence"]
    txns, checks = derived["transactions"], derived["snapshot_checks"]
    return {
        "run_id": run_id,
        "export_run_id": manifest["run_id"],
        "inputs": manifest["inputs"],
        "coverage": manifest.get("coverage"),  # the files read whole of those present, and why not the rest
        "verdicts": {v: verdicts.get(v, 0) for v in VERDICTS},
        "severities": {s: severities.get(s, 0) for s in SEVERITIES},
        "transactions": {s: txns.get(s, 0) for s in TXN_STATUSES},
        "record_duplicates": None if kinds is None else kinds.get(DUP_DUPLICATE, 0),  # copies delivered twice
        "record_duplicate_kinds": None if kinds is None else {k: kinds.get(k, 0) for k in DUPLICATE_KINDS},
        "snapshot_checks": {s: checks.get(s, 0) for s in SNAPSHOT_STATUSES},
        # topic-partitions exported from several log dirs, and their divergent offset ranges by severity
        "replicated_partitions": replicated,
        "replica_divergence": {s: divergence.get(s, 0) for s in SEVERITIES if s != SEV_OK},
        # the partition folders and those told apart by topic name alone (no topic id)
        "topic_identity": plan.identity,
        # the values used: the profile as given, the expiration its default when not configured
        "configuration": configuration(plan.config) | {"export_time_ms": export_time[0],
                                                        "producer_id_expiration_ms": plan.config.expiration_ms}
        | ({"range_batches": None} if plan.range_sized else {}),  # sized, not given: sized again next time
        "range_batches_used": plan.config.range_batches,
        # how the histories were replayed: segaudit's window function, or Spark's window steps (Spark
        # Connect, no jar in the session, or after the function failed; the same verdicts, slower)
        "replay": "window_function" if plan.window_function else "window_steps",
        "replay_note": None if plan.window_function else next(iter(javacode.why_not), None),
        # each broker and topic setting's value and where it came from (analytics.audit.settings)
        "settings": plan.provenance,
        # where export_time_ms came from: the configuration, a live cluster's capture, or the log
        "export_time_source": export_time[1],
        "seconds": round(seconds, 3),
        # an incremental audit: the audit it continued and the histories that continued from it
        "incremental": None if plan.previous is None else {
            "continued_audit": plan.previous.run_id, "continued_histories": replayed.continued,
            # the segment files read into Parquet since the previous audit: the only ones scanned
            # (None: every file was), besides the whole of a history that did not continue
            "files_read": None if plan.since is None else plan.since.files},
        "finished_at_ms": int(time.time() * 1000),
    }


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


def plain_columns(writer, columns):
    """``writer`` with Parquet dictionary encoding off for ``columns``."""
    for c in columns:
        writer = writer.option(f"parquet.enable.dictionary#{c}", "false")
    return writer


def read_audit(out: str) -> dict:
    """The summary of the complete audit under ``out``; :class:`~analytics.errors.StageMissing` when there is none."""
    read_manifest(out, AUDIT)
    return json.loads(published(out).read_text(SUMMARY))
