"""Option grammars shared by several commands, and their parsing into the library's config objects.

Every malformed value becomes a :class:`~analytics.errors.UsageError` naming the option.
"""

from __future__ import annotations

import argparse

from analytics.cli import signals
from analytics.cli.arguments import (
    allowance,
    check_name,
    grammar,
    non_negative,
    parse_time,
    positive,
    positive_number,
    readable_file,
    time_value,
)
from analytics.errors import UsageError


def add_audit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, metavar="FILE", type=readable_file, help="audit configuration (TOML)")
    p.add_argument("--profile", default=None, metavar="VERSION",
                   help="the brokers' Kafka version or profile, e.g. 3.9 or 4.x (default 4.x, the newest; "
                        "overrides the config)")
    p.add_argument("--producer-id-expiration-ms", type=positive, default=None, metavar="MS",
                   help="the brokers' producer.id.expiration.ms: a producer idle this long is forgotten "
                        "(default: the profile's, 1 day since Kafka 3.4; overrides the config)")
    p.add_argument("--transaction-max-timeout-ms", type=positive, default=None, metavar="MS",
                   help="the brokers' transaction.max.timeout.ms: the longest a transaction may stay open "
                        "(default 900000, 15 min; overrides the config)")
    p.add_argument("--export-time-ms", type=non_negative, default=None, metavar="MS",
                   help="'now' for hanging transactions, in ms since the epoch (default: when a live cluster's "
                        "export was captured, else the newest batch's timestamp; overrides the config)")
    p.add_argument("--dedup-key", default=None,
                   help="what makes two records copies: delivery (default: key, value, headers and a CreateTime "
                        "batch's timestamp, what a retry repeats), key_value, or header:<name>")
    p.add_argument("--cleanup-policy", action="append", default=[], metavar="TOPIC=POLICY",
                   type=grammar(lambda text: pair(text, "="), "TOPIC=POLICY"),
                   help="a topic's cleanup.policy (compact, delete, or compact,delete); repeatable")
    p.add_argument("--message-timestamp-type", action="append", default=[], metavar="TOPIC=TYPE",
                   type=grammar(lambda text: pair(text, "="), "TOPIC=TYPE"),
                   help="a topic's message.timestamp.type (CreateTime or LogAppendTime); repeatable")
    p.add_argument("--log-start", action="append", default=[], metavar="TOPIC:PARTITION=OFFSET",
                   type=grammar(log_start, "TOPIC:PARTITION=OFFSET"),
                   help="a partition's log start offset when the export has none; repeatable")
    p.add_argument("--restart", action="append", default=[], metavar="[TOPIC[:PARTITION]@](offset=N|time=MS)",
                   type=grammar(restart, "[TOPIC[:PARTITION]@](offset=N or time=MS)"),
                   help="a broker restart or truncation that lost producer state; repeatable")
    p.add_argument("--server-properties", default=None, metavar="FILE", type=readable_file,
                   help="the brokers' server.properties: static settings (producer.id.expiration.ms, "
                        "transaction.max.timeout.ms, log.cleanup.policy, log.message.timestamp.type) below the "
                        "data dir's __cluster_metadata; overrides the config")
    p.add_argument("--range-batches", type=positive, default=None, metavar="N",
                   help="replay a partition's history in ranges of about N batches, each in a task of its own "
                        "(default: as many as a task's memory holds, at least 250000; changes where the work runs, "
                        "never a verdict)")
    p.add_argument("--skip-deleted-topics", action="store_true", default=None,
                   help="leave out the partition folders of deleted topics (a -delete folder of an id the metadata "
                        "log removed, or whose name another topic id now holds); default: audited apart, marked "
                        "topic_deleted")
    p.add_argument("--incremental", action="store_true",
                   help="continue the audit already in OUT: replay only the batches after the state it left "
                        "(the tables equal a full audit's; a changed history is replayed whole)")
    p.add_argument("--history", default=None, metavar="PATH",
                   help="append this run's counts per partition to this Parquet history (default OUT.history)")
    p.add_argument("--no-history", action="store_true", help="do not append to the metrics history")
    p.add_argument("--prometheus-file", default=None, metavar="FILE",
                   help="also write the counts in the Prometheus text format (node exporter's textfile collector)")


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    """Options of an input ``kafka://HOST:PORT[,...]``: a live cluster read over the protocol."""
    g = p.add_argument_group("a live cluster (LOGDIR is kafka://HOST:PORT[,HOST:PORT...])")
    g.add_argument("--topics", default=".*", metavar="PATTERN",
                   help="a regular expression over whole topic names (default: every topic, internal ones too)")
    g.add_argument("--client-config", default=None, metavar="FILE", type=readable_file,
                   help="a Kafka client properties file: security.protocol, sasl.*, ssl.* (PEM stores)")
    g.add_argument("--from-offset", type=non_negative, default=None, metavar="N",
                   help="start each partition at offset N or later")
    g.add_argument("--from-time", default=None, metavar="TIME", type=time_value,
                   help="start each partition at its first record at or after TIME (ms since the epoch, or ISO 8601)")
    g.add_argument("--until-time", default=None, metavar="TIME", type=time_value,
                   help="end each partition before its first record at or after TIME")
    g.add_argument("--max-bytes-per-second", type=positive_number, default=None, metavar="RATE",
                   help="the whole export's fetch rate at most (shared by its concurrent tasks)")
    g.add_argument("--max-fetches-per-broker", type=positive, default=2, metavar="N",
                   help="fetches a broker serves at once for this export at most (default 2)")


