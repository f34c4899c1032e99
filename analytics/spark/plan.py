"""What the driver does before any file is read: list the inputs and turn them into tasks.

Only names and sizes are looked at here; file contents are read by the tasks, on executors.
"""

from __future__ import annotations

from pathlib import Path

from analytics.kafka.discovery import LogDir, discover
from analytics.kafka.logdir import file_errors as logdir_file_errors
from analytics.kafka.logdir import size_or_zero
from analytics.kafka.model import ParseError

# (index, path, topic, partition, base_offset, size): the fields of a FileTask
Task = tuple[int, str, str, int, int, int]


def plan_files(paths: list[str], table: str, input_format: str = "segments") -> list[Task]:
    """The files that hold ``table``, in a stable order (log dir, topic, partition, base offset)."""
    if input_format == "dump-log":
        files = []
        for p in paths:
            root = Path(p)
            if not root.exists():
                raise FileNotFoundError(f"no such file or directory: {p}")
            files += sorted(f for f in root.rglob("*") if f.is_file()) if root.is_dir() else [root]
        return [(i, str(f), "", -1, -1, size_or_zero(f)) for i, f in enumerate(files)]
    if table == "sidecars":
        return _renumber([t for kind in SIDECARS for t in plan_files(paths, kind, input_format)])
    out: list[Task] = []
    for log_dir in _log_dirs(paths):
        if table == "checkpoints":
            out += [(0, str(f), "", -1, -1, size_or_zero(f)) for f in log_dir.checkpoints.values()]
            continue
        for part in log_dir.partitions:
            if table in ("batches", "records"):
                files = [(s.path, s.base_offset) for s in part.segments]
            elif table == "producer_snapshots":
                files = [(s.path, s.base_offset) for s in part.snapshots]
            elif table == "aborted_transactions":
                files = [(s.path, s.base_offset) for s in part.txn_indexes]
            elif table == "leader_epochs":
                files = [(part.leader_epoch_checkpoint, -1)] if part.leader_epoch_checkpoint else []
            else:  # partition_metadata
                files = [(part.partition_metadata, -1)] if part.partition_metadata else []
            out += [(0, str(f), part.topic, part.partition, base, size_or_zero(f)) for f, base in files]
    return _renumber(out)


SIDECARS = ("producer_snapshots", "aborted_transactions", "leader_epochs", "checkpoints", "partition_metadata")


def _renumber(tasks: list[Task]) -> list[Task]:
    return [(i, *t[1:]) for i, t in enumerate(tasks)]


def file_errors(paths: list[str]) -> list[ParseError]:
    """Errors for files no task reads: unknown files, and temporary files the broker had not finished with."""
    return [e for log_dir in _log_dirs(paths) for e in logdir_file_errors(log_dir)]


def _log_dirs(paths: list[str]) -> list[LogDir]:
    return [log_dir for p in paths for log_dir in discover(p)]
