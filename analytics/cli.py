"""The ``segaudit`` command line: validate options, call the library, render its result.

Data goes to stdout, logs and progress to stderr. Exit codes (``docs/design.md``): 0 success,
1 the data violates an expectation, 2 bad usage or unreadable input with one clear line on
stderr (the traceback only with ``--debug``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Sequence

from analytics import __version__

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad usage or unreadable input: exit code 2, one line on stderr."""


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="segaudit",
        description="Audit Apache Kafka log segments: read them byte for byte, replay the broker's producer rules.",
    )
    ap.add_argument("--version", action="version", version=f"segaudit {__version__}")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("inspect", help="what log directories hold, per partition (no Spark needed)")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="log dir, partition folder or .log file")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--max-errors", type=int, default=20, help="parse errors to list (all are counted)")
    p.set_defaults(run=_inspect)

    p = sub.add_parser("export", help="segments (or kafka-dump-log.sh text) to Parquet tables, with Spark")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="log dir, partition folder or .log file")
    p.add_argument("--out", required=True, metavar="OUT", help="folder for the tables (replaced atomically)")
    p.add_argument("--records", action="store_true", help="also export one row per record")
    p.add_argument("--input-format", choices=["segments", "dump-log"], default="segments")
    _spark_options(p)
    p.set_defaults(run=_export)

    p = sub.add_parser("run", help="the main job: export, audit and validate in one Spark application")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="log dir, partition folder or .log file")
    p.add_argument("--out", required=True, metavar="OUT", help="folder for the tables, audit and validation")
    p.add_argument("--no-records", dest="records", action="store_false",
                   help="skip the records table (and so the record-duplicate check)")
    p.add_argument("--input-format", choices=["segments", "dump-log"], default="segments")
    _audit_options(p)
    _validation_options(p)
    _spark_options(p)
    p.set_defaults(run=_run)

    p = sub.add_parser("audit", help="replay the broker's producer rules over an export; verdict per batch")
    p.add_argument("out", metavar="OUT", help="an export folder (segaudit export ... --out OUT)")
    _audit_options(p)
    _spark_options(p)
    p.set_defaults(run=_audit)

    p = sub.add_parser("validate", help="run the Great Expectations suites on an audit; Data Docs and results.json")
    p.add_argument("out", metavar="OUT", help="an audited folder (segaudit audit OUT)")
    p.add_argument("--config", default=None, help="configuration (TOML) whose [validation] table sets thresholds")
    _validation_options(p)
    _spark_options(p)
    p.set_defaults(run=_validate)

    p = sub.add_parser("report", help="write OUT/report/index.html: summary, timelines, sequences, idle times, trends")
    p.add_argument("out", metavar="OUT", help="an audited export")
    p.add_argument("--history", default=None, metavar="PATH", help="the metrics history to chart (default OUT.history)")
    _spark_options(p)
    p.set_defaults(run=_report)

    p = sub.add_parser("explain", help="the batch holding an offset, its producer's neighbours, the verdict and why")
    p.add_argument("out", metavar="OUT", help="an audited export")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", required=True, type=int)
    p.add_argument("--offset", required=True, type=int)
    p.add_argument("--context", type=int, default=3, help="neighbouring batches of the producer on each side")
    p.add_argument("--log-dir", default=None, metavar="DIR",
                   help="for a partition exported from several log dirs (brokers): the one to explain, its path "
                        "or trailing part (default: the first holding the offset)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    _spark_options(p)
    p.set_defaults(run=_explain)

    p = sub.add_parser("producer", help="one producer's history: epochs, sequence ranges, gaps, transactions, pauses")
    p.add_argument("out", metavar="OUT", help="an audited export")
    p.add_argument("--producer-id", required=True, type=int)
    p.add_argument("--topic", default=None, help="only this topic")
    p.add_argument("--limit", type=int, default=50, help="findings and transactions to list (all are counted)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    _spark_options(p)
    p.set_defaults(run=_producer)

    p = sub.add_parser("sql", help="Spark SQL over every table of OUT, each a view of its name")
    p.add_argument("out", metavar="OUT", help="an export or an audited export")
    p.add_argument("query", help='for example "SELECT verdict, count(*) FROM batch_verdicts GROUP BY verdict"')
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (at most --limit rows), or every row as CSV or JSON lines")
    p.add_argument("--limit", type=int, default=1000, help="rows shown by --format table")
    _spark_options(p)
    p.set_defaults(run=_sql)

    p = sub.add_parser("generate", help="write a real Kafka log directory for a named scenario, with ground truth")
    p.add_argument("logdir", metavar="LOGDIR", help="where to write (must not exist or be empty)")
    p.add_argument("--scenario", required=True, metavar="NAME", help="one of: " + ", ".join(_scenario_names()))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scale", type=int, default=1, help="multiply the bulk of the scenario (for benchmarks)")
    p.add_argument("--profile", default=None, metavar="VERSION",
                   help="the simulated broker's profile or Kafka version (default: the scenario's, else 2.7)")
    p.set_defaults(run=_generate)

    p = sub.add_parser("dump-log", help="print segments as kafka-dump-log.sh --deep-iteration would")
    p.add_argument("files", nargs="*", metavar="FILE", help=".log, .checkpoint, .snapshot or .txnindex files")
    p.add_argument("--files", dest="file_lists", action="append", default=[], metavar="F1,F2",
                   help="comma-separated files, as kafka-dump-log.sh takes them")
    p.add_argument("--deep-iteration", dest="deep", action="store_true", default=True,
                   help="record lines after each batch line (the default)")
    p.add_argument("--no-deep-iteration", dest="deep", action="store_false", help="batch lines only")
    p.add_argument("--print-data-log", action="store_true",
                   help="each record's key and payload, decoded as UTF-8 (implies --deep-iteration)")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="record lines hold only key and payload")
    p.add_argument("--kafka-version", default=None, metavar="X.Y",
                   help="print the text of this Kafka release's tool, 3.2 or later (default: the text of "
                        "3.5 to 4.2; 4.3 and later print a few lines differently)")
    p.set_defaults(run=_dump_log)
    return ap


def _audit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="audit configuration (TOML)")
    p.add_argument("--profile", default=None, metavar="VERSION",
                   help="the brokers' Kafka version or profile, e.g. 3.9 or 4.x (default 4.x, the newest; "
                        "overrides the config)")
    p.add_argument("--producer-id-expiration-ms", type=int, default=None)
    p.add_argument("--transaction-max-timeout-ms", type=int, default=None)
    p.add_argument("--export-time-ms", type=int, default=None, help="'now' for hanging transactions")
    p.add_argument("--dedup-key", default=None, help="key_value (default) or header:<name>")
    p.add_argument("--cleanup-policy", action="append", default=[], metavar="TOPIC=POLICY",
                   help="a topic's cleanup.policy (compact, delete, or compact,delete); repeatable")
    p.add_argument("--log-start", action="append", default=[], metavar="TOPIC:PARTITION=OFFSET",
                   help="a partition's log start offset when the export has none; repeatable")
    p.add_argument("--restart", action="append", default=[], metavar="[TOPIC[:PARTITION]@](offset=N|time=MS)",
                   help="a broker restart or truncation that lost producer state; repeatable")
    p.add_argument("--history", default=None, metavar="PATH",
                   help="append this run's counts per partition to this Parquet history (default OUT.history)")
    p.add_argument("--no-history", action="store_true", help="do not append to the metrics history")
    p.add_argument("--prometheus-file", default=None, metavar="FILE",
                   help="also write the counts in the Prometheus text format (node exporter's textfile collector)")


