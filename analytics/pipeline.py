"""The pipeline as library functions: export, audit, validate, report, and ``run`` doing all four.

Each takes a Spark session and ``OUT``, publishes one stage (:mod:`analytics.publish`) and returns
a result object; the CLI (:mod:`analytics.cli`) parses options, calls these and renders the
results (the spark-submit jobs, ``jobs/``, run the CLI's commands), and a library caller calls
them directly::

    from analytics import pipeline
    result = pipeline.run(spark, ["/var/kafka-logs"], "/audits/broker-1", load_config("audit.toml"))
    sys.exit(result.exit_code)

A command that reads ``OUT`` first checks that the stages it reads are complete and belong
together (:func:`require`).
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from analytics.audit.config import AuditConfig
from analytics.audit.job import AuditResult
from analytics.contract import AUDIT, EXIT_OK, EXIT_VIOLATION, EXPORT, REPORT, REPORT_DIR, VALIDATION_DIR
from analytics.errors import OutOfStep, UsageError
from analytics.export import ExportResult
from analytics.export_plan import CLUSTER, ExportPlan, export_plan
from analytics.publish import AsOf, out_of_step, publication, published, read_manifest, unit
from expectations.suites import ValidationConfig
from expectations.validate import ValidationResult

Progress = Callable[[str], None]


def _quiet(_message: str) -> None:
    pass


def require(out: str, *stages: str, as_of: AsOf | None = None) -> dict:
    """The manifests of ``stages`` under ``out`` (at ``as_of``, or the latest), checked to be complete and
    built from each other.

    :class:`~analytics.errors.StageMissing` when one is missing, :class:`~analytics.errors.OutOfStep`
    when one was built from another run than the one there now (an audit of an older export).
    """
    manifests = {s: read_manifest(out, s, as_of) for s in stages}
    why = out_of_step(out, stages, as_of)
    if why:
        raise OutOfStep(why)
    return manifests


def export(spark, paths: list[str], out: str, *, records: bool = False, input_format: str = "segments",
           progress: Progress | None = None, incremental: bool = False, cluster: dict | None = None,
           plan: ExportPlan | None = None) -> ExportResult:
    """Kafka log dirs, partition folders or files (or ``kafka-dump-log.sh`` text) to the export tables;
    or a live cluster, ``paths = ["kafka://HOST:PORT[,...]"]``, read over the protocol with the
    keywords ``cluster`` of :func:`analytics.export.cluster.export_cluster` (topics, client config,
    ranges, rate).
    ``incremental``: read only the segment files new or changed since the export in ``out``.
    ``plan``: the export's plan when the caller made it (:func:`analytics.export_plan.export_plan`;
    ``incremental`` is then the plan's); else it is made here from ``spark``: a small local input of
    a local session (or none) is read in this process, as the CLI reads it."""
    from analytics.export import export as export_stage

    plan = plan or export_plan(paths, out, incremental=incremental, session=spark)
    if plan.mode == CLUSTER:
        if len(paths) > 1:
            raise UsageError("a live cluster is exported alone: one kafka://HOST:PORT[,...] and no log dirs")
        if plan.incremental:
            raise UsageError("an export over the protocol is not incremental: each captures its own offsets")
        from analytics.export.cluster import export_cluster

        return export_cluster(spark, paths[0], out, records=records, progress=progress, **(cluster or {}))
    return export_stage(None if plan.in_process else spark, list(plan.paths), out, records=records,
                        input_format=input_format, progress=progress, incremental=plan.incremental)


def audit(spark, out: str, config: AuditConfig, *, history: str | None = None,
          prometheus_file: str | None = None, incremental: bool = False,
          progress: Progress | None = None) -> AuditResult:
    """Replay and classify the export under ``out``; publish the audit tables.

    ``incremental``: continue the audit already there, replaying only the batches after the state
    it left (:mod:`analytics.audit.increment`); the tables are those of a full audit. Whether it can,
    and how, the audit's plan decides (:func:`analytics.audit.audit_plan.audit_plan`).

    ``history``: a folder this run's counts per partition are appended to; ``prometheus_file``:
    the same counts in the Prometheus text format (written atomically).
    """
    from analytics.audit.job import audit as audit_stage
    from analytics.spark.progress import watching

    require(out, EXPORT)
    with watching(spark, progress, "auditing"):
        result = audit_stage(spark, out, config, incremental=incremental, progress=progress)
    if history or prometheus_file:
        _record_metrics(spark, _metrics(spark, out, result), history, prometheus_file, result.finished_at_ms)
    return result


def _metrics(spark, out: str, result: AuditResult):
    """The audit's counts per (log dir, topic, partition): a small DataFrame held in the driver
    (one row per partition), so it outlives the folder it was counted from."""
    from analytics.report.history import partition_metrics

    metrics = partition_metrics(spark, out, result.run_id, result.finished_at_ms)
    return spark.createDataFrame(metrics.collect(), metrics.schema)


def _record_metrics(spark, metrics, history: str | None, prometheus_file: str | None, run_time_ms: int) -> None:
    from analytics.report.history import append_history, prometheus_text, write_prometheus

    if history:
        append_history(spark, metrics, history)
    if prometheus_file:
        write_prometheus(prometheus_file, prometheus_text([r.asDict() for r in metrics.collect()], run_time_ms))


def validate(spark, out: str, validation: ValidationConfig | None = None, *,
             progress: Progress | None = None) -> ValidationResult:
    """Run the Great Expectations suites over the audit under ``out``; publish results and Data Docs."""
    from analytics.spark.progress import watching
    from expectations.validate import validate as validate_stage

    require(out, AUDIT, EXPORT)
    with watching(spark, progress, "validating"):
        return validate_stage(spark, out, validation)


def report(spark, out: str, history: str | None = None, *, shown_as: str | None = None, pending=None,
           sections: dict | None = None, as_of: AsOf | None = None, output: str | None = None) -> str:
    """Publish ``OUT/report/index.html``; returns its path. ``history`` defaults to ``OUT.history``;
    ``shown_as``, ``pending`` and ``sections``: see :func:`analytics.report.build.report_data`.

    With ``as_of`` (a past version of ``OUT``) or ``output``, the page is written to the local file
    ``output`` instead (default ``segaudit-report-v<version>.html`` here): ``OUT`` keeps its latest report."""
    from analytics.report.build import report_data
    from analytics.report.history import default_history_path
    from analytics.report.render import render, write_report

    history = history if history is not None else default_history_path(out)
    if as_of is not None or output is not None:
        require(out, AUDIT, EXPORT, as_of=as_of)
        data = report_data(spark, out, history, as_of=as_of)
        return write_report(data, output or f"segaudit-report-v{data['version']}.html")
    manifests = require(out, AUDIT, EXPORT)
    with publication(out, REPORT, built_from={AUDIT: manifests[AUDIT]["run_id"]}) as run:
        data = report_data(spark, out, history, shown_as=shown_as, pending=pending, sections=sections)
        run.store.write_text(f"{run.folder}/{REPORT_DIR}/index.html", render(data))
        run.publish({})
    return run.shown(REPORT_DIR, "index.html")


def reconcile(spark, out: str, *, expected: str | None = None, bucket_ms: int | None = None,
              progress: Progress | None = None):
    """Publish ``OUT/reconciliation``: per bucket of record timestamps, the records in the log, their
    copies and distinct records, against the producers' counts in ``expected`` when given."""
    from analytics.reconcile import DEFAULT_BUCKET_MS
    from analytics.reconcile import reconcile as reconcile_stage

    require(out, AUDIT, EXPORT)
    return reconcile_stage(spark, out, expected=expected, bucket_ms=bucket_ms or DEFAULT_BUCKET_MS, progress=progress)


