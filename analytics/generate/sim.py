"""A simulated broker that writes real Kafka log directories, byte for byte, with ground truth.

Each :class:`SimPartition` is a partition leader: client batches go through the producer-state
rules of :mod:`analytics.replay.broker` (so a retry the broker deduplicates, or a gap it refuses,
is never written), accepted batches get offsets and are appended to the active segment, which
rolls at a size with a producer snapshot, and broker events (leader changes, expiration,
restarts, retention, compaction) change the partition as they would on a broker. The bytes on
disk are :mod:`analytics.generate.files`'s; the cleaner's rewrites are
:mod:`analytics.generate.cleaner`'s. :class:`SimLogDir` holds the partitions and the ground truth.

What no correct broker does (a missed deduplication, a lost batch, a flipped byte, a torn or
zero-filled tail) is injected through the ``fault`` arguments and labelled as such.

Memory stays bounded: closed segments are written to disk as they roll and only their batch
index is kept; ground truth streams to Parquet.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from analytics.contract import CRC_MISMATCH, TRUNCATED, ZERO_FILLED
from analytics.generate import cleaner
from analytics.generate.batches import CORRUPT_FAULT, Segment, WrittenBatch
from analytics.generate.files import PartitionFiles, topic_id, write_log_dir_files
from analytics.generate.truth import TruthWriter
from analytics.kafka.model import AbortedTxn
from analytics.kafka.util import last_sequence
from analytics.kafka.writer import (
    RecordSpec,
    build_batch,
    build_end_txn_marker,
    build_legacy_message,
    build_legacy_wrapper,
)
from analytics.replay.broker import ProducerStateManager
from analytics.replay.decisions import Origin, Result
from analytics.replay.entries import NO_COORDINATOR_EPOCH, NO_OFFSET, ProducerSnapshotEntry
from analytics.replay.profiles import DEFAULT_PRODUCER_ID_EXPIRATION_MS, DEFAULT_PROFILE, resolve_profile

DEFAULT_SEGMENT_BYTES = 64 * 1024


class SimPartition:
    """One partition's leader: validates client writes, assigns offsets, keeps segments."""

    def __init__(
        self,
        log: SimLogDir,
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
        self.snapshots: dict[int, list[ProducerSnapshotEntry]] = {}
        self.aborted: list[tuple[int, AbortedTxn]] = []  # (segment base offset, entry)
        self.txn_first: dict[int, int] = {}  # open transactions: pid -> first offset
        self.txn_batches: dict[int, list[WrittenBatch]] = {}
        self.cleaner_offset: int | None = None
        self.tail: bytes = b""  # a torn or zero-filled tail written after the last batch
        self.tail_kind: str | None = None
        self.keep_segments = keep_segments
        self.files = PartitionFiles(log.root / self.name, self._label)

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
        # A corrupt batch was written correctly and damaged on disk later; other faults are broker bugs.
        origin = Origin.REPLICATION if fault and fault != CORRUPT_FAULT else Origin.CLIENT
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

    def _snapshot_if_rolling(self, size: int) -> list[ProducerSnapshotEntry] | None:
        """The producer state before this append, when the append will roll the segment."""
        return self.state.snapshot() if self._rolls(size) else None

    def _rolls(self, size: int) -> bool:
        active = self.segments[-1]
        return bool(active.size) and active.size + size > self.segment_bytes

    def _append(self, batch: WrittenBatch, before: list[ProducerSnapshotEntry] | None = None) -> None:
        if self._rolls(len(batch.data)):
            self.roll(before)
        active = self.segments[-1]
        if self.keep_segments:
            active.batches.append(batch)
        else:  # streaming: straight to the segment file, labelled as it is written
            self.files.append(active, batch)
        active.size += len(batch.data)
        self.next_offset = batch.last_offset + 1

    def _label(self, path: Path, position: int, batch: WrittenBatch) -> None:
        """Ground truth for a batch that has just been written at ``position`` of ``path``."""
        file = self.log.relative(path)
        self.log.truth.batch(self, batch, file, position, corrupt=batch.is_corrupt)
        if batch.is_corrupt:
            self.log.truth.parse_error(self, file, position, CRC_MISMATCH, len(batch.data))

    def roll(self, snapshot: list[ProducerSnapshotEntry] | None = None) -> None:
        """Start a new segment at the log end offset, taking a producer snapshot there (as Kafka does):
        the state up to but excluding that offset (``snapshot``, when the state has moved past it)."""
        self.snapshots[self.next_offset] = snapshot if snapshot is not None else self.state.snapshot()
        self.files.close_active()
        self.segments.append(Segment(self.next_offset))

    def start_at(self, offset: int, *, producers: Sequence[tuple[int, int, int, int, int]] = ()) -> None:
        """Begin the log at ``offset`` as if retention had removed everything before it; ``producers``
        are (pid, epoch, last sequence, last offset, timestamp) the broker still remembers."""
        if self.next_offset or self.segments[0].size:
            raise ValueError("start_at must come before the first write")
        self.next_offset = self.log_start_offset = offset
        self.segments = [Segment(offset)]
        self.leader_epochs = [(self.leader_epoch, offset)]
        self.state.load_snapshot([
            ProducerSnapshotEntry(pid, epoch, seq, last, 0, ts, NO_COORDINATOR_EPOCH, NO_OFFSET)
            for pid, epoch, seq, last, ts in producers
        ])

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
        self.leader_epochs = cleaner.truncate_epochs(self.leader_epochs, self.log_start_offset)
        self.state.on_log_start_offset(self.log_start_offset)

    def compact(self) -> None:
        """One cleaner pass over the closed segments (LogCleaner.cleanInto, MemoryRecords.filterTo)."""
        if not self.keep_segments:
            raise ValueError("compaction needs SimPartition(keep_segments=True)")
        if len(self.segments) < 2:
            return
        last_data = {e.producer_id: e.last_offset for e in self.state.snapshot()}
        for b in cleaner.compact(self.segments, last_data):
            self.log.truth.deleted(self, b, by_cleaner=True)
        self.cleaner_offset = self.segments[-1].base_offset

    # -- faults -------------------------------------------------------------------------------
    def torn_tail(self, fraction: float = 0.5) -> None:
        """The broker died mid-write: part of one more batch ends the active segment."""
        data = build_batch(self.next_offset, [RecordSpec(b"torn", b"x" * 64, 0)], producer_id=999_999, producer_epoch=0,
                           base_sequence=0, partition_leader_epoch=self.leader_epoch)
        self.tail, self.tail_kind = data[: max(1, int(len(data) * fraction))], TRUNCATED
        if self.tail[:8] == bytes(8) and self.tail.count(0) == len(self.tail):
            self.tail_kind = ZERO_FILLED

    def zero_filled_tail(self, size: int = 4096) -> None:
        """A preallocated segment (log.preallocate) after an unclean shutdown: zeros after the last batch."""
        self.tail, self.tail_kind = bytes(size), ZERO_FILLED

    # -- files --------------------------------------------------------------------------------
    def write(self, *, clean_shutdown: bool = True) -> None:
        """Shut down: a last snapshot when clean, the segments (kept ones written now), the tail and
        the sidecars."""
        if clean_shutdown:
            self.snapshots[self.next_offset] = self.state.snapshot()
        if self.keep_segments:
            tail_path = self.files.write_segments(self.segments)
        else:
            tail_path = self.files.finish_streaming(self.segments[-1])
        if self.tail:
            self.files.append_tail(tail_path, self.tail)
            self.log.truth.parse_error(
                self, self.log.relative(tail_path), self.segments[-1].size, self.tail_kind, len(self.tail)
            )
        self.files.write_sidecars(
            self.topic, self.partition, snapshots=self.snapshots, aborted=self.aborted,
            leader_epochs=self.leader_epochs, topic_id=topic_id(self.topic),
        )


class SimLogDir:
    """A broker's log directory: partitions, the log-dir checkpoints, and the ground truth."""

    def __init__(
        self,
        root: Path,
        *,
        profile: str = DEFAULT_PROFILE.name,
        expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        truth: TruthWriter | None = None,
    ):
        self.root = Path(root)
        self.profile = resolve_profile(profile)
        self.expiration_ms = expiration_ms
        self.partitions: list[SimPartition] = []
        self.truth = truth if truth is not None else TruthWriter(None)

    def partition(self, topic: str, partition: int, **options) -> SimPartition:
        p = SimPartition(self, topic, partition, **options)
        self.partitions.append(p)
        return p

    def relative(self, path: Path) -> str:
        """A file's path inside the log directory, as ground truth names it (portable across machines)."""
        return path.relative_to(self.root).as_posix()

    def write(self, *, clean_shutdown: bool = True) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        parts = sorted(self.partitions, key=lambda p: (p.topic, p.partition))
        for p in parts:
            p.write(clean_shutdown=clean_shutdown)
        write_log_dir_files(self.root, parts)
        self.truth.finish(self)