def _validation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warn", action="append", default=[], metavar="CHECK",
                   help="make this check's failure a warning (exit 0); repeatable")
    p.add_argument("--allow", action="append", default=[], metavar="CHECK=N",
                   help="tolerate up to N offending rows for this check; repeatable")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except (UsageError, FileNotFoundError, NotADirectoryError, PermissionError) as exc:
        if args.debug:
            raise
        print(f"segaudit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `segaudit ... | head`
        return EXIT_OK


def _inspect(args) -> int:
    from analytics.inventory import take_inventory

    inventory = take_inventory(args.logdirs)
    if not inventory.partitions:
        raise UsageError(f"no Kafka partition folders or segments found in {' '.join(args.logdirs)}")
    if args.format == "json":
        doc = {
            "partitions": [dataclasses.asdict(p) for p in inventory.partitions],
            "parse_errors": [dataclasses.asdict(e) for e in inventory.errors],
            "total": inventory.total,
        }
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    columns = ["topic", "partition", "segments", "size_bytes", "batches", "records", "first_offset", "last_offset",
               "producers", "transactional_batches", "commits", "aborts", "codecs", "snapshots", "errors"]
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


def _spark_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--remote", default=None, help="Spark Connect URL, instead of --master")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark configuration")


def _spark(args):
    from analytics.spark.session import JavaMissing, get_spark

    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--conf takes KEY=VALUE, not {item!r}")
        conf[key] = value
    try:
        return get_spark(args.master, remote=args.remote, conf=conf)
    except JavaMissing as exc:
        raise UsageError(str(exc)) from exc


