"""The ground truth's labels: the verdict and explanation of each visible batch of one partition.

Verdicts follow from the batches that are visible in the log, in offset order per producer,
with the broker's CLIENT rules (§2.4) against a state that every visible batch updates (as a
follower's would), except that sequences are compared with the producer's highest sequence of
its epoch run, which a duplicate or a rewind does not lower (``docs/architecture.md``).
Explanations come from what the simulator knows caused an anomaly: an expiration or a restart it
simulated (the batch's ``explain``), batches its cleaner or retention removed. Markers close
transactions; repeated (key, value) records are found on the way.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import NamedTuple

from analytics.contract import (
    COMPACTION,
    CONTROL_MARKER,
    COORDINATOR_EPOCH_REGRESSION,
    CORRUPT,
    DUPLICATE,
    EPOCH_BUMP,
    EPOCH_BUMP_NONZERO,
    FENCED_ZOMBIE_WRITE,
    FIRST_SEEN_NONZERO,
    INVALID_TXN_STATE,
    MARKER_EPOCH_REGRESSION,
    NON_IDEMPOTENT,
    OK,
    OK_VERDICTS,
    PARTIAL_HISTORY,
    SEQ_SPACE,
    SEQUENCE_GAP,
    SEQUENCE_REGRESSION,
    TXN_STATUS_OF_MARKER,
)
from analytics.generate.batches import WrittenBatch
from analytics.kafka import layout as L
from analytics.kafka.util import in_sequence, sequence_ahead


class ClosedTxn(NamedTuple):
    """A transaction a COMMIT or ABORT marker closed."""

    producer_epoch: int  # the epoch of its first batch
    first_offset: int
    end_offset: int  # the marker's offset
    status: str  # COMMITTED or ABORTED
    coordinator_epoch: int


class PendingTxn(NamedTuple):
    """A transaction with data and no marker yet."""

    producer_epoch: int
    first_offset: int
    last_timestamp: int  # the newest of its batches, epoch ms: how long it has been idle


class Label(NamedTuple):
    verdict: str
    explained_by: str | None
    closed_txn: ClosedTxn | None = None  # a marker's: the transaction it closed


class _EpochHistory:
    """Every visible batch's sequence range of one (producer, epoch), in 4 bytes a batch.

    Batches are kept as runs of consecutive ranges (start sequence + batch lengths). A batch can
    only repeat an earlier range if its sequence is not past the highest one seen (the frontier),
    so the runs are walked only for those batches, which are rare.
    """

    __slots__ = ("runs", "frontier")

    def __init__(self) -> None:
        self.runs: list[list] = []  # [start, end, array of lengths]
        self.frontier: int | None = None

    def add(self, base: int, last: int) -> None:
        length = (last - base) % SEQ_SPACE + 1
        if self.runs and base == (self.runs[-1][1] + 1) % SEQ_SPACE:
            run = self.runs[-1]
            run[1] = last
            run[2].append(length)
        else:
            self.runs.append([base, last, array("I", [length])])
        if self.frontier is None or sequence_ahead(self.frontier - 1, last):
            self.frontier = last

    def contains(self, base: int, last: int) -> bool:
        frontier = self.frontier
        if frontier is None or sequence_ahead(frontier, base) or base == (frontier + 1) % SEQ_SPACE:
            return False
        for start, _, lengths in self.runs:
            seq = start
            for length in lengths:
                if seq == base and (seq + length - 1) % SEQ_SPACE == last:
                    return True
                seq = (seq + length) % SEQ_SPACE
        return False


@dataclass(slots=True)
class _Producer:
    epoch: int
    last_seq: int  # -1 when only a marker is known
    last_ts: int
    txn_first: int | None = None
    coordinator_epoch: int = -1
    history: dict[int, _EpochHistory] = field(default_factory=dict)  # epoch -> visible data batches
    # The last data batch's last sequence on a line that wraps at INT_MAX (each batch one step from
    # the previous the shorter way round), and the highest of the current epoch run: the mark a
    # duplicate or a rewind does not lower (None: the run has no data batch yet).
    position: int | None = None
    mark: int | None = None

    @property
    def seq_mark(self) -> int:
        return -1 if self.mark is None else self.mark % SEQ_SPACE

    def advance(self, last: int, new_run: bool) -> None:
        if self.position is None:
            self.position = last
        else:
            step = (last - self.position) % SEQ_SPACE
            self.position += step - SEQ_SPACE if step > SEQ_SPACE // 2 else step
        self.mark = self.position if new_run or self.mark is None else max(self.mark, self.position)

    def seen(self, epoch: int, base: int, last: int) -> bool:
        h = self.history.get(epoch)
        return h is not None and h.contains(base, last)


@dataclass(slots=True)
class PartitionLabels:
    """The labelling state of one partition, fed its visible batches in offset order."""

    producers: dict[int, _Producer] = field(default_factory=dict)
    first_keys: dict = field(default_factory=dict)  # (key, value) -> (offset, producer id)
    removed_by_cleaner: set = field(default_factory=set)  # producer ids that lost batches to the cleaner
    removed_by_retention: set = field(default_factory=set)
    open_txns: dict[int, PendingTxn] = field(default_factory=dict)  # by producer id

    def removed(self, producer_id: int, *, by_cleaner: bool) -> None:
        """The cleaner or retention deleted a batch of ``producer_id``."""
        (self.removed_by_cleaner if by_cleaner else self.removed_by_retention).add(producer_id)

    def label(self, p, b: WrittenBatch, corrupt: bool) -> Label:
        """The label of batch ``b`` of partition ``p`` (its ``log_start_offset`` and ``compacted``),
        which then updates the state as a follower appending it would."""
        if corrupt:
            return Label(CORRUPT, None)  # excluded from the replay: no state change
        if b.magic < L.MAGIC_V2 or b.producer_id < 0:
            return Label(NON_IDEMPOTENT, None)
        s = self.producers.get(b.producer_id)
        if b.is_control:
            return self._marker(s, b)
        if s is None:
            verdict = OK if b.base_sequence == 0 else FIRST_SEEN_NONZERO
        elif s.seen(b.producer_epoch, b.base_sequence, b.last_sequence):
            verdict = DUPLICATE
        elif b.producer_epoch > s.epoch:
            verdict = EPOCH_BUMP if b.base_sequence == 0 else EPOCH_BUMP_NONZERO
        elif b.producer_epoch < s.epoch:
            verdict = FENCED_ZOMBIE_WRITE
        elif in_sequence(s.seq_mark, b.base_sequence):
            verdict = OK
        elif sequence_ahead(s.seq_mark, b.base_sequence):
            verdict = SEQUENCE_GAP
        else:
            verdict = SEQUENCE_REGRESSION
        if verdict in OK_VERDICTS and s is not None and s.txn_first is not None and not b.is_transactional:
            verdict = INVALID_TXN_STATE
        explained = None if verdict in OK_VERDICTS else self._explanation(p, b, verdict)
        self._append_data(s, b)
        return Label(verdict, explained)

    def repeated_records(self, b: WrittenBatch) -> list[tuple[int, int, int, int]]:
        """The records of data batch ``b`` whose (key, value) an earlier record of the partition has:
        (offset, first offset, producer id, first producer id) each."""
        repeats = []
        for i, r in enumerate(b.records):
            offset = b.base_offset + (i if r.offset_delta is None else r.offset_delta)
            k = (r.key, r.value)
            first = self.first_keys.get(k)
            if first is None:
                self.first_keys[k] = (offset, b.producer_id)
            else:
                repeats.append((offset, first[0], b.producer_id, first[1]))
        return repeats

    def _explanation(self, p, b: WrittenBatch, verdict: str) -> str | None:
        if b.explain:
            return b.explain
        if verdict == FIRST_SEEN_NONZERO and (
            b.producer_id in self.removed_by_retention
            or p.log_start_offset > 0
            or (p.compacted and b.producer_id in self.removed_by_cleaner)
        ):
            return PARTIAL_HISTORY  # §7.3: earlier batches are below the log start or cleaned away
        if verdict == SEQUENCE_GAP and b.producer_id in self.removed_by_cleaner and p.compacted:
            return COMPACTION
        return None

    def _append_data(self, s: _Producer | None, b: WrittenBatch) -> None:
        # as a follower appends whatever is on disk; the mark restarts with the epoch
        new_run = s is None or b.producer_epoch != s.epoch
        if s is None:
            s = self.producers[b.producer_id] = _Producer(b.producer_epoch, -1, b.max_timestamp)
        s.advance(b.last_sequence, new_run)
        s.epoch = b.producer_epoch
        s.last_seq = b.last_sequence
        s.last_ts = b.max_timestamp
        s.history.setdefault(b.producer_epoch, _EpochHistory()).add(b.base_sequence, b.last_sequence)
        if b.is_transactional:
            if s.txn_first is None:
                s.txn_first = b.base_offset
                self.open_txns[b.producer_id] = PendingTxn(b.producer_epoch, b.base_offset, b.max_timestamp)
            else:
                pending = self.open_txns[b.producer_id]
                self.open_txns[b.producer_id] = pending._replace(last_timestamp=b.max_timestamp)

    def _marker(self, s: _Producer | None, b: WrittenBatch) -> Label:
        """Markers close the producer's open transaction and may bump its epoch."""
        verdict = CONTROL_MARKER
        if s is not None and b.producer_epoch < s.epoch:
            verdict = MARKER_EPOCH_REGRESSION
        elif s is not None and b.coordinator_epoch is not None and b.coordinator_epoch < s.coordinator_epoch:
            verdict = COORDINATOR_EPOCH_REGRESSION
        if s is None:
            s = self.producers[b.producer_id] = _Producer(b.producer_epoch, -1, b.max_timestamp)
        if b.producer_epoch != s.epoch:
            s.last_seq = -1  # a marker at a new epoch clears the batch cache: the next batch starts at 0
            s.mark = None
        s.epoch = b.producer_epoch
        s.last_ts = b.max_timestamp
        if b.coordinator_epoch is not None:
            s.coordinator_epoch = max(s.coordinator_epoch, b.coordinator_epoch)
        s.txn_first = None
        txn = self.open_txns.pop(b.producer_id, None)
        closed = None
        if txn is not None and b.control_type in L.END_TXN_MARKER_TYPES:
            closed = ClosedTxn(txn.producer_epoch, txn.first_offset, b.base_offset,
                               TXN_STATUS_OF_MARKER[b.control_type], b.coordinator_epoch)
        return Label(verdict, b.explain if verdict != CONTROL_MARKER else None, closed)
