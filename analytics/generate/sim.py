"""A simulated broker that writes real Kafka log directories, byte for byte, with ground truth.

Each :class:`SimPartition` is a partition leader: client batches go through the producer-state
rules of :mod:`analytics.replay.broker` (so a retry the broker deduplicates, or a gap it refuses,
is never written), accepted batches get offsets and are appended to the active segment, and the
files a broker keeps are written as it would: 20-digit segments rolled at a size, a producer
snapshot at every roll and at shutdown, ``.txnindex`` entries for aborted transactions, the
``leader-epoch-checkpoint``, ``partition.metadata`` and the log-dir checkpoints.

What no correct broker does (a missed deduplication, a lost batch, a flipped byte, a torn or
zero-filled tail) is injected through the ``fault`` arguments and labelled as such. Retention
and compaction rewrite the partition as the log cleaner and retention would (§3 of the rules).

Memory stays bounded: closed segments are written to disk as they roll and only their batch
index is kept; ground truth streams to Parquet.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from analytics.generate.truth import TruthWriter
from analytics.kafka import layout as L
from analytics.kafka import sidecars
from analytics.kafka.model import AbortedTxn, CheckpointEntry, LeaderEpochEntry, SnapshotEntry
from analytics.kafka.util import last_sequence
from analytics.kafka.writer import (
    RecordSpec,
    build_batch,
    build_empty_batch,
    build_end_txn_marker,
    build_legacy_message,
    build_legacy_wrapper,
    segment_file_name,
)
from analytics.replay.broker import Origin, ProducerSnapshotEntry, ProducerStateManager, Result

DEFAULT_SEGMENT_BYTES = 64 * 1024
CORRUPT = "corrupt"  # the fault of a batch whose bytes change on disk after it was written


@dataclass(slots=True)
class WrittenBatch:
    """What the simulator keeps of a batch it wrote: enough to compact, label and rebuild it."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    max_timestamp: int
    records: tuple[RecordSpec, ...] | None  # None for control batches
    data: bytes
    compression: str = "none"
    partition_leader_epoch: int = 0
    control_type: str | None = None
    coordinator_epoch: int | None = None
    explain: str | None = None  # why an anomaly here is legitimate (producer_expiration, ...)
    fault: str | None = None  # an injected fault the broker would never allow
    aborted: bool = False  # data of a transaction that ended in ABORT
    magic: int = L.MAGIC_V2

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.last_offset - self.base_offset)


@dataclass(slots=True)
class Segment:
    base_offset: int
    batches: list[WrittenBatch] = field(default_factory=list)
    size: int = 0


