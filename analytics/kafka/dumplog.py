"""``kafka-dump-log.sh`` text as an input: the same rows as the binary reader, and the text back.

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

Lines are read as ``name: value`` tokens, not one regex per version, so key order and extra
tokens do not matter. The token whose name is ``CreateTime`` / ``LogAppendTime`` /
``NoTimestampType`` carries the timestamp type in its name. With ``--print-data-log`` the record
line ends with ``key: K payload: P``, whose texts may hold spaces: the key runs to `` payload: ``
and the payload to the end of the line.

What the text cannot give: ``base_timestamp`` (None), attribute bits other than the printed
flags (rebuilt from them), header values, and record bytes without ``--print-data-log``;
the ≤ 2.1 deep-only lines carry no batch CRC either (``crc`` None). Lines that do not parse become ``ParseError`` rows of kind
:data:`DUMP_LINE`; the parser never raises on input.

The other way, :func:`dump_file` prints what the tool of a release (3.2+, :func:`dump_style`)
prints for a ``.log``, ``.checkpoint``, ``.snapshot`` or ``.txnindex`` file, from the binary
readers; ``tests/test_dumplog_oracle.py`` checks it line for line against the real 3.9.2 and 4.3
tools (docs/real-broker.md).
"""

from __future__ import annotations

import base64
import os
import re
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from analytics.kafka.codecs import decompress
from analytics.kafka.errors import STOPS_FILE, TRUNCATED
from analytics.kafka.layout import (
    CODEC_IDS,
    COMPRESSION_MASK,
    CONTROL_KEY,
    CONTROL_MASK,
    CONTROL_TYPE_IDS,
    DELETE_HORIZON_MASK,
    END_TXN_MARKER_TYPES,
    END_TXN_MARKER_VALUE,
    FRAME,
    INT_MAX,
    LEGACY_CRC_START,
    LEGACY_HEADER_V0,
    LEGACY_HEADER_V1,
    LEGACY_LENGTH,
    MAGIC_V2,
    MIN_LEGACY_SIZE_FIELD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    TIMESTAMP_TYPE_MASK,
    TIMESTAMP_TYPES,
    TRANSACTIONAL_MASK,
    control_type_name,
)
from analytics.kafka.model import Batch, ParseError, Record
from analytics.kafka.records import decode_records, records_section
from analytics.kafka.util import crc32, increment_sequence, java_utf8

# error_kind of a dump line that does not parse. Local to the text input: the binary reader
# never reads text, so errors.py keeps the kinds of bytes.
DUMP_LINE = "dump_line"

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
_TOKEN = re.compile(r"([A-Za-z]\w*): ")
_INTEGER = re.compile(r"-?\d+")
# headerKeys: [k1,k2] -- keys may hold spaces, so the list ends at "]" before a space or the end.
_HEADER_KEYS = re.compile(r"\[([^\]]*)\](?: |$)")
_OPTIONAL_LONG = re.compile(r"OptionalLong(?:\.empty|\[(-?\d+)\])")
_CONTROL_TYPE = re.compile(r"(\w+)\((-?\d+)\)")
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
# <topic>-<partition>, or <topic>-<partition>.<uuid without dashes>-delete|-future|-stray.
_PARTITION_DIR = re.compile(r"(.+)-(\d+)(?:\.[0-9a-fA-F]{32}-(?:delete|future|stray))?")
_PATH_SEPARATORS = re.compile(r"[\\/]")
# DumpLogSegments dumps .log segments and KRaft .checkpoint snapshots as batches; the other
# suffixes (.index, .timeindex, .snapshot, .txnindex) print index or producer-state lines.
_BATCH_FILE_SUFFIXES = (".log", ".checkpoint")
# Token names are compared lower-cased (keySize in HEAD, keysize up to 2.7); these map back.
_TIMESTAMP_TYPE_NAMES = {name.lower(): name for name in (*TIMESTAMP_TYPES, NO_TIMESTAMP_TYPE)}

_REPLACEMENT = "\ufffd"  # what the tool's decoder prints for malformed UTF-8
_KEY_PREFIX = "key: "
_PAYLOAD_PREFIX = "payload: "
_PAYLOAD_SEPARATOR = " payload: "
# Starts of the lines DumpLogSegments prints for a .log file: never taken as a payload's continuation.
_DUMP_LINE_STARTS = ("Dumping ", "Found ", "baseOffset: ", "offset: ", "| ", " " + _PAYLOAD_PREFIX)


@dataclass(frozen=True, slots=True)
class DumpRecord:
    """One record line of a deep dump, in the context of its partition, file and batch.

    ``record.key`` / ``record.value`` are the printed key / payload texts encoded as UTF-8 when
    the dump was made with ``--print-data-log`` (the text the decoder printed, which equals the
    stored bytes for UTF-8 data), else None. ``record.headers`` stays empty: the dump prints
    header keys only, in ``header_keys``. ``key_size`` / ``value_size`` are -1 for null;
    they and ``header_keys`` are None when the line had no metadata (``--skip-record-metadata``).
    """

    topic: str
    partition: int
    file: str
    batch_base_offset: int
    record: Record
    key_size: int | None
    value_size: int | None
    header_keys: tuple[str, ...] | None


DumpItem: TypeAlias = Batch | DumpRecord | ParseError


class _BadLine(Exception):
    """A dump line that does not parse; the parser turns it into a ParseError row."""


