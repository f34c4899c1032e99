"""``segaudit``: the argument parser, and the one place failures become a line on stderr and an exit code.

Exit codes (``analytics.contract``): 0 success, 1 the data violates an expectation, 2 bad usage,
unreadable input or a missing/stale stage, 3 a failure segaudit did not expect ("please report"),
130/143 interrupted by SIGINT/SIGTERM. Every failure is one line on stderr; the traceback only
with ``--debug``.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from analytics import __version__
from analytics.cli import commands, signals
from analytics.cli.options import add_audit_options, add_cluster_options, add_spark_options, add_validation_options
from analytics.contract import EXIT_BUG, EXIT_OK
from analytics.errors import Interrupted, SegauditError
from analytics.spark import jvmlog

ISSUES = "https://github.com/segaudit/segaudit/issues"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="segaudit",
        description="Audit Apache Kafka log segments: read them byte for byte, replay the broker's producer rules.",
    )
    ap.add_argument("--version", action="version", version=f"segaudit {__version__}")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("inspect", help="what log directories hold, per partition and log dir (no Spark needed)")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR",
                   help="log dir, partition folder or .log file; or an export's OUT (read from its tables)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--max-errors", type=int, default=20, help="parse errors to list (all are counted)")
    p.set_defaults(run=commands.inspect)

    p = sub.add_parser("export", help="segments (or kafka-dump-log.sh text, or a live cluster) to Parquet tables, "
                                      "with Spark")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR",
                   help="log dir, partition folder or .log file; or kafka://HOST:PORT[,...] (a live cluster)")
    p.add_argument("--out", required=True, metavar="OUT", help="folder for the tables (replaced atomically)")
    p.add_argument("--records", action="store_true", help="also export one row per record")
    p.add_argument("--incremental", action="store_true",
                   help="read only the segment files new or changed since the export in OUT; keep the others' rows")
    p.add_argument("--input-format", choices=["segments", "dump-log"], default="segments")
    add_cluster_options(p)
    add_spark_options(p)
    p.set_defaults(run=commands.export)

    p = sub.add_parser("run", help="the main job: export, audit, validate and report in one Spark application")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR",
                   help="log dir, partition folder or .log file; or kafka://HOST:PORT[,...] (a live cluster)")
    p.add_argument("--out", required=True, metavar="OUT", help="folder for the tables, audit and validation")
    p.add_argument("--records", dest="records", action="store_true", default=True,
                   help="export one row per record (the default for run)")
    p.add_argument("--no-records", dest="records", action="store_false",
                   help="skip the records table (and so the record-duplicate check)")
    p.add_argument("--input-format", choices=["segments", "dump-log"], default="segments")
    add_cluster_options(p)
    add_audit_options(p)
    add_validation_options(p)
    add_spark_options(p)
    p.set_defaults(run=commands.run)

    p = sub.add_parser("audit", help="replay the broker's producer rules over an export; verdict per batch")
    p.add_argument("out", metavar="OUT", help="an export folder (segaudit export ... --out OUT)")
    add_audit_options(p)
    add_spark_options(p)
    p.set_defaults(run=commands.audit)

    p = sub.add_parser("validate", help="run the Great Expectations suites on an audit; Data Docs and results.json")
    p.add_argument("out", metavar="OUT", help="an audited folder (segaudit audit OUT)")
    p.add_argument("--config", default=None, help="configuration (TOML) whose [validation] table sets thresholds")
    add_validation_options(p)
    add_spark_options(p)
    p.set_defaults(run=commands.validate)

    p = sub.add_parser("report", help="write OUT/report/index.html: summary, timelines, sequences, idle times, trends")
    p.add_argument("out", metavar="OUT", help="an audited export")
    p.add_argument("--history", default=None, metavar="PATH", help="the metrics history to chart (default OUT.history)")
    add_spark_options(p)
    p.set_defaults(run=commands.report)

    p = sub.add_parser("reconcile", help="per time bucket: records in the log, copies, distinct, against producer-side "
                                         "counts: expected, missing")
    p.add_argument("out", metavar="OUT", help="an audited export with records (--records)")
    p.add_argument("--expected", default=None, metavar="FILE",
                   help="producer-side counts, CSV or Parquet: bucket_start, expected, and topic, partition when per them")
    p.add_argument("--bucket", default="10m", help="the bucket size: milliseconds, or 30s, 10m, 1h, 1d (default 10m)")
    p.add_argument("--limit", type=int, default=50, help="buckets to print (all are written to OUT/reconciliation)")
    add_spark_options(p)
    p.set_defaults(run=commands.reconcile)

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
    add_spark_options(p)
    p.set_defaults(run=commands.explain)

    p = sub.add_parser("producer", help="one producer's history: epochs, sequence ranges, gaps, transactions, pauses")
    p.add_argument("out", metavar="OUT", help="an audited export")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--producer-id", type=int)
    who.add_argument("--transactional-id", help="every producer id this transactional id had (from __transaction_state)")
    p.add_argument("--topic", default=None, help="only this topic")
    p.add_argument("--limit", type=int, default=50, help="findings and transactions to list (all are counted)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    add_spark_options(p)
    p.set_defaults(run=commands.producer)

    p = sub.add_parser("sql", help="Spark SQL over every table of OUT, each a view of its name")
    p.add_argument("out", metavar="OUT", help="an export or an audited export")
    p.add_argument("query", help='for example "SELECT verdict, count(*) FROM batch_verdicts GROUP BY verdict"')
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (at most --limit rows), or every row as CSV or JSON lines")
    p.add_argument("--limit", type=int, default=1000, help="rows shown by --format table")
    add_spark_options(p)
    p.set_defaults(run=commands.sql)

    p = sub.add_parser("generate", help="write a real Kafka log directory for a named scenario, with ground truth")
    p.add_argument("logdir", metavar="LOGDIR", help="where to write (must not exist or be empty)")
    p.add_argument("--scenario", required=True, metavar="NAME", help="one of: " + ", ".join(commands.scenario_names()))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scale", type=int, default=1, help="multiply the bulk of the scenario (for benchmarks)")
    p.add_argument("--profile", default=None, metavar="VERSION",
                   help="the simulated broker's profile or Kafka version (default: the scenario's, else 2.7)")
    p.set_defaults(run=commands.generate)

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
    p.set_defaults(run=commands.dump_log)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return guarded(lambda: args.run(args), args.command, debug=args.debug)


def command() -> int:
    """The ``segaudit`` process (the console script, ``python -m analytics``): :func:`main`, then an
    exit without the interpreter's last garbage collection, a walk over every object the modules of
    Spark, Great Expectations and pandas made (0.6 s after a ``run``, docs/benchmarks.md), which
    frees nothing for a process that is ending. Objects made from here on are collected as usual."""
    code = main()
    gc.freeze()
    return code


def guarded(action, command: str, *, debug: bool = False) -> int:
    """``action()``'s exit code; any failure becomes one line on stderr and its exit code
    (the traceback only with ``debug``). SIGINT and SIGTERM interrupt it cleanly."""
    # Py4J logs a traceback of its own when a call is cut short, PySpark a JSON record of every
    # failed query: the one line below says it all
    for name in ("py4j", "SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    if debug:
        jvmlog.show_on_terminal()  # the JVM's log and output too
    signals.install()
    try:
        return action()
    except BrokenPipeError:  # `segaudit ... | head`
        return EXIT_OK
    except BaseException as exc:
        failure = _failure(exc, command)
        if debug:
            traceback.print_exc()
        _say(f"segaudit: {failure}")
        if isinstance(failure, Interrupted):
            _quiet_shutdown()
        return failure.exit_code
    finally:
        signals.restore()


def _failure(exc: BaseException, command: str) -> SegauditError | Interrupted:
    """The failure to report for ``exc``, with its exit code (3 for one segaudit did not expect)."""
    if isinstance(exc, Interrupted):
        return exc if exc.stage else Interrupted(exc.signal_name, command)
    if isinstance(exc, SegauditError):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted("SIGINT", command)
    interrupted = signals.received()
    if interrupted:  # a Spark call cut short by the signal's cancellation
        return Interrupted(interrupted, command)
    if isinstance(exc, OSError) and (exc.filename or exc.strerror):
        where = f": {exc.filename}" if exc.filename else ""
        return SegauditError(f"{exc.strerror or exc}{where}")
    spark = _spark_failure(exc)
    if spark:
        return SegauditError(spark)
    gx = _gx_failure(exc)
    if gx:
        return SegauditError(gx)
    bug = SegauditError(f"unexpected {type(exc).__name__}: {_first_line(exc)} (a bug in segaudit: please report it "
                        f"at {ISSUES} with the output of the same command with --debug)")
    bug.exit_code = EXIT_BUG
    return bug


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _spark_failure(exc: BaseException) -> str | None:
    """One line for an error raised by Spark (an analysis error, a failed job, the JVM gone)."""
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError:
        return None
    if isinstance(exc, PySparkException):
        if exc.getCondition() == "JAVA_GATEWAY_EXITED":  # the JVM did not start: its log says why
            return f"Spark: the JVM exited as it started: {jvmlog.last_line() or 'no reason given'}{_jvm_log()}"
        from pyspark.errors import AnalysisException

        # a query's own mistake (an unknown column, bad SQL) needs no log to be understood
        return f"Spark: {_first_line(exc)}{'' if isinstance(exc, AnalysisException) else _jvm_log()}"
    if isinstance(exc, Py4JError):
        return f"Spark (JVM): {_java_root_cause(exc) or _first_line(exc)}{_jvm_log()}"
    return None


def _jvm_log() -> str:
    """Where the JVM's own account of a Spark failure is, when it wrote to a log file."""
    path = jvmlog.current()
    return f" (the JVM's log: {path})" if path else ""


def _java_root_cause(exc) -> str | None:
    """The innermost Java exception of a failed call: where a full disk or a refused write shows."""
    try:
        cause = exc.java_exception
        for _ in range(50):
            inner = cause.getCause()
            if inner is None:
                break
            cause = inner
        return str(cause.toString()).strip().splitlines()[0]
    except Exception:  # noqa: BLE001 - the JVM may be gone; the first line of the error is reported then
        return None


def _gx_failure(exc: BaseException) -> str | None:
    module = type(exc).__module__ or ""
    if module.startswith("great_expectations"):
        return f"Great Expectations: {_first_line(exc)}"
    return None


def _say(line: str) -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    print(line, file=sys.stderr, flush=True)


def _quiet_shutdown() -> None:
    """After the one line: the JVM's and the interpreter's shutdown messages are not the operator's business."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
    except OSError:
        pass
