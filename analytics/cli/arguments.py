"""The values of the command line's options, checked while the command line is parsed.

Each function here is an argparse ``type``: it returns the value the command uses or raises
``argparse.ArgumentTypeError``, which the parser (:mod:`analytics.cli.parser`) reports as one line
naming the command and the option, exit 2. So a negative offset, an unknown check, a missing
configuration file or a Kafka log directory given for ``OUT`` is answered before any library is
imported and before any JVM starts.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex

from analytics.errors import UsageError, did_you_mean
from analytics.contract.vocabulary import OUT_SCHEMES

Invalid = argparse.ArgumentTypeError


def integer(text: str) -> int:
    """An integer, such as a producer id or a seed.

    >>> integer("-1")
    -1
    """
    try:
        return int(text)
    except ValueError:
        raise Invalid(f"{text!r} is not an integer") from None


def non_negative(text: str) -> int:
    """An integer of 0 or more: an offset, a partition, a count of rows.

    >>> non_negative("0")
    0
    """
    value = integer(text)
    if value < 0:
        raise Invalid(f"{text!r} is negative; give 0 or more")
    return value


def positive(text: str) -> int:
    """An integer of 1 or more: a size, a timeout, a multiplier."""
    value = integer(text)
    if value < 1:
        raise Invalid(f"{text!r} is not positive; give 1 or more")
    return value


def positive_number(text: str) -> float:
    """A number above 0, such as a rate in bytes per second."""
    try:
        value = float(text)
    except ValueError:
        raise Invalid(f"{text!r} is not a number") from None
    if not value > 0:  # also NaN
        raise Invalid(f"{text!r} is not above 0")
    return value


def readable_file(text: str) -> str:
    """A local file the command reads (a configuration, client properties), checked before Spark starts."""
    return _readable(text, folder=False)


def readable_path(text: str) -> str:
    """A local file or folder the command reads (CSV, or Parquet which may be a folder); a URI is left
    to the filesystem that reads it."""
    return text if "://" in text else _readable(text, folder=True)


def _readable(text: str, *, folder: bool) -> str:
    if not os.path.exists(text):
        raise Invalid(f"no such file: {text}")
    if os.path.isdir(text) and not folder:
        raise Invalid(f"{text} is a folder, not a file")
    if not os.access(text, os.R_OK | (os.X_OK if os.path.isdir(text) else 0)):
        raise Invalid(f"cannot read {text}: permission denied")
    return text


def check_name(text: str) -> str:
    """The id of an expectation check (``--warn``).

    >>> check_name("no_crc_failure")
    'no_crc_failure'
    """
    from expectations.suites import check_ids

    known = check_ids()
    if text not in known:
        hint = did_you_mean(text, known)
        raise Invalid(f"unknown check {text!r}" + (hint or f"; checks: {', '.join(known)}"))
    return text


def allowance(text: str) -> tuple[str, int]:
    """``CHECK=N`` (``--allow``): a check id and the offending rows it tolerates, 0 or more.

    >>> allowance("no_zombie_write=3")
    ('no_zombie_write', 3)
    """
    check, sep, n = text.rpartition("=")
    if not sep or not check:
        raise Invalid(f"{text!r}: give CHECK=N, e.g. no_zombie_write=3")
    try:
        rows = int(n)
    except ValueError:
        rows = -1
    if rows < 0:
        raise Invalid(f"{text!r}: give CHECK=N, N the offending rows tolerated (0 or more)")
    return check_name(check), rows


def bucket(text: str) -> int:
    """A bucket size in milliseconds: a number of ms, or with s, m, h or d (``10m``).

    >>> bucket("10m")
    600000
    """
    from analytics.reconcile import parse_bucket

    return _checked(parse_bucket, text)


def time_value(text: str) -> str:
    """A time, milliseconds since the epoch or ISO 8601 (checked here, converted by :func:`parse_time`)."""
    _checked(lambda t: parse_time(t, "TIME"), text)
    return text


def parse_time(value: str | None, option: str) -> int | None:
    """Milliseconds since the epoch from ``value``: an integer, or an ISO 8601 time (UTC unless it says).

    >>> parse_time("1700000000000", "--from-time"), parse_time("2023-11-14T22:13:20Z", "--from-time")
    (1700000000000, 1700000000000)
    """
    from datetime import datetime, timezone

    if value is None:
        return None
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option}: {value!r} is neither milliseconds since the epoch nor an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return int(t.timestamp() * 1000)


def grammar(parse, form: str):
    """A type that checks ``text`` with ``parse`` (an option grammar of :mod:`analytics.cli.options`,
    which raises ValueError) and returns it unchanged, for the configuration to apply later; ``form``
    is what the option takes.

    >>> from analytics.cli.options import log_start
    >>> grammar(log_start, "TOPIC:PARTITION=OFFSET")("orders:0=5")
    'orders:0=5'
    """

    def check(text: str) -> str:
        try:
            parse(text)
        except ValueError:
            raise Invalid(f"{text!r}: give {form}") from None
        return text

    check.__name__ = parse.__name__
    return check


def _checked(parse, text: str):
    """``parse(text)``, its UsageError or ValueError as the type's error (without the option's name,
    which the parser puts first)."""
    try:
        return parse(text)
    except (UsageError, ValueError) as exc:
        raise Invalid(re.sub(r"^(--[\w-]+|TIME)(: | )", "", str(exc))) from None


# -- OUT: an export, never a Kafka log directory ---------------------------------------------------------

def shared_folder(text: str) -> str:
    """``OUT`` is a local folder (on a cluster: one the driver and the executors share) or a bucket
    (``s3://``): what a commit can be created in (``analytics.publish``). Another URI (``gs://``,
    ``abfs://``, ``hdfs://``) is refused before any work."""
    scheme, sep, _ = text.partition("://")
    if sep and scheme.lower() != "file" and scheme.lower() not in OUT_SCHEMES:
        raise Invalid(f"{text}: OUT on {scheme}:// is not supported yet; give a local folder or an s3:// bucket "
                      "(LOGDIR may be read from any URI pyarrow opens)")
    return text


def as_of(text: str):
    """``--as-of``: a version of ``OUT`` (its commit's number) or a time, ISO 8601, UTC unless it says
    otherwise (``2026-11-24``, ``2026-11-24T03:00``, ``2026-11-24T03:00:00+01:00``): the latest commit
    at or before it.

    >>> as_of("3"), as_of("2026-11-24T03:00Z").timestamp_ms
    (AsOf(version=3, timestamp_ms=None), 1795489200000)
    """
    from datetime import datetime, timezone

    from analytics.publish import AsOf

    if text.isdigit():
        return AsOf(version=int(text))
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise Invalid(f"{text!r} is neither a version (a number) nor a time (ISO 8601, e.g. 2026-11-24T03:00Z)") \
            from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return AsOf(timestamp_ms=int(when.timestamp() * 1000))


def export_folder(text: str) -> str:
    """``OUT`` of a command that reads an export: refused when it is a Kafka log directory, a
    partition folder or a segment file, with the command that audits it (:func:`kafka_data`)."""
    shared_folder(text)
    root = kafka_data(text)
    if root is not None:
        raise Invalid(f"{text} is {_what(text)}, not an export; to audit it, run "
                      f"`segaudit run {shlex.quote(text)} --out OUT` with OUT a new folder outside {root}")
    return text


def new_out(text: str) -> str:
    """``--out`` of ``export`` and ``run``: refused when it is a Kafka log directory, a partition folder
    or a segment file, or lies directly in one, where the tables would be written among the broker's
    own files (a broker refuses to load a log dir holding a folder that is no partition's)."""
    shared_folder(text)
    root = kafka_data(text)
    if root is not None:
        raise Invalid(f"{text} is {_what(text)}: the tables would be written among the broker's files; "
                      f"give a new folder outside {root}")
    parent = os.path.dirname(os.path.normpath(text)) or "."
    root = kafka_data(parent, depth=1) if "://" not in text else None
    if root is not None:
        raise Invalid(f"{text} is in {_what(parent)}: the tables would be written among the broker's files; "
                      f"give a new folder outside {root}")
    return text


def _what(path: str) -> str:
    if os.path.isfile(path):
        return "a Kafka segment file"
    from analytics.kafka.discovery import parse_partition_dir

    if parse_partition_dir(os.path.basename(os.path.normpath(path))) and _holds_partition_files(path):
        return "a Kafka partition folder"
    return "a Kafka log directory"


# How far a folder is looked into for partition folders: a log dir, or a copied tree that holds
# log dirs a level down (``backup/broker-1/orders-0``), read at most this many entries per folder.
LOOK_INTO = 2
ENTRIES = 1000


def kafka_data(path: str, depth: int = LOOK_INTO) -> str | None:
    """The Kafka log directory ``path`` is or lies in, when it is one (or a copied tree of them), a
    partition folder (``<topic>-<partition>`` holding segments or a partition's sidecars) or a
    segment file: the folder to stay outside of. None for anything else (an export, a new folder,
    a URI). Only ``depth`` levels are looked into, so a large tree given by mistake costs little.

    >>> kafka_data("s3://bucket/kafka-logs"), kafka_data("no/such/folder")
    (None, None)
    """
    from analytics.contract import EXPORT, MANIFESTS
    from analytics.kafka.discovery import OFFSET_FILE, parse_partition_dir
    from analytics.kafka.sidecars.checkpoints import CHECKPOINT_FILES

    if "://" in path or not os.path.exists(path):
        return None
    path = os.path.normpath(path)
    parent = os.path.dirname(path) or "."
    if os.path.isfile(path):
        if not (path.endswith(".log") or OFFSET_FILE.match(os.path.basename(path))):
            return None
        return (os.path.dirname(parent) or ".") if parse_partition_dir(os.path.basename(parent)) else parent
    if os.path.isfile(os.path.join(path, MANIFESTS[EXPORT])):
        return None  # an export (its tables may sit beside anything)
    if parse_partition_dir(os.path.basename(path)) and _holds_partition_files(path):
        return parent
    if any(name in CHECKPOINT_FILES for name in _names(path)):
        return path
    return path if _holds_partitions(path, depth) else None


def _names(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [e.name for _, e in zip(range(ENTRIES), entries)]
    except OSError:
        return []


def _holds_partition_files(folder: str) -> bool:
    from analytics.kafka.discovery import OFFSET_FILE
    from analytics.kafka.sidecars.checkpoints import LEADER_EPOCH_CHECKPOINT
    from analytics.kafka.sidecars.metadata import PARTITION_METADATA

    return any(OFFSET_FILE.match(n) or n in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA) for n in _names(folder))


def _holds_partitions(folder: str, depth: int) -> bool:
    from analytics.kafka.discovery import parse_partition_dir

    if depth <= 0:
        return False
    subfolders = [os.path.join(folder, n) for n in _names(folder) if os.path.isdir(os.path.join(folder, n))
                  and not os.path.islink(os.path.join(folder, n))]
    if any(parse_partition_dir(os.path.basename(s)) and _holds_partition_files(s) for s in subfolders):
        return True
    return any(_holds_partitions(s, depth - 1) for s in subfolders)
