"""The records DumpLogSegments' deep iteration prints for one entry of a segment.

The tool decodes an entry's records whatever its CRC says and prints a legacy record's own CRC
and validity; the segment reader decodes only CRC-valid entries and keeps neither, so the entry's
bytes are read again here (legacy wrappers opened as ``AbstractLegacyRecordBatch.DeepRecordsIterator``
opens them).
"""

from __future__ import annotations

from dataclasses import dataclass

from analytics.kafka.codecs import decompress
from analytics.kafka.layout import (
    CODEC_IDS,
    COMPRESSION_MASK,
    FRAME,
    LEGACY_CRC_START,
    LEGACY_HEADER_V0,
    LEGACY_HEADER_V1,
    LEGACY_LENGTH,
    MAGIC_V2,
    MIN_LEGACY_SIZE_FIELD,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
)
from analytics.kafka.model import Batch, Record
from analytics.kafka.records import decode_records, records_section
from analytics.kafka.util import crc32


def entry_records(source, batch: Batch) -> list[tuple[Record, bool, int]]:
    """The records the tool's deep iteration prints for an entry, each with its legacy validity and CRC.

    Decoded whatever the entry's CRC says. Records that do not decode (the tool throws there) give
    an empty list.
    """
    if batch.batch_size <= 0:
        return []
    data = source.read_at(batch.file_position, batch.batch_size)
    if len(data) < batch.batch_size:
        return []
    try:
        if batch.magic >= MAGIC_V2:
            section = records_section(data, 0, batch.batch_size, CODEC_IDS[batch.compression])
            records = decode_records(
                section,
                record_count=batch.record_count,
                base_offset=batch.base_offset,
                base_timestamp=batch.base_timestamp if batch.base_timestamp is not None else NO_TIMESTAMP,
                max_timestamp=batch.max_timestamp,
                log_append_time=batch.timestamp_type == "LogAppendTime",
                base_sequence=batch.base_sequence,
            )
            return [(record, True, 0) for record in records]
        return _legacy_records(data)
    except Exception:  # noqa: BLE001 -- any decoding failure: the tool would throw; print no records
        return []


@dataclass(frozen=True, slots=True)
class _LegacyMessage:
    offset: int
    magic: int
    attributes: int
    crc: int  # as stored
    valid: bool
    timestamp: int
    key: bytes | None
    value: bytes | None


def _legacy_message(buf: bytes, pos: int, end: int) -> _LegacyMessage:
    """A magic 0/1 message at ``buf[pos:end]``, key and value read whatever its CRC says."""
    offset, _size, stored_crc, magic, attributes = LEGACY_HEADER_V0.unpack_from(buf, pos)
    valid = crc32(memoryview(buf)[pos + LEGACY_CRC_START : end]) == stored_crc
    if magic >= 1:
        timestamp = LEGACY_HEADER_V1.unpack_from(buf, pos)[5]
        cursor = pos + LEGACY_HEADER_V1.size
    else:
        timestamp = NO_TIMESTAMP
        cursor = pos + LEGACY_HEADER_V0.size
    parts = []
    for _ in range(2):  # key, then value: int32 length (-1 for null) and the bytes
        (length,) = LEGACY_LENGTH.unpack_from(buf, cursor)
        cursor += LEGACY_LENGTH.size
        if length < 0:
            parts.append(None)
            continue
        if cursor + length > end:
            raise ValueError("legacy message key or value overruns the message")
        parts.append(bytes(buf[cursor : cursor + length]))
        cursor += length
    return _LegacyMessage(offset, magic, attributes, stored_crc, valid, timestamp, parts[0], parts[1])


def _legacy_records(data: bytes) -> list[tuple[Record, bool, int]]:
    """An uncompressed legacy entry is its own record; a wrapper's records are its inner messages
    (``AbstractLegacyRecordBatch.DeepRecordsIterator``: v1 inner offsets relative to the wrapper's
    last, LogAppendTime taken from the wrapper)."""
    outer = _legacy_message(data, 0, len(data))
    codec = outer.attributes & COMPRESSION_MASK
    if codec == 0:
        record = Record(outer.offset, outer.timestamp, NO_SEQUENCE, outer.key, outer.value)
        return [(record, outer.valid, outer.crc)]
    if outer.value is None:
        raise ValueError("compressed legacy wrapper without a value")
    inner = decompress(codec, outer.value, magic=outer.magic)
    messages = []
    pos = 0
    while pos < len(inner):
        (size,) = LEGACY_LENGTH.unpack_from(inner, pos + FRAME.size - LEGACY_LENGTH.size)
        end = pos + FRAME.size + size
        if size < MIN_LEGACY_SIZE_FIELD[0] or end > len(inner):
            raise ValueError("inner legacy message overruns its wrapper")
        messages.append(_legacy_message(inner, pos, end))
        pos = end
    if not messages:
        return []
    shift = outer.offset - messages[-1].offset if outer.magic >= 1 else 0
    log_append_time = outer.magic >= 1 and bool(outer.attributes & TIMESTAMP_TYPE_MASK)
    return [
        (
            Record(
                m.offset + shift,
                outer.timestamp if log_append_time else m.timestamp,
                NO_SEQUENCE,
                m.key,
                m.value,
            ),
            m.valid,
            m.crc,
        )
        for m in messages
    ]
