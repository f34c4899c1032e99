"""Read a ``.log`` segment window by window into Arrow rows, accounting for every byte.

:class:`SegmentScanner` frames each window with :mod:`~analytics.kafka.framing`, decodes the v2
batch headers together with NumPy (:mod:`~analytics.kafka.columns`), and takes a per-entry path
for legacy entries and control records (they are rare).

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

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from analytics.contract import schemas as schema
from analytics.kafka import errors as E
from analytics.kafka import layout as L
from analytics.kafka.codecs import DEFAULT_MAX_DECOMPRESSED_BYTES
from analytics.kafka.columns import LOG_APPEND_TIME, arrow_batches, legacy_columns, v2_columns
from analytics.kafka.framing import FRAME_HEAD_END, Walk, walk_window
from analytics.kafka.fs import LocalFile  # noqa: F401 - re-exported: bench/bench_reader.py reads with it
from analytics.kafka.legacy import inner_records, read_message
from analytics.kafka.model import Batch, ParseError, SegmentInfo
from analytics.kafka.records import decode_records, parse_control_record, records_section

DEFAULT_WINDOW = 8 * 1024 * 1024
_ZERO_CHECK_BLOCK = 1 << 20


@dataclass(slots=True)
class Chunk:
    """What one window of a segment yielded: batch rows, and record rows when asked for."""

    batches: pa.RecordBatch
    records: pa.RecordBatch | None = None


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
        after: SegmentInfo | None = None,
    ):
        if window < FRAME_HEAD_END:
            raise ValueError(f"window must be at least {FRAME_HEAD_END} bytes")
        self.source = source
        self.topic = topic
        self.partition = partition
        self.file = file
        self.base_offset = base_offset
        self.records = records
        self.window = window
        self.max_decompressed_bytes = max_decompressed_bytes
        self.errors: list[ParseError] = []
        # ``after``: a read of the file's first ``after.size_bytes`` bytes, whole valid batches only
        # (a segment that grew since): the walk goes on after them and counts on from theirs
        self.start = 0 if after is None else after.size_bytes
        self.valid_bytes = 0 if after is None else after.valid_bytes
        self.batch_count = 0 if after is None else after.batch_count
        self.first_offset: int | None = None if after is None else after.first_offset
        self.last_offset: int | None = None if after is None else after.last_offset
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
        file_pos = self.start
        want = self.window
        while file_pos < size:
            buf = self.source.read_at(file_pos, min(want, size - file_pos))
            if not buf:
                self._stop(file_pos, E.TRUNCATED, "the file ended while it was being read")
                return
            walk = walk_window(buf, size - file_pos)
            chunk = self._decode(buf, file_pos, walk)
            if chunk is not None:
                yield chunk
            if walk.stop:
                self._stop(file_pos + walk.next_pos, *walk.stop)
                return
            file_pos += walk.next_pos
            # An entry larger than the window is read whole: its size was checked against the file.
            want = max(self.window, walk.need)

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
    def _decode(self, buf: bytes, file_pos: int, walk: Walk) -> Chunk | None:
        if not walk.v2 and not walk.legacy:
            return None
        cols = v2_columns(buf, walk.v2)
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
                message = f"control batch: {exc.message}"
                self._error(file_pos + walk.v2[i], exc.kind, message, int(cols["batch_size"][i]))
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

        batches = arrow_batches(self.topic, self.partition, self.file, file_pos + positions, cols)
        if not self.records:
            return Chunk(batches)
        return Chunk(batches, self._records(buf, file_pos, positions, cols, usable, legacy_records))

    def _control(self, buf: bytes, pos: int, cols: dict, i: int) -> tuple[str, int | None]:
        first = self._decode_v2_records(buf, pos, cols, i)[0]
        return parse_control_record(first.key, first.value)

    def _decode_v2_records(self, buf: bytes, pos: int, cols: dict, i: int) -> list:
        size, attributes = int(cols["batch_size"][i]), int(cols["attributes"][i])
        section = records_section(buf, pos, size, attributes, limit=self.max_decompressed_bytes)
        return decode_records(
            section,
            record_count=int(cols["record_count"][i]),
            base_offset=int(cols["base_offset"][i]),
            base_timestamp=int(cols["base_timestamp"][i]),
            max_timestamp=int(cols["max_timestamp"][i]),
            log_append_time=bool(cols["timestamp_type"][i] == LOG_APPEND_TIME),
            base_sequence=int(cols["base_sequence"][i]),
        )

    def _legacy(self, buf: bytes, file_pos: int, positions: list[int]):
        """Columns of legacy entries (:func:`~analytics.kafka.columns.legacy_columns`), compressed
        wrappers opened one by one for their first offset and record count (and every message
        for its records when records are read)."""
        cols, size = legacy_columns(buf, positions)
        crc_valid, codec = cols["crc_valid"], cols["codec"]
        usable = crc_valid.copy()
        for i in np.flatnonzero(~crc_valid):
            message = "legacy message: stored CRC-32 does not match the bytes"
            self._error(file_pos + positions[i], E.CRC_MISMATCH, message, int(size[i]))
        records: dict[int, list] = {}
        for i in np.flatnonzero(crc_valid & ((codec != 0) | self.records)):
            pos = positions[i]
            try:
                message = read_message(buf, pos, pos + int(size[i]))
                inner = inner_records(message, limit=self.max_decompressed_bytes)
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


class _Received:
    """The bytes a :class:`StreamScanner` has been given so far: its ``size``."""

    size = 0


class StreamScanner(SegmentScanner):
    """A :class:`SegmentScanner` over bytes that arrive in pieces of whole entries (fetched over the
    protocol, :mod:`analytics.kafka.fetched`) instead of a file: ``feed`` each piece, ``lost`` for
    bytes that cannot be framed; ``file_position`` is a position in the concatenated pieces."""

    def __init__(self, **kwargs):
        super().__init__(_Received(), **kwargs)

    def __iter__(self):
        raise TypeError("a StreamScanner is fed, not iterated")

    def feed(self, buf: bytes) -> Chunk | None:
        """Decode ``buf``, a run of whole entries that follows the bytes fed before."""
        position = self.source.size
        self.source.size += len(buf)
        return self._decode(buf, position, walk_window(buf, len(buf)))

    def lost(self, kind: str, message: str, bytes_affected: int, stops: bool = True) -> None:
        """What could not be decoded after the bytes fed: one error (``bytes_affected`` received bytes
        that do not frame, or none for offsets that never arrived); ``stops``: the stream ends there."""
        position = self.source.size
        self.source.size += bytes_affected
        if stops:
            self._stopped = kind
        self._error(position, kind, message, bytes_affected)


def batches_from_arrow(batch: pa.RecordBatch) -> list[Batch]:
    """Rows of a batches record batch as :class:`Batch` objects."""
    return [Batch(**row) for row in batch.to_pylist()]
