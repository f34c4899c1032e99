"""The files a simulated broker writes, byte for byte as Kafka lays them out.

:class:`PartitionFiles` writes one partition folder: segment files named by their 20-digit base
offset (streamed batch by batch, or written whole), a torn or zero-filled tail, and the sidecars
(``.snapshot`` per offset, ``.txnindex`` per segment, ``leader-epoch-checkpoint``,
``partition.metadata``). :func:`write_log_dir_files` writes what sits beside the partition folders:
the four offset checkpoints and ``meta.properties``. What goes into the files is the caller's;
the bytes come from :mod:`analytics.kafka.writer` and :mod:`analytics.kafka.sidecars`.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from analytics.generate.batches import Segment, WrittenBatch
from analytics.kafka import sidecars
from analytics.kafka.model import AbortedTxn, CheckpointEntry, LeaderEpochEntry, SnapshotEntry
from analytics.kafka.writer import segment_file_name

# Called for each batch as it reaches its file: the file and the batch's position in it.
OnWritten = Callable[[Path, int, WrittenBatch], None]


class PartitionFiles:
    """One partition folder. ``on_written`` sees every batch the moment it is written."""

    def __init__(self, directory: Path, on_written: OnWritten) -> None:
        self.directory = directory
        self._on_written = on_written
        self._active: BinaryIO | None = None  # streaming: the active segment's open file
        self._active_path: Path | None = None

    def append(self, segment: Segment, batch: WrittenBatch) -> None:
        """Stream ``batch`` to the end of ``segment``'s file, opening the file on its first batch."""
        if self._active is None:
            self._open_active(segment)
        self._write(self._active, self._active_path, segment.size, batch)

    def close_active(self) -> None:
        """The segment rolled: its file is complete."""
        if self._active is not None:
            self._active.close()
            self._active = None

    def finish_streaming(self, active: Segment) -> Path:
        """Close the streamed log at shutdown; Kafka keeps an active segment file even when it is empty.
        Returns the last segment's file."""
        if self._active is None:
            self._open_active(active)
        self.close_active()
        return self._active_path

    def write_segments(self, segments: Iterable[Segment]) -> Path:
        """Write kept segments whole, each batch at its position; returns the last segment's file."""
        for seg in segments:
            path = self._segment_path(seg)
            with open(path, "wb") as f:
                position = 0
                for b in seg.batches:
                    self._write(f, path, position, b)
                    position += len(b.data)
        return path

    def append_tail(self, path: Path, tail: bytes) -> None:
        """Bytes after the last batch that are no batch: a torn write or a preallocated zero tail."""
        with open(path, "ab") as f:
            f.write(tail)

    def write_sidecars(
        self,
        topic: str,
        partition: int,
        *,
        snapshots: Mapping[int, Sequence[tuple]],
        aborted: Iterable[tuple[int, AbortedTxn]],
        leader_epochs: Iterable[tuple[int, int]],
        topic_id: str,
    ) -> None:
        """``snapshots``: producer-state entries by snapshot offset; ``aborted``: (segment base
        offset, entry) for the ``.txnindex`` files; ``leader_epochs``: (epoch, start offset)."""
        folder = self.directory
        folder.mkdir(parents=True, exist_ok=True)
        for offset, entries in sorted(snapshots.items()):
            rows = [SnapshotEntry(topic, partition, offset, *e) for e in entries]
            (folder / segment_file_name(offset, ".snapshot")).write_bytes(sidecars.write_snapshot(rows))
        by_segment: dict[int, list[AbortedTxn]] = {}
        for seg_base, entry in aborted:
            by_segment.setdefault(seg_base, []).append(entry)
        for seg_base, entries in by_segment.items():
            (folder / segment_file_name(seg_base, ".txnindex")).write_bytes(sidecars.write_txnindex(entries))
        epochs = [LeaderEpochEntry(topic, partition, e, o) for e, o in leader_epochs]
        (folder / "leader-epoch-checkpoint").write_bytes(sidecars.write_leader_epoch_checkpoint(epochs))
        (folder / "partition.metadata").write_bytes(sidecars.write_partition_metadata(topic_id))

    def _open_active(self, segment: Segment) -> None:
        self._active_path = self._segment_path(segment)
        self._active = open(self._active_path, "wb")  # noqa: SIM115 (closed at roll or shutdown)

    def _segment_path(self, segment: Segment) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.directory / segment_file_name(segment.base_offset)

    def _write(self, f: BinaryIO, path: Path, position: int, batch: WrittenBatch) -> None:
        f.write(batch.stored_data)
        self._on_written(path, position, batch)


def write_log_dir_files(root: Path, partitions: Sequence) -> None:
    """The log-dir checkpoints and ``meta.properties``. ``partitions``: objects with ``topic``,
    ``partition``, ``log_start_offset``, ``next_offset`` and ``cleaner_offset`` (None: never cleaned),
    in checkpoint order."""
    ends = [(p, p.next_offset) for p in partitions]
    checkpoints = {
        "log-start-offset-checkpoint": ("log-start-offset", [(p, p.log_start_offset) for p in partitions]),
        "recovery-point-offset-checkpoint": ("recovery-point-offset", ends),
        "replication-offset-checkpoint": ("replication-offset", ends),
        "cleaner-offset-checkpoint": (
            "cleaner-offset", [(p, p.cleaner_offset) for p in partitions if p.cleaner_offset is not None]
        ),
    }
    for name, (kind, rows) in checkpoints.items():
        entries = [CheckpointEntry(kind, p.topic, p.partition, offset) for p, offset in rows]
        (root / name).write_bytes(sidecars.write_offset_checkpoint(entries))
    (root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=segaudit-generated\n")


def topic_id(topic: str) -> str:
    """A stable base64url topic id (``Uuid.toString`` form) derived from the name.

    >>> len(topic_id("orders")), topic_id("orders") == topic_id("orders")
    (22, True)
    """
    return base64.urlsafe_b64encode(hashlib.sha256(topic.encode()).digest()[:16]).decode().rstrip("=")
