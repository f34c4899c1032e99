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
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from analytics.contract import schemas as schema
from analytics.kafka import errors as E
from analytics.kafka import layout as L
from analytics.kafka.codecs import DEFAULT_MAX_DECOMPRESSED_BYTES
from analytics.kafka.legacy import inner_records, read_message
from analytics.kafka.model import Batch, ParseError, SegmentInfo
from analytics.kafka.records import decode_records, parse_control_record, records_section
from crc32c import crc32c as _crc32c  # the C function itself: called once per batch

DEFAULT_WINDOW = 8 * 1024 * 1024

# size:int32 | (partitionLeaderEpoch or legacy crc):int32 | magic:int8, read at entry offset 8
# in one call: what the walk needs to frame an entry.
_SIZE_MAGIC = struct.Struct(">i4xb")
_FRAME_HEAD_AT = 8  # the size field follows the int64 offset
_FRAME_HEAD_END = L.ATTRIBUTES_OFFSET  # 21: an entry's bytes needed to frame it and find its CRC
_HEADER_DTYPE = np.dtype(list(L.BATCH_HEADER_NUMPY_FIELDS))
assert _HEADER_DTYPE.itemsize == L.RECORD_BATCH_OVERHEAD
_ZERO_CHECK_BLOCK = 1 << 20
_GATHER_ROWS = 16384  # headers gathered per NumPy fancy-index step (bounds its index array to 8 MB)
# The first 26 bytes of a legacy entry (the smallest entry, v0, has 26): for v0 the "timestamp"
# bytes belong to the key length and are ignored.
_LEGACY_HEADER_DTYPE = np.dtype(
    [("offset", ">i8"), ("size", ">i4"), ("crc", ">u4"), ("magic", "i1"), ("attributes", "i1"), ("timestamp", ">i8")]
)