@dataclass(slots=True)
class _OpenBatch:
    """A batch whose row waits for its record lines (they name the control type)."""

    draft: Batch
    synthesised: bool = False  # built from ≤ 2.1 deep record lines, which print no batch line
    records: list[DumpRecord] = field(default_factory=list)
    all_valid: bool = True  # ≤ 2.1 deep lines print isvalid per record
    control_type: str | None = None
    coordinator_epoch: int | None = None
    last_data: str | None = None  # the "key: … payload: …" text of the last record line, when printed


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
        self._file = source
        self._topic = ""
        self._partition = -1
        self._batch_file = True
        self._open: _OpenBatch | None = None
        self._valid_end: int | None = 0  # byte position after the last batch, where a bad tail starts

    def feed(self, number: int, line: str) -> Iterator[DumpItem]:
        try:
            yield from self._line(line)
        except _BadLine as problem:
            yield ParseError(
                topic=self._topic,
                partition=self._partition,
                file=self._source,
                file_position=number,
                error_kind=DUMP_LINE,
                message=f"{problem} (dump of {self._file})",
                bytes_affected=len(line.encode("utf-8")),
            )

    def close(self, next_position: int | None = None) -> Iterator[DumpItem]:
        """Yield the open batch's row and its records.

        ``next_position`` is where the next batch of the same file starts: a ≤ 2.1 deep dump
        prints no size, so a synthesised batch's size is the distance to it (-1 for the last).
        """
        open_batch, self._open = self._open, None
        if open_batch is None:
            return
        batch, records = open_batch.draft, open_batch.records
        changes: dict = {}
        if open_batch.synthesised:
            first, last = records[0].record, records[-1].record
            changes.update(
                base_offset=first.offset,
                last_offset=last.offset,
                record_count=len(records),
                max_timestamp=max(r.record.timestamp for r in records),
                crc_valid=open_batch.all_valid,
                batch_size=-1 if next_position is None else next_position - batch.file_position,
                is_control=open_batch.control_type is not None,
            )
            if batch.magic >= MAGIC_V2:
                changes.update(base_sequence=first.sequence, last_sequence=last.sequence)
            changes["attributes"] = _attributes(
                batch.compression, batch.timestamp_type, batch.is_transactional, changes["is_control"], False
            )
        elif batch.magic < MAGIC_V2 and records:
            # A legacy line prints the wrapper's (last) offset; the inner messages give the first.
            changes.update(base_offset=records[0].record.offset, record_count=len(records))
        if open_batch.control_type is not None:
            changes.update(
                control_type=open_batch.control_type, coordinator_epoch=open_batch.coordinator_epoch
            )
        if changes:
            batch = replace(batch, **changes)
        self._valid_end = batch.file_position + batch.batch_size if batch.batch_size >= 0 else None
        yield batch
        for record in records:
            if record.batch_base_offset != batch.base_offset:
                record = replace(record, batch_base_offset=batch.base_offset)
            yield record

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
                topic=self._topic,
                partition=self._partition,
                file=self._file,
                file_position=-1 if self._valid_end is None else self._valid_end,
                error_kind=TRUNCATED,
                message=f"{found.group(1)} invalid bytes at the end of {found.group(2)} (from the dump)",
                bytes_affected=int(found.group(1)),
            )
        elif line.startswith("| "):
            self._record_line(line[2:])
        elif line.startswith(" " + _PAYLOAD_PREFIX):
            # --skip-record-metadata with a null key prints " payload: P", without the "| ".
            self._record_line(line[1:])
        elif line.startswith("baseOffset: "):
            # A batch line closes the open batch even if it then fails to parse, so that its
            # record lines are not counted in the batch before it.
            yield from self.close()
            self._open = _OpenBatch(self._v2_batch(_no_data(_fields(line))))
        elif line.startswith("offset: "):
            # Legacy batch line or ≤ 2.1 deep record line: only the tokens tell (keysize).
            fields = _fields(line)
            if "keysize" in fields:
                yield from self._deep_line(fields)
            else:
                yield from self.close()
                self._open = _OpenBatch(self._legacy_batch(_no_data(fields)))
        else:
            raise _BadLine("not a DumpLogSegments line")

    def _start_file(self, path: str) -> None:
        self._file = path
        self._topic, self._partition = _topic_partition(path)
        self._batch_file = path.endswith(_BATCH_FILE_SUFFIXES)
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
        key, value = _key_and_payload(open_batch.last_data)
        open_batch.records[-1] = replace(last, record=replace(last.record, key=key, value=value))
        return True

    def _new_batch(self, **fields) -> Batch:
        """A batch row of the current file: no baseTimestamp in the dump, the control type comes later."""
        return Batch(
            topic=self._topic,
            partition=self._partition,
            file=self._file,
            base_timestamp=None,
            control_type=None,
            coordinator_epoch=None,
            **fields,
        )

    def _v2_batch(self, fields: dict[str, str]) -> Batch:
        timestamp_type, max_timestamp = _timestamp(fields)
        compression = _compression(fields)
        transactional = _bool(fields, "istransactional")
        control = _bool(fields, "iscontrol")
        delete_horizon = _delete_horizon(fields.get("deletehorizonms"))
        return self._new_batch(
            file_position=_int(fields, "position"),
            batch_size=_int(fields, "size"),
            magic=_int(fields, "magic"),
            crc_valid=_bool(fields, "isvalid"),
            base_offset=_int(fields, "baseoffset"),
            last_offset=_int(fields, "lastoffset"),
            record_count=_int(fields, "count"),
            partition_leader_epoch=_int(fields, "partitionleaderepoch"),
            compression=compression,
            timestamp_type=timestamp_type,
            is_transactional=transactional,
            is_control=control,
            max_timestamp=max_timestamp,
            producer_id=_int(fields, "producerid"),
            producer_epoch=_int(fields, "producerepoch"),
            base_sequence=_int(fields, "basesequence"),
            last_sequence=_int(fields, "lastsequence"),
            attributes=_attributes(
                compression, timestamp_type, transactional, control, delete_horizon is not None
            ),
            delete_horizon_ms=delete_horizon,
            crc=_stored_crc(fields),
        )

    def _legacy_batch(self, fields: dict[str, str]) -> Batch:
        timestamp_type, max_timestamp = _timestamp(fields)
        compression = _compression(fields)
        offset = _int(fields, "offset")
        return self._new_batch(
            file_position=_int(fields, "position"),
            batch_size=_int(fields, "size"),
            magic=_int(fields, "magic"),
            crc_valid=_bool(fields, "isvalid"),
            base_offset=offset,
            last_offset=offset,
            record_count=1,
            partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
            compression=compression,
            timestamp_type=timestamp_type,
            is_transactional=False,
            is_control=False,
            max_timestamp=max_timestamp,
            producer_id=NO_PRODUCER_ID,
            producer_epoch=NO_PRODUCER_EPOCH,
            base_sequence=NO_SEQUENCE,
            last_sequence=NO_SEQUENCE,
            attributes=_attributes(compression, timestamp_type, False, False, False),
            crc=_stored_crc(fields),
        )

    def _deep_line(self, fields: dict[str, str]) -> Iterator[DumpItem]:
        """A ≤ 2.1 deep record line: it also carries the batch fields, and the batch's position."""
        position = _int(fields, "position")
        timestamp_type, timestamp = _timestamp(fields)
        compression = _compression(fields)
        magic = _int(fields, "magic")
        valid = _bool(fields, "isvalid")
        control = _control(fields)
        # Legacy lines may lack the producer fields; a legacy batch has none.
        producer_id = _int(fields, "producerid", NO_PRODUCER_ID)
        producer_epoch = _int(fields, "producerepoch", NO_PRODUCER_EPOCH)
        transactional = _bool(fields, "istransactional", False)
        # The batch's base offset is known when it closes, which sets it on its records.
        record = self._record(fields, _int(fields, "offset"))
        open_batch = self._open
        if open_batch is None or not open_batch.synthesised or open_batch.draft.file_position != position:
            yield from self.close(next_position=position)
            open_batch = self._open = _OpenBatch(
                self._new_batch(
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
        self._add_record(open_batch, record, control, fields.get(""))

    def _record_line(self, text: str) -> None:
        """A ``| …`` record line (2.2+) of the open batch."""
        open_batch = self._open
        if open_batch is None or open_batch.synthesised:
            raise _BadLine("record line outside a batch")
        batch = open_batch.draft
        control = None
        if batch.is_control:
            kraft = _KRAFT_CONTROL.search(text)
            if kraft:
                control = (_KRAFT_CONTROL_TYPES[kraft.group(1)], None)
                text = text[: kraft.start()]
        fields = _fields(text)
        control = control or _control(fields)
        if control is not None and not batch.is_control:
            raise _BadLine("control record in a batch whose line says isControl: false")
        if fields.keys() - {""}:
            record = self._record(fields, batch.base_offset)
        elif fields:
            record = self._bare_record(open_batch, fields[""])
        else:
            raise _BadLine("empty record line")
        self._add_record(open_batch, record, control, fields.get(""))

    def _record(self, fields: dict[str, str], batch_base_offset: int) -> DumpRecord:
        key, value = _key_and_payload(fields.get(""))
        header_keys = fields.get("headerkeys")
        return DumpRecord(
            topic=self._topic,
            partition=self._partition,
            file=self._file,
            batch_base_offset=batch_base_offset,
            record=Record(
                offset=_int(fields, "offset"),
                timestamp=_timestamp(fields)[1],
                sequence=_int(fields, "sequence", NO_SEQUENCE),
                key=key,
                value=value,
            ),
            key_size=_int(fields, "keysize"),
            value_size=_int(fields, "valuesize"),
            # Legacy records have no headers, so their lines print no list.
            header_keys=tuple(header_keys.split(",")) if header_keys else (),
        )

    def _bare_record(self, open_batch: _OpenBatch, data: str) -> DumpRecord:
        """A ``--skip-record-metadata`` line: only key and payload are printed.

        The offset and sequence are still exact when the batch lost no records to compaction
        (count == lastOffset - baseOffset + 1): the i-th line is offset base + i. A LogAppendTime
        batch stamps every record with its max timestamp. Otherwise they read as -1.
        """
        batch = open_batch.draft
        index = len(open_batch.records)
        span = batch.last_offset - batch.base_offset + 1
        consecutive = batch.magic >= MAGIC_V2 and batch.record_count == span
        key, value = _key_and_payload(data)
        return DumpRecord(
            topic=self._topic,
            partition=self._partition,
            file=self._file,
            batch_base_offset=batch.base_offset,
            record=Record(
                offset=batch.base_offset + index if consecutive else -1,
                timestamp=batch.max_timestamp if batch.timestamp_type == "LogAppendTime" else NO_TIMESTAMP,
                sequence=(
                    increment_sequence(batch.base_sequence, index)
                    if consecutive and batch.base_sequence != NO_SEQUENCE
                    else NO_SEQUENCE
                ),
                key=key,
                value=value,
            ),
            key_size=None,
            value_size=None,
            header_keys=None,
        )

    @staticmethod
    def _add_record(
        open_batch: _OpenBatch, record: DumpRecord, control: tuple[str, int | None] | None, data: str | None
    ) -> None:
        open_batch.records.append(record)
        open_batch.last_data = data
        # A control batch holds one record; should there be more, the first names the batch.
        if control is not None and open_batch.control_type is None:
            open_batch.control_type, open_batch.coordinator_epoch = control


def _fields(text: str) -> dict[str, str]:
    """The ``name: value`` tokens of a line, names lower-cased; the printed data part under ``""``.

    A value runs to the next space, except ``headerKeys: [...]`` and the trailing
    ``key: … payload: …`` data, whose texts may hold spaces.

    >>> _fields("offset: 5 CreateTime: 9 headerKeys: [a b,c] key: k 1 payload: v: 2")
    {'offset': '5', 'createtime': '9', 'headerkeys': 'a b,c', '': 'key: k 1 payload: v: 2'}
    """
    fields: dict[str, str] = {}
    position, end = 0, len(text)
    while position < end:
        token = _TOKEN.match(text, position)
        if token is None:
            raise _BadLine(f"expected 'name: value' at column {position + 1}")
        name = token.group(1)
        position = token.end()
        if name in ("key", "payload"):
            fields[""] = text[token.start() :]
            break
        if name == "headerKeys":
            keys = _HEADER_KEYS.match(text, position)
            if keys is None:
                raise _BadLine("headerKeys is not a [k1,k2] list")
            value, position = keys.group(1), keys.end()
        else:
            stop = text.find(" ", position)
            stop = end if stop == -1 else stop
            value, position = text[position:stop], stop + 1
        # The 2.8 record line repeats no name; should a line do so, the first value counts.
        fields.setdefault(name.lower(), value)
    return fields


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


def _no_data(fields: dict[str, str]) -> dict[str, str]:
    """The fields of a batch line, which never carries key or payload text."""
    if "" in fields:
        raise _BadLine("key or payload on a batch line")
    return fields


def _key_and_payload(data: str | None) -> tuple[bytes | None, bytes | None]:
    """Split ``key: K payload: P``; a key holding `` payload: `` itself cannot be told apart."""
    if data is None:
        return None, None
    if data.startswith(_PAYLOAD_PREFIX):
        return None, data[len(_PAYLOAD_PREFIX) :].encode("utf-8")
    key = data[len(_KEY_PREFIX) :]
    cut = key.find(_PAYLOAD_SEPARATOR)
    if cut == -1:
        return key.encode("utf-8"), None
    return key[:cut].encode("utf-8"), key[cut + len(_PAYLOAD_SEPARATOR) :].encode("utf-8")


def _int(fields: dict[str, str], name: str, default: int | None = None) -> int:
    value = fields.get(name)
    if value is None:
        if default is None:
            raise _BadLine(f"no {name} field")
        return default
    if not _INTEGER.fullmatch(value):
        raise _BadLine(f"{name} is not an integer: {value!r}")
    return int(value)


def _stored_crc(fields: dict[str, str]) -> int | None:
    """The printed checksum; None where a format leaves it out (the ≤ 2.1 deep lines)."""
    return _int(fields, "crc") if "crc" in fields else None


def _bool(fields: dict[str, str], name: str, default: bool | None = None) -> bool:
    value = fields.get(name)
    if value is None and default is not None:
        return default
    if value not in ("true", "false"):
        raise _BadLine(f"{name} is not true or false: {value!r}")
    return value == "true"


def _timestamp(fields: dict[str, str]) -> tuple[str, int]:
    for name, timestamp_type in _TIMESTAMP_TYPE_NAMES.items():
        if name in fields:
            return timestamp_type, _int(fields, name)
    raise _BadLine("no CreateTime, LogAppendTime or NoTimestampType field")


def _compression(fields: dict[str, str]) -> str:
    # Up to 2.8 the Java enum name was printed (NONE, GZIP, ...), from 3.0 the lower-case name.
    name = fields.get("compresscodec", "").lower()
    if name not in CODEC_IDS:
        raise _BadLine(f"unknown compresscodec {fields.get('compresscodec')!r}")
    return name


def _delete_horizon(value: str | None) -> int | None:
    if value is None:  # ≤ 3.1 does not print the field
        return None
    match = _OPTIONAL_LONG.fullmatch(value)
    if match is None:
        raise _BadLine(f"deleteHorizonMs is not an OptionalLong: {value!r}")
    return None if match.group(1) is None else int(match.group(1))


def _control(fields: dict[str, str]) -> tuple[str, int | None] | None:
    """Control type and coordinator epoch named by a record line, or None for a data record."""
    marker = fields.get("endtxnmarker")
    if marker is not None:
        if marker not in END_TXN_MARKER_TYPES:
            raise _BadLine(f"endTxnMarker is not COMMIT or ABORT: {marker!r}")
        return marker, _int(fields, "coordinatorepoch")
    control_type = fields.get("controltype")
    if control_type is None:
        return None
    match = _CONTROL_TYPE.fullmatch(control_type)
    if match is None:
        raise _BadLine(f"controlType is not NAME(id): {control_type!r}")
    return match.group(1), None


def _attributes(
    compression: str, timestamp_type: str, transactional: bool, control: bool, horizon: bool
) -> int:
    """The attribute bits the printed flags stand for (§1.3); unused bits are not in the dump."""
    return (
        CODEC_IDS[compression]
        | (TIMESTAMP_TYPE_MASK if timestamp_type == "LogAppendTime" else 0)
        | (TRANSACTIONAL_MASK if transactional else 0)
        | (CONTROL_MASK if control else 0)
        | (DELETE_HORIZON_MASK if horizon else 0)
    )


def _topic_partition(path: str) -> tuple[str, int]:
    """Topic and partition from the folder of a dumped file; ("", -1) when it does not parse.

    >>> _topic_partition("/d/orders.v1-3/00000000000000000000.log")
    ('orders.v1', 3)
    >>> _topic_partition("/d/my-topic-12.0123456789abcdef0123456789abcdef-delete/00000000000000000000.log")
    ('my-topic', 12)
    >>> _topic_partition("00000000000000000000.log")
    ('', -1)
    """
    parts = _PATH_SEPARATORS.split(path)
    folder = _PARTITION_DIR.fullmatch(parts[-2]) if len(parts) >= 2 else None
    if folder is None:
        return "", -1
    return folder.group(1), int(folder.group(2))


# --- The text back: what DumpLogSegments prints for a file, from the binary readers.
#
# The text depends on the Kafka release whose tool prints it (``kafka_version``); the releases
# where it changed, checked against the real tools of 3.9.2 and 4.3.1 by tests/test_dumplog_oracle.py:
OLDEST_KAFKA_VERSION = (3, 2)  # batch lines print deleteHorizonMs; older layouts are only read
OPTIONAL_LONG_SINCE = (3, 5)  # snapshot lines: currentTxnFirstOffset an OptionalLong, before None / Some(n)
JAVA_TOOL_SINCE = (4, 3)  # org.apache.kafka.tools.DumpLogSegments, the Java port of kafka.tools' Scala tool
# The default: the Scala tool's text, printed by every release from 3.5 to 4.2.
DEFAULT_KAFKA_VERSION = "4.2"

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)*(?:-[\w.]+)?")
_CHECKPOINT_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
_BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
_JAVA_LONG = re.compile(r"[+-]?\d+")
_INT32 = 1 << 32


@dataclass(frozen=True, slots=True)
class DumpStyle:
    """What the DumpLogSegments of one Kafka release prints differently from the others.

    ``java_tool`` (4.3+): legacy record lines end ``crc: C`` without the Scala tool's stray ``}``;
    LEADER_CHANGE records print ``LeaderChange: {json}`` instead of ``controlType: LEADER_CHANGE(2)``;
    with ``--skip-record-metadata`` a record without key prints ``| payload: P`` (the Scala tool
    `` payload: P``); a snapshot entry without a batch has no trailing space.
    ``optional_long`` (3.5+): a snapshot's ``currentTxnFirstOffset`` is ``OptionalLong.empty`` /
    ``OptionalLong[n]``, before ``None`` / ``Some(n)``.
    """

    java_tool: bool
    optional_long: bool


def dump_style(kafka_version: str | None = None) -> DumpStyle:
    """The text of the ``kafka-dump-log.sh`` of ``kafka_version`` (``MAJOR.MINOR[.PATCH]``, 3.2 or later).

    >>> dump_style("4.4.0"), dump_style("3.9.2") == dump_style()
    (DumpStyle(java_tool=True, optional_long=True), True)
    >>> dump_style("2.8")
    Traceback (most recent call last):
    ...
    ValueError: segaudit prints the dump-log text of Kafka 3.2 and later, not 2.8
    """
    text = DEFAULT_KAFKA_VERSION if kafka_version is None else kafka_version.strip()
    match = _VERSION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Kafka version: {text!r} (expected MAJOR.MINOR or MAJOR.MINOR.PATCH)")
    version = (int(match.group(1)), int(match.group(2)))
    if version < OLDEST_KAFKA_VERSION:
        raise ValueError(f"segaudit prints the dump-log text of Kafka 3.2 and later, not {text}")
    return DumpStyle(java_tool=version >= JAVA_TOOL_SINCE, optional_long=version >= OPTIONAL_LONG_SINCE)


def format_dump(
    path: str,
    batches: Iterable[tuple[Batch, Sequence[Record]]],
    *,
    deep: bool = True,
    log_start_offset: int,
    print_data: bool = False,
    skip_record_metadata: bool = False,
    kafka_version: str | None = None,
) -> Iterator[str]:
    """The lines (without terminators) DumpLogSegments prints for a ``.log`` file holding these rows.

    With ``deep`` the record lines follow each batch line, as with ``--deep-iteration``;
    ``print_data`` adds each record's key and payload as ``--print-data-log`` does (decoded as
    UTF-8, as the tool's StringDecoder does; it implies ``deep``); ``skip_record_metadata`` leaves
    only them (``--skip-record-metadata``). ``kafka_version`` picks the release's text
    (:func:`dump_style`). A row without a stored CRC (``crc`` None) prints ``crc: 0``.
    A control record names its type from its own key and value, as the tool does, or from the
    batch row when it has no such bytes. A legacy record prints the CRC and validity of its batch
    row (:func:`dump_segment` prints each inner message's own).

    >>> batch = Batch("t", 0, "f", 0, 70, 2, True, 5, 5, 1, 0, "none", "CreateTime", False, False,
    ...               None, 9, -1, -1, -1, -1, None, None)
    >>> rows = [(batch, [Record(5, 9, -1, None, b"v")])]
    >>> print("\\n".join(format_dump("/d/t-0/00000000000000000005.log", rows, log_start_offset=5)))
    ... # doctest: +NORMALIZE_WHITESPACE
    Dumping /d/t-0/00000000000000000005.log
    Log starting offset: 5
    baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1
      partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty
      position: 0 CreateTime: 9 size: 70 magic: 2 compresscodec: none crc: 0 isvalid: true
    | offset: 5 CreateTime: 9 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []
    >>> path = "/d/t-0/00000000000000000005.log"
    >>> print(list(format_dump(path, rows, log_start_offset=5, print_data=True))[-1])
    | offset: 5 CreateTime: 9 keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] payload: v
    """
    printer = _Printer(dump_style(kafka_version), print_data, skip_record_metadata)
    yield f"Dumping {path}"
    yield f"Log starting offset: {log_start_offset}"
    for batch, records in batches:
        yield _batch_line(batch)
        if deep or print_data:
            for record in records:
                yield printer.record_line(batch, record, batch.crc_valid, batch.crc or 0)


def _batch_line(batch: Batch) -> str:
    if batch.magic >= MAGIC_V2:
        # Java's OptionalLong.toString.
        horizon = batch.delete_horizon_ms
        horizon_text = "OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.record_count}"
            f" baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence}"
            f" producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch}"
            f" partitionLeaderEpoch: {batch.partition_leader_epoch}"
            f" isTransactional: {_flag(batch.is_transactional)} isControl: {_flag(batch.is_control)}"
            f" deleteHorizonMs: {horizon_text}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {batch.file_position} {batch.timestamp_type}: {batch.max_timestamp}"
        f" size: {batch.batch_size} magic: {batch.magic} compresscodec: {batch.compression}"
        f" crc: {batch.crc or 0} isvalid: {_flag(batch.crc_valid)}"
    )


