"""Producer-state snapshots (``<offset>.snapshot``): read and written byte for byte.

Upstream sources, under https://github.com/apache/kafka/blob/trunk/:
- storage/src/main/resources/message/ProducerSnapshot.json
- storage/src/main/java/org/apache/kafka/storage/internals/log/ProducerStateManager.java
  (``writeSnapshot`` / ``readSnapshot``)
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable

from analytics.kafka.errors import KafkaFormatError
from analytics.kafka.model import SidecarResult, SnapshotEntry
from analytics.kafka.sidecars.results import corrupt, entry_values, error_row
from analytics.kafka.util import crc32c

SNAPSHOT_HEADER = struct.Struct(
    ">h"  # 0 version: SNAPSHOT_VERSION; any other value is a CorruptSnapshotException
    "I"  # 2 crc: CRC-32C of bytes [SNAPSHOT_CRC_START, EOF)
    "i"  # 6 entry count (the length of the ProducerEntries array)
)
SNAPSHOT_ENTRY = struct.Struct(
    ">q"  # producerId
    "h"  # epoch
    "i"  # lastSequence
    "q"  # lastOffset: -1 when the entry has no data batch (only a marker)
    "i"  # offsetDelta: lastOffset - firstOffset of the last batch
    "q"  # timestamp: the entry's last timestamp, epoch ms
    "i"  # coordinatorEpoch: -1 before the producer's first marker
    "q"  # currentTxnFirstOffset: -1 when no transaction is open
)
SNAPSHOT_VERSION = 1
SNAPSHOT_CRC_POSITION = 2
SNAPSHOT_CRC_START = 6  # PRODUCER_ENTRIES_OFFSET: the CRC covers the count and every entry
SNAPSHOT_COUNT_POSITION = 6
SNAPSHOT_SUFFIX = ".snapshot"
# SnapshotEntry fields in on-disk order, after its topic, partition and snapshot_offset.
_SNAPSHOT_FIELDS = (
    "producer_id",
    "producer_epoch",
    "last_sequence",
    "last_offset",
    "offset_delta",
    "timestamp",
    "coordinator_epoch",
    "current_txn_first_offset",
)
# LogFileUtils.producerSnapshotFile: the offset zero-padded to 20 digits. re.ASCII keeps \d to 0-9.
_SNAPSHOT_NAME = re.compile(r"(\d{20})\.snapshot", re.ASCII)


def snapshot_offset_from_name(name: str) -> int | None:
    """The offset in a snapshot file name (20 digits + ``.snapshot``), or None for any other name.

    >>> snapshot_offset_from_name("00000000000001234569.snapshot")
    1234569
    >>> snapshot_offset_from_name("00000000000001234569.snapshot.deleted") is None
    True
    """
    match = _SNAPSHOT_NAME.fullmatch(name)
    if match is None:
        return None
    offset = int(match.group(1))
    # 20 digits reach past int64, which Long.parseLong (LogFileUtils.offsetFromFileName) refuses.
    return offset if offset < 1 << 63 else None


def read_snapshot(
    data: bytes, *, topic: str, partition: int, file: str, snapshot_offset: int, mark_empty: bool = False
) -> SidecarResult:
    """The producers of a ``.snapshot`` file, or one error row if the broker would refuse the file.

    A wrong version, a count that disagrees with the file size, a CRC mismatch or a short file
    leaves no row: the broker discards the whole snapshot, so no entry of it can be trusted.

    A valid file with no entry (the broker writes one when every producer of the partition has
    expired) gives no row, or with ``mark_empty`` one marker row (:func:`empty_snapshot_marker`): what
    the export writes to ``producer_snapshots``, so that the snapshot's offset is known.

    >>> data = write_snapshot([(23423, 146, 0, 1234569, 2, 3, 15, -1)])
    >>> read_snapshot(data, topic="t", partition=0, file="f", snapshot_offset=7).rows[0].producer_epoch
    146
    >>> read_snapshot(data[:-1], topic="t", partition=0, file="f", snapshot_offset=7).errors[0].message
    'entry count 1 needs 56 bytes, the file has 55'
    """
    try:
        entries = _decode_snapshot(data)
    except KafkaFormatError as exc:
        return SidecarResult(errors=[error_row(topic, partition, file, exc)])
    rows = [SnapshotEntry(topic, partition, snapshot_offset, *values, file=file) for values in entries]
    if not rows and mark_empty:
        rows = [empty_snapshot_marker(topic, partition, snapshot_offset, file)]
    return SidecarResult(rows=rows)


def empty_snapshot_marker(topic: str, partition: int, snapshot_offset: int, file: str) -> SnapshotEntry:
    """The ``producer_snapshots`` row of a ``.snapshot`` file with no entry: its topic, partition,
    ``snapshot_offset`` and ``file``, every producer column null (``producer_id`` null marks it; no
    entry of a real file has a null field). It is not a producer: readers counting entries skip it,
    and ``snapshot_checks`` takes only its offset (the producers the replay holds there, absent).

    >>> empty_snapshot_marker("t", 0, 27, "f").producer_id is None
    True
    """
    return SnapshotEntry(topic, partition, snapshot_offset, *([None] * len(_SNAPSHOT_FIELDS)), file=file)


def is_snapshot_entry(row) -> bool:
    """Whether a ``producer_snapshots`` row is a producer's entry, not an empty file's marker."""
    return row.producer_id is not None


def _decode_snapshot(data: bytes) -> Iterable[tuple]:
    size = len(data)
    if size < SNAPSHOT_HEADER.size:
        raise corrupt(
            f"snapshot is {size} bytes, shorter than its {SNAPSHOT_HEADER.size}-byte header", 0, size
        )
    version, stored_crc, count = SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise corrupt(f"unknown snapshot version {version}, expected {SNAPSHOT_VERSION}", 0, size)
    # The count is checked against the bytes present before anything is built from it.
    if count < 0:
        raise corrupt(f"entry count {count} is negative", SNAPSHOT_COUNT_POSITION, size)
    needed = SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size
    if needed != size:
        raise corrupt(
            f"entry count {count} needs {needed} bytes, the file has {size}", SNAPSHOT_COUNT_POSITION, size
        )
    view = memoryview(data)
    computed_crc = crc32c(view[SNAPSHOT_CRC_START:])
    if computed_crc != stored_crc:
        raise corrupt(
            f"CRC-32C mismatch: stored {stored_crc:#010x}, computed {computed_crc:#010x}",
            SNAPSHOT_CRC_POSITION,
            size,
        )
    return SNAPSHOT_ENTRY.iter_unpack(view[SNAPSHOT_HEADER.size :])


def write_snapshot(entries: Iterable) -> bytes:
    """A version-1 ``.snapshot`` file, in the given entry order.

    ``entries`` are :class:`SnapshotEntry` rows or tuples of the eight on-disk values (producerId,
    epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch,
    currentTxnFirstOffset). A value outside its field's range raises ``struct.error``.

    >>> write_snapshot([]).hex()
    '000148674bc700000000'
    """
    body = b"".join(
        SNAPSHOT_ENTRY.pack(*entry_values(entry, SnapshotEntry, _SNAPSHOT_FIELDS)) for entry in entries
    )
    out = bytearray(SNAPSHOT_HEADER.size) + body
    count = len(body) // SNAPSHOT_ENTRY.size
    # The CRC covers the count, so the header is written twice: count first, then the CRC over it.
    SNAPSHOT_HEADER.pack_into(out, 0, SNAPSHOT_VERSION, 0, count)
    SNAPSHOT_HEADER.pack_into(out, 0, SNAPSHOT_VERSION, crc32c(memoryview(out)[SNAPSHOT_CRC_START:]), count)
    return bytes(out)