def _walk_v2_run(buf: bytes, pos: int, end_limit: int, positions: list[int]) -> int:
    """Append the positions of the complete v2 batches that follow one another from ``pos``.

    This loop runs once per batch, so it does the least that framing needs: it stops at the
    first entry that is not a complete, well-sized v2 batch inside ``buf[:end_limit]`` and
    returns its position for the general path. CRCs are computed afterwards in one pass.
    """
    unpack = _SIZE_MAGIC.unpack_from
    append = positions.append
    last_start = len(buf) - _FRAME_HEAD_END
    while pos <= last_start:
        size, magic = unpack(buf, pos + _FRAME_HEAD_AT)
        end = pos + L.LOG_OVERHEAD + size
        if magic != L.MAGIC_V2 or size < L.MIN_V2_SIZE_FIELD or end > end_limit:
            return pos
        append(pos)
        pos = end
    return pos


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
        walk = _Walk()
        n = len(buf)
        pos = 0
        while pos < n:
            pos = _walk_v2_run(buf, pos, min(n, file_remaining), walk.v2)
            if pos >= n:
                break
            # Anything but a complete v2 batch: the general path, one entry at a time.
            if pos + _FRAME_HEAD_END > n:
                if n < file_remaining:  # more of the file follows: read it with the next window
                    walk.need = _FRAME_HEAD_END
                    break
                if pos + L.FRAME_AND_MAGIC <= n and buf[pos + L.MAGIC_OFFSET] not in (0, 1, 2):
                    walk.stop = _unknown_magic(buf[pos + L.MAGIC_OFFSET])
                else:
                    walk.stop = (E.TRUNCATED, f"{n - pos} bytes at the end are too few for an entry header")
                break
            size, magic = _SIZE_MAGIC.unpack_from(buf, pos + _FRAME_HEAD_AT)
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
            (walk.v2 if magic == L.MAGIC_V2 else walk.legacy).append(pos)
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
        cols = _v2_columns(buf, walk.v2)
        usable = cols["crc_valid"].copy()
        for i in np.flatnonzero(~usable):
            self._error(
                file_pos + walk.v2[i],
                E.CRC_MISMATCH,
                f"batch at offset {int(cols['base_offset'][i])}: stored CRC-32C {int(cols['crc'][i])}"
                " does not match the bytes",
                int(cols["batch_size"][i]),
            )
        control_type = np.full(len(walk.v2), None, dtype=object)
        coordinator_epoch = np.zeros(len(walk.v2), dtype=np.int32)
        has_coordinator_epoch = np.zeros(len(walk.v2), dtype=bool)
        for i in np.flatnonzero(cols["is_control"] & usable & (cols["record_count"] > 0)):
            try:
                control_type[i], epoch = self._control(buf, walk.v2[i], cols, i)
            except E.KafkaFormatError as exc:
                usable[i] = False
                self._error(file_pos + walk.v2[i], exc.kind, f"control batch: {exc.message}", int(cols["batch_size"][i]))
                continue
            if epoch is not None:
                coordinator_epoch[i] = epoch
                has_coordinator_epoch[i] = True
        cols["control_type"] = control_type
        cols["coordinator_epoch"] = coordinator_epoch
        cols["has_coordinator_epoch"] = has_coordinator_epoch
        positions = np.asarray(walk.v2, dtype=np.int64)
        legacy_records: dict[int, list] = {}
        if walk.legacy:
            legacy_cols, legacy_usable, legacy_records = self._legacy(buf, file_pos, walk.legacy)
            positions = np.concatenate([positions, np.asarray(walk.legacy, dtype=np.int64)])
            cols = {k: np.concatenate([cols[k], legacy_cols[k].astype(cols[k].dtype)]) for k in cols}
            usable = np.concatenate([usable, legacy_usable])
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

        batches = self._arrow_batches(file_pos + positions, cols)
        if not self.records:
            return Chunk(batches)
        return Chunk(batches, self._records(buf, file_pos, positions, cols, usable, legacy_records))

    def _control(self, buf: bytes, pos: int, cols: dict, i: int) -> tuple[str, int | None]:
        first = self._decode_v2_records(buf, pos, cols, i)[0]
        return parse_control_record(first.key, first.value)

    def _decode_v2_records(self, buf: bytes, pos: int, cols: dict, i: int) -> list:
        section = records_section(
            buf, pos, int(cols["batch_size"][i]), int(cols["attributes"][i]), limit=self.max_decompressed_bytes
        )
        return decode_records(
            section,
            record_count=int(cols["record_count"][i]),
            base_offset=int(cols["base_offset"][i]),
            base_timestamp=int(cols["base_timestamp"][i]),
            max_timestamp=int(cols["max_timestamp"][i]),
            log_append_time=bool(cols["timestamp_type"][i] == _LOG_APPEND_TIME),
            base_sequence=int(cols["base_sequence"][i]),
        )

    def _legacy(self, buf: bytes, file_pos: int, positions: list[int]):
        """Columns (same names and codes as the v2 ones) for legacy entries.

        Headers and CRC-32s are read for all entries at once; only compressed wrappers are
        opened one by one, since their first offset and record count are inside them.
        """
        n = len(positions)
        heads = _gather(buf, positions, _LEGACY_HEADER_DTYPE)
        size = heads["size"].astype(np.int64) + L.LOG_OVERHEAD
        mv = memoryview(buf)
        computed = [zlib.crc32(mv[p + L.LEGACY_CRC_START : p + k]) for p, k in zip(positions, size.tolist())]
        crc_valid = np.asarray(computed, dtype=np.uint32) == heads["crc"]
        magic = heads["magic"].astype(np.int8)
        attributes = heads["attributes"].astype(np.int16) & 0xFF
        codec = (attributes & L.COMPRESSION_MASK).astype(np.int8)
        timestamp = np.where(magic == L.MAGIC_V1, heads["timestamp"], L.NO_TIMESTAMP).astype(np.int64)
        offset = heads["offset"].astype(np.int64)
        cols = {
            "batch_size": size.astype(np.int32),
            "magic": magic,
            "crc_valid": crc_valid,
            "crc": heads["crc"].astype(np.int64),
            "base_offset": offset.copy(),
            "last_offset": offset,
            "record_count": np.ones(n, dtype=np.int32),
            "codec": codec,
            "timestamp_type": np.where(
                magic == L.MAGIC_V0, _NO_TIMESTAMP_TYPE, (attributes & L.TIMESTAMP_TYPE_MASK) != 0
            ).astype(np.int8),
            "base_timestamp": timestamp.copy(),
            "max_timestamp": timestamp,
            "attributes": attributes,
        }
        cols.update({k: np.full(n, value) for k, value in _LEGACY_CONSTANT.items()})
        cols["control_type"] = np.full(n, None, dtype=object)
        usable = crc_valid.copy()
        for i in np.flatnonzero(~crc_valid):
            self._error(
                file_pos + positions[i], E.CRC_MISMATCH, "legacy message: stored CRC-32 does not match the bytes", int(size[i])
            )
        records: dict[int, list] = {}
        for i in np.flatnonzero(crc_valid & ((codec != 0) | self.records)):
            pos = positions[i]
            try:
                inner = inner_records(read_message(buf, pos, pos + int(size[i])), limit=self.max_decompressed_bytes)
            except E.KafkaFormatError as exc:
                if codec[i] == 0:  # an uncompressed message's key and value are record-level
                    self._error(file_pos + pos, exc.kind, f"legacy message: {exc.message}", 0)
                else:
                    usable[i] = False
                    cols["record_count"][i] = 0
                    self._error(file_pos + pos, exc.kind, f"legacy wrapper: {exc.message}", int(size[i]))
                continue
            records[pos] = inner
            cols["base_offset"][i] = inner[0].offset
            cols["record_count"][i] = len(inner)
            cols["base_timestamp"][i] = inner[0].timestamp
        return cols, usable, records

    def _records(self, buf, file_pos, positions, cols, usable, legacy_records) -> pa.RecordBatch:
        """One Arrow batch with the records of every usable entry of the window."""
        offsets, timestamps, sequences, keys, values, headers = [], [], [], [], [], []
        batch_rows = []  # index of the entry each record belongs to
        for i in np.flatnonzero(usable).tolist():
            pos = int(positions[i])
            if cols["magic"][i] != L.MAGIC_V2:
                recs = legacy_records.get(pos, [])
            else:
                try:
                    recs = self._decode_v2_records(buf, pos, cols, i)
                except E.KafkaFormatError as exc:
                    message = f"records of batch at offset {int(cols['base_offset'][i])}: {exc.message}"
                    self._error(file_pos + pos, exc.kind, message, 0)
                    continue
            for r in recs:
                offsets.append(r.offset)
                timestamps.append(r.timestamp)
                sequences.append(r.sequence)
                keys.append(r.key)
                values.append(r.value)
                headers.append([{"key": h.key, "value": h.value} for h in r.headers] if r.headers else [])
            batch_rows.extend([i] * len(recs))
        rows = np.asarray(batch_rows, dtype=np.int64)
        n = len(rows)
        return pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar(self.topic, pa.string()), n),
                pa.repeat(pa.scalar(self.partition, pa.int32()), n),
                pa.array(offsets, pa.int64()),
                pa.array(timestamps, pa.int64()),
                pa.array(cols["base_offset"][rows], pa.int64()),
                pa.array(cols["producer_id"][rows], pa.int64()),
                pa.array(cols["producer_epoch"][rows], pa.int16()),
                pa.array(sequences, pa.int32()),
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array(headers, schema.RECORDS_RAW.field("headers").type),
                pa.array([-1 if v is None else len(v) for v in values], pa.int32()),
                pa.array(cols["is_control"][rows], pa.bool_()),
            ],
            schema=schema.RECORDS_RAW,
        )

    def _arrow_batches(self, file_positions: np.ndarray, cols: dict) -> pa.RecordBatch:
        n = len(file_positions)
        control_rows = cols["control_type"] != None  # noqa: E711 (element-wise on an object array)
        derived = {
            "topic": pa.repeat(pa.scalar(self.topic, pa.string()), n),
            "partition": pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            "file": pa.repeat(pa.scalar(self.file, pa.string()), n),
            "file_position": file_positions,
            "compression": _CODEC_ARROW.take(pa.array(cols["codec"].astype(np.int8))),
            "timestamp_type": _TIMESTAMP_TYPE_ARROW.take(pa.array(cols["timestamp_type"].astype(np.int8))),
            "control_type": pa.array(cols["control_type"], pa.string()) if control_rows.any() else pa.nulls(n, pa.string()),
            "coordinator_epoch": pa.array(cols["coordinator_epoch"], pa.int32(), mask=~cols["has_coordinator_epoch"]),
            "delete_horizon_ms": pa.array(cols["base_timestamp"], pa.int64(), mask=~cols["has_delete_horizon"]),
        }
        arrays = [
            derived[f.name] if f.name in derived else pa.array(cols[f.name], f.type) for f in schema.BATCHES
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=schema.BATCHES)