class _Printer:
    """Record lines (``dumpBatchRecords``: ``printRecordMetadata`` then ``printRecordContents``)."""

    def __init__(self, style: DumpStyle, print_data: bool, skip_record_metadata: bool):
        self.style = style
        self.print_data = print_data
        self.skip_metadata = skip_record_metadata
        self.legacy_end = "" if style.java_tool else "}"  # the Scala tool's stray brace

    def record_line(self, batch: Batch, record: Record, legacy_valid: bool, legacy_crc: int) -> str:
        """One record's line; ``legacy_valid`` / ``legacy_crc`` are a magic 0/1 record's own."""
        line = ""
        if not self.skip_metadata:
            line = (
                f"| offset: {record.offset} {batch.timestamp_type}: {record.timestamp}"
                f" keySize: {_size(record.key)} valueSize: {_size(record.value)}"
            )
            if batch.magic >= MAGIC_V2:
                header_keys = ",".join(h.key for h in record.headers)
                line += f" sequence: {record.sequence} headerKeys: [{header_keys}]"
            else:
                line += f" isValid: {_flag(legacy_valid)} crc: {legacy_crc}{self.legacy_end}"
            if batch.is_control:
                line += self._control(batch, record)
        if self.print_data and not batch.is_control:
            prefix = "| " if self.skip_metadata else " "
            if record.key is not None:
                line += f"{prefix}key: {_decoded(record.key)}"
                prefix = " "
            if record.value is not None:
                # The Scala tool always wrote " payload: ", also when nothing came before it.
                line += f"{prefix if self.style.java_tool else ' '}payload: {_decoded(record.value)}"
        return line

    def _control(self, batch: Batch, record: Record) -> str:
        """``printControlRecord``: the record's type from its key (the batch row's without one)."""
        key, value = record.key, record.value
        if key is not None and len(key) >= CONTROL_KEY.size:
            type_id = CONTROL_KEY.unpack_from(key)[1]
            name = control_type_name(type_id)
        else:
            name = batch.control_type or "UNKNOWN"
            type_id = CONTROL_TYPE_IDS.get(name, -1)
        if name in END_TXN_MARKER_TYPES:
            if value is not None and len(value) >= END_TXN_MARKER_VALUE.size:
                coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)[1]
            else:
                coordinator_epoch = batch.coordinator_epoch
            return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
        if name != "LEADER_CHANGE" or self.style.java_tool:
            printed = _control_json(name, value)
            if printed is not None:
                return printed
        # Also where the tool would fail to decode the value: the type is what the rows keep.
        return f" controlType: {name}({type_id})"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _decoded(data: bytes) -> str:
    """The tool's StringDecoder: ``new String(bytes, UTF_8)``, malformed input replaced as the JDK does."""
    return java_utf8(data)


