"""Write Kafka log entries byte for byte as a broker stores them.

Used by the tests and by the scenario generator. The layout comes from
:mod:`analytics.kafka.layout`, the same tables the reader uses, and the builders follow the
Java code that writes each form:
``MemoryRecordsBuilder`` / ``DefaultRecord.writeTo`` (v2 batches),
``MemoryRecords.writeEndTransactionalMarker`` (COMMIT/ABORT markers),
``DefaultRecordBatch.writeEmptyHeader`` (batches emptied by the cleaner) and
``LegacyRecord.write`` (magic 0/1 messages and compressed wrappers).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from analytics.kafka import layout as L
from analytics.kafka.codecs import compress
from analytics.kafka.util import crc32, crc32c, encode_varint, encode_varlong


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """A record to write. ``offset_delta`` defaults to its index in the batch; compacted batches set it."""

    key: bytes | None = None
    value: bytes | None = None
    timestamp: int = 0
    headers: tuple[tuple[str, bytes | None], ...] = ()
    offset_delta: int | None = None


def encode_record(record: RecordSpec, offset_delta: int, base_timestamp: int) -> bytes:
    """One v2 record, length prefix included (``DefaultRecord.writeTo``)."""
    body = bytearray(b"\x00")  # attributes: unused, always 0
    body += encode_varlong(record.timestamp - base_timestamp)
    body += encode_varint(offset_delta)
    body += _varint_bytes(record.key)
    body += _varint_bytes(record.value)
    body += encode_varint(len(record.headers))
    for hkey, hvalue in record.headers:
        body += _varint_bytes(hkey.encode("utf-8"))
        body += _varint_bytes(hvalue)
    return encode_varint(len(body)) + bytes(body)


def _varint_bytes(data: bytes | None) -> bytes:
    if data is None:
        return encode_varint(-1)
    return encode_varint(len(data)) + data


def build_batch(
    base_offset: int,
    records: Sequence[RecordSpec],
    *,
    compression: str = "none",
    producer_id: int = L.NO_PRODUCER_ID,
    producer_epoch: int = L.NO_PRODUCER_EPOCH,
    base_sequence: int = L.NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = L.NO_PARTITION_LEADER_EPOCH,
    log_append_time: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """A RecordBatch v2. With ``log_append_time`` the batch is LogAppendTime and that is its max timestamp.

    ``max_timestamp`` overrides the maximum of the record timestamps: the header field is
    written by the leader (``setMaxTimestamp``) and need not equal it.

    ``last_offset_delta`` defaults to the last record's offset delta; it is given for batches the
    cleaner has thinned (count below lastOffsetDelta + 1) and for empty batches.
    """
    if log_append_time is not None and max_timestamp is not None:
        raise ValueError("give log_append_time or max_timestamp, not both")
    deltas = [i if r.offset_delta is None else r.offset_delta for i, r in enumerate(records)]
    if last_offset_delta is None:
        if not records:
            raise ValueError("an empty batch needs last_offset_delta")
        last_offset_delta = deltas[-1]
    base_timestamp = records[0].timestamp if records else L.NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(r.timestamp for r in records) if records else L.NO_TIMESTAMP
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms  # 3.1+: the field holds the horizon; deltas are relative to it
    if log_append_time is not None:
        max_timestamp = log_append_time
    body = b"".join(encode_record(r, d, base_timestamp) for r, d in zip(records, deltas))
    codec = L.CODEC_IDS[compression]
    attributes = codec
    if log_append_time is not None:
        attributes |= L.TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= L.TRANSACTIONAL_MASK
    if is_control:
        attributes |= L.CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= L.DELETE_HORIZON_MASK
    return _assemble_v2(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=len(records),
        records=compress(codec, body) if records else b"",
    )


def _assemble_v2(*, records: bytes, **fields) -> bytes:
    size = L.RECORD_BATCH_OVERHEAD + len(records)
    header = bytearray(
        L.BATCH_HEADER.pack(
            fields["base_offset"],
            size - L.LOG_OVERHEAD,
            fields["partition_leader_epoch"],
            L.MAGIC_V2,
            0,  # crc, filled in below: it covers everything after itself
            fields["attributes"],
            fields["last_offset_delta"],
            fields["base_timestamp"],
            fields["max_timestamp"],
            fields["producer_id"],
            fields["producer_epoch"],
            fields["base_sequence"],
            fields["record_count"],
        )
    )
    header += records
    crc = crc32c(memoryview(header)[L.ATTRIBUTES_OFFSET :])
    header[L.CRC_OFFSET : L.CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(header)


def build_control_batch(
    offset: int,
    control_type: str,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    value: bytes | None,
    partition_leader_epoch: int = L.NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = True,
) -> bytes:
    """A control batch of one control record of ``control_type`` (key version 0)."""
    key = L.CONTROL_KEY.pack(0, L.CONTROL_TYPE_IDS[control_type])
    return build_batch(
        offset,
        [RecordSpec(key=key, value=value, timestamp=timestamp)],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=is_transactional,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def build_end_txn_marker(
    offset: int,
    control_type: str,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    partition_leader_epoch: int = L.NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A COMMIT or ABORT marker, 78 bytes (``MemoryRecords.writeEndTransactionalMarker``)."""
    if control_type not in L.END_TXN_MARKER_TYPES:
        raise ValueError(f"an end-transaction marker is COMMIT or ABORT, not {control_type}")
    return build_control_batch(
        offset,
        control_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        timestamp=timestamp,
        value=L.END_TXN_MARKER_VALUE.pack(0, coordinator_epoch),
        partition_leader_epoch=partition_leader_epoch,
    )


