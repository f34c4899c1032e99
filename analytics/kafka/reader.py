"""Walk a ``.log`` segment entry by entry and turn it into Arrow columns, accounting for every byte.

The walk mirrors the format (``Records.java``): each entry starts with ``offset:int64 |
size:int32`` and has its magic at byte 16, so framing is uniform across magics. v2 batch
headers are collected by position and decoded together with NumPy; legacy entries and control
records take a per-entry path (they are rare).

Reading is windowed: a segment of any size is read ``window`` bytes at a time, and an entry is
only read once its size field has been checked against the bytes that exist, so memory stays
bounded by the window (or the largest single entry) whatever the segment size.

Accounting: every byte of a file is either in a *valid* entry (CRC correct, header readable,
counted in ``valid_bytes``) or in the ``bytes_affected`` of exactly one parse error. Problems
that break the framing (a truncated or zero-filled tail, a bad size field, an unknown magic)
end the walk and the rest of the file is one error, as Kafka's log recovery truncates there. A
CRC mismatch is reported and the walk goes on with the next entry: its header is still a row of
``batches`` with ``crc_valid = false``. Record-level problems found with ``records=True`` have
``bytes_affected = 0``: the batch's bytes are already accounted for as a valid batch.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from analytics import schema
from analytics.kafka import errors as E
from analytics.kafka import layout as L
from analytics.kafka.codecs import DEFAULT_MAX_DECOMPRESSED_BYTES
from analytics.kafka.legacy import LegacyMessage, inner_records, read_message
from analytics.kafka.model import Batch, ParseError, SegmentInfo
from analytics.kafka.records import decode_records, parse_control_record, records_section
from analytics.kafka.util import crc32c

DEFAULT_WINDOW = 8 * 1024 * 1024

# size:int32 | partitionLeaderEpoch (v2) or crc (legacy):int32 | magic:int8 | crc (v2):uint32,
# read at entry offset 8 in one call: the fields the walk needs to frame and check an entry.
_FRAME_HEAD = struct.Struct(">iibI")
_FRAME_HEAD_AT = 8  # the size field follows the int64 offset
_FRAME_HEAD_END = _FRAME_HEAD_AT + _FRAME_HEAD.size  # 21: bytes of an entry needed to frame and check it
_HEADER_DTYPE = np.dtype(list(L.BATCH_HEADER_NUMPY_FIELDS))
assert _HEADER_DTYPE.itemsize == L.RECORD_BATCH_OVERHEAD
_CODEC_LABELS = np.array([L.codec_name(i) for i in range(8)], dtype=object)
_ZERO_CHECK_BLOCK = 1 << 20


class LocalFile:
    """A local file read by position (``os.pread``): no shared file offset, no seeks."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size

    def read_at(self, offset: int, length: int) -> bytes:
        data = os.pread(self._fd, length, offset)
        while len(data) < length:  # pread may return short; a file shrinking under us ends early
            more = os.pread(self._fd, length - len(data), offset + len(data))
            if not more:
                break
            data += more
        return data

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> "LocalFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(slots=True)
class Chunk:
    """What one window of a segment yielded: batch rows, and record rows when asked for."""

    batches: pa.RecordBatch
    records: pa.RecordBatch | None = None


@dataclass(slots=True)
class _Walk:
    """Positions found in one window, and why the walk of the window ended."""

    v2: list[int] = field(default_factory=list)
    v2_crc_ok: list[bool] = field(default_factory=list)
    legacy: list[int] = field(default_factory=list)
    next_pos: int = 0  # window position where the next walk starts
    need: int = 0  # bytes needed from next_pos when an entry did not fit the window
    stop: tuple[str, str] | None = None  # (error kind, message) ending the file at next_pos


