"""Retention and compaction: how the log cleaner rewrites a partition's closed segments (§3 of
``docs/kafka-replay-rules.md``).

Pure functions over :class:`~analytics.generate.batches.Segment` lists: which batches one cleaner
pass keeps, empties or drops, and the leader-epoch entries that survive a new log start offset.
Upstream: ``LogCleaner.cleanInto``, ``MemoryRecords.filterTo`` and
``LeaderEpochFileCache.truncateFromStart`` of apache/kafka.
"""

from __future__ import annotations

from dataclasses import replace

from analytics.generate.batches import Segment, WrittenBatch
from analytics.kafka import layout as L
from analytics.kafka.writer import RecordSpec, build_batch, build_empty_batch


def truncate_epochs(epochs: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    """LeaderEpochFileCache.truncateFromStart: the epoch covering ``start`` now starts there.

    >>> truncate_epochs([(0, 0), (1, 50), (2, 90)], 60)
    [(1, 60), (2, 90)]
    """
    kept = [(e, o) for e, o in epochs if o > start]
    covering = [(e, o) for e, o in epochs if o <= start]
    return ([(covering[-1][0], start)] if covering else []) + kept


def compact(segments: list[Segment], last_data_offsets: dict[int, int]) -> list[WrittenBatch]:
    """One cleaner pass over the closed segments (all but the last, active one), rewritten in place.

    ``last_data_offsets`` maps each producer the broker remembers to its last data batch's offset:
    that batch keeps its (possibly emptied) header, so the producer's sequence survives. Returns
    the batches the pass removed, in log order.
    """
    upper = segments[-1].base_offset
    latest = _latest_offsets(segments)
    removed = []
    for seg in segments[:-1]:
        kept = []
        for b in seg.batches:
            survivor = _clean_batch(b, latest, last_data_offsets, upper)
            if survivor is None:
                removed.append(b)
            else:
                kept.append(survivor)
        seg.batches = kept
        seg.size = sum(len(b.data) for b in kept)
    return removed


def _latest_offsets(segments: list[Segment]) -> dict[bytes | None, int]:
    """The offset of each key's latest record outside aborted transactions."""
    latest: dict[bytes | None, int] = {}
    for seg in segments:
        for b in seg.batches:
            if b.records and not b.aborted:
                for i, r in enumerate(b.records):
                    latest[r.key] = b.base_offset + (i if r.offset_delta is None else r.offset_delta)
    return latest


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
