"""``segaudit``: the one place failures become a line on stderr and an exit code.

The grammar is :mod:`analytics.cli.parser` (``parser`` is imported here too, for the jobs). Exit
codes (``analytics.contract``, listed by ``--help``: ``parser.EXIT_CODES``): 0 success, 1 the data
violates an expectation, 2 bad usage, unreadable input or a missing/stale stage, 3 a failure
segaudit did not expect ("please report"), 4 no batch holds the offset asked for (``explain``),
130/143 interrupted by SIGINT/SIGTERM. Every failure is one line on stderr; the traceback only
with ``--debug``.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from analytics import progress
from analytics.cli import signals
from analytics.cli.parser import parser
from analytics.contract import EXIT_BUG, EXIT_OK, EXIT_USAGE
from analytics.errors import Interrupted, SegauditError
from analytics.spark import jvmlog

ISSUES = "https://github.com/segaudit/segaudit/issues"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already said in one line
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    progress.configure(getattr(args, "progress", False) or _on_terminal())
    return guarded(lambda: _reachable(args) or args.run(args), args.command, debug=args.debug)


def _reachable(args) -> None:
    """An ``OUT`` in a bucket is asked once before the command starts: a wrong endpoint, credentials,
    bucket or region is one line at once, not after the clients' retries or a JVM's start."""
    out = getattr(args, "out", None)
    if isinstance(out, str) and "://" in out and not out.startswith("file://"):
        from analytics.kafka.fs import check_exists

        check_exists(out)


def _on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


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
        jvmlog.show_on_terminal(False)


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
    store = _store_failure(exc)
    if store:
        return SegauditError(store)
    if isinstance(exc, OSError) and (exc.filename or exc.strerror):
        where = f": {exc.filename}" if exc.filename else ""
        return SegauditError(f"{exc.strerror or exc}{where}")
    if isinstance(exc, FileNotFoundError):  # pyarrow's, of a remote path: its message names the path
        return SegauditError(_first_line(exc))
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


def _store_failure(exc: BaseException) -> str | None:
    """An object store's refusal (credentials, endpoint, bucket, region) from pyarrow or boto3:
    the user's to fix, never a bug (:func:`analytics.kafka.fs.store_problem`)."""
    if not isinstance(exc, OSError) and type(exc).__module__.split(".")[0] not in ("botocore", "boto3"):
        return None
    from analytics.kafka.fs import store_problem

    return store_problem(exc)


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
    sys.stderr.write(line + "\n")  # one write: a signal never splits the line from its end
    sys.stderr.flush()


def _quiet_shutdown() -> None:
    """After the one line: the JVM's and the interpreter's shutdown messages are not the operator's business."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
    except OSError:
        pass