# Timestamp types as small codes in the columns, labelled when the Arrow batch is built.
_LOG_APPEND_TIME = 1
_NO_TIMESTAMP_TYPE = 2
_TIMESTAMP_TYPE_ARROW = pa.array([*L.TIMESTAMP_TYPES, L.NO_TIMESTAMP_TYPE], pa.string())
_CODEC_ARROW = pa.array([L.codec_name(i) for i in range(8)], pa.string())
# Columns that are the same for every legacy entry.
_LEGACY_CONSTANT = {
    "partition_leader_epoch": L.NO_PARTITION_LEADER_EPOCH,
    "is_transactional": False,
    "is_control": False,
    "producer_id": L.NO_PRODUCER_ID,
    "producer_epoch": L.NO_PRODUCER_EPOCH,
    "base_sequence": L.NO_SEQUENCE,
    "last_sequence": L.NO_SEQUENCE,
    "coordinator_epoch": 0,
    "has_coordinator_epoch": False,
    "has_delete_horizon": False,
}


def _unknown_magic(magic: int) -> tuple[str, str]:
    return E.UNKNOWN_MAGIC, f"magic byte {magic} is not 0, 1 or 2"


def _gather(buf: bytes, positions: list[int], dtype: np.dtype) -> np.ndarray:
    """The fixed-size headers at ``positions`` of ``buf`` as a NumPy record array."""
    data = np.frombuffer(buf, dtype=np.uint8)
    pos = np.asarray(positions, dtype=np.int64)
    columns = np.arange(dtype.itemsize)
    raw = np.empty((len(pos), dtype.itemsize), dtype=np.uint8)
    for start in range(0, len(pos), _GATHER_ROWS):
        block = pos[start : start + _GATHER_ROWS]
        raw[start : start + len(block)] = data[block[:, None] + columns]
    return raw.reshape(-1).view(dtype)


