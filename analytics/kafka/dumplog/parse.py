"""``kafka-dump-log.sh`` text as an input: the same rows as the binary reader.

Upstream source (apache/kafka): ``core/src/main/scala/kafka/tools/DumpLogSegments.scala``
(``dumpLog``, ``printBatchLevel``; a Java port under ``tools/`` after 4.0 prints the same lines).
The line formats per Kafka version are in ``kafka-replay-rules.md`` §5.2:

* HEAD (3.2+): batch line with ``deleteHorizonMs``, record lines ``| offset: … keySize: …``.
* 3.0–3.1: the same without ``deleteHorizonMs``.
* 2.8: upper-case codec names (``NONE``), and a long record line that repeats the batch fields
  (``| offset: O keySize: K valueSize: V CreateTime: T baseOffset: … batchSize: …``
  ``compressType: … position: P sequence: S headerKeys: […]``).
* 2.2–2.7: record lines with lower-case ``keysize`` / ``valuesize``, legacy ones end ``crc: C isvalid: B``.
* ≤ 2.1: batch lines (shallow, ``isvalid`` before ``size``) **or** record lines alone (deep):
  ``offset: O position: P CreateTime: T isvalid: B keysize: K valuesize: V magic: M …``; a batch
  row is then built from the record lines that share a position.
* Legacy (magic 0/1) batch lines ``offset: LAST position: P CreateTime|NoTimestampType…: T size: …``.

Each line is read as tokens (:mod:`~analytics.kafka.dumplog.tokens`) into rows
(:mod:`~analytics.kafka.dumplog.rows`). Lines that do not parse become ``ParseError`` rows of
kind :data:`DUMP_LINE`; the parser never raises on input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TypeAlias

from analytics.kafka.dumplog.rows import DumpedFile, DumpRecord, OpenBatch
from analytics.kafka.dumplog.source import BATCH_FILE_SUFFIXES
from analytics.kafka.dumplog.tokens import (
    PAYLOAD_PREFIX,
    BadLine,
    bool_field,
    compression_field,
    control_field,
    int_field,
    key_and_payload,
    no_data,
    split_fields,
    timestamp_field,
)
from analytics.kafka.errors import TRUNCATED
from analytics.kafka.layout import NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from analytics.kafka.model import Batch, ParseError

# error_kind of a dump line that does not parse. Local to the text input: the binary reader
# never reads text, so the contract's kinds are those of bytes.
DUMP_LINE = "dump_line"

DumpItem: TypeAlias = Batch | DumpRecord | ParseError

_DUMPING = re.compile(r"Dumping (.+)")
_FOUND_INVALID = re.compile(r"Found (\d+) invalid bytes at the end of (.+)")
# Lines that carry nothing for the rows: the segment's start offset (from its file name; "Starting
# offset" up to 2.8), KRaft snapshot headers, and the stderr report of offset gaps (compaction
# makes them), present when stderr was captured with stdout.
_INFO = re.compile(
    r"(?:Log )?[Ss]tarting offset: -?\d+"
    r"|Snapshot end offset: .*|KRaft bootstrap snapshot"
    r"|Non-consecutive offsets in .*|\s+-?\d+ is followed by -?\d+"
)
# KRaft control records print their record as JSON instead of name: value tokens (3.x+; the
# LEADER_CHANGE record from 4.3 on, as "LeaderChange: {...}").
_KRAFT_CONTROL = re.compile(r" (SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters|LeaderChange:) \{.*$")
_KRAFT_CONTROL_TYPES = {
    "LeaderChange:": "LEADER_CHANGE",
    "SnapshotHeader": "SNAPSHOT_HEADER",
    "SnapshotFooter": "SNAPSHOT_FOOTER",
    "KRaftVersion": "KRAFT_VERSION",
    "KRaftVoters": "KRAFT_VOTERS",
}
_REPLACEMENT = "\ufffd"  # what the tool's decoder prints for malformed UTF-8
# Starts of the lines DumpLogSegments prints for a .log file: never taken as a payload's continuation.
_DUMP_LINE_STARTS = ("Dumping ", "Found ", "baseOffset: ", "offset: ", "| ", " " + PAYLOAD_PREFIX)


def parse_dump(lines: Iterable[str], *, source: str = "<dump>") -> Iterator[DumpItem]:
    """Rows of ``kafka-dump-log.sh`` output: ``Batch``, then its ``DumpRecord`` rows, and ``ParseError`` rows.

    ``lines`` is read lazily, one line at a time (line terminators are optional; ``\r\n`` when the
    first line ends so, else ``\n``, since a key or payload may end with ``\r``); only the record
    lines of the batch being read are held. A batch row is yielded when the next batch line, the
    next file or the end arrives, because a control batch's type is on its record line.
    ``source`` names the dump in the errors of its lines: those rows have ``file=source``,
    ``file_position`` = the 1-based line number and ``bytes_affected`` = the line's UTF-8 length.

    >>> rows = list(parse_dump([
    ...     "Dumping /data/orders-3/00000000000000000000.log",
    ...     "offset: 7 position: 0 NoTimestampType: -1 size: 40 magic: 0 compresscodec: none"
    ...     " crc: 1 isvalid: true",
    ...     "not a dump line",
    ... ]))
    >>> [(type(r).__name__, r.topic, r.partition) for r in rows]
    [('ParseError', 'orders', 3), ('Batch', 'orders', 3)]
    >>> rows[0].error_kind, rows[0].file_position, rows[1].last_offset
    ('dump_line', 3, 7)
    """
    parser = _DumpParser(source)
    crlf = None  # a dump made on Windows ends its lines with "\r\n"; the first line tells
    for number, line in enumerate(lines, start=1):
        if line.endswith("\n"):
            line = line[:-1]
        if crlf is None:
            crlf = line.endswith("\r")
        if crlf and line.endswith("\r"):
            line = line[:-1]
        # Otherwise a "\r" ending a line is the end of a printed key or payload.
        yield from parser.feed(number, line)
    yield from parser.close()


class _DumpParser:
    """The line-by-line state of :func:`parse_dump`: the file being dumped and its open batch."""

    def __init__(self, source: str):
        self._source = source
        # Until a "Dumping" line names a file, the lines are taken as a .log dump of the source.
        self._file = DumpedFile(source)
        self._batch_file = True
        self._open: OpenBatch | None = None
        self._valid_end: int | None = 0  # byte position after the last batch, where a bad tail starts

    def feed(self, number: int, line: str) -> Iterator[DumpItem]:
        try:
            yield from self._line(line)
        except BadLine as problem:
            yield ParseError(
                topic=self._file.topic,
                partition=self._file.partition,
                file=self._source,
                file_position=number,
                error_kind=DUMP_LINE,
                message=f"{problem} (dump of {self._file.path})",
                bytes_affected=len(line.encode("utf-8")),
            )

    def close(self, next_position: int | None = None) -> Iterator[DumpItem]:
        """Yield the open batch's row and its records (``next_position``: see :meth:`OpenBatch.finish`)."""
        open_batch, self._open = self._open, None
        if open_batch is None:
            return
        batch, records = open_batch.finish(next_position)
        self._valid_end = batch.file_position + batch.batch_size if batch.batch_size >= 0 else None
        yield batch
        yield from records

    def _line(self, line: str) -> Iterator[DumpItem]:
        # A payload printed with newlines continues on the next lines; its valueSize tells how much
        # is still missing, so this comes before any other reading of the line.
        if self._continue_payload(line):
            return
        dumping = _DUMPING.fullmatch(line)
        if dumping:
            yield from self.close()
            self._start_file(dumping.group(1))
            return
        if not self._batch_file or not line.strip() or _INFO.fullmatch(line):
            return
        found = _FOUND_INVALID.fullmatch(line)
        if found:
            yield from self.close()
            yield ParseError(
                topic=self._file.topic,
                partition=self._file.partition,
                file=self._file.path,
                file_position=-1 if self._valid_end is None else self._valid_end,
                error_kind=TRUNCATED,
                message=f"{found.group(1)} invalid bytes at the end of {found.group(2)} (from the dump)",
                bytes_affected=int(found.group(1)),
            )
        elif line.startswith("| "):
            self._record_line(line[2:])
        elif line.startswith(" " + PAYLOAD_PREFIX):
            # --skip-record-metadata with a null key prints " payload: P", without the "| ".
            self._record_line(line[1:])
        elif line.startswith("baseOffset: "):
            # A batch line closes the open batch even if it then fails to parse, so that its
            # record lines are not counted in the batch before it.
            yield from self.close()
            self._open = OpenBatch(self._file.v2_batch(no_data(split_fields(line))))
        elif line.startswith("offset: "):
            # Legacy batch line or ≤ 2.1 deep record line: only the tokens tell (keysize).
            fields = split_fields(line)
            if "keysize" in fields:
                yield from self._deep_line(fields)
            else:
                yield from self.close()
                self._open = OpenBatch(self._file.legacy_batch(no_data(fields)))
        else:
            raise BadLine("not a DumpLogSegments line")

    def _start_file(self, path: str) -> None:
        self._file = DumpedFile.named(path)
        self._batch_file = path.endswith(BATCH_FILE_SUFFIXES)
        self._valid_end = 0

    def _continue_payload(self, line: str) -> bool:
        # A key or payload printed with newlines runs on over the next lines:
        # - always while a printed key waits for its payload (valueSize >= 0 and no " payload: " yet);
        # - else never on a line that starts as a dump line does;
        # - else while the text is shorter than its keySize / valueSize in UTF-8 bytes; and, when it
        #   holds a U+FFFD (malformed bytes, 1 to 3 of them printed as 3 bytes, so the size tells
        #   nothing), on any line that could be nothing else: not an information line, and not
        #   empty under --skip-record-metadata (where a record with neither key nor payload prints
        #   an empty line; with record metadata no line is empty).
        open_batch = self._open
        if open_batch is None or open_batch.last_data is None:
            return False
        last = open_batch.records[-1]
        awaits_payload = last.value_size is not None and last.value_size >= 0 and last.record.value is None
        if not awaits_payload:
            if line.startswith(_DUMP_LINE_STARTS):
                return False
            if not _runs_on(last) and (
                _REPLACEMENT not in open_batch.last_data
                or (not line.strip() and last.value_size is None)  # the empty line of a record without data
                or _INFO.fullmatch(line)
                or _FOUND_INVALID.fullmatch(line)
                or _DUMPING.fullmatch(line)
            ):
                return False
        open_batch.last_data += "\n" + line
        key, value = key_and_payload(open_batch.last_data)
        open_batch.records[-1] = replace(last, record=replace(last.record, key=key, value=value))
        return True

    def _deep_line(self, fields: dict[str, str]) -> Iterator[DumpItem]:
        """A ≤ 2.1 deep record line: it also carries the batch fields, and the batch's position."""
        position = int_field(fields, "position")
        timestamp_type, timestamp = timestamp_field(fields)
        compression = compression_field(fields)
        magic = int_field(fields, "magic")
        valid = bool_field(fields, "isvalid")
        control = control_field(fields)
        # Legacy lines may lack the producer fields; a legacy batch has none.
        producer_id = int_field(fields, "producerid", NO_PRODUCER_ID)
        producer_epoch = int_field(fields, "producerepoch", NO_PRODUCER_EPOCH)
        transactional = bool_field(fields, "istransactional", False)
        # The batch's base offset is known when it closes, which sets it on its records.
        record = self._file.record(fields, int_field(fields, "offset"))
        open_batch = self._open
        if open_batch is None or not open_batch.synthesised or open_batch.draft.file_position != position:
            yield from self.close(next_position=position)
            open_batch = self._open = OpenBatch(
                self._file.batch(
                    file_position=position,
                    batch_size=-1,
                    magic=magic,
                    crc_valid=valid,
                    base_offset=record.record.offset,
                    last_offset=record.record.offset,
                    record_count=0,
                    partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,  # not printed by ≤ 2.1 deep lines
                    compression=compression,
                    timestamp_type=timestamp_type,
                    is_transactional=transactional,
                    is_control=False,
                    max_timestamp=timestamp,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    base_sequence=NO_SEQUENCE,
                    last_sequence=NO_SEQUENCE,
                ),
                synthesised=True,
            )
        open_batch.all_valid = open_batch.all_valid and valid
        open_batch.add(record, control, fields.get(""))

    def _record_line(self, text: str) -> None:
        """A ``| …`` record line (2.2+) of the open batch."""
        open_batch = self._open
        if open_batch is None or open_batch.synthesised:
            raise BadLine("record line outside a batch")
        batch = open_batch.draft
        control = None
        if batch.is_control:
            kraft = _KRAFT_CONTROL.search(text)
            if kraft:
                control = (_KRAFT_CONTROL_TYPES[kraft.group(1)], None)
                text = text[: kraft.start()]
        fields = split_fields(text)
        control = control or control_field(fields)
        if control is not None and not batch.is_control:
            raise BadLine("control record in a batch whose line says isControl: false")
        if fields.keys() - {""}:
            record = self._file.record(fields, batch.base_offset)
        elif fields:
            record = self._file.bare_record(batch, len(open_batch.records), fields[""])
        else:
            raise BadLine("empty record line")
        open_batch.add(record, control, fields.get(""))


def _runs_on(last: DumpRecord) -> bool:
    """Whether the printed key or payload of a record line is shorter than its size says.

    Without sizes (``--skip-record-metadata``) nothing tells, so nothing runs on.
    """
    key_size, value_size = last.key_size, last.value_size
    if key_size is None or value_size is None:
        return False
    key, value = last.record.key, last.record.value
    if value_size >= 0:
        if value is None:  # the key runs on: " payload: " is still to come
            return key_size >= 0 and key is not None
        return len(value) < value_size
    return key_size >= 0 and key is not None and len(key) < key_size
