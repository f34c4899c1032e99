"""How a segment file becomes chunks of Arrow rows on an executor: :class:`BinarySegments` reads
Kafka's ``.log`` files with the pure reader, :class:`DumpLogText` parses ``kafka-dump-log.sh``
output into the same rows. Either feeds the segment task types of :mod:`analytics.spark.tasks`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

from analytics.contract.schemas import BATCHES, RECORDS_RAW
from analytics.contract.vocabulary import CRC_MISMATCH, TRUNCATED
from analytics.kafka.codecs import DEFAULT_MAX_DECOMPRESSED_BYTES
from analytics.kafka.logdir import row_dict, stream_segment
from analytics.kafka.model import Batch, ParseError, SegmentInfo
from analytics.kafka.reader import DEFAULT_WINDOW, Chunk
from analytics.spark.files import FileTask
from analytics.spark.listing import segment_files

INPUT_FORMATS = ("segments", "dump-log")
_DUMP_BATCH_ROWS = 8192

# A segment file decoded: its chunks, then its segments rows and parse errors.
ChunkStream = Generator[Chunk, None, tuple[list[SegmentInfo], list[ParseError]]]


class Decoded:
    """A decoder's chunks of one file, to iterate once; then its ``segments`` rows and parse errors."""

    def __init__(self, stream: ChunkStream):
        self._stream = stream
        self.segments: list[SegmentInfo] = []
        self.errors: list[ParseError] = []

    def __iter__(self) -> Iterator[Chunk]:
        self.segments, self.errors = yield from self._stream


@dataclass(frozen=True, slots=True)
class BinarySegments:
    """Segment (``.log``) files, through the pure reader in windows of ``window`` bytes."""

    window: int = DEFAULT_WINDOW
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    input_format: ClassVar[str] = "segments"

    def plan(self, paths: list[str]) -> list[FileTask]:
        return segment_files(paths, self.input_format)

    def decode(self, file: FileTask, *, records: bool) -> Decoded:
        return Decoded(self._stream(file, records))

    def _stream(self, file: FileTask, records: bool) -> ChunkStream:
        info, errors = yield from stream_segment(
            file.path, topic=file.topic, partition=file.partition, base_offset=file.base_offset,
            records=records, window=self.window, max_decompressed_bytes=self.max_decompressed_bytes, after=file.after)
        return [info], errors


@dataclass(frozen=True, slots=True)
class DumpLogText:
    """``kafka-dump-log.sh`` output files: the same batch (and record) rows, parsed from text.

    A dump may hold several segments; each gets its ``segments`` row, tallied from its batches."""

    input_format: ClassVar[str] = "dump-log"

    def plan(self, paths: list[str]) -> list[FileTask]:
        return segment_files(paths, self.input_format)

    def decode(self, file: FileTask, *, records: bool) -> Decoded:
        return Decoded(self._stream(file, records))

    def _stream(self, file: FileTask, with_records: bool) -> ChunkStream:
        from analytics.kafka.dumplog import DumpRecord, parse_dump  # the text parser: for dump-log reads only

        batches: list[dict] = []
        records: list[dict] = []
        per_file: dict[str, dict] = {}
        errors: list[ParseError] = []

        def chunk() -> Chunk:
            rec = pa.RecordBatch.from_pylist(records, schema=RECORDS_RAW) if with_records else None
            out = Chunk(pa.RecordBatch.from_pylist(batches, schema=BATCHES), rec)
            batches.clear()
            records.clear()
            return out

        # Lines end at "\n" only (parse_dump strips a "\r" of Windows dumps): a printed payload may hold "\r".
        with open(file.path, encoding="utf-8", errors="replace", newline="\n") as f:
            for item in parse_dump(f, source=file.path):
                if isinstance(item, ParseError):
                    errors.append(item)
                    if item.error_kind == TRUNCATED and item.file in per_file:
                        per_file[item.file]["invalid"] += item.bytes_affected
                elif isinstance(item, Batch):
                    _tally(per_file, item)
                    batches.append(row_dict(item, BATCHES))
                    if not item.crc_valid:  # as the binary reader reports it
                        errors.append(ParseError(item.topic, item.partition, item.file, item.file_position, CRC_MISMATCH,
                                                 f"batch at offset {item.base_offset}: the dump says isvalid: false",
                                                 item.batch_size))
                elif with_records and isinstance(item, DumpRecord):
                    r = item.record
                    size = item.value_size if item.value_size is not None else (len(r.value) if r.value is not None else -1)
                    records.append({
                        "topic": item.topic, "partition": item.partition, "offset": r.offset, "timestamp": r.timestamp,
                        "batch_base_offset": item.batch_base_offset, "producer_id": None, "producer_epoch": None,
                        "sequence": r.sequence, "key": r.key, "value": r.value, "headers": [], "value_size": size,
                        "is_control": None,
                    })
                if len(batches) >= _DUMP_BATCH_ROWS or len(records) >= _DUMP_BATCH_ROWS:
                    yield chunk()
        if batches or records:
            yield chunk()
        segments = [
            SegmentInfo(t["topic"], t["partition"], name, t["base_offset"], t["valid"] + t["bad"] + t["invalid"],
                        t["valid"], t["count"], t["first"], t["last"], "ok" if not (t["bad"] or t["invalid"]) else "corrupt")
            for name, t in per_file.items()
        ]
        return segments, errors


Decoder = BinarySegments | DumpLogText


def _tally(per_file: dict, b: Batch) -> None:
    """Count a dumped batch into the ``segments`` row of its file."""
    t = per_file.setdefault(b.file, {"topic": b.topic, "partition": b.partition, "base_offset": b.base_offset,
                                     "valid": 0, "bad": 0, "invalid": 0, "count": 0, "first": None, "last": None})
    t["count"] += 1
    if b.crc_valid:
        t["valid"] += b.batch_size
        t["first"] = b.base_offset if t["first"] is None else t["first"]
        t["last"] = b.last_offset
    else:
        t["bad"] += b.batch_size