def cluster_options(args) -> dict:
    """The live-cluster options of ``args`` as keywords of :func:`analytics.pipeline.export` (their
    values checked by the parser: :mod:`analytics.cli.arguments`)."""
    return {"topics": args.topics, "client_config": args.client_config, "from_offset": args.from_offset,
            "from_time": parse_time(args.from_time, "--from-time"),
            "until_time": parse_time(args.until_time, "--until-time"),
            "max_bytes_per_second": args.max_bytes_per_second, "per_broker": args.max_fetches_per_broker}


def add_validation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warn", action="append", default=[], metavar="CHECK", type=check_name,
                   help="make this check's failure a warning (exit 0); repeatable")
    p.add_argument("--allow", action="append", default=[], metavar="CHECK=N", type=allowance,
                   help="tolerate up to N (0 or more) offending rows for this check; repeatable")


def add_spark_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--remote", default=None, help="Spark Connect URL, instead of --master")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark configuration")
    p.add_argument("--progress", action="store_true",
                   help="say how far a long step got (Spark stages' tasks, files read) every 5 s also when "
                        "stderr is not a terminal, e.g. in a scheduler's log (on a terminal it always does)")


def spark_session(args, plan=None):
    """The Spark session the options ask for (local mode by default), sized for the input of ``plan``
    (the export's plan, :func:`planned_export`: its bytes and whether it is incremental) when the
    caller made one, else for what the command reads (:func:`input_bytes`)."""
    from analytics.spark.session import JavaMissing, get_spark

    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--conf takes KEY=VALUE, not {item!r}")
        conf[key] = value
    size = plan.input_bytes if plan is not None else input_bytes(args)
    incremental = plan.incremental if plan is not None else getattr(args, "incremental", False)
    try:
        storage = [*(getattr(args, "logdirs", None) or []), *filter(None, [getattr(args, "out", None)])]
        session = get_spark(args.master, remote=args.remote, conf=conf, input_bytes=size,
                            incremental=incremental, storage=storage)
    except JavaMissing as exc:
        raise UsageError(str(exc)) from exc
    signals.install()  # again: the new SparkContext put PySpark's own SIGINT handler in place
    return session


def planned_export(args):
    """The plan of the export of ``export`` or ``run`` (:func:`analytics.export_plan.export_plan`): in
    this process when no master or Spark Connect is named and the input is local and small; the one
    place ``--incremental`` is read for them."""
    from analytics.export_plan import STARTED_HERE
    from analytics.export_plan import export_plan as plan

    return plan(args.logdirs, args.out, incremental=getattr(args, "incremental", False),
                session=args.remote or args.master or STARTED_HERE)


def input_bytes(args) -> int | None:
    """About how much the command will read, before Spark starts (:func:`analytics.export_plan.input_bytes`):
    the size of its local LOGDIRs, or of the log its OUT was exported from; for ``--incremental``, what
    is new since the export in OUT. None when unknown (a live cluster, a bucket)."""
    from analytics.export_plan import input_bytes as measured

    return measured(getattr(args, "logdirs", None), getattr(args, "out", None),
                    incremental=getattr(args, "incremental", False))


