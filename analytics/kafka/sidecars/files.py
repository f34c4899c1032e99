"""One sidecar file read from disk, its reader chosen by its name: :func:`read_sidecar`."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

from analytics.kafka.errors import UNKNOWN_FILE, not_read
from analytics.kafka.model import ParseError, SidecarResult
from analytics.kafka.sidecars.checkpoints import (
    CHECKPOINT_FILES,
    LEADER_EPOCH_CHECKPOINT,
    LOG_DIR_PARTITION,
    LOG_DIR_TOPIC,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
)
from analytics.kafka.sidecars.metadata import PARTITION_METADATA, read_partition_metadata
from analytics.kafka.sidecars.snapshot import SNAPSHOT_SUFFIX, read_snapshot, snapshot_offset_from_name
from analytics.kafka.sidecars.txnindex import TXNINDEX_SUFFIX, read_txnindex


def read_sidecar(path: Path, *, topic: str, partition: int) -> SidecarResult:
    """Read one sidecar file, choosing the reader by its name.

    Names handled: ``*.snapshot``, ``*.txnindex``, ``leader-epoch-checkpoint``,
    ``partition.metadata`` and the keys of :data:`CHECKPOINT_FILES`; any other name raises
    ``ValueError``, since the caller decides which files are sidecars. Error rows name the file by
    ``str(path)``. For a log-dir checkpoint ``topic`` and ``partition`` are not used (see
    :func:`read_offset_checkpoint`). A file the operating system refuses to read is one
    ``unreadable`` row. A valid ``.snapshot`` file with no entry is one marker row (null producer
    fields, :func:`~analytics.kafka.sidecars.snapshot.empty_snapshot_marker`): the export keeps its offset.
    """
    name = path.name
    file = str(path)
    decode = _reader_for(name, topic=topic, partition=partition, file=file)
    if decode is None:
        raise ValueError(f"{name} is not a sidecar file")
    if name in CHECKPOINT_FILES:
        topic, partition = LOG_DIR_TOPIC, LOG_DIR_PARTITION
    try:
        data = path.read_bytes()
    except OSError as exc:
        kind, message = not_read(exc, f"cannot read {name}")
        return SidecarResult(errors=[ParseError(topic, partition, file, 0, kind, message, _size_or_zero(path))])
    return decode(data)


def _reader_for(
    name: str, *, topic: str, partition: int, file: str
) -> Callable[[bytes], SidecarResult] | None:
    if name in CHECKPOINT_FILES:
        return lambda data: read_offset_checkpoint(data, checkpoint=CHECKPOINT_FILES[name], file=file)
    if name == LEADER_EPOCH_CHECKPOINT:
        return lambda data: read_leader_epoch_checkpoint(data, topic=topic, partition=partition, file=file)
    if name == PARTITION_METADATA:
        return lambda data: read_partition_metadata(data, topic=topic, partition=partition, file=file)
    if name.endswith(TXNINDEX_SUFFIX):
        return lambda data: read_txnindex(data, topic=topic, partition=partition, file=file)
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    offset = snapshot_offset_from_name(name)
    if offset is None:
        # Kafka names every snapshot by its offset; without one its rows would have no snapshot_offset.
        message = "a .snapshot file whose name is not a 20-digit offset"
        return lambda data: SidecarResult(
            errors=[ParseError(topic, partition, file, 0, UNKNOWN_FILE, message, len(data))]
        )
    return lambda data: read_snapshot(
        data, topic=topic, partition=partition, file=file, snapshot_offset=offset, mark_empty=True
    )


def _size_or_zero(path: Path) -> int:
    # An unreadable file's bytes are still accounted for when stat works; a directory has no bytes of data.
    try:
        status = path.stat()
    except OSError:
        return 0
    return status.st_size if stat.S_ISREG(status.st_mode) else 0