def _export(args) -> int:
    from analytics.export import ExportError, export, stderr_progress
    from analytics.kafka.fs import is_remote

    for path in args.logdirs:
        if not is_remote(path) and not os.path.exists(path):
            raise UsageError(f"no such file or directory: {path}")
    spark = _spark(args)
    try:
        result = export(spark, args.logdirs, args.out, records=args.records, input_format=args.input_format,
                        progress=stderr_progress)
    except ExportError as exc:
        raise UsageError(str(exc)) from exc
    print(render_table(["table", "rows"], sorted(result.rows.items())))
    return EXIT_OK


def _audit_config(args):
    """The configuration file with every flag applied over it."""
    from analytics.audit.config import check_dedup_key, load_config
    from analytics.replay.broker import resolve_profile

    if args.profile is not None:
        try:
            resolve_profile(args.profile)
        except ValueError as exc:
            raise UsageError(f"--profile: {exc}") from exc
    try:
        config = load_config(args.config)
        config = config.with_overrides(
            profile=args.profile,
            producer_id_expiration_ms=args.producer_id_expiration_ms,
            transaction_max_timeout_ms=args.transaction_max_timeout_ms,
            export_time_ms=args.export_time_ms,
            dedup_key=args.dedup_key,
            cleanup_policy=(config.cleanup_policy | dict(_pair(v, "=") for v in args.cleanup_policy)) if args.cleanup_policy else None,
            log_start_offsets=(config.log_start_offsets | dict(_log_start(v) for v in args.log_start)) if args.log_start else None,
            broker_restarts=(config.broker_restarts + tuple(_restart(v) for v in args.restart)) if args.restart else None,
        )
        if args.dedup_key:
            check_dedup_key(args.dedup_key)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the configuration: {exc}") from exc
    return config


def _validation_config(args):
    """The [validation] table of --config with --warn and --allow applied over it."""
    from analytics.audit.config import load_validation_section
    from expectations.suites import ValidationConfig

    try:
        section = load_validation_section(args.config)
        validation = ValidationConfig.from_mapping(section)
        allow = validation.allow | {k: int(v) for k, v in (_pair(a, "=") for a in args.allow)}
        return ValidationConfig(allow=allow, warn=validation.warn | frozenset(args.warn))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the validation configuration: {exc}") from exc


def _audit(args) -> int:
    from analytics.audit.job import audit
    from analytics.export import ExportError, read_manifest

    config = _audit_config(args)
    try:
        read_manifest(args.out)
    except ExportError as exc:
        raise UsageError(str(exc)) from exc
    result = audit(_spark(args), args.out, config, **_history_options(args))
    rows = [[v, n] for v, n in result.verdicts.items() if n]
    print(render_table(["verdict", "batches"], rows))
    print()
    print(render_table(["severity", "batches"], [[s, n] for s, n in result.severities.items()]))
    return EXIT_OK


def _validate(args) -> int:
    from analytics.export import ExportError
    from expectations.validate import validate

    validation = _validation_config(args)
    spark = _spark(args)
    try:
        result = validate(spark, args.out, validation)
    except (ExportError, ValueError) as exc:  # no audit there; unknown check ids
        raise UsageError(str(exc)) from exc
    print(_checks_table(result))
    print(f"\n{_passed(result)}; Data Docs: {result.data_docs}")
    return EXIT_OK if result.success else EXIT_VIOLATION