class SimPartition:
    """One partition's leader: validates client writes, assigns offsets, keeps segments."""

    def __init__(
        self,
        log: "SimLogDir",
        topic: str,
        partition: int,
        *,
        compacted: bool = False,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        keep_segments: bool = False,
    ):
        """``keep_segments`` keeps closed segments in memory for retention and compaction; otherwise a
        segment is written to disk when it rolls and only the active one is held (bounded memory)."""
        self.log = log
        self.topic = topic
        self.partition = partition
        self.compacted = compacted
        self.segment_bytes = segment_bytes
        self.state = ProducerStateManager(log.profile, producer_id_expiration_ms=log.expiration_ms)
        self.segments: list[Segment] = [Segment(0)]
        self.next_offset = 0
        self.log_start_offset = 0
        self.leader_epoch = 0
        self.leader_epochs: list[tuple[int, int]] = [(0, 0)]
        self.snapshots: dict[int, list] = {}
        self.aborted: list[tuple[int, AbortedTxn]] = []  # (segment base offset, entry)
        self.txn_first: dict[int, int] = {}  # open transactions: pid -> first offset
        self.txn_batches: dict[int, list[WrittenBatch]] = {}
        self.cleaner_offset: int | None = None
        self.tail: bytes = b""  # a torn or zero-filled tail written after the last batch
        self.tail_kind: str | None = None
        self.keep_segments = keep_segments
        self._out = None  # streaming: the active segment's open file
        self._out_path: Path | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    # -- writes through the broker's rules ----------------------------------------------------
    def produce(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        records: Sequence[RecordSpec],
        *,
        transactional: bool = False,
        compression: str = "none",
        explain: str | None = None,
        fault: str | None = None,
        verified_tv2: bool = False,
    ) -> Result:
        """A client produce request. Returns the broker's decision (APPENDED, DUPLICATE or an error).

        With ``fault`` the batch is written whatever the rules say (a broker bug), and the state is
        updated as a follower would (REPLICATION origin).
        """
        n = len(records)
        max_ts = max(r.timestamp for r in records)
        # A "corrupt" batch was written correctly and damaged on disk later; other faults are broker bugs.
        origin = Origin.REPLICATION if fault and fault != CORRUPT else Origin.CLIENT
        data = build_batch(
            self.next_offset,
            records,
            compression=compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=transactional,
            partition_leader_epoch=self.leader_epoch,
        )
        # UnifiedLog.append validates, rolls (snapshotting the state so far), appends, then updates
        # the producer state; the state manager here updates on acceptance, so snapshot first.
        before = self._snapshot_if_rolling(len(data))
        decision = self.state.append_data(
            producer_id,
            producer_epoch,
            base_sequence,
            last_sequence(base_sequence, n - 1),
            self.next_offset,
            self.next_offset + n - 1,
            max_ts,
            is_transactional=transactional,
            origin=origin,
            verified_tv2=verified_tv2,
        )
        if decision.result != Result.APPENDED:
            return decision.result
        batch = WrittenBatch(
            self.next_offset, self.next_offset + n - 1, producer_id, producer_epoch, base_sequence, transactional,
            False, max_ts, tuple(records), data, compression, self.leader_epoch, explain=explain, fault=fault,
        )
        if transactional:
            self.txn_first.setdefault(producer_id, batch.base_offset)
            self.txn_batches.setdefault(producer_id, []).append(batch)
        self._append(batch, before)
        return Result.APPENDED

    def produce_plain(self, records: Sequence[RecordSpec], *, compression: str = "none", fault: str | None = None) -> None:
        """A non-idempotent producer's batch (producer id -1): never validated, never deduplicated."""
        n = len(records)
        data = build_batch(self.next_offset, records, compression=compression, partition_leader_epoch=self.leader_epoch)
        self._append(
            WrittenBatch(self.next_offset, self.next_offset + n - 1, -1, -1, -1, False, False,
                         max(r.timestamp for r in records), tuple(records), data, compression, self.leader_epoch,
                         fault=fault)
        )

    def produce_legacy(self, records: Sequence[RecordSpec], *, compression: str = "none", magic: int = 1) -> None:
        """Messages of a pre-0.11 producer (magic 0/1): one entry per message, or one compressed wrapper."""
        if compression == "none":
            for r in records:
                data = build_legacy_message(self.next_offset, r.key, r.value, magic=magic, timestamp=r.timestamp)
                self._append(WrittenBatch(self.next_offset, self.next_offset, -1, -1, -1, False, False, r.timestamp,
                                          (r,), data, "none", -1, magic=magic))
        else:
            offsets = list(range(self.next_offset, self.next_offset + len(records)))
            data = build_legacy_wrapper(offsets, records, compression=compression, magic=magic)
            self._append(WrittenBatch(offsets[0], offsets[-1], -1, -1, -1, False, False,
                                      max(r.timestamp for r in records), tuple(records), data, compression, -1, magic=magic))

    def end_transaction(
        self,
        producer_id: int,
        producer_epoch: int,
        control_type: str,
        *,
        coordinator_epoch: int,
        timestamp: int,
        tv2: bool = False,
        explain: str | None = None,
    ) -> Result:
        """The coordinator's WriteTxnMarkers for this partition: a COMMIT or ABORT marker."""
        data = build_end_txn_marker(
            self.next_offset, control_type, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, timestamp=timestamp, partition_leader_epoch=self.leader_epoch,
        )
        before = self._snapshot_if_rolling(len(data))
        decision = self.state.append_marker(
            producer_id, producer_epoch, control_type, coordinator_epoch, self.next_offset, timestamp, tv2=tv2
        )
        if decision.result != Result.APPENDED:
            return decision.result
        marker = WrittenBatch(self.next_offset, self.next_offset, producer_id, producer_epoch, -1, True, True, timestamp,
                              None, data, "none", self.leader_epoch, control_type, coordinator_epoch, explain=explain)
        first = self.txn_first.pop(producer_id, None)
        if control_type == "ABORT":
            for b in self.txn_batches.get(producer_id, []):
                b.aborted = True
        self.txn_batches.pop(producer_id, None)
        self._append(marker, before)
        if control_type == "ABORT" and first is not None:
            # LogSegment.updateTxnIndex: the last stable offset is the oldest other open transaction's start.
            others = list(self.txn_first.values())
            lso = min(others) if others else marker.base_offset + 1
            entry = AbortedTxn(self.topic, self.partition, "", 0, producer_id, first, marker.base_offset, lso)
            self.aborted.append((self.segments[-1].base_offset, entry))
        return Result.APPENDED

    def _snapshot_if_rolling(self, size: int) -> list | None:
        """The producer state before this append, when the append will roll the segment."""
        active = self.segments[-1]
        return self.state.snapshot() if active.size and active.size + size > self.segment_bytes else None

    def _append(self, batch: WrittenBatch, before: list | None = None) -> None:
        active = self.segments[-1]
        if active.size and active.size + len(batch.data) > self.segment_bytes:
            self.roll(before)
            active = self.segments[-1]
        if self.keep_segments:
            active.batches.append(batch)
        else:  # streaming: straight to the segment file, labelled as it is written
            if self._out is None:
                self._open_segment(active)
            self._emit(self._out, self._out_path, active.size, batch)
        active.size += len(batch.data)
        self.next_offset = batch.last_offset + 1

    def _open_segment(self, seg: Segment) -> None:
        part = self.log.root / self.name
        part.mkdir(parents=True, exist_ok=True)
        self._out_path = part / segment_file_name(seg.base_offset)
        self._out = open(self._out_path, "wb")  # noqa: SIM115 (closed at roll or write)

    def _emit(self, f, path: Path, position: int, b: WrittenBatch) -> None:
        """Write one batch at ``position`` of its segment file and label it."""
        data = b.data
        corrupt = b.fault == CORRUPT
        if corrupt:
            data = bytearray(data)
            data[-1] ^= 0x5A  # inside the records: covered by the CRC, framing intact
        f.write(data)
        rel = self.log.relative(path)
        self.log.truth.batch(self, b, rel, position, corrupt=corrupt)
        if corrupt:
            self.log.truth.parse_error(self, rel, position, "crc_mismatch", len(data))

    def roll(self, snapshot: list | None = None) -> None:
        """Start a new segment at the log end offset, taking a producer snapshot there (as Kafka does):
        the state up to but excluding that offset (``snapshot``, when the state has moved past it)."""
        self.snapshots[self.next_offset] = snapshot if snapshot is not None else self.state.snapshot()
        if self._out is not None:
            self._out.close()
            self._out = None
        self.segments.append(Segment(self.next_offset))

    def start_at(self, offset: int, *, producers: Sequence[tuple[int, int, int, int, int]] = ()) -> None:
        """Begin the log at ``offset`` as if retention had removed everything before it; ``producers``
        are (pid, epoch, last sequence, last offset, timestamp) the broker still remembers."""
        if self.next_offset or self.segments[0].size:
            raise ValueError("start_at must come before the first write")
        self.next_offset = self.log_start_offset = offset
        self.segments = [Segment(offset)]
        self.leader_epochs = [(self.leader_epoch, offset)]
        self.state.load_snapshot(
            [ProducerSnapshotEntry(pid, epoch, seq, last, 0, ts, -1, -1) for pid, epoch, seq, last, ts in producers]
        )

    # -- broker events ------------------------------------------------------------------------
    def leader_change(self) -> None:
        self.leader_epoch += 1
        self.leader_epochs.append((self.leader_epoch, self.next_offset))

    def expire(self, now_ms: int) -> None:
        self.state.remove_expired(now_ms)

    def restart(self, *, with_snapshot: bool = True) -> None:
        """A broker restart: producer state is reloaded from a snapshot (only last batches cached) or lost."""
        entries = self.state.snapshot()
        self.state = ProducerStateManager(self.log.profile, producer_id_expiration_ms=self.log.expiration_ms)
        if with_snapshot:
            self.state.load_snapshot(entries)

    def delete_head_segments(self, count: int) -> None:
        """Retention removes whole segments from the head; the log start offset moves to the next one."""
        if not self.keep_segments:
            raise ValueError("retention needs SimPartition(keep_segments=True)")
        count = min(count, len(self.segments) - 1)
        if count <= 0:
            return
        for seg in self.segments[:count]:
            for b in seg.batches:
                self.log.truth.deleted(self, b)
        self.segments = self.segments[count:]
        self.log_start_offset = self.segments[0].base_offset
        self.snapshots = {o: s for o, s in self.snapshots.items() if o >= self.log_start_offset}
        self.aborted = [(s, e) for s, e in self.aborted if s >= self.log_start_offset]
        self.leader_epochs = _truncate_epochs(self.leader_epochs, self.log_start_offset)
        self.state.on_log_start_offset(self.log_start_offset)

    def compact(self) -> None:
        """One cleaner pass over the closed segments (LogCleaner.cleanInto, MemoryRecords.filterTo)."""
        if not self.keep_segments:
            raise ValueError("compaction needs SimPartition(keep_segments=True)")
        closed = self.segments[:-1]
        if not closed:
            return
        upper = self.segments[-1].base_offset
        latest: dict[bytes | None, int] = {}
        for seg in self.segments:
            for b in seg.batches:
                if b.records and not b.aborted:
                    for i, r in enumerate(b.records):
                        latest[r.key] = b.base_offset + (i if r.offset_delta is None else r.offset_delta)
        last_data = {e.producer_id: e.last_offset for e in self.state.snapshot()}
        for seg in closed:
            kept = []
            for b in seg.batches:
                survivor = _clean_batch(b, latest, last_data, upper)
                if survivor is None:
                    self.log.truth.deleted(self, b, by_cleaner=True)
                    continue
                kept.append(survivor)
            seg.batches = kept
            seg.size = sum(len(b.data) for b in kept)
        self.cleaner_offset = upper

    # -- faults -------------------------------------------------------------------------------
    def torn_tail(self, fraction: float = 0.5) -> None:
        """The broker died mid-write: part of one more batch ends the active segment."""
        data = build_batch(self.next_offset, [RecordSpec(b"torn", b"x" * 64, 0)], producer_id=999_999, producer_epoch=0,
                           base_sequence=0, partition_leader_epoch=self.leader_epoch)
        self.tail, self.tail_kind = data[: max(1, int(len(data) * fraction))], "truncated"
        if self.tail[:8] == bytes(8) and self.tail.count(0) == len(self.tail):
            self.tail_kind = "zero_filled"

    def zero_filled_tail(self, size: int = 4096) -> None:
        """A preallocated segment (log.preallocate) after an unclean shutdown: zeros after the last batch."""
        self.tail, self.tail_kind = bytes(size), "zero_filled"

    # -- files --------------------------------------------------------------------------------
    def write(self, root: Path, *, clean_shutdown: bool = True) -> None:
        part = root / self.name
        part.mkdir(parents=True, exist_ok=True)
        if clean_shutdown:
            self.snapshots[self.next_offset] = self.state.snapshot()
        if self.keep_segments:
            for seg in self.segments:
                path = part / segment_file_name(seg.base_offset)
                with open(path, "wb") as f:
                    position = 0
                    for b in seg.batches:
                        self._emit(f, path, position, b)
                        position += len(b.data)
            tail_path = path
        else:
            if self._out is None:  # Kafka keeps an (empty) active segment
                self._open_segment(self.segments[-1])
            self._out.close()
            self._out = None
            tail_path = self._out_path
        if self.tail:
            with open(tail_path, "ab") as f:
                f.write(self.tail)
            self.log.truth.parse_error(self, self.log.relative(tail_path), self.segments[-1].size, self.tail_kind, len(self.tail))
        for offset, entries in sorted(self.snapshots.items()):
            rows = [SnapshotEntry(self.topic, self.partition, offset, *e) for e in entries]
            (part / segment_file_name(offset, ".snapshot")).write_bytes(sidecars.write_snapshot(rows))
        by_segment: dict[int, list[AbortedTxn]] = {}
        for seg_base, entry in self.aborted:
            by_segment.setdefault(seg_base, []).append(entry)
        for seg_base, entries in by_segment.items():
            (part / segment_file_name(seg_base, ".txnindex")).write_bytes(sidecars.write_txnindex(entries))
        epochs = [LeaderEpochEntry(self.topic, self.partition, e, o) for e, o in self.leader_epochs]
        (part / "leader-epoch-checkpoint").write_bytes(sidecars.write_leader_epoch_checkpoint(epochs))
        (part / "partition.metadata").write_bytes(sidecars.write_partition_metadata(self.log.topic_id(self.topic)))


