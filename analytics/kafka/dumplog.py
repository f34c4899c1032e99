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
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from analytics.kafka.errors import STOPS_FILE, TRUNCATED
from analytics.kafka.layout import (
    CODEC_IDS,
    CONTROL_MASK,
    CONTROL_TYPE_IDS,
    DELETE_HORIZON_MASK,
    END_TXN_MARKER_TYPES,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    TIMESTAMP_TYPE_MASK,
    TIMESTAMP_TYPES,
    TRANSACTIONAL_MASK,
)
from analytics.kafka.model import Batch, Header, ParseError, Record
from analytics.kafka.util import increment_sequence

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
# KRaft control records print their record as JSON instead of name: value tokens (3.x+).
_KRAFT_CONTROL = re.compile(r" (SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters) \{.*$")
_KRAFT_CONTROL_TYPES = {
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


def parse_dump(lines: Iterable[str], *, source: str = "<dump>") -> Iterator[DumpItem]:
    """Rows of ``kafka-dump-log.sh`` output: ``Batch``, then its ``DumpRecord`` rows, and ``ParseError`` rows.

    ``lines`` is read lazily, one line at a time (line terminators are optional); only the record
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
    for number, line in enumerate(lines, start=1):
        yield from parser.feed(number, line.rstrip("\r\n"))
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
        # Only when the payload is shorter than its valueSize (a decoder other than the string one
        # may print fewer characters than bytes, hence also the check of the line's start).
        if self._open is None or not self._open.records or line.startswith(_DUMP_LINE_STARTS):
            return False
        last = self._open.records[-1]
        value = last.record.value
        if value is None or last.value_size is None or len(value) >= last.value_size:
            return False
        continued = replace(last.record, value=value + b"\n" + line.encode("utf-8"))
        self._open.records[-1] = replace(last, record=continued)
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
        self._add_record(open_batch, record, control)

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
        self._add_record(open_batch, record, control)

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
        open_batch: _OpenBatch, record: DumpRecord, control: tuple[str, int | None] | None
    ) -> None:
        open_batch.records.append(record)
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


def format_dump(
    path: str,
    batches: Iterable[tuple[Batch, Sequence[Record]]],
    *,
    deep: bool = True,
    log_start_offset: int,
) -> Iterator[str]:
    """The lines (without terminators) HEAD DumpLogSegments prints for a file holding these rows.

    With ``deep`` the record lines follow each batch line, as with ``--deep-iteration``.
    A row without a stored CRC (``crc`` None) prints ``crc: 0``. Control records print
    ``endTxnMarker: … coordinatorEpoch: …`` from the batch row, other control types
    ``controlType: NAME(id)`` (HEAD prints the KRaft snapshot and voter records as JSON, which
    needs their decoded values).

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
    """
    yield f"Dumping {path}"
    yield f"Log starting offset: {log_start_offset}"
    for batch, records in batches:
        yield _batch_line(batch)
        if deep:
            for record in records:
                yield _record_line(batch, record)


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


def _record_line(batch: Batch, record: Record) -> str:
    line = (
        f"| offset: {record.offset} {batch.timestamp_type}: {record.timestamp}"
        f" keySize: {_size(record.key)} valueSize: {_size(record.value)}"
    )
    if batch.magic >= MAGIC_V2:
        line += f" sequence: {record.sequence} headerKeys: [{','.join(h.key for h in record.headers)}]"
    else:
        # HEAD prints each legacy record's own CRC with a stray "}"; records keep no CRC of their
        # own, so the entry's is printed (the same for an uncompressed message, not for a wrapper).
        line += f" isValid: {_flag(batch.crc_valid)} crc: {batch.crc or 0}}}"
    if batch.is_control:
        control_type = batch.control_type or "UNKNOWN"
        if control_type in END_TXN_MARKER_TYPES:
            line += f" endTxnMarker: {control_type} coordinatorEpoch: {batch.coordinator_epoch}"
        else:
            line += f" controlType: {control_type}({CONTROL_TYPE_IDS.get(control_type, -1)})"
    return line


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def dump_segment(path: str, *, deep: bool = True) -> Iterator[str]:
    """The lines ``kafka-dump-log.sh --files PATH [--deep-iteration]`` prints (HEAD format), from
    the binary reader; a torn tail ends with the tool's ``Found N invalid bytes`` line."""
    from analytics.kafka.discovery import OFFSET_FILE
    from analytics.kafka.logdir import read_segment
    from analytics.kafka.reader import batches_from_arrow

    read = read_segment(path, records=deep)
    records: dict[int, list[Record]] = {}
    if deep:
        for row in read.records.to_pylist():
            headers = tuple(Header(h["key"], h["value"]) for h in row["headers"])
            records.setdefault(row["batch_base_offset"], []).append(
                Record(row["offset"], row["timestamp"], row["sequence"], row["key"], row["value"], headers)
            )
    batches = [b for rb in read.batches.to_batches() for b in batches_from_arrow(rb)]
    name = OFFSET_FILE.match(os.path.basename(path))
    yield from format_dump(
        path,
        ((b, records.get(b.base_offset, []) if b.crc_valid else []) for b in batches),
        deep=deep,
        log_start_offset=int(name["offset"]) if name else 0,
    )
    invalid = sum(e.bytes_affected for e in read.errors if e.error_kind in STOPS_FILE)
    if invalid:
        yield f"Found {invalid} invalid bytes at the end of {os.path.basename(path)}"
