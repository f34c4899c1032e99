"""What the driver does before any file is read: list the inputs as :class:`FileTask` values.

Only names and sizes are looked at here; file contents are read by the tasks, on executors.
Every listing is in a stable order (log dir, topic, partition, base offset) and numbered from 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from analytics.contract.vocabulary import SIDECAR_TABLES
from analytics.kafka.discovery import LogDir, discover
from analytics.kafka.logdir import file_errors as logdir_file_errors
from analytics.kafka.logdir import size_or_zero
from analytics.kafka.model import ParseError
from analytics.spark.files import FileTask

# Where a file sits: (topic, partition, base offset, path); what FileTask holds but its index and size.
_Entry = tuple[str, int, int, Path]


def segment_files(paths: list[str], input_format: str = "segments") -> list[FileTask]:
    """The files holding segments: the ``.log`` files of the inputs, or for ``dump-log`` input
    (``kafka-dump-log.sh`` text) every file under them."""
    if input_format == "dump-log":
        return _numbered(("", -1, -1, f) for f in _every_file(paths))
    return _numbered(
        (part.topic, part.partition, s.base_offset, s.path)
        for log_dir in _log_dirs(paths) for part in log_dir.partitions for s in part.segments
    )


def kafka_log_dirs(paths: list[str]) -> bool:
    """Whether the inputs are Kafka data with no segment in it: a log dir with its checkpoints, or
    partition folders (a broker with no topic yet, topics with no partition written): an export of
    zero batches, not a mistake."""
    return any(log_dir.partitions or log_dir.checkpoints for log_dir in _log_dirs(paths))


def sidecar_files(paths: list[str], tables: Iterable[str] = SIDECAR_TABLES) -> list[FileTask]:
    """The files holding ``tables`` (sidecar tables of the contract), table by table."""
    tables = tuple(tables)
    unknown = [t for t in tables if t not in SIDECAR_TABLES]
    if unknown:
        raise ValueError(f"not sidecar tables: {', '.join(unknown)} (those are {', '.join(SIDECAR_TABLES)})")
    log_dirs = _log_dirs(paths)
    return _numbered(entry for table in tables for log_dir in log_dirs for entry in _sidecars(log_dir, table))


def file_errors(paths: list[str]) -> list[ParseError]:
    """Errors for files no task reads: unknown files, and temporary files the broker had not finished with."""
    return [e for log_dir in _log_dirs(paths) for e in logdir_file_errors(log_dir)]


def _sidecars(log_dir: LogDir, table: str) -> Iterator[_Entry]:
    if table == "checkpoints":  # the log dir's own files, of no partition
        yield from (("", -1, -1, f) for f in log_dir.checkpoints.values())
        return
    for part in log_dir.partitions:
        if table == "producer_snapshots":
            files = [(s.path, s.base_offset) for s in part.snapshots]
        elif table == "aborted_transactions":
            files = [(s.path, s.base_offset) for s in part.txn_indexes]
        elif table == "leader_epochs":
            files = [(part.leader_epoch_checkpoint, -1)] if part.leader_epoch_checkpoint else []
        else:  # partition_metadata
            files = [(part.partition_metadata, -1)] if part.partition_metadata else []
        yield from ((part.topic, part.partition, base, f) for f, base in files)


def _every_file(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        root = Path(p)
        if not root.exists():
            raise FileNotFoundError(f"no such file or directory: {p}")
        files += sorted(f for f in root.rglob("*") if f.is_file()) if root.is_dir() else [root]
    return files


def _numbered(entries: Iterable[_Entry]) -> list[FileTask]:
    return [FileTask(i, str(path), topic, partition, base, size_or_zero(path))
            for i, (topic, partition, base, path) in enumerate(entries)]


def _log_dirs(paths: list[str]) -> list[LogDir]:
    return [log_dir for p in paths for log_dir in discover(p)]