@dataclass(frozen=True)
class RunResult:
    """What ``run`` did: each stage's result, the report's path and a few counts for the operator."""

    exported: ExportResult
    audited: AuditResult
    validated: ValidationResult
    report: str
    partitions: int
    producers: int
    seconds: float

    @property
    def exit_code(self) -> int:
        """0 when every expectation is met, 1 when the data violates one."""
        return EXIT_OK if self.validated.success else EXIT_VIOLATION


def run(spark, paths: list[str], out: str, config: AuditConfig, validation: ValidationConfig | None = None, *,
        records: bool = True, input_format: str = "segments", history: str | None = None,
        prometheus_file: str | None = None, progress: Progress | None = None, incremental: bool = False,
        cluster: dict | None = None, planned: ExportPlan | None = None) -> RunResult:
    """The main job: export (with records), audit, validate and report, in one Spark application,
    published as one unit (:func:`analytics.publish.unit`): until all four are done, ``OUT`` keeps
    its previous complete set. The history and the Prometheus file get this run once it is published.
    ``incremental``: the export and the audit continue the ones in ``OUT`` (:func:`export`, :func:`audit`);
    ``cluster``: the options of a live cluster's export (:func:`export`); ``planned``: the export's
    plan when the caller made it (:func:`analytics.export_plan.export_plan`, whose ``incremental`` the
    run then follows; else made here, as the CLI makes it): in this process, without Spark, for a small local input, where Spark's Python workers
    cost far more than the reading (:func:`analytics.export.export`). ``spark`` is a session, or
    one still starting (:class:`analytics.spark.concurrent.Starting`, from
    :func:`~analytics.spark.concurrent.beside`): it is waited for when a stage needs it, so an export
    in this process runs while the JVM starts."""
    from analytics.report.history import default_history_path
    from analytics.spark.progress import watching

    say = progress or _quiet
    started = time.monotonic()
    _import_beside("great_expectations")  # the validation's library, loaded while Spark exports and audits
    planned = planned or export_plan(paths, out, incremental=incremental, session=spark)
    with unit(out) as staged:
        exported = export(None if planned.in_process else _ready(spark), paths, staged.out, records=records,
                          input_format=input_format, progress=say, cluster=cluster, plan=planned)
        spark = _ready(spark)
        say(f"auditing {exported.rows.get('batches', 0):,} batches ...")
        audited = audit(spark, staged.out, config, incremental=planned.incremental, progress=progress)
        say("validating and reporting ...")
        history_path = history if history is not None else default_history_path(out)
        with watching(spark, progress, "validating and reporting"):
            validated, metrics, partitions, producers = _validate_and_report(
                spark, staged.out, out, audited, validation, history_path)
        staged.publish()
    _record_metrics(spark, metrics, history, prometheus_file, audited.finished_at_ms)
    store = published(out)
    exported, audited = replace(exported, out=out), replace(audited, out=out)
    validated = replace(validated, out=out, data_docs=store.shown(VALIDATION_DIR, "data_docs", "index.html"))
    return RunResult(exported, audited, validated, store.shown(REPORT_DIR, "index.html"), partitions, producers,
                     time.monotonic() - started)


