"""Rows back to text: the batch and record lines DumpLogSegments prints, in a release's style.

A batch line follows ``printBatchLevel``, a record line ``dumpBatchRecords``
(``printRecordMetadata`` then ``printRecordContents``); :func:`format_dump` prints rows already
read, :mod:`~analytics.kafka.dumplog.segment` the entries of a segment file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from analytics.kafka.dumplog.kraft import control_json
from analytics.kafka.dumplog.style import DumpStyle, dump_style
from analytics.kafka.layout import (
    CONTROL_KEY,
    CONTROL_TYPE_IDS,
    END_TXN_MARKER_TYPES,
    END_TXN_MARKER_VALUE,
    MAGIC_V2,
    control_type_name,
)
from analytics.kafka.model import Batch, Record
from analytics.kafka.util import java_utf8


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
    printer = RecordPrinter(dump_style(kafka_version), print_data, skip_record_metadata)
    yield f"Dumping {path}"
    yield f"Log starting offset: {log_start_offset}"
    for batch, records in batches:
        yield batch_line(batch)
        if deep or print_data:
            for record in records:
                yield printer.record_line(batch, record, batch.crc_valid, batch.crc or 0)


def batch_line(batch: Batch) -> str:
    """``printBatchLevel``: the line of a v2 batch, or of a legacy entry (its last offset)."""
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


class RecordPrinter:
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
            printed = control_json(name, value)
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