def _run(args) -> int:
    """export, audit, validate: one Spark application, a short result on stdout, progress on stderr."""
    import time

    from analytics.audit.job import audit
    from analytics.export import ExportError, export, stderr_progress
    from analytics.kafka.fs import is_remote
    from expectations.validate import validate

    for path in args.logdirs:
        if not is_remote(path) and not os.path.exists(path):
            raise UsageError(f"no such file or directory: {path}")
    config, validation = _audit_config(args), _validation_config(args)
    spark = _spark(args)
    started = time.monotonic()
    try:
        exported = export(spark, args.logdirs, args.out, records=args.records, input_format=args.input_format,
                          progress=stderr_progress)
    except ExportError as exc:
        raise UsageError(str(exc)) from exc
    print(f"auditing {exported.rows.get('batches', 0):,} batches ...", file=sys.stderr)
    audited = audit(spark, args.out, config, **_history_options(args))
    print("validating ...", file=sys.stderr)
    validated = validate(spark, args.out, validation)
    print("reporting ...", file=sys.stderr)
    from analytics.report.build import write as write_report

    report = write_report(spark, args.out, _history_options(args)["history"])
    from pyspark.sql import functions as F

    sessions = spark.read.parquet(os.path.join(args.out, "producer_sessions"))
    facts = sessions.agg(F.countDistinct("topic", "partition", "producer_id").alias("producers")).first()
    partitions = spark.read.parquet(os.path.join(args.out, "segments")).select("topic", "partition").distinct().count()
    print(render_table(["", "count"], [
        ["partitions", partitions],
        ["producers", facts["producers"]],
        ["batches", sum(audited.verdicts.values())],
        *[[f"  {v}", n] for v, n in audited.verdicts.items() if n],
        *[[f"severity {s}", n] for s, n in audited.severities.items() if n],
        *[[f"transactions {s}", n] for s, n in audited.transactions.items() if n],
    ]))
    print()
    print(_checks_table(validated))
    print(f"\n{_passed(validated)} in {time.monotonic() - started:.1f} s; Data Docs: {validated.data_docs}; "
          f"report: {report}")
    return EXIT_OK if validated.success else EXIT_VIOLATION


def _history_options(args) -> dict:
    from analytics.report.history import default_history_path

    history = None if args.no_history else (args.history or default_history_path(args.out))
    return {"history": history, "prometheus_file": args.prometheus_file}


def _audited(args) -> None:
    from analytics.audit.job import read_audit
    from analytics.export import ExportError

    try:
        read_audit(args.out)
    except ExportError as exc:
        raise UsageError(str(exc)) from exc


def _report(args) -> int:
    from analytics.report.build import write

    _audited(args)
    print(write(_spark(args), args.out, args.history))
    return EXIT_OK


def _explain(args) -> int:
    from analytics.forensics import NotFound, explain

    _audited(args)
    try:
        e = explain(_spark(args), args.out, args.topic, args.partition, args.offset, context=args.context,
                    log_dir=args.log_dir)
    except NotFound as exc:
        raise UsageError(str(exc)) from exc
    if args.format == "json":
        print(json.dumps(dataclasses.asdict(e), indent=2, default=str))
        return EXIT_OK
    print(f"{e.topic}-{e.partition} offset {e.offset}" + (f" in {e.log_dir}" if len(e.log_dirs) > 1 else ""))
    for b in e.batches:
        print(f"  batch {b['base_offset']}..{b['last_offset']} in {b['file']} at byte {b['file_position']}: "
              f"{b['verdict']} ({b['severity']}{', explained by ' + b['explained_by'] if b['explained_by'] else ''})")
    print()
    for line in e.reasoning:
        print(f"  {line}")
    neighbours = [*e.before, *e.batches[:1], *e.after] if e.batches else [r for r in e.nearest.values() if r]
    if neighbours:
        title = f"producer {e.batches[0]['producer_id']}, batches around it" if e.batches else "the batches around it"
        print(f"\n{title}:")
        here = e.batches[0]["base_offset"] if e.batches else None
        print(render_table(["", "base_offset", "last_offset", "epoch", "sequences", "idle_ms", "verdict", "explained_by"], [
            [">" if r["base_offset"] == here else "", r["base_offset"], r["last_offset"], r["producer_epoch"],
             "-" if r["is_control"] else f"{r['base_sequence']}..{r['last_sequence']}", r["idle_ms"],
             r["verdict"] if not r["is_control"] else f"{r['verdict']} {r['control_type'] or ''}".rstrip(),
             r["explained_by"]]
            for r in neighbours]))
    return EXIT_OK