class SegmentScanner:
    """Iterate a segment as :class:`Chunk` s; afterwards ``errors`` and ``info`` describe the file.

    ``source`` is anything with ``size`` and ``read_at(offset, length)``, such as
    :class:`LocalFile`.
    """

    def __init__(
        self,
        source,
        *,
        topic: str,
        partition: int,
        file: str,
        base_offset: int = -1,
        records: bool = False,
        window: int = DEFAULT_WINDOW,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    ):
        if window < _FRAME_HEAD_END:
            raise ValueError(f"window must be at least {_FRAME_HEAD_END} bytes")
        self.source = source
        self.topic = topic
        self.partition = partition
        self.file = file
        self.base_offset = base_offset
        self.records = records
        self.window = window
        self.max_decompressed_bytes = max_decompressed_bytes
        self.errors: list[ParseError] = []
        self.valid_bytes = 0
        self.batch_count = 0
        self.first_offset: int | None = None
        self.last_offset: int | None = None
        self._stopped: str | None = None

    # -- accounting ---------------------------------------------------------------------------
    def _error(self, position: int, kind: str, message: str, bytes_affected: int) -> None:
        self.errors.append(
            ParseError(self.topic, self.partition, self.file, position, kind, message, bytes_affected)
        )

    @property
    def info(self) -> SegmentInfo:
        if self._stopped:
            status = self._stopped
        elif self.errors:
            status = self.errors[0].error_kind
        else:
            status = "ok"
        return SegmentInfo(
            self.topic,
            self.partition,
            self.file,
            self.base_offset,
            self.source.size,
            self.valid_bytes,
            self.batch_count,
            self.first_offset,
            self.last_offset,
            status,
        )

    # -- the walk -----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Chunk]:
        size = self.source.size
        file_pos = 0
        want = self.window
        while file_pos < size:
            buf = self.source.read_at(file_pos, min(want, size - file_pos))
            if not buf:
                self._stop(file_pos, E.TRUNCATED, "the file ended while it was being read")
                return
            walk = self._walk(buf, size - file_pos)
            chunk = self._decode(buf, file_pos, walk)
            if chunk is not None:
                yield chunk
            if walk.stop:
                self._stop(file_pos + walk.next_pos, *walk.stop)
                return
            file_pos += walk.next_pos
            # An entry larger than the window is read whole: its size was checked against the file.
            want = max(self.window, walk.need)

    def _walk(self, buf: bytes, file_remaining: int) -> _Walk:
        mv = memoryview(buf)
        n = len(buf)
        walk = _Walk()
        v2, v2_crc_ok, legacy = walk.v2, walk.v2_crc_ok, walk.legacy
        unpack_head = _FRAME_HEAD.unpack_from
        pos = 0
        while pos < n:
            if pos + _FRAME_HEAD_END > n:
                if n < file_remaining:  # more of the file follows: read it with the next window
                    walk.need = _FRAME_HEAD_END
                    break
                if pos + L.FRAME_AND_MAGIC <= n and buf[pos + L.MAGIC_OFFSET] not in (0, 1, 2):
                    walk.stop = _unknown_magic(buf[pos + L.MAGIC_OFFSET])
                else:
                    walk.stop = (E.TRUNCATED, f"{n - pos} bytes at the end are too few for an entry header")
                break
            size, _, magic, stored_crc = unpack_head(buf, pos + _FRAME_HEAD_AT)
            if magic == L.MAGIC_V2:
                minimum = L.MIN_V2_SIZE_FIELD
            elif magic == L.MAGIC_V0 or magic == L.MAGIC_V1:
                minimum = L.MIN_LEGACY_SIZE_FIELD[magic]
            else:
                walk.stop = _unknown_magic(magic)
                break
            if size < minimum:
                walk.stop = (E.INVALID_LENGTH, f"size field {size} is below the minimum {minimum} for magic {magic}")
                break
            end = pos + L.LOG_OVERHEAD + size
            if end > file_remaining:
                walk.stop = (
                    E.TRUNCATED,
                    f"entry of {size + L.LOG_OVERHEAD} bytes runs {end - file_remaining} bytes past the end of the file",
                )
                break
            if end > n:
                walk.need = end - pos
                break
            if magic == L.MAGIC_V2:
                v2.append(pos)
                v2_crc_ok.append(crc32c(mv[pos + L.ATTRIBUTES_OFFSET : end]) == stored_crc)
            else:
                legacy.append(pos)
            pos = end
        walk.next_pos = pos
        return walk

    def _stop(self, position: int, kind: str, message: str) -> None:
        rest = self.source.size - position
        if kind != E.ZERO_FILLED and self._rest_is_zero(position):
            kind, message = E.ZERO_FILLED, f"the last {rest} bytes are zeros (a preallocated segment's tail)"
        self._stopped = kind
        self._error(position, kind, message, rest)

    def _rest_is_zero(self, position: int) -> bool:
        while position < self.source.size:
            block = self.source.read_at(position, min(_ZERO_CHECK_BLOCK, self.source.size - position))
            if not block or block.count(0) != len(block):
                return False
            position += len(block)
        return True

    # -- decoding -----------------------------------------------------------------------------
    def _decode(self, buf: bytes, file_pos: int, walk: _Walk) -> Chunk | None:
        if not walk.v2 and not walk.legacy:
            return None
        cols = _v2_columns(buf, walk.v2, walk.v2_crc_ok)
        usable = np.array(walk.v2_crc_ok, dtype=bool)
        control_type = np.full(len(walk.v2), None, dtype=object)
        coordinator_epoch = np.full(len(walk.v2), None, dtype=object)
        for i in np.flatnonzero(cols["is_control"] & usable & (cols["record_count"] > 0)):
            pos = walk.v2[i]
            try:
                control_type[i], coordinator_epoch[i] = self._control(buf, pos, cols, i)
            except E.KafkaFormatError as exc:
                usable[i] = False
                self._error(file_pos + pos, exc.kind, f"control batch: {exc.message}", int(cols["batch_size"][i]))
        cols["control_type"] = control_type
        cols["coordinator_epoch"] = coordinator_epoch
        for i in np.flatnonzero(~usable & ~cols["crc_valid"]):
            self._error(
                file_pos + walk.v2[i],
                E.CRC_MISMATCH,
                f"batch at offset {int(cols['base_offset'][i])}: stored CRC-32C {int(cols['crc'][i])} does not match the bytes",
                int(cols["batch_size"][i]),
            )
        positions = np.asarray(walk.v2, dtype=np.int64)
        if walk.legacy:
            legacy_cols, legacy_usable, legacy_records = self._legacy(buf, file_pos, walk.legacy)
            positions = np.concatenate([positions, np.asarray(walk.legacy, dtype=np.int64)])
            cols = {k: np.concatenate([cols[k], legacy_cols[k]]) for k in legacy_cols}
            usable = np.concatenate([usable, legacy_usable])
        else:
            legacy_records = {}
        order = np.argsort(positions, kind="stable")
        positions = positions[order]
        cols = {k: v[order] for k, v in cols.items()}
        usable = usable[order]

        self.batch_count += len(positions)
        self.valid_bytes += int(cols["batch_size"][usable].sum())
        if usable.any():
            if self.first_offset is None:
                self.first_offset = int(cols["base_offset"][usable][0])
            self.last_offset = int(cols["last_offset"][usable][-1])

        batches = self._batch_record_batch(file_pos + positions, cols)
        if not self.records:
            return Chunk(batches)
        parts = self._records(buf, file_pos, positions, cols, usable, legacy_records)
        records = pa.concat_batches(parts) if parts else pa.RecordBatch.from_pylist([], schema=schema.RECORDS_RAW)
        return Chunk(batches, records)

    def _control(self, buf: bytes, pos: int, cols: dict, i: int) -> tuple[str, int | None]:
        section = records_section(
            buf, pos, int(cols["batch_size"][i]), int(cols["attributes"][i]), limit=self.max_decompressed_bytes
        )
        first = decode_records(
            section,
            record_count=int(cols["record_count"][i]),
            base_offset=int(cols["base_offset"][i]),
            base_timestamp=int(cols["base_timestamp"][i]),
            max_timestamp=int(cols["max_timestamp"][i]),
            log_append_time=bool(cols["attributes"][i] & L.TIMESTAMP_TYPE_MASK),
            base_sequence=int(cols["base_sequence"][i]),
        )[0]
        return parse_control_record(first.key, first.value)

    def _legacy(self, buf: bytes, file_pos: int, positions: list[int]):
        rows: dict[str, list] = {k: [] for k in _COLUMN_ORDER}
        usable = []
        records = {}
        for pos in positions:
            (size,) = L.LEGACY_LENGTH.unpack_from(buf, pos + 8)
            end = pos + L.LOG_OVERHEAD + size
            message: LegacyMessage | None = None
            inner = None
            problem = None
            try:
                message = read_message(buf, pos, end)
                if message.crc_valid:
                    inner = inner_records(message, limit=self.max_decompressed_bytes)
                else:
                    problem = (E.CRC_MISMATCH, "legacy message: stored CRC-32 does not match the bytes")
            except E.KafkaFormatError as exc:
                problem = (exc.kind, f"legacy message: {exc.message}")
            if problem:
                self._error(file_pos + pos, problem[0], problem[1], size + L.LOG_OVERHEAD)
            offset, _, _, magic, attributes = L.LEGACY_HEADER_V0.unpack_from(buf, pos)
            timestamp = message.timestamp if message else L.NO_TIMESTAMP
            usable.append(problem is None)
            if inner is not None:
                records[pos] = inner
            for k, v in (
                ("batch_size", size + L.LOG_OVERHEAD),
                ("magic", magic),
                ("crc_valid", bool(message and message.crc_valid)),
                ("crc", 0),
                ("base_offset", inner[0].offset if inner else offset),
                ("last_offset", offset),
                ("record_count", len(inner) if inner else 0),
                ("partition_leader_epoch", L.NO_PARTITION_LEADER_EPOCH),
                ("compression", L.codec_name(attributes & L.COMPRESSION_MASK)),
                (
                    "timestamp_type",
                    L.NO_TIMESTAMP_TYPE
                    if magic == L.MAGIC_V0
                    else L.TIMESTAMP_TYPES[bool(attributes & L.TIMESTAMP_TYPE_MASK)],
                ),
                ("is_transactional", False),
                ("is_control", False),
                ("base_timestamp", inner[0].timestamp if inner else timestamp),
                ("max_timestamp", timestamp),
                ("producer_id", L.NO_PRODUCER_ID),
                ("producer_epoch", L.NO_PRODUCER_EPOCH),
                ("base_sequence", L.NO_SEQUENCE),
                ("last_sequence", L.NO_SEQUENCE),
                ("control_type", None),
                ("coordinator_epoch", None),
                ("attributes", attributes & 0xFF),
                ("delete_horizon_ms", None),
            ):
                rows[k].append(v)
        cols = {k: np.array(v, dtype=object if k in _OBJECT_COLUMNS else None) for k, v in rows.items()}
        return cols, np.array(usable, dtype=bool), records

    def _records(self, buf, file_pos, positions, cols, usable, legacy_records) -> list[pa.RecordBatch]:
        out = []
        for i in np.flatnonzero(usable):
            pos = int(positions[i])
            if cols["magic"][i] != L.MAGIC_V2:
                recs = legacy_records.get(pos, [])
            else:
                try:
                    section = records_section(
                        buf, pos, int(cols["batch_size"][i]), int(cols["attributes"][i]), limit=self.max_decompressed_bytes
                    )
                    recs = decode_records(
                        section,
                        record_count=int(cols["record_count"][i]),
                        base_offset=int(cols["base_offset"][i]),
                        base_timestamp=int(cols["base_timestamp"][i]),
                        max_timestamp=int(cols["max_timestamp"][i]),
                        log_append_time=bool(cols["attributes"][i] & L.TIMESTAMP_TYPE_MASK),
                        base_sequence=int(cols["base_sequence"][i]),
                    )
                except E.KafkaFormatError as exc:
                    self._error(
                        file_pos + pos,
                        exc.kind,
                        f"records of batch at offset {int(cols['base_offset'][i])}: {exc.message}",
                        0,
                    )
                    continue
            if recs:
                out.append(
                    _record_batch(
                        self.topic,
                        self.partition,
                        recs,
                        int(cols["base_offset"][i]),
                        int(cols["producer_id"][i]),
                        int(cols["producer_epoch"][i]),
                    )
                )
        return out

    def _batch_record_batch(self, file_positions: np.ndarray, cols: dict) -> pa.RecordBatch:
        n = len(file_positions)
        arrays = []
        for f in schema.BATCHES:
            if f.name == "topic":
                arr = pa.array([self.topic] * n, f.type)
            elif f.name == "partition":
                arr = pa.array(np.full(n, self.partition, dtype=np.int32), f.type)
            elif f.name == "file":
                arr = pa.array([self.file] * n, f.type)
            elif f.name == "file_position":
                arr = pa.array(file_positions, f.type)
            else:
                arr = pa.array(cols[f.name], f.type, from_pandas=True)
            arrays.append(arr)
        return pa.RecordBatch.from_arrays(arrays, schema=schema.BATCHES)