# --- KRaft control records, printed as the JSON of their message (``<Name>JsonConverter.write``).
class _MessageReader:
    """The fields of a flexible-version Kafka message (``ByteBufferAccessor``); ValueError past the end."""

    def __init__(self, data: bytes):
        self.data = data
        self.position = 0

    def take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise ValueError("message runs past its bytes")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def number(self, layout: str) -> int:
        fmt = struct.Struct(">" + layout)
        return fmt.unpack(self.take(fmt.size))[0]

    def unsigned_varint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise ValueError("varint longer than 5 bytes")

    def array(self, read_item) -> list:
        length = self.unsigned_varint() - 1  # compact array: length + 1, 0 for null
        if length < 0 or length > len(self.data) - self.position:
            raise ValueError("bad array length")
        return [read_item() for _ in range(length)]

    def string(self) -> str:
        length = self.unsigned_varint() - 1
        if length < 0 or length > 0x7FFF:
            raise ValueError("bad string length")
        return java_utf8(self.take(length))

    def uuid(self) -> str:
        # Uuid.toString: URL-safe base64 of the 16 bytes, without padding.
        return base64.urlsafe_b64encode(self.take(16)).decode("ascii").rstrip("=")

    def tagged_fields(self) -> None:
        for _ in range(self.unsigned_varint()):
            self.unsigned_varint()  # tag
            self.take(self.unsigned_varint())


