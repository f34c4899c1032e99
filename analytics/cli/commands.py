"""The commands: each validates its options, calls the library, renders the result, returns the exit code.

Data goes to stdout, progress to stderr. Failures are raised (:mod:`analytics.errors`) and
reported by :func:`analytics.cli.main.main` as one line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from analytics.cli.forensic import explain_text, producer_text, transactional_id_text
from analytics.cli.options import (
    audit_config,
    check_profile,
    cluster_options,
    history_options,
    planned_export,
    spark_session,
    validation_config,
)
from analytics.cli.render import checks_table, document, outcome, passed, plain, render_table
from analytics.contract import (
    AUDIT,
    BROKER_QUESTION,
    DATA_QUESTION,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_VIOLATION,
    EXPORT,
    SUMMARY,
    VALIDATION_DIR,
)
from analytics.errors import UsageError
from analytics.spark.concurrent import beside


def progress(message: str) -> None:
    """Progress lines on stderr, flushed at once (stdout is the command's data); the line and its end
    in one write, so a signal's line after it never joins it."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _inputs_exist(paths: list[str]) -> None:
    """Every input is there, before Spark starts: a local path, a bucket's prefix (asked once, so a
    wrong endpoint, credentials or bucket is one line at once), a well-formed cluster address."""
    from analytics.kafka.fs import check_exists, is_remote

    from analytics.cluster.config import bootstrap_of, is_cluster

    for path in paths:
        if is_cluster(path):
            bootstrap_of(path)  # a malformed address is a usage error before Spark starts
        elif not (check_exists(path) if is_remote(path) else os.path.exists(path)):
            raise UsageError(f"no such file or directory: {path}")


def _cluster_answers(paths: list[str], live: dict) -> None:
    """A live cluster among the inputs answers before Spark starts (else one line, exit 2)."""
    from analytics.cluster.config import is_cluster, load

    for path in paths:
        if is_cluster(path):
            from analytics.cluster.client import Cluster

            Cluster(load(path, live.get("client_config"))).close()


def _out_exists(out: str) -> None:
    if "://" not in out and not os.path.isdir(out):
        raise UsageError(f"no such directory: {out}")


def inspect(args) -> int:
    from analytics.contract import MANIFESTS
    from analytics.inventory import inventory_of_export, take_inventory

    _inputs_exist(args.logdirs)
    [first, *rest] = args.logdirs
    if not rest and os.path.isfile(os.path.join(first, MANIFESTS[EXPORT])):
        inventory = inventory_of_export(first)  # an export: its tables answer, no segment is read again
    else:
        inventory = take_inventory(args.logdirs)
    if not inventory.partitions:
        raise UsageError(f"no Kafka partition folders or segments found in {' '.join(args.logdirs)}")
    if args.format == "json":
        doc = {
            "partitions": [dataclasses.asdict(p) for p in inventory.partitions],
            "parse_errors": [dataclasses.asdict(e) for e in inventory.errors],
            "total": inventory.total,
        }
        print(document(doc))
        return EXIT_OK
    several = len({p.log_dir for p in inventory.partitions}) > 1
    columns = ["topic", "partition", *(["log_dir"] if several else []), "segments", "size_bytes", "batches", "records",
               "first_offset", "last_offset", "producers", "transactional_batches", "commits", "aborts", "codecs",
               "snapshots", "errors"]
    rows = [[getattr(p, c) for c in columns] for p in inventory.partitions]
    print(render_table(columns, rows))
    total = inventory.total
    print(
        f"\n{total['partitions']} partitions, {total['segments']} segments, {total['size_bytes']:,} bytes "
        f"({total['valid_bytes']:,} in valid batches), {total['batches']:,} batches, {total['records']:,} records, "
        f"{len(inventory.errors)} parse errors"
    )
    if inventory.errors:
        print("\nparse errors:")
        cols = ["file", "file_position", "error_kind", "bytes_affected", "message"]
        shown = inventory.errors[: args.max_errors]
        print(render_table(cols, [[getattr(e, c) for c in cols] for e in shown]))
        if len(inventory.errors) > len(shown):
            print(f"... and {len(inventory.errors) - len(shown)} more")
    return EXIT_OK


def export(args) -> int:
    from analytics import pipeline

    _inputs_exist(args.logdirs)
    live = cluster_options(args)
    _cluster_answers(args.logdirs, live)
    plan = planned_export(args)
    spark = None if plan.in_process else spark_session(args, plan)
    result = pipeline.export(spark, args.logdirs, args.out, records=args.records,
                             input_format=args.input_format, progress=progress, cluster=live, plan=plan)
    print(render_table(["table", "rows"], sorted(result.rows.items())))
    print(f"\nexport run {result.run_id} in {result.out}")
    return EXIT_OK


def audit(args) -> int:
    from analytics import pipeline

    pipeline.require(args.out, EXPORT)
    previous = _previous_audit(args.out)
    config = audit_config(args, previous)
    _say_configuration(args, previous, config)
    history = history_options(args)
    result = pipeline.audit(spark_session(args), args.out, config, incremental=args.incremental, progress=progress,
                            **history)
    if args.format == "json":
        print(document(outcome("audit", EXIT_OK, _path(args.out), _summary(args.out), paths=_paths(args.out, **history),
                               seconds=result.seconds)))
        return EXIT_OK
    print(render_table(["verdict", "batches"], [[v, n] for v, n in result.verdicts.items() if n]))
    print()
    print(render_table(["severity", "batches"], [[s, n] for s, n in result.severities.items()]))
    read = _what_was_read(args.out)
    if read:
        print("\n" + "\n".join(read))
    return EXIT_OK


def _what_was_read(out: str) -> list[str]:
    """The audit's lines for an operator on its input: the export's coverage, and the partition
    folders told apart by topic name alone, when there are any."""
    from analytics.audit.audit_plan import described_identity
    from analytics.export.coverage import described

    summary = _summary(out)
    return [line for line in (described(summary.get("coverage")), described_identity(summary.get("topic_identity")))
            if line]


def _previous_audit(out: str) -> dict | None:
    """The ``summary.json`` of the complete audit in ``out``, if there is one."""
    from analytics.audit.job import read_audit
    from analytics.errors import StageMissing

    try:
        return read_audit(out)
    except (StageMissing, OSError, ValueError):
        return None


def _say_configuration(args, previous: dict | None, config) -> None:
    """Says which configuration an audit of an audited ``OUT`` uses: without ``--config``, the one the
    previous audit was given again (and what the flags change of it); with it, what it changes."""
    from analytics.audit.config import changes, non_defaults, recorded_config

    if previous is None:
        return
    before = recorded_config(previous)
    changed = changes(before, config)
    if args.config is None:
        kept = non_defaults(before)
        progress("audit: the configuration of the previous audit in OUT is used again"
                 + (f" ({', '.join(kept)})" if kept else " (the defaults)")
                 + (f"; the options change {', '.join(changed)}" if changed else "")
                 + "; --config FILE replaces it")
    elif changed:
        progress(f"audit: {args.config} changes the configuration of the previous audit in OUT: {', '.join(changed)}")


def validate(args) -> int:
    validation = validation_config(args)  # a mistake answered before Spark is imported
    from analytics import pipeline

    pipeline.require(args.out, AUDIT, EXPORT)
    result = pipeline.validate(spark_session(args), args.out, validation, progress=progress)
    code = EXIT_OK if result.success else EXIT_VIOLATION
    if args.format == "json":
        print(document(outcome("validate", code, _path(args.out), _summary(args.out), validated=result,
                               paths=_paths(args.out, validated=result), seconds=result.seconds)))
        return code
    print(checks_table(result))
    print(f"\n{passed(result)}; Data Docs: {result.data_docs}")
    return code


def run(args) -> int:
    """export, audit, validate, report: one Spark application, a short result on stdout, progress on stderr."""
    _inputs_exist(args.logdirs)
    config, validation = audit_config(args), validation_config(args)  # mistakes answered before Spark
    live = cluster_options(args)
    _cluster_answers(args.logdirs, live)
    from analytics import pipeline

    plan = planned_export(args)  # the input measured and --incremental read once, before the session exists
    # an export in this process needs no session: its JVM starts meanwhile, on a thread of its own
    session = (beside(lambda: spark_session(args, plan), "spark-session") if plan.in_process
               else spark_session(args, plan))
    history = history_options(args)
    result = pipeline.run(session, args.logdirs, args.out, config, validation, records=args.records,
                          input_format=args.input_format, progress=progress, cluster=live, planned=plan,
                          **history)
    if args.format == "json":
        print(document(outcome("run", result.exit_code, _path(args.out), _summary(args.out), validated=result.validated,
                               paths=_paths(args.out, validated=result.validated, report=result.report, **history),
                               partitions=result.partitions, producers=result.producers, seconds=result.seconds)))
        return result.exit_code
    audited = result.audited
    print(f"{BROKER_QUESTION} (severity per batch)")
    print(render_table(["", "count"], [
        ["partitions", result.partitions],
        ["producers", result.producers],
        ["batches", sum(audited.verdicts.values())],
        *[[f"  {v}", n] for v, n in audited.verdicts.items() if n],
        *[[f"severity {s}", n] for s, n in audited.severities.items() if n],
        *[[f"transactions {s}", n] for s, n in audited.transactions.items() if n],
    ]))
    for line in _what_was_read(args.out):
        print(line)
    print(f"\n{DATA_QUESTION} (the expectation suites: an explained duplicate or zombie write still fails its check)")
    print(checks_table(result.validated))
    print(f"\n{passed(result.validated)} in {result.seconds:.1f} s; Data Docs: {result.validated.data_docs}; "
          f"report: {result.report}")
    return result.exit_code


def _path(out: str) -> str:
    """``OUT`` as the library writes it: an absolute path, or the URI."""
    from analytics.publish import Store

    return Store(out).path()


def _summary(out: str) -> dict:
    """The audit's summary.json under ``out`` (its counts go into the JSON documents)."""
    from analytics.audit.job import read_audit

    return read_audit(out)


def _paths(out: str, *, validated=None, report: str | None = None, history: str | None = None,
           prometheus_file: str | None = None) -> dict:
    """The files a command wrote under (or beside) ``out``; null for what it did not write."""
    from analytics.publish import shown_path

    return {"summary": shown_path(out, SUMMARY),
            "results": shown_path(out, VALIDATION_DIR, "results.json") if validated else None,
            "data_docs": validated.data_docs if validated else None,
            "report": report, "history": history, "prometheus_file": prometheus_file}


def report(args) -> int:
    from analytics import pipeline

    pipeline.require(args.out, AUDIT, EXPORT, as_of=args.as_of)  # before Spark starts
    print(pipeline.report(spark_session(args), args.out, args.history, as_of=args.as_of, output=args.output))
    return EXIT_OK


def open_report(args) -> int:
    """Prints the file URL of the report (copied out of a bucket with its Data Docs); no JVM."""
    from analytics.report.opened import local_report, open_in_browser

    page = local_report(args.out, args.as_of, args.into)
    print(page.as_uri())
    open_in_browser(page)
    return EXIT_OK


def reconcile(args) -> int:
    """Prints the buckets that lost or doubled records first; exit 1 when some did (with expected
    counts: missing or copied records; without: copied records)."""
    from analytics import pipeline
    from analytics.publish import published
    from analytics.spark.tables import read_parquet

    bucket_ms = args.bucket  # milliseconds: arguments.bucket
    pipeline.require(args.out, AUDIT, EXPORT)
    spark = spark_session(args)
    result = pipeline.reconcile(spark, args.out, expected=args.expected, bucket_ms=bucket_ms, progress=progress)
    from pyspark.sql import functions as F

    table = read_parquet(spark, published(result.out).path("reconciliation"))
    worst = (table.orderBy((F.coalesce("missing", F.lit(0)) + F.col("duplicated")).desc(), "log_dir", "topic",
                           "partition", "bucket_start").limit(args.limit).collect())
    columns = ["log_dir", "topic", "partition", "bucket_start", "expected", "records", "distinct", "duplicated",
               "missing", "surplus"]
    code = EXIT_OK if result.sound else EXIT_VIOLATION
    if args.format == "json":
        print(document({"command": "reconcile", "exit_code": code, "out": _path(args.out), "bucket_ms": bucket_ms,
                        "level": result.level, "totals": result.totals,
                        "buckets": [{c: r[c] for c in columns} for r in worst],
                        "paths": {"reconciliation": os.path.join(result.out, "reconciliation")},
                        "seconds": result.seconds}))
        return code
    print(render_table(columns, [[r[c] for c in columns] for r in worst]))
    t = result.totals
    print(f"\n{t['records']:,} records, {t['distinct']:,} distinct, {t['duplicated']:,} copies"
          + ("" if t["expected"] is None else f"; expected {t['expected']:,}, missing {t['missing']:,}, "
                                               f"beyond expected {t['surplus']:,}")
          + f" (buckets of {bucket_ms:,} ms, per {result.level}; OUT/reconciliation)")
    return code


def explain(args) -> int:
    """No Spark session: the library reads the tables with pyarrow. An offset no batch holds (beyond
    the log, before its start, in a hole) is answered, where it falls, with exit code 4."""
    from analytics.forensics import explain

    e = explain(args.out, args.topic, args.partition, args.offset, context=args.context, log_dir=args.log_dir,
                as_of=args.as_of)
    code = EXIT_OK if e.batches else EXIT_NOT_FOUND
    print(document({"exit_code": code, **dataclasses.asdict(e)}) if args.format == "json" else explain_text(e))
    return code


def producer(args) -> int:
    """No Spark session: the library reads the tables with pyarrow."""
    from analytics.forensics import producer_history, transactional_id_history, utc

    if args.transactional_id is not None:
        h = transactional_id_history(args.out, args.transactional_id, limit=args.limit, as_of=args.as_of)
        text = transactional_id_text
    else:
        h = producer_history(args.out, args.producer_id, topic=args.topic, limit=args.limit, as_of=args.as_of)
        text = producer_text
    print(json.dumps(dataclasses.asdict(h), indent=2, default=str) if args.format == "json" else text(h, utc))
    return EXIT_OK


def sql(args) -> int:
    import csv

    from analytics.forensics import NotFound, run_sql
    from analytics.forensics.sql import check_tables

    _out_exists(args.out)
    check_tables(args.out, args.query, args.as_of)  # before Spark starts
    from pyspark.errors import AnalysisException, ParseException

    try:
        df = run_sql(spark_session(args), args.out, args.query, args.as_of)
        columns = df.columns
        if args.format == "table":
            rows = df.limit(args.limit + 1).collect()
            print(render_table(columns, [list(r) for r in rows[:args.limit]]))
            if len(rows) > args.limit:
                print(f"(first {args.limit} rows; --limit N for more, or --format csv|json for all)", file=sys.stderr)
            return EXIT_OK
        rows = df.toLocalIterator()  # streamed a partition at a time, never the whole result on the driver
        if args.format == "csv":
            writer = csv.writer(sys.stdout, lineterminator="\n")
            writer.writerow(columns)
            for r in rows:
                writer.writerow(["" if v is None else plain(v) for v in r])
        else:
            for r in rows:
                sys.stdout.write(json.dumps({k: plain(v) for k, v in r.asDict(recursive=True).items()}, default=str) + "\n")
    except (NotFound, AnalysisException, ParseException) as exc:
        raise UsageError(str(exc).strip().splitlines()[0]) from exc
    return EXIT_OK


def scenario_names() -> list[str]:
    from analytics.generate.scenarios import SCENARIO_NAMES

    return list(SCENARIO_NAMES)


def generate(args) -> int:
    from analytics.generate import generate

    if args.scenario not in scenario_names():
        raise UsageError(f"unknown scenario {args.scenario!r}; choose from {', '.join(scenario_names())}")
    check_profile(args.profile)
    try:
        result = generate(args.logdir, args.scenario, seed=args.seed, scale=args.scale, profile=args.profile,
                          progress=progress)
    except FileExistsError as exc:
        raise UsageError(str(exc)) from exc
    print(f"wrote {result.log_dir} ({result.batches:,} batches) and its ground truth in {result.truth_dir}")
    print(render_table(["verdict", "batches"], sorted(result.verdicts.items())))
    return EXIT_OK


def dump_log(args) -> int:
    from analytics.kafka.dumplog import dump_file, dump_style

    files = [*args.files, *(f for listed in args.file_lists for f in listed.split(",") if f)]
    if not files:
        raise UsageError("dump-log: no file given (FILE... or --files F1,F2)")
    try:
        dump_style(args.kafka_version)
    except ValueError as exc:
        raise UsageError(f"--kafka-version: {exc}") from exc
    for path in files:
        if path.endswith((".index", ".timeindex")):
            raise UsageError(f"{path}: dump-log prints .log, .checkpoint, .snapshot and .txnindex files")
        if not os.path.exists(path) and "://" not in path:
            raise UsageError(f"no such file: {path}")

    def warn(message: str) -> None:
        sys.stdout.flush()
        sys.stderr.write(message + "\n")

    for path in files:
        for line in dump_file(path, deep=args.deep, print_data=args.print_data_log,
                              skip_record_metadata=args.skip_record_metadata,
                              kafka_version=args.kafka_version, warn=warn):
            sys.stdout.write(line + "\n")
    return EXIT_OK