def _producer(args) -> int:
    from analytics.forensics import NotFound, producer_history, utc

    _audited(args)
    try:
        h = producer_history(_spark(args), args.out, args.producer_id, topic=args.topic, limit=args.limit)
    except NotFound as exc:
        raise UsageError(str(exc)) from exc
    if args.format == "json":
        print(json.dumps(dataclasses.asdict(h), indent=2, default=str))
        return EXIT_OK
    # a partition exported from several log dirs (replicas) has a session per log dir: they are
    # shown apart, and the header counts the batches of each partition's first log dir only
    dirs = sorted({s.get("log_dir") for s in h.sessions}, key=str)
    first_dir = {}
    for s in sorted(h.sessions, key=lambda s: str(s.get("log_dir"))):
        first_dir.setdefault((s["topic"], s["partition"]), s.get("log_dir"))
    batches = sum(s["batches"] for s in h.sessions if s.get("log_dir") == first_dir[(s["topic"], s["partition"])])
    print(f"producer {h.producer_id}: partitions {len(first_dir)}, "
          f"epochs {sorted({s['producer_epoch'] for s in h.sessions})}, batches {batches:,}, "
          f"findings {h.findings_total:,}, transactions {h.transactions_total:,}"
          + (f", log dirs {len(dirs)} (batches counted in the first log dir of each partition)" if len(dirs) > 1 else "")
          + "\n")
    print("sessions (one per topic, partition and epoch" + (", in each log dir):" if len(dirs) > 1 else "):"))
    print(render_table(["topic", "partition", *(["log_dir"] if len(dirs) > 1 else []), "epoch", "offsets", "sequences",
                        "first_time", "last_time", "batches", "records", "findings"], [
        [s["topic"], s["partition"], *([s.get("log_dir")] if len(dirs) > 1 else []), s["producer_epoch"],
         f"{s['first_offset']}..{s['last_offset']}",
         "-" if s["first_sequence"] is None else f"{s['first_sequence']}..{s['last_sequence']}",
         utc(s["first_timestamp"]), utc(s["last_timestamp"]),
         s["batches"], s["records"], _session_findings(s)] for s in h.sessions]))
    # with several log dirs, every table names the log dir of each row
    where = (lambda r: [r["log_dir"]]) if len(dirs) > 1 else (lambda r: [])
    head = ["log_dir"] if len(dirs) > 1 else []
    if h.epoch_changes:
        print("\nepoch changes:")
        print(render_table(["topic", "partition", *head, "from", "to", "at_offset", "at_time", "verdict"], [
            [c["topic"], c["partition"], *where(c), c["from_epoch"], c["to_epoch"], c["at_offset"], utc(c["at_timestamp"]),
             c["verdict"]] for c in h.epoch_changes]))
    print(f"\nfindings ({len(h.findings)} of {h.findings_total}):" if h.findings else "\nfindings: none")
    if h.findings:
        print(render_table(["topic", "partition", *head, "offset", "epoch", "sequences", "expected", "verdict", "explained_by"], [
            [f["topic"], f["partition"], *where(f), f["base_offset"], f["producer_epoch"],
             f"{f['base_sequence']}..{f['last_sequence']}", f["expected_sequence"], f["verdict"], f["explained_by"]]
            for f in h.findings]))
    if h.transactions:
        print(f"\ntransactions ({len(h.transactions)} of {h.transactions_total}, unfinished first):")
        print(render_table(["topic", "partition", *head, "epoch", "first_offset", "end_offset", "status"], [
            [t["topic"], t["partition"], *where(t), t["producer_epoch"], t["first_offset"], t["end_offset"], t["status"]]
            for t in h.transactions]))
    print(f"\nlongest pauses (producer.id.expiration.ms = {h.expiration_ms}):")
    print(render_table(["topic", "partition", *head, "offset", "after_offset", "idle_ms", "verdict", "explained_by"], [
        [i["topic"], i["partition"], *where(i), i["base_offset"], i["prev_base_offset"], i["idle_ms"], i["verdict"],
         i["explained_by"]] for i in h.idle]))
    return EXIT_OK


def _session_findings(s: dict) -> str:
    from analytics.audit.job import VERDICTS

    return ", ".join(f"{v} {s[v.lower()]}" for v in VERDICTS
                     if v not in ("OK", "EPOCH_BUMP", "CONTROL_MARKER", "NON_IDEMPOTENT") and s.get(v.lower()))