def _leader_change(reader: _MessageReader) -> dict:
    # Read at version 0 (ControlRecordUtils), written as JSON at the version its Version field names.
    version = reader.number("h")
    leader_id = reader.number("i")

    def voter() -> dict:
        voter_id = reader.number("i")
        reader.tagged_fields()
        item: dict = {"voterId": voter_id}
        if version >= 1:  # VoterDirectoryId (1+): not read at version 0, so Uuid.ZERO_UUID
            item["voterDirectoryId"] = "AAAAAAAAAAAAAAAAAAAAAA"
        return item

    voters = reader.array(voter)
    granting = reader.array(voter)
    reader.tagged_fields()
    return {"version": version, "leaderId": leader_id, "voters": voters, "grantingVoters": granting}


def _snapshot_header(reader: _MessageReader) -> dict:
    version, timestamp = reader.number("h"), reader.number("q")
    reader.tagged_fields()
    return {"version": version, "lastContainedLogTimestamp": timestamp}


def _snapshot_footer(reader: _MessageReader) -> dict:
    version = reader.number("h")
    reader.tagged_fields()
    return {"version": version}


def _kraft_version(reader: _MessageReader) -> dict:
    version, kraft_version = reader.number("h"), reader.number("h")
    reader.tagged_fields()
    return {"version": version, "kRaftVersion": kraft_version}