_COLUMN_ORDER = (
    "batch_size",
    "magic",
    "crc_valid",
    "crc",
    "base_offset",
    "last_offset",
    "record_count",
    "partition_leader_epoch",
    "compression",
    "timestamp_type",
    "is_transactional",
    "is_control",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "last_sequence",
    "control_type",
    "coordinator_epoch",
    "attributes",
    "delete_horizon_ms",
)
_OBJECT_COLUMNS = frozenset({"compression", "timestamp_type", "control_type", "coordinator_epoch", "delete_horizon_ms"})


def _unknown_magic(magic: int) -> tuple[str, str]:
    return E.UNKNOWN_MAGIC, f"magic byte {magic} is not 0, 1 or 2"


def _v2_columns(buf: bytes, positions: list[int], crc_ok: list[bool]) -> dict[str, np.ndarray]:
    """Decode the headers of the v2 batches at ``positions`` at once."""
    mv = memoryview(buf)
    headers = np.frombuffer(
        b"".join([mv[p : p + L.RECORD_BATCH_OVERHEAD] for p in positions]), dtype=_HEADER_DTYPE
    )
    base_offset = headers["base_offset"].astype(np.int64)
    delta = headers["last_offset_delta"].astype(np.int64)
    base_sequence = headers["base_sequence"].astype(np.int32)
    # lastSequence = incrementSequence(baseSequence, lastOffsetDelta), i.e. addition mod 2^31.
    seq_sum = base_sequence.astype(np.int64) + delta
    seq_sum = np.where(seq_sum > L.INT_MAX, seq_sum - (L.INT_MAX + 1), seq_sum)
    last_sequence = np.where(base_sequence == L.NO_SEQUENCE, L.NO_SEQUENCE, seq_sum).astype(np.int32)
    attributes = headers["attributes"].astype(np.int16)
    low = attributes & 0xFF  # only the low byte carries meaning
    base_timestamp = headers["base_timestamp"].astype(np.int64)
    horizon = (low & L.DELETE_HORIZON_MASK) != 0
    return {
        "batch_size": (headers["length"].astype(np.int64) + L.LOG_OVERHEAD).astype(np.int32),
        "magic": headers["magic"].astype(np.int8),
        "crc_valid": np.array(crc_ok, dtype=bool),
        "crc": headers["crc"].astype(np.int64),
        "base_offset": base_offset,
        "last_offset": base_offset + delta,
        "record_count": headers["record_count"].astype(np.int32),
        "partition_leader_epoch": headers["partition_leader_epoch"].astype(np.int32),
        "compression": _CODEC_LABELS[low & L.COMPRESSION_MASK],
        "timestamp_type": np.where(low & L.TIMESTAMP_TYPE_MASK, "LogAppendTime", "CreateTime").astype(object),
        "is_transactional": (low & L.TRANSACTIONAL_MASK) != 0,
        "is_control": (low & L.CONTROL_MASK) != 0,
        "base_timestamp": base_timestamp,
        "max_timestamp": headers["max_timestamp"].astype(np.int64),
        "producer_id": headers["producer_id"].astype(np.int64),
        "producer_epoch": headers["producer_epoch"].astype(np.int16),
        "base_sequence": base_sequence,
        "last_sequence": last_sequence,
        "attributes": attributes,
        "delete_horizon_ms": np.where(horizon, base_timestamp, None).astype(object),
    }


def _record_batch(topic, partition, recs, batch_base_offset, producer_id, producer_epoch) -> pa.RecordBatch:
    n = len(recs)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array([r.offset for r in recs], pa.int64()),
            pa.array([r.timestamp for r in recs], pa.int64()),
            pa.array([batch_base_offset] * n, pa.int64()),
            pa.array([producer_id] * n, pa.int64()),
            pa.array([producer_epoch] * n, pa.int16()),
            pa.array([r.sequence for r in recs], pa.int32()),
            pa.array([r.key for r in recs], pa.binary()),
            pa.array([r.value for r in recs], pa.binary()),
            pa.array([[{"key": h.key, "value": h.value} for h in r.headers] for r in recs], schema.RECORDS_RAW.field("headers").type),
        ],
        schema=schema.RECORDS_RAW,
    )


def batches_from_arrow(batch: pa.RecordBatch) -> list[Batch]:
    """Rows of a batches record batch as :class:`Batch` objects."""
    return [Batch(**row) for row in batch.to_pylist()]
