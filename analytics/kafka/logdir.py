"""Read whole log directories into Arrow tables with the pure-Python reader.

This is the single-process path (tests, the ``inspect`` command, small exports): every table
is held in memory. The Spark data source reads the same files through the same
:class:`~analytics.kafka.reader.SegmentScanner`, one file per task, and never collects.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from analytics.contract import schemas as schema
from analytics.contract.vocabulary import SIDECAR_TABLES
from analytics.kafka import errors as E
from analytics.kafka.codecs import DEFAULT_MAX_DECOMPRESSED_BYTES
from analytics.kafka.discovery import LogDir, PartitionDir, discover
from analytics.kafka.fs import RemotePath, edge_crc, local_path, open_file
from analytics.kafka.model import ParseError, SegmentInfo
from analytics.kafka.reader import DEFAULT_WINDOW, Chunk, SegmentScanner
from analytics.kafka.sidecars import read_sidecar


@dataclass(slots=True)
class SegmentRead:
    batches: pa.Table
    records: pa.Table | None
    errors: list[ParseError]
    info: SegmentInfo


@dataclass(slots=True)
class LogDirTables:
    """Every table the reader yields for a set of inputs."""

    batches: list[pa.RecordBatch] = field(default_factory=list)
    records: list[pa.RecordBatch] | None = None
    segments: list[SegmentInfo] = field(default_factory=list)
    parse_errors: list[ParseError] = field(default_factory=list)
    producer_snapshots: list = field(default_factory=list)
    aborted_transactions: list = field(default_factory=list)
    leader_epochs: list = field(default_factory=list)
    checkpoints: list = field(default_factory=list)
    partition_metadata: list = field(default_factory=list)

    def table(self, name: str) -> pa.Table:
        """One table by its contract name, with its explicit schema."""
        target = schema.READ_SCHEMAS[name]
        rows = getattr(self, name)
        # The scanner's tables are held as Arrow record batches, the others as row dataclasses.
        if target in (schema.BATCHES, schema.RECORDS_RAW):
            if rows is None:
                raise ValueError("records were not read (records=False)")
            return pa.Table.from_batches(rows, schema=target)
        return pa.Table.from_pylist([row_dict(r, target) for r in rows], schema=target)




def row_dict(obj, target: pa.Schema) -> dict:
    """A row dataclass as a dict of ``target``'s columns (None for columns it lacks)."""
    d = dataclasses.asdict(obj)
    return {name: d.get(name) for name in target.names}


def stream_segment(
    path: str | os.PathLike,
    *,
    topic: str = "",
    partition: int = -1,
    base_offset: int = -1,
    records: bool = False,
    window: int = DEFAULT_WINDOW,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    after: SegmentInfo | None = None,
) -> Generator[Chunk, None, tuple[SegmentInfo, list[ParseError]]]:
    """Yield a segment's chunks; return its ``SegmentInfo`` and errors. Never raises on bad files:
    an unreadable file is one ``unreadable`` error, a read failing half-way an error for the rest.
    ``after``: the ``SegmentInfo`` of a read of the file's head, whole valid batches only (a
    segment that grew since): only the bytes after it are read, and the info returned is the
    whole file's."""
    file = str(path)
    try:
        source = open_file(file)
    except OSError as exc:
        size = size_or_zero(file)
        error = ParseError(topic, partition, file, 0, *E.not_read(exc), size)
        return SegmentInfo(topic, partition, file, base_offset, size, 0, 0, None, None, error.error_kind), [error]
    with source:
        scanner = SegmentScanner(
            source,
            topic=topic,
            partition=partition,
            file=file,
            base_offset=base_offset,
            records=records,
            window=window,
            max_decompressed_bytes=max_decompressed_bytes,
            after=after,
        )
        try:
            yield from scanner
            # the fingerprint of the bytes read, for the next incremental export (not of a failed read:
            # a file whose read failed is read again)
            return dataclasses.replace(scanner.info, edge_crc=edge_crc(source)), scanner.errors
        except OSError as exc:
            position = scanner.valid_bytes + sum(e.bytes_affected for e in scanner.errors)
            scanner.errors.append(
                ParseError(topic, partition, file, position, E.UNREADABLE, f"read failed: {exc}", source.size - position)
            )
        return scanner.info, scanner.errors


