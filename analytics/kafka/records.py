"""Records inside a v2 batch (``DefaultRecord.readFrom``) and control records.

A record is ``length:varint | attributes:int8 | timestampDelta:varlong | offsetDelta:varint |
keyLength:varint | key | valueLength:varint | value | headerCount:varint | headers``; lengths of
-1 mean null. The reader checks, as Kafka does, that each record uses exactly ``length`` bytes
and that exactly ``recordsCount`` records fill the section with nothing left over.
"""

from __future__ import annotations

from analytics.kafka import layout as L
from analytics.kafka.codecs import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from analytics.kafka.errors import RECORD_DECODE, KafkaFormatError
from analytics.kafka.model import Header, Record
from analytics.kafka.util import increment_sequence, java_utf8, read_varint, read_varlong

# The smallest encoded record: length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, headerCount, one byte each. Used to refuse a recordsCount the bytes cannot hold.
MIN_RECORD_BYTES = 7



def records_section(buf, pos: int, size: int, attributes: int, *, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES):
    """The (decompressed) records section of the v2 batch at ``buf[pos:pos+size]``."""
    section = memoryview(buf)[pos + L.RECORD_BATCH_OVERHEAD : pos + size]
    codec = attributes & L.COMPRESSION_MASK
    return section if codec == 0 else memoryview(decompress(codec, section, limit=limit))


def decode_records(
    section,
    *,
    record_count: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append_time: bool,
    base_sequence: int,
) -> list[Record]:
    """Decode ``record_count`` records from a records section; raises KafkaFormatError."""
    if record_count < 0:
        raise KafkaFormatError(RECORD_DECODE, f"negative record count {record_count}")
    end = len(section)
    if record_count * MIN_RECORD_BYTES > end:
        raise KafkaFormatError(
            RECORD_DECODE, f"record count {record_count} cannot fit in {end} bytes of records"
        )
    out = []
    pos = 0
    for i in range(record_count):
        length, pos = read_varint(section, pos)
        start = pos
        if length < 0 or start + length > end:
            raise KafkaFormatError(RECORD_DECODE, f"record {i} length {length} overruns the batch")
        pos += 1  # attributes: unused, always 0
        ts_delta, pos = read_varlong(section, pos)
        offset_delta, pos = read_varint(section, pos)
        key, pos = _read_bytes(section, pos, start + length, "key")
        value, pos = _read_bytes(section, pos, start + length, "value")
        header_count, pos = read_varint(section, pos)
        if header_count < 0 or header_count * 2 > start + length - pos:
            raise KafkaFormatError(RECORD_DECODE, f"record {i} header count {header_count} is impossible")
        headers = []
        for _ in range(header_count):
            hkey, pos = _read_bytes(section, pos, start + length, "header key")
            if hkey is None:
                raise KafkaFormatError(RECORD_DECODE, f"record {i} has a null header key")
            hvalue, pos = _read_bytes(section, pos, start + length, "header value")
            headers.append(Header(java_utf8(hkey), hvalue))  # as RecordHeader.key()
        if pos != start + length:
            raise KafkaFormatError(
                RECORD_DECODE, f"record {i} declared {length} bytes but used {pos - start}"
            )
        out.append(
            Record(
                offset=base_offset + offset_delta,
                timestamp=max_timestamp if log_append_time else base_timestamp + ts_delta,
                sequence=-1 if base_sequence < 0 else increment_sequence(base_sequence, offset_delta),
                key=key,
                value=value,
                headers=tuple(headers),
            )
        )
    if pos != end:
        raise KafkaFormatError(
            RECORD_DECODE, f"incorrect declared batch size: {end - pos} bytes left after {record_count} records"
        )
    return out


def _read_bytes(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        if n != -1:
            raise KafkaFormatError(RECORD_DECODE, f"{what} length {n} is negative")
        return None, pos
    if pos + n > end:
        raise KafkaFormatError(RECORD_DECODE, f"{what} of {n} bytes overruns its record")
    return bytes(buf[pos : pos + n]), pos + n


def parse_control_record(key: bytes | None, value: bytes | None) -> tuple[str, int | None]:
    """(control type name, coordinator epoch or None) of a control record.

    Key: ``version:int16 | type:int16``; a negative version is corrupt, a higher one is read as
    v0 (``ControlRecordType.parseTypeId``). COMMIT/ABORT values are ``version:int16 |
    coordinatorEpoch:int32`` (``EndTransactionMarker.deserializeValue``).
    """
    if key is None or len(key) < L.CONTROL_KEY.size:
        raise KafkaFormatError(RECORD_DECODE, "control record key is shorter than 4 bytes")
    version, type_id = L.CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise KafkaFormatError(RECORD_DECODE, f"control record key version {version} is negative")
    name = L.control_type_name(type_id)
    if name not in L.END_TXN_MARKER_TYPES:
        return name, None
    if value is None or len(value) < L.END_TXN_MARKER_VALUE.size:
        raise KafkaFormatError(RECORD_DECODE, f"{name} marker value is shorter than 6 bytes")
    marker_version, coordinator_epoch = L.END_TXN_MARKER_VALUE.unpack_from(value)
    if marker_version < 0:
        raise KafkaFormatError(RECORD_DECODE, f"{name} marker value version {marker_version} is negative")
    return name, coordinator_epoch
