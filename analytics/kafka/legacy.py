"""Legacy message sets, magic 0 and 1 (``LegacyRecord.java``, ``AbstractLegacyRecordBatch.java``).

An entry is ``offset:int64 | size:int32 | crc:uint32 | magic:int8 | attributes:int8 |
[timestamp:int64, v1 only] | keyLength:int32 | key | valueLength:int32 | value``, its CRC-32
(IEEE) over ``[magic, end)``. A compressed *wrapper* holds compressed inner messages in its
value: in v1 their offsets are relative and the wrapper carries the absolute offset of the
last one; in v0 inner offsets are absolute. Legacy entries have no producer fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from analytics.kafka import layout as L
from analytics.kafka.codecs import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from analytics.kafka.errors import RECORD_DECODE, KafkaFormatError
from analytics.kafka.model import Record
from analytics.kafka.util import crc32


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    offset: int
    magic: int
    attributes: int
    crc_valid: bool
    timestamp: int  # -1 for magic 0
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> int:
        return self.attributes & L.COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic == L.MAGIC_V1 and bool(self.attributes & L.TIMESTAMP_TYPE_MASK)


def read_message(buf, pos: int, end: int) -> LegacyMessage:
    """Parse the legacy message at ``buf[pos:end]`` (framing already checked); verifies its CRC."""
    offset, _size, stored_crc, magic, attributes = L.LEGACY_HEADER_V0.unpack_from(buf, pos)
    crc_valid = crc32(memoryview(buf)[pos + L.LEGACY_CRC_START : end]) == stored_crc
    if magic == L.MAGIC_V1:
        timestamp = L.LEGACY_HEADER_V1.unpack_from(buf, pos)[5]
        cursor = pos + L.LEGACY_HEADER_V1.size
    else:
        timestamp = L.NO_TIMESTAMP
        cursor = pos + L.LEGACY_HEADER_V0.size
    if not crc_valid:  # the key/value lengths cannot be trusted
        return LegacyMessage(offset, magic, attributes, False, timestamp, None, None)
    key, cursor = _read_sized(buf, cursor, end, "key")
    value, cursor = _read_sized(buf, cursor, end, "value")
    if cursor != end:
        raise KafkaFormatError(RECORD_DECODE, f"legacy message has {end - cursor} bytes after its value")
    return LegacyMessage(offset, magic, attributes, True, timestamp, key, value)


def _read_sized(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise KafkaFormatError(RECORD_DECODE, f"legacy message {what} length is cut short")
    (n,) = L.LEGACY_LENGTH.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise KafkaFormatError(RECORD_DECODE, f"legacy message {what} of {n} bytes overruns the message")
    return bytes(buf[pos : pos + n]), pos + n


def inner_records(wrapper: LegacyMessage, *, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> list[Record]:
    """The records of a legacy entry: itself when uncompressed, else its inner messages."""
    if wrapper.codec == 0:
        return [Record(wrapper.offset, wrapper.timestamp, -1, wrapper.key, wrapper.value)]
    if wrapper.value is None:
        raise KafkaFormatError(RECORD_DECODE, "compressed legacy wrapper has a null value")
    data = decompress(wrapper.codec, wrapper.value, limit=limit, magic=wrapper.magic)
    inner: list[LegacyMessage] = []
    pos = 0
    while pos < len(data):
        if pos + L.LOG_OVERHEAD + L.MIN_LEGACY_SIZE_FIELD[L.MAGIC_V0] > len(data):
            raise KafkaFormatError(RECORD_DECODE, "inner legacy message is cut short")
        (size,) = L.LEGACY_LENGTH.unpack_from(data, pos + 8)
        magic = data[pos + L.MAGIC_OFFSET]
        if magic not in L.MIN_LEGACY_SIZE_FIELD or size < L.MIN_LEGACY_SIZE_FIELD[magic]:
            raise KafkaFormatError(RECORD_DECODE, f"inner legacy message has magic {magic} and size {size}")
        end = pos + L.LOG_OVERHEAD + size
        if end > len(data):
            raise KafkaFormatError(RECORD_DECODE, "inner legacy message overruns the wrapper")
        message = read_message(data, pos, end)
        if not message.crc_valid:
            raise KafkaFormatError(RECORD_DECODE, f"inner legacy message at {pos} fails its CRC-32")
        if message.codec != 0:
            raise KafkaFormatError(RECORD_DECODE, "nested compression in a legacy wrapper")
        inner.append(message)
        pos = end
    if not inner:
        raise KafkaFormatError(RECORD_DECODE, "compressed legacy wrapper holds no messages")
    # v1 inner offsets are relative to the wrapper, which carries the last absolute offset.
    shift = wrapper.offset - inner[-1].offset if wrapper.magic == L.MAGIC_V1 else 0
    return [
        Record(
            offset=m.offset + shift,
            timestamp=wrapper.timestamp if wrapper.log_append_time else m.timestamp,
            sequence=-1,
            key=m.key,
            value=m.value,
        )
        for m in inner
    ]