def _sql(args) -> int:
    import csv

    from pyspark.errors import AnalysisException, ParseException

    from analytics.forensics import NotFound, run_sql

    if not os.path.isdir(args.out) and "://" not in args.out:
        raise UsageError(f"no such directory: {args.out}")
    # a mistyped query is reported in one line below, not as PySpark's logged JSON traceback
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        df = run_sql(_spark(args), args.out, args.query)
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
                writer.writerow(["" if v is None else _plain(v) for v in r])
        else:
            for r in rows:
                sys.stdout.write(json.dumps({k: _plain(v) for k, v in r.asDict(recursive=True).items()}, default=str) + "\n")
    except (NotFound, AnalysisException, ParseException) as exc:
        raise UsageError(str(exc).strip().splitlines()[0]) from exc
    return EXIT_OK


def _plain(v):
    """JSON- and CSV-friendly: bytes as hex (keys are arbitrary bytes), the rest as they are."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _checks_table(result) -> str:
    rows = [[c.suite, c.id, "pass" if c.success else ("WARN" if c.severity == "warning" else "FAIL"),
             c.unexpected_count] for c in result.checks]
    return render_table(["suite", "check", "result", "offending rows"], rows)


def _passed(result) -> str:
    passed = sum(c.success for c in result.checks)
    failed = [c for c in result.checks if not c.success]
    warned = sum(c.severity == "warning" for c in failed)
    text = f"{passed}/{len(result.checks)} expectations passed"
    if failed:
        text += f", {len(failed) - warned} failed" + (f", {warned} warnings" if warned else "")
    return text


def _pair(text: str, sep: str) -> tuple[str, str]:
    key, found, value = text.rpartition(sep)
    if not found or not key or not value:
        raise ValueError(f"expected KEY{sep}VALUE, not {text!r}")
    return key, value


def _log_start(text: str) -> tuple[tuple[str, int], int]:
    where, offset = _pair(text, "=")
    topic, partition = _pair(where, ":")
    return (topic, int(partition)), int(offset)


def _restart(text: str):
    """``[TOPIC[:PARTITION]@](offset=N|time=MS)``.

    >>> _restart("orders:3@offset=120"), _restart("time=5")
    (Restart(time_ms=None, offset=120, topic='orders', partition=3), Restart(time_ms=5, offset=None, topic=None, partition=None))
    """
    from analytics.audit.config import Restart

    where, _, what = text.rpartition("@")
    kind, value = _pair(what, "=")
    if kind not in ("offset", "time"):
        raise ValueError(f"--restart takes offset=N or time=MS, not {what!r}")
    topic, partition = None, None
    if where:
        topic, _, part = where.partition(":")
        partition = int(part) if part else None
    return Restart(int(value) if kind == "time" else None, int(value) if kind == "offset" else None, topic, partition)


def _scenario_names() -> list[str]:
    from analytics.generate.scenarios import SCENARIO_NAMES

    return list(SCENARIO_NAMES)


def _generate(args) -> int:
    from analytics.generate import generate
    from analytics.replay.broker import resolve_profile

    if args.scenario not in _scenario_names():
        raise UsageError(f"unknown scenario {args.scenario!r}; choose from {', '.join(_scenario_names())}")
    if args.profile is not None:
        try:
            resolve_profile(args.profile)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    if args.scale < 1:
        raise UsageError("--scale must be at least 1")
    try:
        result = generate(args.logdir, args.scenario, seed=args.seed, scale=args.scale, profile=args.profile)
    except FileExistsError as exc:
        raise UsageError(str(exc)) from exc
    print(f"wrote {result.log_dir} ({result.batches:,} batches) and its ground truth in {result.truth_dir}")
    print(render_table(["verdict", "batches"], sorted(result.verdicts.items())))
    return EXIT_OK


def _dump_log(args) -> int:
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
            raise FileNotFoundError(f"no such file: {path}")

    def warn(message: str) -> None:
        sys.stdout.flush()
        sys.stderr.write(message + "\n")

    for path in files:
        for line in dump_file(path, deep=args.deep, print_data=args.print_data_log,
                              skip_record_metadata=args.skip_record_metadata,
                              kafka_version=args.kafka_version, warn=warn):
            sys.stdout.write(line + "\n")
    return EXIT_OK


def render_table(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A plain aligned text table; numbers right-aligned, None as an empty cell.

    >>> print(render_table(["a", "b"], [[1, "x"], [None, "yy"]]))
    a  b
    -  --
    1  x
       yy
    """
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row[i], int) or row[i] is None for row in rows) and rows for i in range(len(columns))]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(list(columns)), line(["-" * w for w in widths])] + [line(r) for r in cells])


if __name__ == "__main__":
    sys.exit(main())