def read_segment(path: str | os.PathLike, *, records: bool = False, **options) -> SegmentRead:
    """Read one segment file into tables (see :func:`stream_segment` for the options)."""
    stream = stream_segment(path, records=records, **options)
    chunks = []
    while True:
        try:
            chunks.append(next(stream))
        except StopIteration as done:
            info, errors = done.value
            break
    batches = pa.Table.from_batches([c.batches for c in chunks], schema=schema.BATCHES)
    recs = pa.Table.from_batches([c.records for c in chunks], schema=schema.RECORDS_RAW) if records else None
    return SegmentRead(batches, recs, errors, info)


def size_or_zero(path) -> int:
    if isinstance(path, RemotePath):
        return max(path.size, 0)
    try:
        return os.stat(local_path(path)).st_size
    except OSError:
        return 0


def read_log_dirs(
    paths: Iterable[str | os.PathLike],
    *,
    records: bool = False,
    window: int = DEFAULT_WINDOW,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> LogDirTables:
    """Read every partition below ``paths`` (log dirs, partition folders or single files)."""
    out = LogDirTables(records=[] if records else None)
    for path in paths:
        for log_dir in discover(path):
            _read_log_dir(log_dir, out, records=records, window=window, max_decompressed_bytes=max_decompressed_bytes)
    return out


def _read_log_dir(log_dir: LogDir, out: LogDirTables, **options) -> None:
    for path in log_dir.checkpoints.values():
        _sidecar(path, "", -1, out)
    out.parse_errors.extend(file_errors(log_dir))
    for part in log_dir.partitions:
        _read_partition(part, out, **options)


def file_errors(log_dir: LogDir) -> list[ParseError]:
    """Errors for the files of a log dir that hold nothing to read: unknown and temporary files."""
    errors = [_file_error("", -1, f, E.UNKNOWN_FILE, "not a file a Kafka broker writes in a log directory")
              for f in log_dir.unknown]
    for part in log_dir.partitions:
        errors += [_file_error(part.topic, part.partition, f, E.TEMPORARY_FILE,
                               "a temporary file the broker had not finished with") for f in part.temporary]
        errors += [_file_error(part.topic, part.partition, f, E.UNKNOWN_FILE,
                               "not a file a Kafka broker writes in a partition folder") for f in part.unknown]
    return errors


def _read_partition(part: PartitionDir, out: LogDirTables, *, records: bool, **options) -> None:
    for segment in part.segments:
        read = read_segment(
            segment.path,
            topic=part.topic,
            partition=part.partition,
            base_offset=segment.base_offset,
            records=records,
            **options,
        )
        out.batches.extend(read.batches.to_batches())
        if records:
            out.records.extend(read.records.to_batches())
        out.segments.append(read.info)
        out.parse_errors.extend(read.errors)
    sidecars = [s.path for s in part.snapshots] + [s.path for s in part.txn_indexes]
    sidecars += [p for p in (part.leader_epoch_checkpoint, part.partition_metadata) if p is not None]
    for path in sidecars:
        _sidecar(path, part.topic, part.partition, out)


# The table each sidecar row type belongs to, by the type's name: the row types of the contract's
# SIDECAR_TABLES, in its order.
SIDECAR_TABLE_OF = dict(
    zip(
        ("SnapshotEntry", "AbortedTxn", "LeaderEpochEntry", "CheckpointEntry", "PartitionMetadata"),
        SIDECAR_TABLES,
        strict=True,
    )
)


def _sidecar(path: Path, topic: str, partition: int, out: LogDirTables) -> None:
    result = read_sidecar(path, topic=topic, partition=partition)
    for row in result.rows:
        getattr(out, SIDECAR_TABLE_OF[type(row).__name__]).append(row)
    out.parse_errors.extend(result.errors)


def _file_error(topic: str, partition: int, path: Path, kind: str, message: str) -> ParseError:
    return ParseError(topic, partition, str(path), 0, kind, message, size_or_zero(path))
