"""The rows a dump's lines become: a batch line's ``Batch``, a record line's ``DumpRecord``, and
the batch that collects its record lines until its row is complete.

What the text cannot give: ``base_timestamp`` (None), attribute bits other than the printed
flags (rebuilt from them), header values, and record bytes without ``--print-data-log``;
the ≤ 2.1 deep-only lines carry no batch CRC either (``crc`` None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from analytics.kafka.discovery import parse_partition_dir
from analytics.kafka.dumplog.tokens import (
    attributes,
    bool_field,
    compression_field,
    crc_field,
    delete_horizon_field,
    int_field,
    key_and_payload,
    timestamp_field,
)
from analytics.kafka.layout import (
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
)
from analytics.kafka.model import Batch, Record
from analytics.kafka.util import increment_sequence

_PATH_SEPARATORS = re.compile(r"[\\/]")


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


@dataclass(frozen=True, slots=True)
class DumpedFile:
    """The file a ``Dumping`` line names, and the topic and partition of its folder ("", -1 if none).

    Its methods build the rows of the lines dumped from it.

    >>> [(f.topic, f.partition) for f in map(DumpedFile.named, [
    ...     "/d/orders.v1-3/00000000000000000000.log",
    ...     "/d/my-topic-12.0123456789abcdef0123456789abcdef-delete/00000000000000000000.log",
    ...     "00000000000000000000.log",
    ... ])]
    [('orders.v1', 3), ('my-topic', 12), ('', -1)]
    """

    path: str
    topic: str = ""
    partition: int = -1

    @classmethod
    def named(cls, path: str) -> DumpedFile:
        """The file at ``path``; its folder's name read as discovery reads a partition folder's
        (:func:`~analytics.kafka.discovery.parse_partition_dir`), ``\\`` also a separator (a dump made
        on Windows)."""
        parts = _PATH_SEPARATORS.split(path)
        folder = parse_partition_dir(parts[-2]) if len(parts) >= 2 else None
        if folder is None:
            return cls(path)
        topic, partition, _ = folder
        return cls(path, topic, partition)

    def batch(self, **fields) -> Batch:
        """A batch row of this file: no baseTimestamp in the dump, the control type comes later."""
        return Batch(
            topic=self.topic,
            partition=self.partition,
            file=self.path,
            base_timestamp=None,
            control_type=None,
            coordinator_epoch=None,
            **fields,
        )

    def v2_batch(self, fields: dict[str, str]) -> Batch:
        """The row of a ``baseOffset: …`` line."""
        timestamp_type, max_timestamp = timestamp_field(fields)
        compression = compression_field(fields)
        transactional = bool_field(fields, "istransactional")
        control = bool_field(fields, "iscontrol")
        delete_horizon = delete_horizon_field(fields)
        return self.batch(
            file_position=int_field(fields, "position"),
            batch_size=int_field(fields, "size"),
            magic=int_field(fields, "magic"),
            crc_valid=bool_field(fields, "isvalid"),
            base_offset=int_field(fields, "baseoffset"),
            last_offset=int_field(fields, "lastoffset"),
            record_count=int_field(fields, "count"),
            partition_leader_epoch=int_field(fields, "partitionleaderepoch"),
            compression=compression,
            timestamp_type=timestamp_type,
            is_transactional=transactional,
            is_control=control,
            max_timestamp=max_timestamp,
            producer_id=int_field(fields, "producerid"),
            producer_epoch=int_field(fields, "producerepoch"),
            base_sequence=int_field(fields, "basesequence"),
            last_sequence=int_field(fields, "lastsequence"),
            attributes=attributes(
                compression, timestamp_type, transactional, control, delete_horizon is not None
            ),
            delete_horizon_ms=delete_horizon,
            crc=crc_field(fields),
        )

    def legacy_batch(self, fields: dict[str, str]) -> Batch:
        """The row of a legacy (magic 0/1) ``offset: LAST position: …`` line."""
        timestamp_type, max_timestamp = timestamp_field(fields)
        compression = compression_field(fields)
        offset = int_field(fields, "offset")
        return self.batch(
            file_position=int_field(fields, "position"),
            batch_size=int_field(fields, "size"),
            magic=int_field(fields, "magic"),
            crc_valid=bool_field(fields, "isvalid"),
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
            attributes=attributes(compression, timestamp_type, False, False, False),
            crc=crc_field(fields),
        )

    def record(self, fields: dict[str, str], batch_base_offset: int) -> DumpRecord:
        """The row of a record line with its metadata."""
        key, value = key_and_payload(fields.get(""))
        header_keys = fields.get("headerkeys")
        return DumpRecord(
            topic=self.topic,
            partition=self.partition,
            file=self.path,
            batch_base_offset=batch_base_offset,
            record=Record(
                offset=int_field(fields, "offset"),
                timestamp=timestamp_field(fields)[1],
                sequence=int_field(fields, "sequence", NO_SEQUENCE),
                key=key,
                value=value,
            ),
            key_size=int_field(fields, "keysize"),
            value_size=int_field(fields, "valuesize"),
            # Legacy records have no headers, so their lines print no list.
            header_keys=tuple(header_keys.split(",")) if header_keys else (),
        )

    def bare_record(self, batch: Batch, index: int, data: str) -> DumpRecord:
        """The ``index``-th record line of ``batch`` under ``--skip-record-metadata``: only key and payload.

        The offset and sequence are still exact when the batch lost no records to compaction
        (count == lastOffset - baseOffset + 1): the i-th line is offset base + i. A LogAppendTime
        batch stamps every record with its max timestamp. Otherwise they read as -1.
        """
        span = batch.last_offset - batch.base_offset + 1
        consecutive = batch.magic >= MAGIC_V2 and batch.record_count == span
        key, value = key_and_payload(data)
        return DumpRecord(
            topic=self.topic,
            partition=self.partition,
            file=self.path,
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


@dataclass(slots=True)
class OpenBatch:
    """A batch whose row waits for its record lines (they name the control type)."""

    draft: Batch
    synthesised: bool = False  # built from ≤ 2.1 deep record lines, which print no batch line
    records: list[DumpRecord] = field(default_factory=list)
    all_valid: bool = True  # ≤ 2.1 deep lines print isvalid per record
    control_type: str | None = None
    coordinator_epoch: int | None = None
    last_data: str | None = None  # the "key: … payload: …" text of the last record line, when printed

    def add(self, record: DumpRecord, control: tuple[str, int | None] | None, data: str | None) -> None:
        """Append a record line's row; ``control`` is what it names, ``data`` its printed key and payload."""
        self.records.append(record)
        self.last_data = data
        # A control batch holds one record; should there be more, the first names the batch.
        if control is not None and self.control_type is None:
            self.control_type, self.coordinator_epoch = control

    def finish(self, next_position: int | None) -> tuple[Batch, list[DumpRecord]]:
        """The batch row, completed from its record lines, and the records with its base offset.

        ``next_position`` is where the next batch of the same file starts: a ≤ 2.1 deep dump
        prints no size, so a synthesised batch's size is the distance to it (-1 for the last).
        """
        batch, records = self.draft, self.records
        changes: dict = {}
        if self.synthesised:
            first, last = records[0].record, records[-1].record
            changes.update(
                base_offset=first.offset,
                last_offset=last.offset,
                record_count=len(records),
                max_timestamp=max(r.record.timestamp for r in records),
                crc_valid=self.all_valid,
                batch_size=-1 if next_position is None else next_position - batch.file_position,
                is_control=self.control_type is not None,
            )
            if batch.magic >= MAGIC_V2:
                changes.update(base_sequence=first.sequence, last_sequence=last.sequence)
            changes["attributes"] = attributes(
                batch.compression, batch.timestamp_type, batch.is_transactional, changes["is_control"], False
            )
        elif batch.magic < MAGIC_V2 and records:
            # A legacy line prints the wrapper's (last) offset; the inner messages give the first.
            changes.update(base_offset=records[0].record.offset, record_count=len(records))
        if self.control_type is not None:
            changes.update(control_type=self.control_type, coordinator_epoch=self.coordinator_epoch)
        if changes:
            batch = replace(batch, **changes)
        base = batch.base_offset
        return batch, [
            record if record.batch_base_offset == base else replace(record, batch_base_offset=base)
            for record in records
        ]