def _v2_columns(buf: bytes, positions: list[int]) -> dict[str, np.ndarray]:
    """Decode and CRC-check the headers of the v2 batches at ``positions`` at once."""
    headers = _gather(buf, positions, _HEADER_DTYPE)
    size = headers["length"].astype(np.int64) + L.LOG_OVERHEAD
    mv = memoryview(buf)
    crc_skip = L.ATTRIBUTES_OFFSET
    computed = [_crc32c(mv[p + crc_skip : p + n]) for p, n in zip(positions, size.tolist())]
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
    return {
        "batch_size": size.astype(np.int32),
        "magic": headers["magic"].astype(np.int8),
        "crc_valid": np.asarray(computed, dtype=np.uint32) == headers["crc"],
        "crc": headers["crc"].astype(np.int64),
        "base_offset": base_offset,
        "last_offset": base_offset + delta,
        "record_count": headers["record_count"].astype(np.int32),
        "partition_leader_epoch": headers["partition_leader_epoch"].astype(np.int32),
        "codec": (low & L.COMPRESSION_MASK).astype(np.int8),
        "timestamp_type": ((low & L.TIMESTAMP_TYPE_MASK) != 0).astype(np.int8),  # code into _TIMESTAMP_TYPE_ARROW
        "is_transactional": (low & L.TRANSACTIONAL_MASK) != 0,
        "is_control": (low & L.CONTROL_MASK) != 0,
        "base_timestamp": base_timestamp,
        "max_timestamp": headers["max_timestamp"].astype(np.int64),
        "producer_id": headers["producer_id"].astype(np.int64),
        "producer_epoch": headers["producer_epoch"].astype(np.int16),
        "base_sequence": base_sequence,
        "last_sequence": last_sequence,
        "attributes": attributes,
        "has_delete_horizon": (low & L.DELETE_HORIZON_MASK) != 0,
    }


def batches_from_arrow(batch: pa.RecordBatch) -> list[Batch]:
    """Rows of a batches record batch as :class:`Batch` objects."""
    return [Batch(**row) for row in batch.to_pylist()]
