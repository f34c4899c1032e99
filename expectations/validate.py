"""``segaudit validate OUT``: run the suites on an audit's tables with Great Expectations.

Writes ``OUT/validation/results.json`` (one entry per suite and check: success, severity, the
count of offending rows and a sample of them) and the Data Docs site
``OUT/validation/data_docs/index.html``, published as one stage (:mod:`analytics.publish`,
``_validation.json`` last), so a crash leaves the previous validation whole. In Data Docs every
check that found rows shows its sample under its description, a validation is named by its
run id and the data asset it read, and the index opens with the failed checks by name, each linked
to its suite's page, and a link to the report beside it (``OUT/report/index.html``).

The GX context is ephemeral: the suites live in ``expectations.suites`` and are rebuilt from
the audit's own configuration (``summary.json``) on every run, so a validation always checks
the thresholds the audit applied.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import io
import json
import os
import posixpath
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from analytics.audit.config import config_from_mapping
from analytics.audit.job import read_audit
from analytics.contract import AUDIT, REPORT_DIR, VALIDATE, VALIDATION_DIR
from analytics.errors import InputError, UsageError
from analytics.publish import publication, published, read_manifest
from analytics.spark.concurrent import concurrently
from analytics.spark.tables import read_table
from expectations.suites import TABLE_OF_SUITE, ValidationConfig, check_ids, suites, unknown_check_ids, with_allowance

VIEWS = ("segments", "parse_errors", "log_start_offsets", "batch_verdicts", "anomalies", "transactions",
         "record_duplicates", "replica_divergence")
SAMPLE_ROWS = 20  # offending rows kept per check in results.json (GX keeps up to 200 in Data Docs)
DATA_DOCS = f"{VALIDATION_DIR}/data_docs"
# The report from the Data Docs index: both live under OUT, so the relative link holds wherever OUT goes.
REPORT_LINK = posixpath.relpath(f"{REPORT_DIR}/index.html", DATA_DOCS)


@dataclass(frozen=True)
class CheckResult:
    suite: str
    id: str
    description: str
    success: bool
    severity: str  # critical | warning
    unexpected_count: int
    allowed: int
    sample: list


@dataclass(frozen=True)
class ValidationResult:
    out: str
    checks: list[CheckResult]
    seconds: float
    data_docs: str

    @property
    def success(self) -> bool:
        """No critical check failed (warnings do not fail a validation)."""
        return all(c.success or c.severity == "warning" for c in self.checks)

    def suite_success(self, suite: str) -> bool:
        return all(c.success for c in self.checks if c.suite == suite)


def validate(spark, out: str, validation: ValidationConfig | None = None) -> ValidationResult:
    import great_expectations as gx

    started = time.monotonic()
    store = published(out)
    summary = read_audit(out)
    config = config_from_mapping(summary["configuration"])
    validation = validation or ValidationConfig()
    present = [name for name in VIEWS if store.is_dir(name)]
    declared = suites(config, has_records="record_duplicates" in present,
                      has_replicas=bool(summary.get("replicated_partitions")) and "replica_divergence" in present)
    why = unknown_check_ids(validation, check_ids())
    if why is None and (why := unknown_check_ids(validation, [c.id for cs in declared.values() for c in cs])):
        why += " (a check on records: this audit's export has none; export with --records)"
    if why:
        raise UsageError(why)
    # each table held once for the checks' queries: read side by side (small ones are a job each)
    frames = concurrently(spark, {name: (lambda n=name: read_table(spark, store.path(n), store.size(n)))
                                  for name in present})
    for name, frame in frames.items():
        frame.createOrReplaceTempView(name)
    if "record_duplicates" in present:
        _records_view(spark, store, frames["anomalies"])
    with publication(out, VALIDATE, built_from={AUDIT: read_manifest(out, AUDIT)["run_id"]}) as run:
        # GX builds the site in a local folder: OUT's own, or a temporary one uploaded into a bucket
        docs = run.path(VALIDATION_DIR, "data_docs") if not run.store.remote else tempfile.mkdtemp(prefix="segaudit-docs-")
        os.makedirs(docs, exist_ok=True)
        # GX prints to stdout (a notice for every query that reads a second table); stdout is
        # the command's data, so the GX section runs with stdout set aside.
        with contextlib.redirect_stdout(io.StringIO()):
            results = _run_suites(gx, declared, frames, validation, docs, run.run_id)
        seconds = time.monotonic() - started
        result = ValidationResult(out, results, seconds, run.shown(VALIDATION_DIR, "data_docs", "index.html"))
        document = {
            "run_id": run.run_id,
            "audit_run_id": summary["run_id"],
            "success": result.success,
            "suites": {
                name: {
                    "success": result.suite_success(name),
                    "table": TABLE_OF_SUITE[name],
                    "checks": [dataclasses.asdict(c) for c in results if c.suite == name],
                }
                for name in declared
            },
            "seconds": round(seconds, 3),
        }
        make_offline(docs)
        if run.store.remote:
            run.store.upload(docs, f"{run.folder}/{VALIDATION_DIR}/data_docs")
            shutil.rmtree(docs, ignore_errors=True)
        run.store.write_text(f"{run.folder}/{VALIDATION_DIR}/results.json", json.dumps(document, indent=2, default=str) + "\n")
        run.publish({"success": result.success})
    return result


def _records_view(spark, store, anomalies) -> None:
    """The export's ``records`` as the view ``sequence_reuse_justified`` reads, when some batch is
    explained by ``sequence_reuse``; else the view holds none (the check has nothing to read, and the
    largest table is not scanned for it)."""
    from pyspark.sql import functions as F

    from analytics.contract import OUT_SCHEMAS, SEQUENCE_REUSE
    from analytics.spark.source import spark_schema
    from analytics.spark.tables import read_parquet

    reused = store.is_dir("records") and not anomalies.where(F.col("explained_by") == SEQUENCE_REUSE).isEmpty()
    frame = (read_parquet(spark, store.path("records")) if reused
             else spark.createDataFrame([], spark_schema(OUT_SCHEMAS["records"])))
    frame.createOrReplaceTempView("records")


def _run_suites(gx, declared, frames, validation: ValidationConfig, docs: str, run_name: str) -> list[CheckResult]:
    """Each suite's validation (one GX run named ``run_name``), then the Data Docs site built once
    from them and each suite's page completed (:func:`show_rows`)."""
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.base import ProgressBarsConfig
    from great_expectations.expectations.metadata_types import FailureSeverity

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    for site in list(context.get_config().data_docs_sites or {}):
        context.delete_data_docs_site(site)
    context.add_data_docs_site(site_name="segaudit", site_config={
        "class_name": "SiteBuilder",
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": docs},
    })
    source = context.data_sources.add_spark(name="segaudit")
    run_id = RunIdentifier(run_name=run_name)
    results: list[CheckResult] = []
    pages: list[tuple[str, str, list]] = []  # (suite, data asset, its checks' (description, result))
    for suite_name, checks in declared.items():
        table = TABLE_OF_SUITE[suite_name]
        asset = source.add_dataframe_asset(name=f"{suite_name}:{table}")
        batch = asset.add_batch_definition_whole_dataframe(table)
        suite = gx.ExpectationSuite(name=suite_name, meta={"table": table})
        descriptions = {}
        for check in checks:
            allowed = validation.allow.get(check.id, 0)
            descriptions[check.id] = check.description + (f" (up to {allowed} tolerated)" if allowed else "")
            suite.add_expectation(gx.expectations.UnexpectedRowsExpectation(
                unexpected_rows_query=with_allowance(check, allowed, table),
                description=descriptions[check.id],
                severity=FailureSeverity.WARNING if check.id in validation.warn else FailureSeverity.CRITICAL,
                meta={"check": check.id, "table": check.table},
            ))
        suite = context.suites.add(suite)
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=suite_name, data=batch, suite=suite))
        outcome = definition.run(batch_parameters={"dataframe": frames[table]}, run_id=run_id,
                                 result_format={"result_format": "COMPLETE"})
        found = len(results)
        for r in outcome.results:
            meta = r.expectation_config.meta or {}
            check_id = meta.get("check")
            check = next(c for c in checks if c.id == check_id)
            failure = _raised(r.exception_info)
            if failure is not None:
                raise InputError(f"Great Expectations could not run the check {suite_name}.{check_id} "
                                 f"over {table}: {failure}")
            rows = (r.result or {}).get("details", {}).get("unexpected_rows") or []
            results.append(CheckResult(
                suite=suite_name, id=check_id, description=check.description, success=bool(r.success),
                severity="warning" if check_id in validation.warn else "critical",
                unexpected_count=int((r.result or {}).get("observed_value") or 0),
                allowed=validation.allow.get(check_id, 0),
                sample=[_jsonable_row(row) for row in rows[:SAMPLE_ROWS]],
            ))
        pages.append((suite_name, asset.name, [(descriptions[c.id], c) for c in results[found:]]))
    # one build of the site (its index, static files and every page), not one per suite
    context.build_data_docs(site_names=["segaudit"])
    suite_pages = {}
    for suite_name, asset_name, described in pages:
        for page in sorted(Path(docs, "validations", suite_name).rglob("*.html")):
            show_rows(page, asset_name, described)
            suite_pages.setdefault(suite_name, page.relative_to(docs).as_posix())
    show_failures(Path(docs, "index.html"), results, suite_pages, run_name)
    return results