def check_profile(profile: str | None, option: str = "--profile") -> None:
    from analytics.replay.broker import resolve_profile

    if profile is not None:
        try:
            resolve_profile(profile)
        except ValueError as exc:
            raise UsageError(f"{option}: {exc}") from exc


def audit_config(args, previous: dict | None = None):
    """The configuration file with every flag applied over it; without ``--config``, over the
    configuration the audit whose ``summary.json`` is ``previous`` was given, when there is one."""
    from analytics.audit.config import check_dedup_key, load_config, recorded_config

    check_profile(args.profile)
    try:
        config = load_config(args.config) if args.config or previous is None else recorded_config(previous)
        config = config.with_overrides(
            profile=args.profile,
            producer_id_expiration_ms=args.producer_id_expiration_ms,
            transaction_max_timeout_ms=args.transaction_max_timeout_ms,
            export_time_ms=args.export_time_ms,
            dedup_key=args.dedup_key,
            cleanup_policy=(config.cleanup_policy | dict(pair(v, "=") for v in args.cleanup_policy)) if args.cleanup_policy else None,
            log_start_offsets=(config.log_start_offsets | dict(log_start(v) for v in args.log_start)) if args.log_start else None,
            broker_restarts=(config.broker_restarts + tuple(restart(v) for v in args.restart)) if args.restart else None,
            range_batches=args.range_batches,
            server_properties=args.server_properties,
            skip_deleted_topics=getattr(args, "skip_deleted_topics", None),
            message_timestamp_type=(config.message_timestamp_type | dict(pair(v, "=") for v in args.message_timestamp_type))
            if args.message_timestamp_type else None,
        )
        if config.server_properties is not None:  # a file that cannot be read: one line before Spark
            from analytics.audit.settings import read_server_properties
            read_server_properties(config.server_properties)
        if args.dedup_key:
            check_dedup_key(args.dedup_key)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the configuration: {exc}") from exc
    return config


def validation_config(args):
    """The [validation] table of --config with --warn and --allow applied over it."""
    from analytics.audit.config import load_validation_section
    from expectations.suites import ValidationConfig, check_ids, unknown_check_ids

    try:
        section = load_validation_section(args.config)
        validation = ValidationConfig.from_mapping(section)
        allow = validation.allow | dict(args.allow)  # (check, rows) pairs: arguments.allowance
        validation = ValidationConfig(allow=allow, warn=validation.warn | frozenset(args.warn))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the validation configuration: {exc}") from exc
    why = unknown_check_ids(validation, check_ids())  # before Spark starts
    if why:
        raise UsageError(why)
    return validation


def history_options(args) -> dict:
    """``history`` and ``prometheus_file`` for :func:`analytics.pipeline.audit`."""
    from analytics.report.history import default_history_path

    history = None if args.no_history else (args.history or default_history_path(args.out))
    return {"history": history, "prometheus_file": args.prometheus_file}


def pair(text: str, sep: str) -> tuple[str, str]:
    key, found, value = text.rpartition(sep)
    if not found or not key or not value:
        raise ValueError(f"expected KEY{sep}VALUE, not {text!r}")
    return key, value


def log_start(text: str) -> tuple[tuple[str, int], int]:
    where, offset = pair(text, "=")
    topic, partition = pair(where, ":")
    return (topic, int(partition)), int(offset)


def restart(text: str):
    """``[TOPIC[:PARTITION]@](offset=N|time=MS)``.

    >>> restart("orders:3@offset=120"), restart("time=5")
    (Restart(time_ms=None, offset=120, topic='orders', partition=3), Restart(time_ms=5, offset=None, topic=None, partition=None))
    """
    from analytics.audit.config import Restart

    where, _, what = text.rpartition("@")
    kind, value = pair(what, "=")
    if kind not in ("offset", "time"):
        raise ValueError(f"--restart takes offset=N or time=MS, not {what!r}")
    topic, partition = None, None
    if where:
        topic, _, part = where.partition(":")
        partition = int(part) if part else None
    return Restart(int(value) if kind == "time" else None, int(value) if kind == "offset" else None, topic, partition)