def _kraft_voters(reader: _MessageReader) -> dict:
    def endpoint() -> dict:
        item = {"name": reader.string(), "host": reader.string(), "port": reader.number("H")}
        reader.tagged_fields()
        return item

    def voter() -> dict:
        voter_id, directory_id = reader.number("i"), reader.uuid()
        endpoints = reader.array(endpoint)
        low, high = reader.number("h"), reader.number("h")
        reader.tagged_fields()  # of KRaftVersionFeature
        reader.tagged_fields()  # of Voter
        return {
            "voterId": voter_id,
            "voterDirectoryId": directory_id,
            "endpoints": endpoints,
            "kRaftVersionFeature": {"minSupportedVersion": low, "maxSupportedVersion": high},
        }

    version = reader.number("h")
    voters = reader.array(voter)
    reader.tagged_fields()
    return {"version": version, "voters": voters}


# Control type -> (what the tool prints before the JSON, the message reader).
_CONTROL_JSON = {
    "LEADER_CHANGE": (" LeaderChange: ", _leader_change),
    "SNAPSHOT_HEADER": (" SnapshotHeader ", _snapshot_header),
    "SNAPSHOT_FOOTER": (" SnapshotFooter ", _snapshot_footer),
    "KRAFT_VERSION": (" KRaftVersion ", _kraft_version),
    "KRAFT_VOTERS": (" KRaftVoters ", _kraft_voters),
}