def build_empty_batch(
    base_offset: int,
    last_offset: int,
    *,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    max_timestamp: int,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = L.NO_PARTITION_LEADER_EPOCH,
    log_append_time: bool = False,
) -> bytes:
    """The 61-byte header the cleaner leaves of a producer's last batch (``writeEmptyHeader``)."""
    attributes = (
        (L.TIMESTAMP_TYPE_MASK if log_append_time else 0)
        | (L.TRANSACTIONAL_MASK if is_transactional else 0)
        | (L.CONTROL_MASK if is_control else 0)
    )
    return _assemble_v2(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=last_offset - base_offset,
        base_timestamp=L.NO_TIMESTAMP,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=0,
        records=b"",
    )


def build_legacy_message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int = L.MAGIC_V1,
    timestamp: int = L.NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    """One magic 0/1 message with its framing (``LegacyRecord.write``)."""
    if magic not in (L.MAGIC_V0, L.MAGIC_V1):
        raise ValueError(f"legacy magic is 0 or 1, not {magic}")
    body = bytearray([magic, attributes & 0xFF])
    if magic == L.MAGIC_V1:
        body += timestamp.to_bytes(8, "big", signed=True)
    for part in (key, value):
        body += L.LEGACY_LENGTH.pack(-1 if part is None else len(part))
        body += part or b""
    crc = crc32(body)
    return L.FRAME.pack(offset, 4 + len(body)) + crc.to_bytes(4, "big") + bytes(body)


def build_legacy_wrapper(
    offsets: Sequence[int],
    records: Sequence[RecordSpec],
    *,
    compression: str,
    magic: int = L.MAGIC_V1,
    log_append_time: int | None = None,
) -> bytes:
    """A compressed legacy wrapper holding ``records`` at absolute ``offsets``.

    v1 inner offsets are written relative (0..n-1) and the wrapper carries the last absolute
    offset; v0 inner offsets are absolute (``AbstractLegacyRecordBatch``).
    """
    codec = L.CODEC_IDS[compression]
    if codec == 0 or len(offsets) != len(records) or not records:
        raise ValueError("a wrapper needs a codec and one offset per record")
    ts_type = L.TIMESTAMP_TYPE_MASK if (magic == L.MAGIC_V1 and log_append_time is not None) else 0
    inner = b"".join(
        build_legacy_message(
            i if magic == L.MAGIC_V1 else offset,
            r.key,
            r.value,
            magic=magic,
            timestamp=r.timestamp if magic == L.MAGIC_V1 else L.NO_TIMESTAMP,
            attributes=ts_type,
        )
        for i, (offset, r) in enumerate(zip(offsets, records))
    )
    if magic == L.MAGIC_V1:
        wrapper_ts = log_append_time if log_append_time is not None else max(r.timestamp for r in records)
    else:
        wrapper_ts = L.NO_TIMESTAMP
    return build_legacy_message(
        offsets[-1], None, compress(codec, inner), magic=magic, timestamp=wrapper_ts, attributes=codec | ts_type
    )


def segment_file_name(base_offset: int, suffix: str = ".log") -> str:
    """The 20-digit zero-padded name Kafka gives a segment file (``LogFileUtils``).

    >>> segment_file_name(1234)
    '00000000000000001234.log'
    """
    return f"{base_offset:020d}{suffix}"


def write_file(path: str | os.PathLike, entries: Iterable[bytes]) -> int:
    """Write entries one after the other; returns the bytes written."""
    size = 0
    with open(path, "wb") as f:
        for entry in entries:
            f.write(entry)
            size += len(entry)
    return size