# GX's Spark dataframe assets leave the data asset out of the batch spec its page header reads.
NO_DATA_ASSET = "Data asset: None<br>"


def show_rows(page: Path, asset: str, checks: list[tuple[str, CheckResult]]) -> None:
    """Complete a suite's validation page: the data asset in its header, and under the description
    of each check that found rows (``(description, result)``, the description as given to GX), a
    table of its sample. GX renders an ``UnexpectedRowsExpectation`` as its count alone: its
    unexpected-table renderer reads the per-value lists of column expectations, not rows."""
    text = page.read_text().replace(NO_DATA_ASSET, f"Data asset: {html.escape(asset)}<br>", 1)
    for description, check in checks:
        if check.sample:
            # GX writes a description as it was given (a template, not escaped): match it verbatim
            text = re.sub(rf"({re.escape(description)}\s*</span>)", lambda m: m.group(1) + rows_table(check),
                          text, count=1)
    page.write_text(text)


# Where the index's own summary goes: above GX's tabs of validation results and suites.
INDEX_TABS = '<div id="section-1-content-block-2" class="col-12 ge-index-page-tabs-container"'


def show_failures(index: Path, checks: list[CheckResult], suite_pages: dict[str, str], run_name: str) -> None:
    """Open the Data Docs index with what GX's index leaves out: how many checks failed and which
    (each linked to its suite's page, ``suite_pages``: suite -> path from the index), the warned ones,
    and a link to the report. GX's index lists a status icon per suite only."""
    failed = [c for c in checks if not c.success and c.severity != "warning"]
    warned = [c for c in checks if not c.success and c.severity == "warning"]

    def item(c: CheckResult) -> str:
        page = suite_pages.get(c.suite)
        suite = f'<a href="{html.escape(page)}">{html.escape(c.suite)}</a>' if page else html.escape(c.suite)
        rows = f"{c.unexpected_count:,} offending row{'' if c.unexpected_count == 1 else 's'}"
        return (f'<li><code class="segaudit-check">{html.escape(c.id)}</code> ({suite}): {rows}'
                + (f", {c.allowed:,} tolerated" if c.allowed else "") + "</li>")

    head = (f"{len(failed)} of {len(checks)} checks failed" if failed else f"all {len(checks)} checks passed")
    head += f", {len(warned)} warned" if warned else ""
    tone = "alert-danger" if failed else ("alert-warning" if warned else "alert-success")
    lists = "".join(f'{label}<ul class="mb-2 segaudit-{name}">{"".join(item(c) for c in group)}</ul>'
                    for name, label, group in (
                        ("failed-checks", "", failed),
                        ("warned-checks", '<p class="mb-1">Warned (a warning does not fail the validation):</p>', warned))
                    if group)
    panel = (f'<div class="col-12 segaudit-summary"><div class="alert {tone}" role="status">'
             f'<p class="mb-2"><strong class="segaudit-failed">{html.escape(head)}</strong>'
             f' <span class="text-muted small">validation run {html.escape(run_name)}</span></p>{lists}'
             f'<p class="mb-0"><strong><a class="segaudit-report" href="{REPORT_LINK}">The report</a></strong>: '
             "each partition with findings and the rows behind them (written by segaudit report OUT, or segaudit run)."
             "</p>"
             "</div></div>")
    text = index.read_text()
    at = text.find(INDEX_TABS)
    if at < 0:  # a GX whose index lacks the tabs: the summary opens the page body instead
        at = text.index(">", text.index("<body")) + 1
    index.write_text(text[:at] + panel + text[at:])


