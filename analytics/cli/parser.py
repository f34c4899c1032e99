"""The command line's grammar: every command, its options with their help, and the exit codes.

A mistake on the command line is one line on stderr, ``segaudit <command>: <what>``, with the
closest option or command (``did you mean --out?``) or a pointer to ``segaudit <command> --help``,
and exit 2 (:class:`Parser`). Values are checked while parsing (:mod:`analytics.cli.arguments`),
so none of these mistakes waits for a JVM.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn

from analytics import __version__
from analytics.cli import commands
from analytics.cli.arguments import (
    as_of,
    bucket,
    export_folder,
    integer,
    new_out,
    non_negative,
    positive,
    readable_file,
    readable_path,
)
from analytics.cli.options import add_audit_options, add_cluster_options, add_spark_options, add_validation_options
from analytics.contract import (
    EXIT_BUG,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_USAGE,
    EXIT_VIOLATION,
)
from analytics.errors import did_you_mean

# Every exit code, what it means, and the commands it concerns (None: every command). The reference's
# table of exit codes is generated from it (docs/reference/exit-codes.md).
EXIT_CODES = (
    (EXIT_OK, "success (run, validate: every expectation is met)", None),
    (EXIT_VIOLATION, "the data violates an expectation (run, validate), or records are missing or doubled "
                     "(reconcile)", ("run", "validate", "reconcile")),
    (EXIT_USAGE, "bad usage, unreadable input, or a missing or out-of-step stage in OUT: one line on stderr", None),
    (EXIT_BUG, "a failure segaudit did not expect: one line on stderr asking for a report", None),
    (EXIT_NOT_FOUND, "no batch holds the offset asked for; the answer says where it falls (explain)", ("explain",)),
    (EXIT_SIGINT, "interrupted by SIGINT (Ctrl-C); OUT keeps its previous complete run", None),
    (EXIT_SIGTERM, "terminated by SIGTERM; OUT keeps its previous complete run", None),
)
FORMATS = ("text", "json")
FORMAT_HELP = "text for people (the default), or json: one JSON document on stdout (docs/reference/json-output.md)"


def exit_codes(command: str | None = None) -> str:
    """The ``exit codes:`` paragraph of ``--help``: every code, or those of ``command``."""
    rows = [(code, meaning) for code, meaning, commands in EXIT_CODES
            if command is None or commands is None or command in commands]
    return "exit codes:\n" + "\n".join(f"  {code:<5}{meaning}" for code, meaning in rows)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose every error is one line naming the command, and exit 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.commands: dict[str, Parser] = {}

    def add_command(self, sub, name: str, help: str, epilog: str | None = None) -> Parser:  # noqa: A002
        """A command: its parser, described by ``help`` in both ``segaudit --help`` and its own, with its exit codes."""
        p = sub.add_parser(name, help=help, description=help,
                           epilog="\n\n".join(filter(None, [epilog, exit_codes(name)])))
        self.commands[name] = p
        return p

    def parse_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        if self.commands:
            self._check_words(args)
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            target = self.commands.get(getattr(namespace, "command", None), self)
            target.error(f"unexpected argument {extras[0]!r}")
        return namespace

    def _check_words(self, args: list[str]) -> None:
        """An unknown command or option, before argparse would report something else about it (a
        missing ``--out`` when ``--outt`` was typed): with the closest known name."""
        i = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
        if i is None or args[:i].count("--"):
            return
        name = args[i]
        if name not in self.commands:
            self.error(f"unknown command {name!r}{did_you_mean(name, self.commands, quote=str)}")
        command = self.commands[name]
        known = [s for action in command._actions for s in action.option_strings]
        for arg in args[i + 1:]:
            if arg == "--":
                break
            flag = arg.split("=", 1)[0]
            if not flag.startswith("-") or command._negative_number_matcher.match(arg):
                continue
            if not any(k.startswith(flag) for k in known):
                command.error(f"unknown option {flag}{did_you_mean(flag, known, quote=str)}")

    def error(self, message: str) -> NoReturn:
        what = _plain(message)
        hint = "" if any(s in what for s in SUGGESTS) else f"; see {self.prog} --help"
        self.exit(EXIT_USAGE, f"{self.prog}: {what}{hint}\n")


# A message that already says what to give needs no pointer to --help (each value type's message
# ends with what the option takes: analytics.cli.arguments).
SUGGESTS = ("did you mean", "`segaudit ", "give ", "; checks: ")
CHOICE = re.compile(r"^argument (?P<arg>[^:]+): invalid choice: '?(?P<value>.*?)'? \(choose from (?P<choices>.*)\)$")
REQUIRED = "the following arguments are required: "


def _plain(message: str) -> str:
    """argparse's message in fewer words, with the closest choice for an invalid one.

    >>> _plain("argument --format: invalid choice: 'jsn' (choose from 'text', 'json')")
    "--format: 'jsn' is not one of text, json (did you mean json?)"
    >>> _plain("the following arguments are required: --out")
    'missing --out'
    """
    m = CHOICE.match(message)
    if m:
        choices = [c.strip().strip("'") for c in m["choices"].split(",")]
        return f"{m['arg']}: {m['value']!r} is not one of {', '.join(choices)}" + did_you_mean(
            m["value"], choices, quote=str)
    if message.startswith(REQUIRED):
        return "missing " + message[len(REQUIRED):]
    return message.removeprefix("argument ")


def parser() -> Parser:
    ap = Parser(
        prog="segaudit",
        description="Audit Apache Kafka log segments: read them byte for byte, replay the broker's producer rules.",
        epilog=exit_codes(),
    )
    ap.add_argument("--version", action="version", version=f"segaudit {__version__}",
                    help="print segaudit's version and exit")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND",
                            help="what to do; segaudit COMMAND --help says how")
    logdirs = "log dir, partition folder or .log file; or kafka://HOST:PORT[,...] (a live cluster)"

    p = ap.add_command(sub, "inspect", "what log directories hold, per partition and log dir (no Spark needed)")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR",
                   help="log dir, partition folder or .log file; or an export's OUT (read from its tables)")
    p.add_argument("--format", choices=["text", "table", "json"], default="text",
                   help="text (or table, the same) for people, or json: one JSON document on stdout")
    p.add_argument("--max-errors", type=non_negative, default=20, help="parse errors to list (all are counted)")
    p.set_defaults(run=commands.inspect)

    p = ap.add_command(sub, "export", "segments (or kafka-dump-log.sh text, or a live cluster) to Parquet tables, "
                                      "with Spark")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR", help=logdirs)
    p.add_argument("--out", required=True, metavar="OUT", type=new_out,
                   help="folder for the tables (replaced atomically)")
    p.add_argument("--records", action="store_true", help="also export one row per record")
    p.add_argument("--incremental", action="store_true",
                   help="read only the segment files new or changed since the export in OUT; keep the others' rows")
    _input_format(p)
    add_cluster_options(p)
    add_spark_options(p)
    p.set_defaults(run=commands.export)

    p = ap.add_command(sub, "run", "the main job: export, audit, validate and report in one Spark application")
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR", help=logdirs)
    p.add_argument("--out", required=True, metavar="OUT", type=new_out,
                   help="folder for the tables, audit and validation")
    p.add_argument("--records", dest="records", action="store_true", default=True,
                   help="export one row per record (the default for run)")
    p.add_argument("--no-records", dest="records", action="store_false",
                   help="skip the records table (and so the record-duplicate check)")
    _input_format(p)
    add_cluster_options(p)
    add_audit_options(p)
    add_validation_options(p)
    _format(p)
    add_spark_options(p)
    p.set_defaults(run=commands.run)

    p = ap.add_command(sub, "audit", "replay the broker's producer rules over an export; verdict per batch")
    p.add_argument("out", metavar="OUT", type=export_folder, help="an export folder (segaudit export ... --out OUT)")
    add_audit_options(p)
    _format(p)
    add_spark_options(p)
    p.set_defaults(run=commands.audit)

    p = ap.add_command(sub, "validate", "run the Great Expectations suites on an audit; Data Docs and results.json")
    p.add_argument("out", metavar="OUT", type=export_folder, help="an audited folder (segaudit audit OUT)")
    p.add_argument("--config", default=None, metavar="FILE", type=readable_file,
                   help="configuration (TOML) whose [validation] table sets thresholds")
    add_validation_options(p)
    _format(p)
    add_spark_options(p)
    p.set_defaults(run=commands.validate)

    p = ap.add_command(sub, "report", "write OUT/report/index.html: summary, timelines, sequences, idle times, "
                                      "trends")
    p.add_argument("out", metavar="OUT", type=export_folder, help="an audited export")
    p.add_argument("--history", default=None, metavar="PATH", help="the metrics history to chart (default OUT.history)")
    p.add_argument("--output", default=None, metavar="FILE",
                   help="write the page to this local file instead of publishing it into OUT (with --as-of, "
                        "default segaudit-report-v<VERSION>.html here)")
    _as_of(p)
    add_spark_options(p)
    p.set_defaults(run=commands.report)

    p = ap.add_command(sub, "open", "the latest report as a local page whose Data Docs link works, opened in a "
                                    "browser from a terminal; its file URL on stdout")
    p.add_argument("out", metavar="OUT", type=export_folder, help="an audited export with a report")
    p.add_argument("--into", default=None, metavar="DIR",
                   help="where a report from a bucket (or --as-of) is copied (default: a new temporary folder)")
    _as_of(p)
    p.set_defaults(run=commands.open_report)

    p = ap.add_command(sub, "reconcile", "per time bucket: records in the log, copies, distinct, against "
                                         "producer-side counts: expected, missing")
    p.add_argument("out", metavar="OUT", type=export_folder, help="an audited export with records (--records)")
    p.add_argument("--expected", default=None, metavar="FILE", type=readable_path,
                   help="producer-side counts, CSV or Parquet: bucket_start, expected, and topic, partition when per them")
    p.add_argument("--bucket", default="10m", type=bucket, metavar="SIZE",
                   help="the bucket size: milliseconds, or 30s, 10m, 1h, 1d (default 10m)")
    p.add_argument("--limit", type=non_negative, default=50,
                   help="buckets to print (all are written to OUT/reconciliation)")
    _format(p)
    add_spark_options(p)
    p.set_defaults(run=commands.reconcile)

    p = ap.add_command(sub, "explain", "the batch holding an offset, its producer's neighbours, the verdict and why")
    p.add_argument("out", metavar="OUT", type=export_folder, help="an audited export")
    p.add_argument("--topic", required=True, help="the topic of the offset")
    p.add_argument("--partition", required=True, type=non_negative, metavar="P", help="the partition of the offset")
    p.add_argument("--offset", required=True, type=non_negative, metavar="O", help="the offset to explain")
    p.add_argument("--context", type=non_negative, default=3, metavar="N",
                   help="neighbouring batches of the producer on each side (default 3)")
    p.add_argument("--log-dir", default=None, metavar="DIR",
                   help="for a partition exported from several log dirs (brokers): the one to explain, its path "
                        "or trailing part (default: the first holding the offset)")
    _as_of(p)
    _format(p)
    add_spark_options(p)
    p.set_defaults(run=commands.explain)

    p = ap.add_command(sub, "producer", "one producer's history: epochs, sequence ranges, gaps, transactions, pauses")
    p.add_argument("out", metavar="OUT", type=export_folder, help="an audited export")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--producer-id", type=integer, metavar="ID", help="the producer id (-1: batches without one)")
    who.add_argument("--transactional-id", help="every producer id this transactional id had (from __transaction_state)")
    p.add_argument("--topic", default=None, help="only this topic")
    p.add_argument("--limit", type=non_negative, default=50, help="findings and transactions to list (all are counted)")
    _as_of(p)
    _format(p)
    add_spark_options(p)
    p.set_defaults(run=commands.producer)

    p = ap.add_command(sub, "sql", "Spark SQL over every table of OUT, each a view of its name")
    p.add_argument("out", metavar="OUT", type=export_folder, help="an export or an audited export")
    p.add_argument("query", help='for example "SELECT verdict, count(*) FROM batch_verdicts GROUP BY verdict"')
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (at most --limit rows), or every row as CSV or JSON lines")
    p.add_argument("--limit", type=non_negative, default=1000, help="rows shown by --format table")
    _as_of(p)
    add_spark_options(p)
    p.set_defaults(run=commands.sql)

    p = ap.add_command(sub, "generate", "write a real Kafka log directory for a named scenario, with ground truth")
    p.add_argument("logdir", metavar="LOGDIR", help="where to write (must not exist or be empty)")
    p.add_argument("--scenario", required=True, metavar="NAME", help="one of: " + ", ".join(commands.scenario_names()))
    p.add_argument("--seed", type=integer, default=0, help="the seed of every random choice: the same seed, the "
                                                           "same bytes (default 0)")
    p.add_argument("--scale", type=positive, default=1, help="multiply the bulk of the scenario (for benchmarks)")
    p.add_argument("--profile", default=None, metavar="VERSION",
                   help="the simulated broker's profile or Kafka version (default: the scenario's, else 2.7)")
    p.add_argument("--progress", action="store_true",
                   help="say how far it got every 5 s also when stderr is not a terminal (on a terminal it always does)")
    p.set_defaults(run=commands.generate)

    p = ap.add_command(sub, "dump-log", "print segments as kafka-dump-log.sh --deep-iteration would")
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


def _input_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input-format", choices=["segments", "dump-log"], default="segments",
                   help="segments: Kafka's files (the default); dump-log: the text kafka-dump-log.sh "
                        "--deep-iteration printed")


def _as_of(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as-of", type=as_of, default=None, metavar="VERSION|TIME",
                   help="answer from a past version of OUT: a commit's number, or a time (ISO 8601, UTC unless "
                        "given), whose latest commit is read; kept for at least 7 days (SEGAUDIT_RETENTION_HOURS)")


def _format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="text", help=FORMAT_HELP)