def _validate_and_report(spark, staged: str, out: str, audited: AuditResult, validation: ValidationConfig | None,
                         history: str):
    """The validation, this run's metrics, the report and two counts of the run staged in ``staged``
    (to be published as ``out``). The report's sections (and this run's metrics, which its history
    section shows) read the audit, not the validation: they are aggregated beside it."""
    from pyspark.sql import functions as F

    from analytics.report.build import report_sections
    from analytics.spark.concurrent import concurrently
    from analytics.spark.tables import read_parquet

    store = published(staged)

    def metrics_and_sections():
        metrics = _metrics(spark, staged, audited)
        return metrics, report_sections(spark, staged, history, pending=metrics)

    both = concurrently(spark, {
        "validated": lambda: validate(spark, staged, validation),
        "sections": metrics_and_sections,
        "producers": lambda: read_parquet(spark, store.path("producer_sessions")).agg(
            F.countDistinct("topic", "partition", "producer_id")).first()[0],
        "partitions": lambda: read_parquet(spark, store.path("segments")).select("topic", "partition").distinct().count(),
    })
    metrics, sections = both["sections"]
    report(spark, staged, history, shown_as=out, sections=sections)
    return both["validated"], metrics, both["partitions"], both["producers"]


def _ready(spark):
    """The session ``spark`` is, or is starting (:class:`~analytics.spark.concurrent.Starting`)."""
    from analytics.spark.concurrent import Starting

    return spark.result() if isinstance(spark, Starting) else spark


def _import_beside(module: str) -> None:
    """Import ``module`` on a background thread, while the caller's thread mostly waits on Spark; an
    import that fails there fails again, with its error, where the module is used."""
    if module in sys.modules:
        return

    def load() -> None:
        try:
            importlib.import_module(module)
        except BaseException:  # noqa: BLE001 - reported by the import where the module is used
            pass

    threading.Thread(target=load, name=f"import-{module}", daemon=True).start()