def rows_table(check: CheckResult) -> str:
    """The sample of a check as a Bootstrap table in GX's style, every value escaped, with how many
    of the offending rows it shows."""
    columns = list(dict.fromkeys(k for row in check.sample for k in row))
    head = "".join(f'<th class="px-1 text-nowrap">{html.escape(c)}</th>' for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(row.get(c)))}</td>" for c in columns) + "</tr>"
                   for row in check.sample)
    shown = len(check.sample)
    note = (f"{shown} offending row{'' if shown == 1 else 's'}" if shown == check.unexpected_count else
            f"the first {shown} of {check.unexpected_count} offending rows (the check's query returns them all)")
    return (f'<p class="mt-2 mb-1 small text-muted segaudit-rows-note">{html.escape(note)}</p>'
            f'<table class="table table-sm table-bordered small segaudit-rows" data-check="{html.escape(check.id)}">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _cell(value) -> str:
    return "null" if value is None else str(value)


VENDOR = Path(__file__).resolve().parent / "assets" / "vendor"
# The libraries GX's Data Docs load from CDNs, served from the site itself so the dashboard
# renders on a machine with no internet (vega is left out: only column-distribution charts use it).
OFFLINE_ASSETS = {
    "https://code.jquery.com/jquery-3.7.1.min.js": "vendor/jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": "vendor/popper.min.js",
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": "vendor/bootstrap.min.js",
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": "vendor/bootstrap.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": "vendor/bootstrap-table.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": "vendor/bootstrap-table.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js":
        "vendor/bootstrap-table-filter-control.min.js",
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css":
        "vendor/bootstrap-table-filter-control.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js":
        "vendor/bootstrap-datepicker.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css":
        "vendor/bootstrap-datepicker.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": "vendor/fontawesome.min.css",
}
ONLINE_ONLY = re.compile(
    r'<(?:script|link)[^>]+(?:src|href)="https://(?:cdn\.jsdelivr\.net/npm/(?:vega|@forevolve)[^"]*)"[^>]*>(?:</script>)?')
REMOTE_LOGO = re.compile(r'https://great-expectations-web-assets\.s3[^"]*/logo-long\.png[^"]*')


def make_offline(site: str) -> None:
    """Point every page of a Data Docs site at the vendored libraries in ``static/``."""
    static = Path(site, "static")
    shutil.copytree(VENDOR, static / "vendor", dirs_exist_ok=True, ignore=shutil.ignore_patterns("webfonts"))
    shutil.copytree(VENDOR / "webfonts", static / "webfonts", dirs_exist_ok=True)  # fontawesome's ../webfonts
    for page in Path(site).rglob("*.html"):
        prefix = os.path.relpath(static, page.parent).replace(os.sep, "/")
        text = page.read_text()
        for url, local in OFFLINE_ASSETS.items():
            text = text.replace(url, f"{prefix}/{local}")
        text = ONLINE_ONLY.sub("", text)
        text = REMOTE_LOGO.sub(f"{prefix}/images/logo-long.png", text)
        page.write_text(text)


def read_results(out: str) -> dict:
    """``results.json`` of the complete validation under ``out``."""
    read_manifest(out, VALIDATE)
    return json.loads(published(out).read_text(f"{VALIDATION_DIR}/results.json"))


def _raised(info) -> str | None:
    """The first line of the exception a check raised, if it raised one. GX reports it either flat
    (``{"raised_exception": True, "exception_message": ...}``) or per metric (a dict of those)."""
    if not info:
        return None
    entries = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    for entry in entries:
        if entry.get("raised_exception"):
            lines = str(entry.get("exception_message") or "").strip().splitlines()
            return lines[0] if lines else "an exception without a message"
    return None


def _jsonable_row(row) -> dict:
    row = row if isinstance(row, dict) else dict(row)
    return {k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v)) for k, v in row.items()}