def _truncate_epochs(epochs: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    """LeaderEpochFileCache.truncateFromStart: the epoch covering ``start`` now starts there."""
    kept = [(e, o) for e, o in epochs if o > start]
    covering = [(e, o) for e, o in epochs if o <= start]
    return ([(covering[-1][0], start)] if covering else []) + kept


def _clean_batch(b: WrittenBatch, latest: dict, last_data: dict[int, int], upper: int) -> WrittenBatch | None:
    """The cleaner's verdict on one batch: None to drop it, else the batch as it is rewritten."""
    if b.is_control:
        return b  # markers stay until their delete horizon, which one pass never reaches
    if b.aborted:
        survivors = []
    elif b.magic < L.MAGIC_V2:
        return b  # legacy entries: kept as they are (the cleaner would convert them; not simulated)
    else:
        survivors = [
            (i, r) for i, r in enumerate(b.records)
            if latest.get(r.key) == b.base_offset + (i if r.offset_delta is None else r.offset_delta)
        ]
    if survivors and len(survivors) == len(b.records or ()):
        return b
    keep_empty = (b.producer_id >= 0 and last_data.get(b.producer_id) == b.last_offset) or b.last_offset + 1 == upper
    if not survivors:
        if not keep_empty:
            return None
        data = build_empty_batch(
            b.base_offset, b.last_offset, producer_id=b.producer_id, producer_epoch=b.producer_epoch,
            base_sequence=b.base_sequence, max_timestamp=b.max_timestamp, is_transactional=b.is_transactional,
            partition_leader_epoch=b.partition_leader_epoch,
        )
        return replace(b, records=(), data=data)
    records = tuple(
        RecordSpec(r.key, r.value, r.timestamp, r.headers, i if r.offset_delta is None else r.offset_delta)
        for i, r in survivors
    )
    data = build_batch(
        b.base_offset, records, compression=b.compression, producer_id=b.producer_id, producer_epoch=b.producer_epoch,
        base_sequence=b.base_sequence, is_transactional=b.is_transactional, partition_leader_epoch=b.partition_leader_epoch,
        last_offset_delta=b.last_offset - b.base_offset, max_timestamp=b.max_timestamp,
    )
    return replace(b, records=records, data=data)


class SimLogDir:
    """A broker's log directory: partitions, the log-dir checkpoints, and the ground truth."""

    def __init__(
        self,
        root: Path,
        *,
        profile: str = "2.7",
        expiration_ms: int = 86_400_000,
        seed: int = 0,
        truth: TruthWriter | None = None,
    ):
        from analytics.replay.broker import resolve_profile

        self.root = Path(root)
        self.profile = resolve_profile(profile)
        self.profile_name = profile
        self.expiration_ms = expiration_ms
        self.rng = random.Random(seed)
        self.partitions: list[SimPartition] = []
        self.truth = truth if truth is not None else TruthWriter(None)

    def partition(self, topic: str, partition: int, **options) -> SimPartition:
        p = SimPartition(self, topic, partition, **options)
        self.partitions.append(p)
        return p

    def relative(self, path: Path) -> str:
        """A file's path inside the log directory, as ground truth names it (portable across machines)."""
        return path.relative_to(self.root).as_posix()

    def topic_id(self, topic: str) -> str:
        """A stable base64url topic id (Uuid.toString form) derived from the name."""
        import base64
        import hashlib

        return base64.urlsafe_b64encode(hashlib.sha256(topic.encode()).digest()[:16]).decode().rstrip("=")

    def write(self, *, clean_shutdown: bool = True) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for p in sorted(self.partitions, key=lambda p: (p.topic, p.partition)):
            p.write(self.root, clean_shutdown=clean_shutdown)
        parts = sorted(self.partitions, key=lambda p: (p.topic, p.partition))
        checkpoints = {
            "log-start-offset-checkpoint": ("log-start-offset", [(p, p.log_start_offset) for p in parts]),
            "recovery-point-offset-checkpoint": ("recovery-point-offset", [(p, p.next_offset) for p in parts]),
            "replication-offset-checkpoint": ("replication-offset", [(p, p.next_offset) for p in parts]),
            "cleaner-offset-checkpoint": ("cleaner-offset", [(p, p.cleaner_offset) for p in parts if p.cleaner_offset is not None]),
        }
        for name, (kind, rows) in checkpoints.items():
            entries = [CheckpointEntry(kind, p.topic, p.partition, offset) for p, offset in rows]
            (self.root / name).write_bytes(sidecars.write_offset_checkpoint(entries))
        (self.root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=segaudit-generated\n")
        self.truth.finish(self)