def _control_json(name: str, value: bytes | None) -> str | None:
    """`` SnapshotHeader {"version":0,…}`` and the like; None for other types or an undecodable value.

    >>> _control_json("KRAFT_VERSION", bytes([0, 0, 0, 1, 0]))
    ' KRaftVersion {"version":0,"kRaftVersion":1}'
    """
    known = _CONTROL_JSON.get(name)
    if known is None or value is None:
        return None
    prefix, read = known
    try:
        message = read(_MessageReader(value))
    except (ValueError, struct.error):
        return None
    return prefix + _json(message)


def _json(value) -> str:
    """Jackson's compact JSON (``JsonNode.toString``): no spaces, non-ASCII kept, upper-case \\u escapes."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json_string(k)}:{_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    if isinstance(value, str):
        return _json_string(value)
    return str(value)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _json_string(text: str) -> str:
    out = []
    for char in text:
        if char in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


# --- Files: what ``kafka-dump-log.sh --files PATH`` prints, read with the binary readers.
def dump_file(
    path: str,
    *,
    deep: bool = True,
    print_data: bool = False,
    skip_record_metadata: bool = False,
    kafka_version: str | None = None,
    warn=None,
) -> Iterator[str]:
    """The stdout lines of DumpLogSegments for one file, chosen by its suffix as the tool does.

    ``.log`` segments and ``.checkpoint`` KRaft snapshots: :func:`dump_segment`; ``.snapshot``:
    :func:`dump_producer_snapshot`; ``.txnindex``: :func:`dump_txn_index`. ``warn`` (a callable
    taking one line) receives what the tool prints on stderr instead of stdout: an unknown file,
    a snapshot the broker would refuse. ``.index`` and ``.timeindex`` files raise ValueError.
    """
    name = os.path.basename(_java_path(path))
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix in _BATCH_FILE_SUFFIXES:
        yield from dump_segment(
            path,
            deep=deep,
            print_data=print_data,
            skip_record_metadata=skip_record_metadata,
            kafka_version=kafka_version,
        )
    elif suffix == ".snapshot":
        yield from dump_producer_snapshot(path, kafka_version=kafka_version, warn=warn)
    elif suffix == ".txnindex":
        yield from dump_txn_index(path, warn=warn)
    elif suffix in (".index", ".timeindex"):
        raise ValueError(f"{path}: segaudit dump-log does not print {suffix} files")
    else:
        yield f"Dumping {_java_path(path)}"
        if warn is not None:
            warn(f"Ignoring unknown file {_java_path(path)}")


def dump_segment(
    path: str,
    *,
    deep: bool = True,
    print_data: bool = False,
    skip_record_metadata: bool = False,
    kafka_version: str | None = None,
) -> Iterator[str]:
    """The lines ``kafka-dump-log.sh --files PATH [--deep-iteration]`` prints, from the binary reader.

    Every entry the tool iterates gets its batch line, also one failing its CRC; with ``deep``
    its records follow, decoded whatever its CRC says, as the tool does (a legacy record prints
    its own message's CRC and validity). Where the records do not decode, the tool throws and
    stops; here the entry has no record lines and the dump goes on. A torn tail ends with the
    tool's ``Found N invalid bytes`` line. The options are those of :func:`format_dump`.
    """
    from analytics.kafka.logdir import read_segment
    from analytics.kafka.reader import batches_from_arrow

    printer = _Printer(dump_style(kafka_version), print_data, skip_record_metadata)
    deep = deep or print_data
    shown = _java_path(path)
    name = os.path.basename(shown)
    read = read_segment(path)
    yield f"Dumping {shown}"
    header = _segment_header(name)
    if header is not None:
        yield header
    batches = (b for rb in read.batches.to_batches() for b in batches_from_arrow(rb))
    if deep:
        with _open_source(path) as source:
            for batch in batches:
                yield _batch_line(batch)
                for record, valid, crc in _entry_records(source, batch):
                    yield printer.record_line(batch, record, valid, crc)
    else:
        for batch in batches:
            yield _batch_line(batch)
    invalid = sum(e.bytes_affected for e in read.errors if e.error_kind in STOPS_FILE)
    if invalid:
        yield f"Found {invalid} invalid bytes at the end of {name}"


def dump_producer_snapshot(path: str, *, kafka_version: str | None = None, warn=None) -> Iterator[str]:
    """``dumpProducerIdSnapshot``: one line per producer of a ``.snapshot`` file, in file order.

    A file the broker refuses (version, size, CRC) prints nothing after its ``Dumping`` line; the
    reason goes to ``warn``, as the tool prints it on stderr.
    """
    from analytics.kafka.sidecars import read_snapshot, snapshot_offset_from_name

    style = dump_style(kafka_version)
    shown = _java_path(path)
    data = _read_all(path)
    yield f"Dumping {shown}"
    name = os.path.basename(shown)
    read = read_snapshot(
        data, topic="", partition=-1, file=path, snapshot_offset=snapshot_offset_from_name(name) or 0
    )
    for error in read.errors:
        if warn is not None:
            warn(f"{shown}: {error.message}")
    for entry in read.rows:
        txn = entry.current_txn_first_offset
        if style.optional_long:
            txn_text = "OptionalLong.empty" if txn < 0 else f"OptionalLong[{txn}]"
        else:
            txn_text = "None" if txn < 0 else f"Some({txn})"
        line = (
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch}"
            f" coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {txn_text}"
            f" lastTimestamp: {entry.timestamp}"
        )
        if entry.last_offset >= 0:  # the entry's last batch (readSnapshot keeps it when lastOffset >= 0)
            first_sequence = _java_decrement_sequence(entry.last_sequence, entry.offset_delta)
            line += (
                f" firstSequence: {first_sequence} lastSequence: {entry.last_sequence}"
                f" lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta}"
                f" timestamp: {entry.timestamp}"
            )
        elif not style.java_tool:
            line += " "  # the Scala tool printed "lastTimestamp: T " before the batch part
        yield line


def dump_txn_index(path: str, *, warn=None) -> Iterator[str]:
    """``dumpTxnIndex``: one line per aborted transaction of a ``.txnindex`` file.

    A partial trailing entry is skipped, as the broker's iterator does; an entry of a version
    above 0 makes the tool throw, so the dump stops there (the reason goes to ``warn``).
    """
    from analytics.kafka.sidecars import ABORTED_TXN, ABORTED_TXN_VERSION

    shown = _java_path(path)
    data = _read_all(path)
    yield f"Dumping {shown}"
    whole = len(data) - len(data) % ABORTED_TXN.size
    for version, producer_id, first, last, last_stable in ABORTED_TXN.iter_unpack(data[:whole]):
        if version > ABORTED_TXN_VERSION:
            if warn is not None:
                warn(f"Unexpected aborted transaction version {version} in transaction index {shown}")
            return
        yield (
            f"version: {version} producerId: {producer_id} firstOffset: {first}"
            f" lastOffset: {last} lastStableOffset: {last_stable}"
        )


def _java_path(path: str) -> str:
    """The path as ``new File(path)`` prints it: repeated separators collapsed, no trailing one."""
    if "://" in path:
        return path
    collapsed = re.sub(r"/{2,}", "/", path)
    return collapsed.rstrip("/") or collapsed


def _segment_header(name: str) -> str | None:
    """The line after ``Dumping``: the segment's start offset, or a KRaft snapshot's id."""
    if name.endswith(".log"):
        first = name.split(".")[0]
        # Long.parseLong of the name before its first dot; a name that is no number makes the tool throw.
        return f"Log starting offset: {int(first) if _JAVA_LONG.fullmatch(first) else 0}"
    if name == _BOOTSTRAP_CHECKPOINT:
        return "KRaft bootstrap snapshot"
    checkpoint = _CHECKPOINT_NAME.fullmatch(name)
    if checkpoint is not None:
        return f"Snapshot end offset: {int(checkpoint.group(1))}, epoch: {int(checkpoint.group(2))}"
    return None


def _open_source(path: str):
    from analytics.kafka.fs import ArrowFile, is_remote, local_path
    from analytics.kafka.reader import LocalFile

    return ArrowFile(path) if is_remote(path) else LocalFile(local_path(path))


def _read_all(path: str) -> bytes:
    with _open_source(path) as source:
        return source.read_at(0, source.size)


def _entry_records(source, batch: Batch) -> list[tuple[Record, bool, int]]:
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


def _java_decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence`` with Java's int arithmetic (a snapshot's firstSequence)."""
    if sequence < decrement:
        result = INT_MAX - (decrement - sequence) + 1
    else:
        result = sequence - decrement
    result %= _INT32
    return result - _INT32 if result >= 1 << 31 else result
