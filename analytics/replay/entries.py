"""What a partition leader keeps per producer (``docs/kafka-replay-rules.md`` §2.2, §2.5, §4).

:class:`ProducerStateEntry` is Kafka's ``ProducerStateEntry``: the epoch, the last few data
batches (:class:`BatchMetadata`, the dedup cache), the coordinator epoch, the timestamp that
expiration reads and the open transaction's first offset; it changes only through
:meth:`~ProducerStateEntry.add_batch` and :meth:`~ProducerStateEntry.end_transaction`.
:class:`ProducerSnapshotEntry` is one producer of a ``.snapshot`` file, which keeps the last
batch only.

Upstream: ``ProducerStateEntry.java``, ``BatchMetadata.java`` and ``ProducerStateManager.java``
(writeSnapshot, readSnapshot, loadProducerEntry) under
``storage/src/main/java/org/apache/kafka/storage/internals/log/`` of apache/kafka.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import NamedTuple

from analytics.kafka.layout import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP
from analytics.kafka.util import decrement_sequence

# ProducerStateEntry.coordinatorEpoch before the producer's first marker.
NO_COORDINATOR_EPOCH = -1
# Snapshot sentinels (ProducerSnapshot.json): no data batch, no open transaction.
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One cached data batch of a producer (``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int  # last_offset - first_offset; equal to the sequence span of a v2 batch
    timestamp: int  # the batch's maxTimestamp, epoch ms

    @property
    def first_seq(self) -> int:
        # With the int32 wrap: a batch may run INT_MAX-1, INT_MAX, 0 (KAFKA-7692).
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerSnapshotEntry(NamedTuple):
    """One producer of a ``.snapshot`` file, the eight fields in on-disk order (§4), so a list of
    them can go straight to :func:`analytics.kafka.sidecars.write_snapshot`."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int  # NO_OFFSET when the entry has no data batch (only a marker)
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # NO_OFFSET when no transaction is open


@dataclass(slots=True)
class ProducerStateEntry:
    """What the broker keeps per producer (``ProducerStateEntry``, §2.2)."""

    producer_id: int
    producer_epoch: int
    # Oldest first; maxlen is the profile's dedup cache size, so a full deque drops its oldest batch.
    batch_metadata: deque[BatchMetadata]
    coordinator_epoch: int
    last_timestamp: int  # epoch ms; what expiration compares with the clock
    current_txn_first_offset: int | None

    @classmethod
    def empty(cls, producer_id: int, cache_size: int) -> ProducerStateEntry:
        return cls(
            producer_id, NO_PRODUCER_EPOCH, deque(maxlen=cache_size), NO_COORDINATOR_EPOCH, NO_TIMESTAMP, None
        )

    @classmethod
    def from_snapshot(cls, row, cache_size: int) -> ProducerStateEntry:
        """The entry a broker loads from one snapshot row (``loadProducerEntry``): a
        :class:`ProducerSnapshotEntry` or an ``analytics.kafka.model.SnapshotEntry``."""
        entry = cls.empty(row.producer_id, cache_size)
        entry.producer_epoch = row.producer_epoch
        if row.last_offset >= 0:  # a batch is rebuilt only when the producer had a data batch
            entry.batch_metadata.append(
                BatchMetadata(row.last_sequence, row.last_offset, row.offset_delta, row.timestamp)
            )
        entry.coordinator_epoch = row.coordinator_epoch
        entry.last_timestamp = row.timestamp
        entry.current_txn_first_offset = (
            row.current_txn_first_offset if row.current_txn_first_offset >= 0 else None
        )
        return entry

    def to_snapshot(self) -> ProducerSnapshotEntry:
        """The entry as ``writeSnapshot`` stores it: the last batch only, sentinels for what is missing."""
        txn = self.current_txn_first_offset
        return ProducerSnapshotEntry(
            self.producer_id,
            self.producer_epoch,
            self.last_seq,
            self.last_data_offset,
            self.last_offset_delta,
            self.last_timestamp,
            self.coordinator_epoch,
            NO_OFFSET if txn is None else txn,
        )

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else NO_OFFSET

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def copy(self) -> ProducerStateEntry:
        return replace(self, batch_metadata=deque(self.batch_metadata, maxlen=self.batch_metadata.maxlen))

    def find_duplicate_batch(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this sequence range in this epoch (``findDuplicateBatch``).
        Only the range is compared: offsets, content and the transactional flag are not."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batch_metadata:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self._maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def end_transaction(
        self, epoch: int, coordinator_epoch: int, timestamp: int, *, marker_sets_timestamp: bool
    ) -> None:
        """A COMMIT/ABORT marker (``ProducerStateEntry.update(epoch, coordinatorEpoch, timestamp)``)."""
        self._maybe_update_producer_epoch(epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        if marker_sets_timestamp:
            self.last_timestamp = timestamp
        else:
            # Before KAFKA-9144 the entry's timestamp was derived from its last cached batch.
            self.last_timestamp = self.batch_metadata[-1].timestamp if self.batch_metadata else NO_TIMESTAMP

    def _maybe_update_producer_epoch(self, epoch: int) -> None:
        # A new epoch restarts the sequence space, so no cached batch can be continued or retried.
        # A marker with the same epoch keeps the cache: the next batch continues the sequence.
        if epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
