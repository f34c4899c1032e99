"""What the simulated broker keeps of the batches it wrote: enough to compact, label and rebuild them.

A :class:`WrittenBatch` holds a batch's header fields, its records and its exact bytes, plus the
simulator's knowledge no reader has: why an anomaly is legitimate (``explain``), which broker
fault produced it (``fault``), and whether its transaction was aborted. A :class:`Segment`
groups the batches of one segment file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analytics.kafka import layout as L
from analytics.kafka.util import last_sequence
from analytics.kafka.writer import RecordSpec

# The fault of a batch written correctly whose bytes changed on disk later (the others are broker bugs).
CORRUPT_FAULT = "corrupt"


@dataclass(slots=True)
class WrittenBatch:
    """One batch as the simulator wrote it."""

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
    explain: str | None = None  # why an anomaly here is legitimate (an explanation of the contract)
    fault: str | None = None  # an injected fault the broker would never allow
    aborted: bool = False  # data of a transaction that ended in ABORT
    magic: int = L.MAGIC_V2

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.last_offset - self.base_offset)

    @property
    def is_corrupt(self) -> bool:
        return self.fault == CORRUPT_FAULT

    @property
    def stored_data(self) -> bytes:
        """The bytes on disk: a corrupt batch has one byte flipped inside its records, so its CRC
        fails while its framing stays intact."""
        if not self.is_corrupt:
            return self.data
        damaged = bytearray(self.data)
        damaged[-1] ^= 0x5A
        return bytes(damaged)


@dataclass(slots=True)
class Segment:
    """One segment file: its base offset (the 20-digit name), its batches and its size in bytes."""

    base_offset: int
    batches: list[WrittenBatch] = field(default_factory=list)
    size: int = 0
