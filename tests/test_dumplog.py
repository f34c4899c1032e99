"""``kafka-dump-log.sh`` text → rows, per Kafka version (rules §5.2), and rows → HEAD text.

Every sample below is written in the exact form DumpLogSegments prints for its version
(``core/src/main/scala/kafka/tools/DumpLogSegments.scala`` of that branch).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.kafka.dumplog import DUMP_LINE, DumpRecord, dump_segment, format_dump, parse_dump
from analytics.kafka.layout import (
    CODEC_IDS,
    CODEC_NAMES,
    CONTROL_KEY,
    CONTROL_TYPE_IDS,
    END_TXN_MARKER_VALUE,
    INT_MAX,
)
from analytics.kafka.logdir import read_segment
from analytics.kafka.model import Batch, Header, ParseError, Record
from analytics.kafka.reader import batches_from_arrow
from analytics.kafka.util import increment_sequence, last_sequence
from analytics.kafka.writer import RecordSpec, build_batch, build_end_txn_marker, write_file
from tests.commands import assert_own_lines


def lines(text: str) -> list[str]:
    return text.strip("\n").split("\n")


def parse(text: str) -> list:
    return list(parse_dump(lines(text), source="dump.txt"))


def of_type(rows: list, kind: type) -> list:
    return [row for row in rows if isinstance(row, kind)]


# --- HEAD (3.2+), --deep-iteration: golden vectors of rules §1.11, then a compacted batch.
HEAD_PATH = "/var/kafka-logs/orders.v1-3/00000000000001234567.log"
HEAD_DUMP = """
Dumping /var/kafka-logs/orders.v1-3/00000000000001234567.log
Log starting offset: 1234567
baseOffset: 1234567 lastOffset: 1234569 count: 3 baseSequence: 2147483646 lastSequence: 0 producerId: 23423 producerEpoch: 145 partitionLeaderEpoch: 7 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 3 size: 88 magic: 2 compresscodec: none crc: 256920453 isvalid: true
| offset: 1234567 CreateTime: 1 keySize: 1 valueSize: 1 sequence: 2147483646 headerKeys: []
| offset: 1234568 CreateTime: 2 keySize: 1 valueSize: 1 sequence: 2147483647 headerKeys: []
| offset: 1234569 CreateTime: 3 keySize: 1 valueSize: 1 sequence: 0 headerKeys: []
baseOffset: 1234570 lastOffset: 1234570 count: 1 baseSequence: -1 lastSequence: -1 producerId: 23423 producerEpoch: 146 partitionLeaderEpoch: 7 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 88 CreateTime: 1700000000000 size: 78 magic: 2 compresscodec: none crc: 3614444544 isvalid: true
| offset: 1234570 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 15
baseOffset: 1234571 lastOffset: 1234575 count: 2 baseSequence: 10 lastSequence: 14 producerId: 23424 producerEpoch: 0 partitionLeaderEpoch: 8 isTransactional: false isControl: false deleteHorizonMs: OptionalLong[1700086400000] position: 166 LogAppendTime: 1700000005000 size: 120 magic: 2 compresscodec: zstd crc: 1 isvalid: false
| offset: 1234572 LogAppendTime: 1700000005000 keySize: 2 valueSize: 4 sequence: 11 headerKeys: [trace-id,span id]
| offset: 1234575 LogAppendTime: 1700000005000 keySize: 2 valueSize: -1 sequence: 14 headerKeys: []
Found 17 invalid bytes at the end of 00000000000001234567.log
"""

IDEMPOTENT = Batch(
    topic="orders.v1",
    partition=3,
    file=HEAD_PATH,
    file_position=0,
    batch_size=88,
    magic=2,
    crc_valid=True,
    base_offset=1234567,
    last_offset=1234569,
    record_count=3,
    partition_leader_epoch=7,
    compression="none",
    timestamp_type="CreateTime",
    is_transactional=False,
    is_control=False,
    base_timestamp=None,
    max_timestamp=3,
    producer_id=23423,
    producer_epoch=145,
    base_sequence=INT_MAX - 1,
    last_sequence=0,
    control_type=None,
    coordinator_epoch=None,
    attributes=0,
    delete_horizon_ms=None,
    crc=256920453,
)
COMMIT = Batch(
    topic="orders.v1",
    partition=3,
    file=HEAD_PATH,
    file_position=88,
    batch_size=78,
    magic=2,
    crc_valid=True,
    base_offset=1234570,
    last_offset=1234570,
    record_count=1,
    partition_leader_epoch=7,
    compression="none",
    timestamp_type="CreateTime",
    is_transactional=True,
    is_control=True,
    base_timestamp=None,
    max_timestamp=1700000000000,
    producer_id=23423,
    producer_epoch=146,
    base_sequence=-1,
    last_sequence=-1,
    control_type="COMMIT",
    coordinator_epoch=15,
    attributes=0x30,
    delete_horizon_ms=None,
    crc=3614444544,
)
COMPACTED = Batch(
    topic="orders.v1",
    partition=3,
    file=HEAD_PATH,
    file_position=166,
    batch_size=120,
    magic=2,
    crc_valid=False,
    base_offset=1234571,
    last_offset=1234575,
    record_count=2,
    partition_leader_epoch=8,
    compression="zstd",
    timestamp_type="LogAppendTime",
    is_transactional=False,
    is_control=False,
    base_timestamp=None,
    max_timestamp=1700000005000,
    producer_id=23424,
    producer_epoch=0,
    base_sequence=10,
    last_sequence=14,
    control_type=None,
    coordinator_epoch=None,
    attributes=0x04 | 0x08 | 0x40,
    delete_horizon_ms=1700086400000,
    crc=1,  # printed as stored, though isvalid: false
)


def dump_record(
    batch: Batch, offset, timestamp, sequence, key_size, value_size, header_keys=(), key=None, value=None
) -> DumpRecord:
    return DumpRecord(
        topic=batch.topic,
        partition=batch.partition,
        file=batch.file,
        batch_base_offset=batch.base_offset,
        record=Record(offset=offset, timestamp=timestamp, sequence=sequence, key=key, value=value),
        key_size=key_size,
        value_size=value_size,
        header_keys=header_keys,
    )


def test_head_dump_gives_each_batch_then_its_records_then_the_truncated_tail():
    rows = parse(HEAD_DUMP)
    assert rows == [
        IDEMPOTENT,
        dump_record(IDEMPOTENT, 1234567, 1, INT_MAX - 1, 1, 1),
        dump_record(IDEMPOTENT, 1234568, 2, INT_MAX, 1, 1),
        dump_record(IDEMPOTENT, 1234569, 3, 0, 1, 1),
        COMMIT,
        dump_record(COMMIT, 1234570, 1700000000000, -1, 4, 6),
        COMPACTED,
        dump_record(COMPACTED, 1234572, 1700000005000, 11, 2, 4, ("trace-id", "span id")),
        dump_record(COMPACTED, 1234575, 1700000005000, 14, 2, -1),
        # The tail starts where the last batch ends: 166 + 120.
        ParseError("orders.v1", 3, HEAD_PATH, 286, "truncated", rows[-1].message, 17),
    ]
    assert "17 invalid bytes" in rows[-1].message


def test_commit_marker_needs_deep_iteration_for_its_type():
    shallow = "\n".join(line for line in lines(HEAD_DUMP) if not line.startswith("| "))
    batches = of_type(parse(shallow), Batch)
    assert batches[1] == replace(COMMIT, control_type=None, coordinator_epoch=None)
    assert batches[0] == IDEMPOTENT
    assert of_type(parse(shallow), DumpRecord) == []


# --- 3.0–3.1: no deleteHorizonMs, lower-case codec names.
V3_0_DUMP = """
Dumping /data/payments_eu-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 4 count: 5 baseSequence: 0 lastSequence: 4 producerId: 9 producerEpoch: 1 partitionLeaderEpoch: 2 isTransactional: true isControl: false position: 0 CreateTime: 1630000000999 size: 150 magic: 2 compresscodec: snappy crc: 77 isvalid: true
baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: 9 producerEpoch: 1 partitionLeaderEpoch: 2 isTransactional: true isControl: true position: 150 CreateTime: 1630000001000 size: 78 magic: 2 compresscodec: none crc: 78 isvalid: true
"""


def test_3_0_batch_lines_without_delete_horizon():
    data, marker = parse(V3_0_DUMP)
    assert data == Batch(
        topic="payments_eu",
        partition=0,
        file="/data/payments_eu-0/00000000000000000000.log",
        file_position=0,
        batch_size=150,
        magic=2,
        crc_valid=True,
        base_offset=0,
        last_offset=4,
        record_count=5,
        partition_leader_epoch=2,
        compression="snappy",
        timestamp_type="CreateTime",
        is_transactional=True,
        is_control=False,
        base_timestamp=None,
        max_timestamp=1630000000999,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
        last_sequence=4,
        control_type=None,
        coordinator_epoch=None,
        attributes=0x02 | 0x10,
        delete_horizon_ms=None,
        crc=77,
    )
    # A control batch dumped without --deep-iteration: the marker type is not in the text.
    assert (marker.is_control, marker.control_type, marker.attributes) == (True, None, 0x30)
    assert (marker.file_position, marker.crc) == (150, 78)


# --- 2.8: upper-case codec, and the long record line that repeats the batch fields (print-data-log).
V2_8_DUMP = """
Dumping /data/kafka/payments-0/00000000000000000000.log
Starting offset: 0
baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 4000 producerEpoch: 2 partitionLeaderEpoch: 5 isTransactional: false isControl: false position: 0 CreateTime: 1620000000123 size: 91 magic: 2 compresscodec: NONE crc: 2233445566 isvalid: true
| offset: 0 keySize: -1 valueSize: 5 CreateTime: 1620000000100 baseOffset: 0 lastOffset: 1 baseSequence: 0 lastSequence: 1 producerEpoch: 2 partitionLeaderEpoch: 5 batchSize: 91 magic: 2 compressType: NONE position: 0 sequence: 0 headerKeys: [] payload: hello
| offset: 1 keySize: 3 valueSize: 11 CreateTime: 1620000000123 baseOffset: 0 lastOffset: 1 baseSequence: 0 lastSequence: 1 producerEpoch: 2 partitionLeaderEpoch: 5 batchSize: 91 magic: 2 compressType: NONE position: 0 sequence: 1 headerKeys: [h1] key: k 1 payload: hello world
"""


def test_2_8_upper_case_codec_and_long_record_lines():
    batch, first, second = parse(V2_8_DUMP)
    assert batch == Batch(
        topic="payments",
        partition=0,
        file="/data/kafka/payments-0/00000000000000000000.log",
        file_position=0,
        batch_size=91,
        magic=2,
        crc_valid=True,
        base_offset=0,
        last_offset=1,
        record_count=2,
        partition_leader_epoch=5,
        compression="none",
        timestamp_type="CreateTime",
        is_transactional=False,
        is_control=False,
        base_timestamp=None,
        max_timestamp=1620000000123,
        producer_id=4000,
        producer_epoch=2,
        base_sequence=0,
        last_sequence=1,
        control_type=None,
        coordinator_epoch=None,
        attributes=0,
        delete_horizon_ms=None,
        crc=2233445566,
    )
    assert first == dump_record(batch, 0, 1620000000100, 0, -1, 5, value=b"hello")
    # The key runs to " payload: ", the payload to the end of the line, both with spaces.
    assert second == dump_record(batch, 1, 1620000000123, 1, 3, 11, ("h1",), key=b"k 1", value=b"hello world")


# --- 2.2–2.7: lower-case keysize/valuesize, legacy records end "crc: C isvalid: B".
V2_2_DUMP = """
Dumping /data/kafka/legacy_topic-1/00000000000000000000.log
Starting offset: 0
offset: 2 position: 0 CreateTime: 1500000000002 size: 120 magic: 1 compresscodec: GZIP crc: 3735928559 isvalid: true
| offset: 0 CreateTime: 1500000000000 keysize: 3 valuesize: 5 crc: 11 isvalid: true
| offset: 1 CreateTime: 1500000000001 keysize: 3 valuesize: 5 crc: 12 isvalid: true
| offset: 2 CreateTime: 1500000000002 keysize: 3 valuesize: 5 crc: 13 isvalid: true
offset: 3 position: 120 NoTimestampType: -1 size: 40 magic: 0 compresscodec: NONE crc: 14 isvalid: false
| offset: 3 NoTimestampType: -1 keysize: -1 valuesize: 12 crc: 14 isvalid: false
baseOffset: 4 lastOffset: 4 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 160 CreateTime: 1500000000500 size: 72 magic: 2 compresscodec: LZ4 crc: 5 isvalid: true
| offset: 4 CreateTime: 1500000000500 keysize: 3 valuesize: 3 sequence: -1 headerKeys: [] key: abc payload: x y
"""

LEGACY_BATCH = dict(
    topic="legacy_topic",
    partition=1,
    file="/data/kafka/legacy_topic-1/00000000000000000000.log",
    partition_leader_epoch=-1,
    is_transactional=False,
    is_control=False,
    base_timestamp=None,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    last_sequence=-1,
    control_type=None,
    coordinator_epoch=None,
    delete_horizon_ms=None,
)


def test_2_2_legacy_wrapper_takes_base_offset_and_count_from_its_inner_records():
    rows = parse(V2_2_DUMP)
    batches = of_type(rows, Batch)
    assert batches[0] == Batch(
        **LEGACY_BATCH,
        file_position=0,
        batch_size=120,
        magic=1,
        crc_valid=True,
        base_offset=0,  # the line prints the wrapper's offset, the last inner one
        last_offset=2,
        record_count=3,
        compression="gzip",
        timestamp_type="CreateTime",
        max_timestamp=1500000000002,
        attributes=0x01,
        crc=3735928559,  # the wrapper's, not an inner record's (11, 12, 13)
    )
    assert batches[1] == Batch(
        **LEGACY_BATCH,
        file_position=120,
        batch_size=40,
        magic=0,
        crc_valid=False,
        base_offset=3,
        last_offset=3,
        record_count=1,
        compression="none",
        timestamp_type="NoTimestampType",
        max_timestamp=-1,
        attributes=0,
        crc=14,
    )
    assert (batches[2].compression, batches[2].attributes, batches[2].base_offset, batches[2].crc) == (
        "lz4",
        0x03,
        4,
        5,
    )
    records = of_type(rows, DumpRecord)
    assert [(r.batch_base_offset, r.record.offset, r.key_size, r.value_size) for r in records] == [
        (0, 0, 3, 5),
        (0, 1, 3, 5),
        (0, 2, 3, 5),
        (3, 3, -1, 12),
        (4, 4, 3, 3),
    ]
    assert (records[3].record.timestamp, records[3].header_keys) == (-1, ())
    assert (records[4].record.key, records[4].record.value) == (b"abc", b"x y")


# --- HEAD legacy magic-1 line; its record lines end with the stray "}".
HEAD_LEGACY_DUMP = """
Dumping /data/old.topic-7/00000000000000000006.log
Log starting offset: 6
offset: 7 position: 0 LogAppendTime: 1600000000000 size: 95 magic: 1 compresscodec: snappy crc: 1234 isvalid: true
| offset: 6 LogAppendTime: 1600000000000 keySize: -1 valueSize: 3 isValid: true crc: 42}
| offset: 7 LogAppendTime: 1600000000000 keySize: -1 valueSize: 3 isValid: true crc: 43}
"""


def test_head_legacy_magic_1_line_with_stray_brace_on_record_lines():
    batch, *records = parse(HEAD_LEGACY_DUMP)
    assert batch == Batch(
        topic="old.topic",
        partition=7,
        file="/data/old.topic-7/00000000000000000006.log",
        file_position=0,
        batch_size=95,
        magic=1,
        crc_valid=True,
        base_offset=6,
        last_offset=7,
        record_count=2,
        partition_leader_epoch=-1,
        compression="snappy",
        timestamp_type="LogAppendTime",
        is_transactional=False,
        is_control=False,
        base_timestamp=None,
        max_timestamp=1600000000000,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        last_sequence=-1,
        control_type=None,
        coordinator_epoch=None,
        attributes=0x02 | 0x08,
        delete_horizon_ms=None,
        crc=1234,  # the batch line's, not the record lines' own (42, 43)
    )
    assert records == [
        dump_record(batch, 6, 1600000000000, -1, -1, 3),
        dump_record(batch, 7, 1600000000000, -1, -1, 3),
    ]


# --- ≤ 2.1 shallow: isvalid before size, enum codec names.
V2_1_SHALLOW_DUMP = """
Dumping /kafka/old-0/00000000000000000000.log
Starting offset: 0
offset: 0 position: 0 CreateTime: 1500000000000 isvalid: true size: 73 magic: 1 compresscodec: NONE crc: 123456
baseOffset: 1 lastOffset: 3 count: 3 baseSequence: 0 lastSequence: 2 producerId: 1000 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 73 CreateTime: 1500000000300 isvalid: true size: 100 magic: 2 compresscodec: LZ4 crc: 99
"""


def test_2_1_shallow_lines_put_isvalid_before_size():
    legacy, v2 = parse(V2_1_SHALLOW_DUMP)
    assert (
        legacy.magic,
        legacy.base_offset,
        legacy.last_offset,
        legacy.batch_size,
        legacy.crc_valid,
        legacy.crc,
    ) == (1, 0, 0, 73, True, 123456)
    assert v2 == Batch(
        topic="old",
        partition=0,
        file="/kafka/old-0/00000000000000000000.log",
        file_position=73,
        batch_size=100,
        magic=2,
        crc_valid=True,
        base_offset=1,
        last_offset=3,
        record_count=3,
        partition_leader_epoch=0,
        compression="lz4",
        timestamp_type="CreateTime",
        is_transactional=False,
        is_control=False,
        base_timestamp=None,
        max_timestamp=1500000000300,
        producer_id=1000,
        producer_epoch=0,
        base_sequence=0,
        last_sequence=2,
        control_type=None,
        coordinator_epoch=None,
        attributes=0x03,
        delete_horizon_ms=None,
        crc=99,
    )


# --- ≤ 2.1 deep: record lines only; batches are the runs of lines with the same position.
V2_1_DEEP_DUMP = """
Dumping /kafka/old-0/00000000000000000000.log
Starting offset: 0
offset: 0 position: 0 CreateTime: 10 isvalid: true keysize: 25 valuesize: 363 magic: 2 compresscodec: NONE producerId: 5000 producerEpoch: 1 sequence: 7 isTransactional: true headerKeys: []
offset: 1 position: 0 CreateTime: 30 isvalid: true keysize: 25 valuesize: 364 magic: 2 compresscodec: NONE producerId: 5000 producerEpoch: 1 sequence: 8 isTransactional: true headerKeys: [a]
offset: 2 position: 0 CreateTime: 20 isvalid: true keysize: 25 valuesize: 365 magic: 2 compresscodec: NONE producerId: 5000 producerEpoch: 1 sequence: 9 isTransactional: true headerKeys: []
offset: 3 position: 400 CreateTime: 40 isvalid: true keysize: 4 valuesize: 6 magic: 2 compresscodec: NONE producerId: 5000 producerEpoch: 1 sequence: -1 isTransactional: true headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3
offset: 4 position: 478 CreateTime: 50 isvalid: false keysize: -1 valuesize: 5 magic: 2 compresscodec: GZIP producerId: -1 producerEpoch: -1 sequence: -1 isTransactional: false headerKeys: [] key: x payload: hello
Found 5 invalid bytes at the end of 00000000000000000000.log
"""


def test_2_1_deep_only_dump_synthesises_one_batch_per_position():
    rows = parse(V2_1_DEEP_DUMP)
    batches = of_type(rows, Batch)
    assert batches[0] == Batch(
        topic="old",
        partition=0,
        file="/kafka/old-0/00000000000000000000.log",
        file_position=0,
        batch_size=400,  # the distance to the next position: deep lines print no size
        magic=2,
        crc_valid=True,
        base_offset=0,
        last_offset=2,
        record_count=3,
        partition_leader_epoch=-1,
        compression="none",
        timestamp_type="CreateTime",
        is_transactional=True,
        is_control=False,
        base_timestamp=None,
        max_timestamp=30,
        producer_id=5000,
        producer_epoch=1,
        base_sequence=7,
        last_sequence=9,
        control_type=None,
        coordinator_epoch=None,
        attributes=0x10,
        delete_horizon_ms=None,
        crc=None,  # ≤ 2.1 deep lines print no crc
    )
    assert batches[1] == replace(
        batches[0],
        file_position=400,
        batch_size=78,
        base_offset=3,
        last_offset=3,
        record_count=1,
        max_timestamp=40,
        is_control=True,
        base_sequence=-1,
        last_sequence=-1,
        control_type="COMMIT",
        coordinator_epoch=3,
        attributes=0x30,
    )
    assert batches[1].crc is None
    assert (
        batches[2].batch_size,
        batches[2].crc_valid,
        batches[2].compression,
        batches[2].attributes,
        batches[2].crc,
    ) == (-1, False, "gzip", 0x01, None)
    records = of_type(rows, DumpRecord)
    assert [(r.batch_base_offset, r.record.offset, r.header_keys) for r in records] == [
        (0, 0, ()),
        (0, 1, ("a",)),
        (0, 2, ()),
        (3, 3, ()),
        (4, 4, ()),
    ]
    assert (records[4].record.key, records[4].record.value) == (b"x", b"hello")
    # The last batch's size is unknown, so is where the invalid tail starts.
    assert rows[-1] == ParseError("old", 0, batches[2].file, -1, "truncated", rows[-1].message, 5)
    assert [type(row).__name__ for row in rows] == [
        "Batch", "DumpRecord", "DumpRecord", "DumpRecord", "Batch", "DumpRecord", "Batch", "DumpRecord", "ParseError"
    ]  # fmt: skip


# --- Control records beyond the transaction markers.
CONTROL_DUMP = """
Dumping /kraft/__cluster_metadata-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 100 magic: 2 compresscodec: none crc: 1 isvalid: true
| offset: 0 CreateTime: 1700000000000 keySize: 4 valueSize: 20 sequence: -1 headerKeys: [] controlType: LEADER_CHANGE(2)
baseOffset: 1 lastOffset: 1 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 100 CreateTime: 1700000000001 size: 90 magic: 2 compresscodec: none crc: 2 isvalid: true
| offset: 1 CreateTime: 1700000000001 keySize: 4 valueSize: 14 sequence: -1 headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":1700000000001}
"""


def test_control_type_from_controltype_and_kraft_json_record_lines():
    leader_change, _, snapshot_header, _ = parse(CONTROL_DUMP)
    assert (leader_change.control_type, leader_change.coordinator_epoch, leader_change.attributes) == (
        "LEADER_CHANGE",
        None,
        0x20,
    )
    assert snapshot_header.control_type == "SNAPSHOT_HEADER"
    assert (leader_change.crc, snapshot_header.crc) == (1, 2)


# --- Several files in one dump; only .log files hold batches.
MULTI_FILE_DUMP = """
Dumping /k/orders-0/00000000000000000000.index
offset: 0 position: 0
offset: 100 position: 4096
Dumping /k/orders-0/00000000000000000000.timeindex
timestamp: 5 offset: 0
Dumping /k/orders-0/00000000000000000000.snapshot
producerId: 1 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 5 firstSequence: 0 lastSequence: 0 lastOffset: 0 offsetDelta: 0 timestamp: 5
Dumping /k/orders-0/00000000000000000000.txnindex
version: 0 producerId: 1 firstOffset: 0 lastOffset: 5 lastStableOffset: 0
Dumping /k/__consumer_offsets-12.0123456789abcdef0123456789abcdef-delete/00000000000000000000.log
Log starting offset: 0
offset: 0 position: 0 CreateTime: 1 size: 80 magic: 1 compresscodec: none crc: 1 isvalid: true
Dumping 00000000000000000042.log
Log starting offset: 42
offset: 42 position: 0 CreateTime: 2 size: 80 magic: 1 compresscodec: none crc: 1 isvalid: true
"""


def test_several_files_and_non_log_dumps_are_skipped():
    rows = parse(MULTI_FILE_DUMP)
    assert [(r.topic, r.partition, r.file, r.last_offset) for r in rows] == [
        ("__consumer_offsets", 12, "/k/__consumer_offsets-12.0123456789abcdef0123456789abcdef-delete/"
         "00000000000000000000.log", 0),
        ("", -1, "00000000000000000042.log", 42),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("folder", "topic", "partition"),
    [
        ("orders-0", "orders", 0),
        ("my.topic_v2-17", "my.topic_v2", 17),
        ("a-1-2", "a-1", 2),  # the partition is after the last dash
        ("t-3.0123456789abcdef0123456789abcdef-delete", "t", 3),
        ("t-3.0123456789ABCDEF0123456789abcdef-future", "t", 3),
        ("t-3.0123456789abcdef0123456789abcdef-stray", "t", 3),
        ("t-3-delete", "", -1),  # a -delete folder always has the uid
        ("no_partition", "", -1),
        ("t-x", "", -1),
    ],
)
def test_topic_and_partition_from_the_parent_folder(folder, topic, partition):
    text = f"""
Dumping /logs/{folder}/00000000000000000000.log
offset: 0 position: 0 CreateTime: 1 size: 80 magic: 1 compresscodec: none crc: 1 isvalid: true
"""
    (batch,) = parse(text)
    assert (batch.topic, batch.partition) == (topic, partition)


@pytest.mark.parametrize(
    ("printed", "compression"),
    [("none", "none"), ("NONE", "none"), ("GZIP", "gzip"), ("SNAPPY", "snappy"), ("LZ4", "lz4"), ("ZSTD", "zstd"),
     ("zstd", "zstd")],
)  # fmt: skip
def test_codec_names_of_every_version(printed, compression):
    line = f"offset: 0 position: 0 CreateTime: 1 size: 80 magic: 1 compresscodec: {printed} crc: 1 isvalid: true"
    (batch,) = parse(line)
    assert (batch.compression, batch.attributes) == (compression, CODEC_IDS[compression])


# --- Bad lines become dump_line rows; the lines around them still parse.
BATCH_LINE = (
    "baseOffset: 10 lastOffset: 10 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 0 CreateTime: 5 size: 70 magic: 2 compresscodec: none crc: 1 isvalid: true"
)
RECORD_LINE = "| offset: 10 CreateTime: 5 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []"


@pytest.mark.parametrize(
    "bad",
    [
        "this is not a dump line",
        "Ünïcödé garbage ✓",
        "| offset: ten CreateTime: 5 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []",
        "| offset: 11 CreateTime: 5 keySize: -1 valueSize: 1 sequence: -1 headerKeys: k1,k2",
        "| offset: 11 CreateTime: 5 keySize: -1 sequence: -1 headerKeys: []",
        "| offset: 11 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []",
        "| offset: 11 CreateTime: 5 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT "
        "coordinatorEpoch: 1",
        "| offset: 11 CreateTime: 5 keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] trailing words",
    ],
)
def test_bad_record_line_is_an_error_row_and_parsing_continues(bad):
    dump = ["Dumping /d/t-0/00000000000000000010.log", BATCH_LINE, bad, RECORD_LINE]
    rows = list(parse_dump(dump, source="d.txt"))
    error = rows[0]
    assert error == ParseError("t", 0, "d.txt", 3, DUMP_LINE, error.message, len(bad.encode("utf-8")))
    assert "/d/t-0/00000000000000000010.log" in error.message
    batch, record = rows[1:]
    assert (batch.base_offset, batch.record_count, record.record.offset) == (10, 1, 10)


@pytest.mark.parametrize(
    ("field", "bad_value"),
    [
        ("count: 1", "count: many"),
        ("compresscodec: none", "compresscodec: brotli"),
        ("isvalid: true", "isvalid: yes"),
        ("deleteHorizonMs: OptionalLong.empty", "deleteHorizonMs: 5"),
        ("CreateTime: 5", "SomeTime: 5"),
        ("producerId: -1 ", ""),
    ],
)
def test_bad_batch_line_is_an_error_row_and_its_records_are_not_given_to_the_batch_before(field, bad_value):
    first = BATCH_LINE.replace("baseOffset: 10 lastOffset: 10", "baseOffset: 9 lastOffset: 9")
    bad = BATCH_LINE.replace(field, bad_value).replace("position: 0", "position: 70")
    assert bad != BATCH_LINE
    rows = list(parse_dump([first, bad, RECORD_LINE, BATCH_LINE.replace("position: 0", "position: 140")]))
    assert [type(r).__name__ for r in rows] == ["Batch", "ParseError", "ParseError", "Batch"]
    assert [(r.file_position, r.error_kind, r.file) for r in rows[1:3]] == [
        (2, DUMP_LINE, "<dump>"),
        (3, DUMP_LINE, "<dump>"),
    ]
    assert "record line outside a batch" in rows[2].message
    assert (rows[0].base_offset, rows[0].record_count, rows[3].file_position) == (9, 1, 140)


def test_record_line_before_any_batch_is_an_error_row():
    (error,) = parse_dump([RECORD_LINE])
    assert (error.error_kind, error.file_position, error.bytes_affected) == (DUMP_LINE, 1, len(RECORD_LINE))


# --- --print-data-log details.
def test_payload_with_newlines_continues_until_its_value_size():
    rows = list(
        parse_dump(
            [
                BATCH_LINE.replace("count: 1", "count: 2").replace("lastOffset: 10", "lastOffset: 11"),
                "| offset: 10 CreateTime: 5 keySize: -1 valueSize: 12 sequence: -1 headerKeys: [] payload: {",
                '  "a": 1',
                "}",
                "| offset: 11 CreateTime: 5 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] payload: ok",
                "stray text after a complete payload",
            ]
        )
    )
    batch, first, second, error = rows[1], rows[2], rows[3], rows[0]
    assert first.record.value == b'{\n  "a": 1\n}' and len(first.record.value) == first.value_size
    assert second.record.value == b"ok"
    assert (batch.record_count, error.error_kind, error.file_position) == (2, DUMP_LINE, 6)


def test_a_short_payload_from_a_non_string_decoder_does_not_swallow_the_next_record():
    # --value-decoder-class ...IntegerDecoder prints 4 value bytes as "7": shorter than valueSize.
    rows = list(
        parse_dump(
            [
                BATCH_LINE.replace("count: 1", "count: 2").replace("lastOffset: 10", "lastOffset: 11"),
                "| offset: 10 CreateTime: 5 keySize: -1 valueSize: 4 sequence: -1 headerKeys: [] payload: 7",
                "| offset: 11 CreateTime: 5 keySize: -1 valueSize: 4 sequence: -1 headerKeys: [] payload: 8",
            ]
        )
    )
    assert [(r.record.offset, r.record.value) for r in of_type(rows, DumpRecord)] == [(10, b"7"), (11, b"8")]


def test_the_first_control_record_names_the_batch():
    control = BATCH_LINE.replace("isTransactional: false isControl: false", "isTransactional: true isControl: true")
    marker = "| offset: 10 CreateTime: 5 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: {}"
    abort, commit = marker.format("ABORT coordinatorEpoch: 4"), marker.format("COMMIT coordinatorEpoch: 5")
    rows = list(parse_dump([control, abort, commit]))
    assert (rows[0].control_type, rows[0].coordinator_epoch, len(rows)) == ("ABORT", 4, 3)


def test_skip_record_metadata_lines_get_offsets_when_the_batch_is_not_compacted():
    whole = (
        "baseOffset: 20 lastOffset: 22 count: 3 baseSequence: 2147483646 lastSequence: 1 producerId: 3 "
        "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 LogAppendTime: 77 size: 100 magic: 2 compresscodec: none "
        "crc: 1 isvalid: true"
    )
    compacted = (
        whole.replace("baseOffset: 20 lastOffset: 22 count: 3", "baseOffset: 30 lastOffset: 39 count: 1")
        .replace("LogAppendTime", "CreateTime")
        .replace("position: 0", "position: 100")
    )
    dump = [whole, "| key: k 1 payload: v 1", " payload: v2", "| payload: v3", compacted, "| key: k"]
    records = of_type(list(parse_dump(dump)), DumpRecord)
    seen = [(r.record.offset, r.record.sequence, r.record.timestamp, r.record.key, r.record.value) for r in records]
    assert seen == [
        (20, INT_MAX - 1, 77, b"k 1", b"v 1"),
        (21, INT_MAX, 77, None, b"v2"),
        (22, 0, 77, None, b"v3"),
        (-1, -1, -1, b"k", None),
    ]
    assert {(r.key_size, r.value_size, r.header_keys) for r in records} == {(None, None, None)}


def test_parse_is_lazy_over_an_endless_dump():
    def endless():
        yield "Dumping /d/t-0/00000000000000000000.log"
        for n in itertools.count():
            yield BATCH_LINE.replace("baseOffset: 10 lastOffset: 10", f"baseOffset: {n} lastOffset: {n}")

    first_three = list(itertools.islice(parse_dump(endless()), 3))
    assert [b.base_offset for b in first_three] == [0, 1, 2]


def test_line_terminators_are_ignored():
    with_newlines = [line + "\r\n" for line in lines(HEAD_DUMP)]
    assert list(parse_dump(with_newlines, source="dump.txt")) == parse(HEAD_DUMP)


# --- format_dump: exact HEAD text.
HEAD_FORMATTED = """
Dumping /var/kafka-logs/orders.v1-3/00000000000001234567.log
Log starting offset: 1234567
baseOffset: 1234567 lastOffset: 1234569 count: 3 baseSequence: 2147483646 lastSequence: 0 producerId: 23423 producerEpoch: 145 partitionLeaderEpoch: 7 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 3 size: 88 magic: 2 compresscodec: none crc: 256920453 isvalid: true
| offset: 1234567 CreateTime: 1 keySize: 1 valueSize: 1 sequence: 2147483646 headerKeys: []
| offset: 1234568 CreateTime: 2 keySize: 1 valueSize: 1 sequence: 2147483647 headerKeys: []
| offset: 1234569 CreateTime: 3 keySize: 1 valueSize: 1 sequence: 0 headerKeys: []
baseOffset: 1234570 lastOffset: 1234570 count: 1 baseSequence: -1 lastSequence: -1 producerId: 23423 producerEpoch: 146 partitionLeaderEpoch: 7 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 88 CreateTime: 1700000000000 size: 78 magic: 2 compresscodec: none crc: 3614444544 isvalid: true
| offset: 1234570 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 15
baseOffset: 1234571 lastOffset: 1234575 count: 2 baseSequence: 10 lastSequence: 14 producerId: 23424 producerEpoch: 0 partitionLeaderEpoch: 8 isTransactional: false isControl: false deleteHorizonMs: OptionalLong[1700086400000] position: 166 LogAppendTime: 1700000005000 size: 120 magic: 2 compresscodec: zstd crc: 1 isvalid: false
| offset: 1234572 LogAppendTime: 1700000005000 keySize: 2 valueSize: 4 sequence: 11 headerKeys: [trace-id,span id]
| offset: 1234575 LogAppendTime: 1700000005000 keySize: 2 valueSize: -1 sequence: 14 headerKeys: []
offset: 1234576 position: 286 NoTimestampType: -1 size: 40 magic: 0 compresscodec: gzip crc: 4023233417 isvalid: true
| offset: 1234576 NoTimestampType: -1 keySize: -1 valueSize: 2 isValid: true crc: 4023233417}
"""

GOLDEN_ROWS = [
    (
        replace(IDEMPOTENT, base_timestamp=1),
        [
            Record(1234567 + i, i + 1, increment_sequence(INT_MAX - 1, i), key, b"v")
            for i, key in enumerate((b"a", b"b", b"c"))
        ],
    ),
    (
        replace(COMMIT, base_timestamp=1700000000000),
        [Record(1234570, 1700000000000, -1, CONTROL_KEY.pack(0, 1), END_TXN_MARKER_VALUE.pack(0, 15))],
    ),
    (
        COMPACTED,
        [
            Record(
                1234572, 1700000005000, 11, b"k1", b"v123", (Header("trace-id", b"x"), Header("span id", None))
            ),
            Record(1234575, 1700000005000, 14, b"k2", None),
        ],
    ),
    (
        replace(
            IDEMPOTENT,
            file_position=286,
            batch_size=40,
            magic=0,
            base_offset=1234576,
            last_offset=1234576,
            record_count=1,
            partition_leader_epoch=-1,
            compression="gzip",
            timestamp_type="NoTimestampType",
            max_timestamp=-1,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            last_sequence=-1,
            attributes=0x01,
            crc=4023233417,
        ),
        [Record(1234576, -1, -1, None, b"v0")],
    ),
]


def test_format_dump_prints_head_lines():
    assert list(format_dump(HEAD_PATH, GOLDEN_ROWS, log_start_offset=1234567)) == lines(HEAD_FORMATTED)
    shallow = list(format_dump(HEAD_PATH, GOLDEN_ROWS, deep=False, log_start_offset=1234567))
    assert shallow == [line for line in lines(HEAD_FORMATTED) if not line.startswith("| ")]
    # The v2 batch lines are the ones of the HEAD sample, stored crc included.
    assert [line for line in shallow if line.startswith("baseOffset: ")] == [
        line for line in lines(HEAD_DUMP) if line.startswith("baseOffset: ")
    ]


def test_format_dump_prints_crc_0_for_a_row_without_a_stored_crc():
    rows = [(replace(batch, crc=None), records) for batch, records in GOLDEN_ROWS]
    formatted = list(format_dump(HEAD_PATH, rows, log_start_offset=1234567))
    assert formatted == [re.sub(r"crc: \d+", "crc: 0", line) for line in lines(HEAD_FORMATTED)]
    assert [batch.crc for batch in of_type(list(parse_dump(formatted)), Batch)] == [0, 0, 0, 0]


# --- Round trip: format_dump then parse_dump gives the rows back, less what the text cannot carry.
TOPICS = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=12)
HEADER_KEYS = st.text(st.sampled_from("abc -_.:"), min_size=1, max_size=6)
PAYLOADS = st.none() | st.binary(max_size=8)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
CRCS = st.integers(0, 2**32 - 1)  # the stored uint32, printed as an unsigned number


@st.composite
def v2_batch(draw, position: int, base_offset: int, context: dict):
    transactional = draw(st.booleans())
    control = draw(st.booleans())
    compression = draw(st.sampled_from(CODEC_NAMES))
    timestamp_type = draw(st.sampled_from(("CreateTime", "LogAppendTime")))
    horizon = draw(st.none() | st.integers(0, 2**63 - 1))
    base_sequence = -1 if control else draw(st.just(-1) | st.integers(0, INT_MAX))
    if control:
        control_type = draw(st.sampled_from(sorted(CONTROL_TYPE_IDS) + ["UNKNOWN"]))
        coordinator_epoch = draw(INT32) if control_type in ("COMMIT", "ABORT") else None
        deltas = [0] if draw(st.booleans()) else []  # a cleaned control batch can be empty
        last_delta = 0
        if not deltas:  # then no record names the type, in the binary reader as in the dump
            control_type = coordinator_epoch = None
    else:
        control_type = coordinator_epoch = None
        deltas = sorted(draw(st.sets(st.integers(0, 6), max_size=4)))
        last_delta = max(deltas, default=draw(st.integers(0, 3)))
    records = [
        Record(
            offset=base_offset + delta,
            timestamp=draw(INT64),
            sequence=-1 if base_sequence == -1 else increment_sequence(base_sequence, delta),
            key=CONTROL_KEY.pack(0, CONTROL_TYPE_IDS.get(control_type, 9)) if control else draw(PAYLOADS),
            value=END_TXN_MARKER_VALUE.pack(0, coordinator_epoch) if coordinator_epoch is not None else draw(PAYLOADS),
            headers=() if control else tuple(Header(key, None) for key in draw(st.lists(HEADER_KEYS, max_size=3))),
        )
        for delta in deltas
    ]
    batch = Batch(
        **context,
        file_position=position,
        batch_size=draw(st.integers(61, 10_000)),
        magic=2,
        crc_valid=draw(st.booleans()),
        base_offset=base_offset,
        last_offset=base_offset + last_delta,
        record_count=len(records),
        partition_leader_epoch=draw(INT32),
        compression=compression,
        timestamp_type=timestamp_type,
        is_transactional=transactional or control,
        is_control=control,
        base_timestamp=draw(st.none() | INT64),
        max_timestamp=draw(INT64),
        producer_id=draw(INT64),
        producer_epoch=draw(st.integers(-1, 2**15 - 1)),
        base_sequence=base_sequence,
        last_sequence=last_sequence(base_sequence, last_delta),
        control_type=control_type,
        coordinator_epoch=coordinator_epoch,
        attributes=CODEC_IDS[compression]
        | (0x08 if timestamp_type == "LogAppendTime" else 0)
        | (0x10 if transactional or control else 0)
        | (0x20 if control else 0)
        | (0x40 if horizon is not None else 0),
        delete_horizon_ms=horizon,
        crc=draw(CRCS),
    )
    return batch, records


@st.composite
def legacy_batch(draw, position: int, base_offset: int, context: dict):
    magic = draw(st.sampled_from((0, 1)))
    compression = draw(st.sampled_from(CODEC_NAMES[:4]))
    timestamp_types = ("NoTimestampType",) if magic == 0 else ("CreateTime", "LogAppendTime")
    timestamp_type = draw(st.sampled_from(timestamp_types))
    count = draw(st.integers(1, 3))
    records = [
        Record(base_offset + i, -1 if magic == 0 else draw(INT64), -1, draw(PAYLOADS), draw(PAYLOADS))
        for i in range(count)
    ]
    batch = Batch(
        **context,
        file_position=position,
        batch_size=draw(st.integers(26, 10_000)),
        magic=magic,
        crc_valid=draw(st.booleans()),
        base_offset=base_offset,
        last_offset=base_offset + count - 1,
        record_count=count,
        partition_leader_epoch=-1,
        compression=compression,
        timestamp_type=timestamp_type,
        is_transactional=False,
        is_control=False,
        base_timestamp=None,
        max_timestamp=-1 if magic == 0 else draw(INT64),
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        last_sequence=-1,
        control_type=None,
        coordinator_epoch=None,
        attributes=CODEC_IDS[compression] | (0x08 if timestamp_type == "LogAppendTime" else 0),
        crc=draw(CRCS),
    )
    return batch, records


@st.composite
def segment(draw):
    topic, partition = draw(TOPICS), draw(st.integers(0, 10_000))
    start = draw(st.integers(0, 2**40))
    path = f"/var/kafka-logs/{topic}-{partition}/{start:020d}.log"
    context = dict(topic=topic, partition=partition, file=path)
    rows, position, offset = [], 0, start
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from((v2_batch, legacy_batch)))
        batch, records = draw(kind(position, offset, context))
        rows.append((batch, records))
        position, offset = position + batch.batch_size, batch.last_offset + 1 + draw(st.integers(0, 3))
    return path, start, rows


def printed_crcs(text: list[str]) -> list[int]:
    """The crc of each batch line (v2 ``baseOffset: …`` or legacy ``offset: …``), in order."""
    batch_lines = [line for line in text if line.startswith(("baseOffset: ", "offset: "))]
    return [int(re.search(r" crc: (\d+) isvalid: ", line).group(1)) for line in batch_lines]


@settings(max_examples=200, deadline=None)
@given(segment())
def test_round_trip_deep(generated):
    path, start, rows = generated
    text = list(format_dump(path, rows, log_start_offset=start))
    assert printed_crcs(text) == [batch.crc for batch, _ in rows]
    parsed = list(parse_dump(text))
    assert of_type(parsed, ParseError) == []
    assert of_type(parsed, Batch) == [replace(batch, base_timestamp=None) for batch, _ in rows]
    assert of_type(parsed, DumpRecord) == [
        DumpRecord(
            topic=batch.topic,
            partition=batch.partition,
            file=path,
            batch_base_offset=batch.base_offset,
            record=Record(record.offset, record.timestamp, record.sequence, None, None),
            key_size=-1 if record.key is None else len(record.key),
            value_size=-1 if record.value is None else len(record.value),
            header_keys=tuple(header.key for header in record.headers),
        )
        for batch, records in rows
        for record in records
    ]


@settings(max_examples=100, deadline=None)
@given(segment())
def test_round_trip_shallow(generated):
    path, start, rows = generated
    text = list(format_dump(path, rows, deep=False, log_start_offset=start))
    assert printed_crcs(text) == [batch.crc for batch, _ in rows]
    parsed = list(parse_dump(text))
    # Without record lines: no marker type, and a legacy entry is its wrapper offset alone.
    assert parsed == [
        replace(
            batch,
            base_timestamp=None,
            control_type=None,
            coordinator_epoch=None,
            base_offset=batch.base_offset if batch.magic == 2 else batch.last_offset,
            record_count=batch.record_count if batch.magic == 2 else 1,
        )
        for batch, _ in rows
    ]


# --- dump_segment: DumpLogSegments lines of a real segment, from the binary reader.
SEGMENT_NAME = "00000000000000000005.log"


def write_segment(tmp_path, tail: bytes = b"") -> tuple[str, bytes, bytes]:
    """A transactional batch of 2 records (offsets 5, 6) then its COMMIT marker (offset 7)."""
    folder = tmp_path / "t-0"
    folder.mkdir()
    path = folder / SEGMENT_NAME
    data = build_batch(
        5,
        [RecordSpec(b"k", b"v1", 100, (("h", b"x"),)), RecordSpec(None, b"v22", 105)],
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
        is_transactional=True,
        partition_leader_epoch=3,
    )
    marker = build_end_txn_marker(
        7,
        "COMMIT",
        producer_id=7,
        producer_epoch=1,
        coordinator_epoch=9,
        timestamp=200,
        partition_leader_epoch=3,
    )
    write_file(path, [data, marker, tail])
    return str(path), data, marker


def binary_batches(path: str) -> list[Batch]:
    read = read_segment(path, topic="t", partition=0, base_offset=5, records=True)
    return [batch for rb in read.batches.to_batches() for batch in batches_from_arrow(rb)]


def stored_crc(entry: bytes) -> int:
    return int.from_bytes(entry[17:21], "big")  # a v2 batch's crc field (rules §1.1)


def test_dump_segment_parses_back_to_the_binary_readers_rows(tmp_path):
    path, data, marker = write_segment(tmp_path)
    dumped = list(dump_segment(path))
    assert dumped[:2] == [f"Dumping {path}", "Log starting offset: 5"]
    rows = list(parse_dump(dumped))
    assert of_type(rows, ParseError) == []

    binary = binary_batches(path)
    assert of_type(rows, Batch) == [replace(batch, base_timestamp=None) for batch in binary]
    # The rows compared carry the stored crc and the marker's type, not defaults.
    assert [(b.crc, b.control_type, b.coordinator_epoch) for b in binary] == [
        (stored_crc(data), None, None),
        (stored_crc(marker), "COMMIT", 9),
    ]
    assert printed_crcs(dumped) == [stored_crc(data), stored_crc(marker)]

    read = read_segment(path, topic="t", partition=0, base_offset=5, records=True)
    expected_records = [
        (row["batch_base_offset"], row["offset"], row["timestamp"], row["sequence"])
        for row in read.records.to_pylist()
    ]
    assert expected_records == [(5, 5, 100, 0), (5, 6, 105, 1), (7, 7, 200, -1)]
    assert [
        (r.batch_base_offset, r.record.offset, r.record.timestamp, r.record.sequence)
        for r in of_type(rows, DumpRecord)
    ] == expected_records


def test_dump_segment_ends_a_torn_tail_with_the_invalid_bytes_line(tmp_path):
    partial = build_batch(8, [RecordSpec(b"k", b"v")])[:10]
    path, _, _ = write_segment(tmp_path, tail=partial)
    dumped = list(dump_segment(path))
    assert dumped[-1] == f"Found 10 invalid bytes at the end of {SEGMENT_NAME}"
    assert sum(line.startswith("Found ") for line in dumped) == 1

    rows = list(parse_dump(dumped))
    error = rows[-1]
    # The tail starts after the marker: 85-byte data batch + 78-byte marker.
    assert error == ParseError("t", 0, path, 163, "truncated", error.message, 10)
    assert of_type(rows, ParseError) == [error]
    # The valid batches before the tail are read as without it, and the binary reader agrees on the tail.
    assert of_type(rows, Batch) == [replace(batch, base_timestamp=None) for batch in binary_batches(path)]
    (binary_error,) = read_segment(path, topic="t", partition=0, base_offset=5).errors
    assert (binary_error.error_kind, binary_error.file_position, binary_error.bytes_affected) == (
        error.error_kind,
        error.file_position,
        error.bytes_affected,
    )


# --- The text of each Kafka release (checked against the real tools by tests/test_dumplog_oracle.py).
LEGACY_LINE = "| offset: 1234576 NoTimestampType: -1 keySize: -1 valueSize: 2 isValid: true crc: 4023233417"


def test_kafka_4_3_prints_legacy_record_lines_without_the_stray_brace():
    scala = list(format_dump(HEAD_PATH, GOLDEN_ROWS, log_start_offset=1234567, kafka_version="3.9.2"))
    java = list(format_dump(HEAD_PATH, GOLDEN_ROWS, log_start_offset=1234567, kafka_version="4.4.0"))
    assert scala == lines(HEAD_FORMATTED) and scala[-1] == LEGACY_LINE + "}"
    assert java == scala[:-1] + [LEGACY_LINE]
    with pytest.raises(ValueError, match="3.2 and later"):
        list(format_dump(HEAD_PATH, GOLDEN_ROWS, log_start_offset=1234567, kafka_version="3.1"))


def test_leader_change_is_json_from_4_3_and_both_texts_parse_to_its_type():
    value = b"\x00\x00" + (7).to_bytes(4, "big") + b"\x02" + (7).to_bytes(4, "big") + b"\x00" + b"\x02" + (
        7).to_bytes(4, "big") + b"\x00" + b"\x00"
    batch = replace(COMMIT, is_transactional=False, control_type="LEADER_CHANGE", coordinator_epoch=None)
    rows = [(batch, [Record(1234570, 1700000000000, -1, CONTROL_KEY.pack(0, 2), value)])]
    scala = list(format_dump(HEAD_PATH, rows, log_start_offset=0, kafka_version="3.9"))
    java = list(format_dump(HEAD_PATH, rows, log_start_offset=0, kafka_version="4.3"))
    assert scala[-1].endswith(" headerKeys: [] controlType: LEADER_CHANGE(2)")
    assert java[-1].endswith(' headerKeys: [] LeaderChange: {"version":0,"leaderId":7,'
                             '"voters":[{"voterId":7}],"grantingVoters":[{"voterId":7}]}')
    for text in (scala, java):
        (parsed,) = of_type(list(parse_dump(text)), Batch)
        assert (parsed.control_type, parsed.coordinator_epoch) == ("LEADER_CHANGE", None)


def test_print_data_log_and_skip_record_metadata():
    batch = replace(IDEMPOTENT, record_count=3)
    records = [
        Record(1234567, 1, 2147483646, b"k 1", b"v: 1\nsecond line"),
        Record(1234568, 2, 2147483647, None, b"\xed\xa0\x80"),  # an encoded surrogate: one U+FFFD, as the JDK
        Record(1234569, 3, 0, b"k3", None),
    ]
    rows = [(batch, records)]
    data = list(format_dump(HEAD_PATH, rows, log_start_offset=0, deep=False, print_data=True))
    assert data[3:] == [
        "| offset: 1234567 CreateTime: 1 keySize: 3 valueSize: 16 sequence: 2147483646 headerKeys: [] "
        "key: k 1 payload: v: 1\nsecond line",
        "| offset: 1234568 CreateTime: 2 keySize: -1 valueSize: 3 sequence: 2147483647 headerKeys: []"
        " payload: \ufffd",
        "| offset: 1234569 CreateTime: 3 keySize: 2 valueSize: -1 sequence: 0 headerKeys: [] key: k3",
    ]
    only = list(format_dump(HEAD_PATH, rows, log_start_offset=0, print_data=True, skip_record_metadata=True))
    assert only[3:] == ["| key: k 1 payload: v: 1\nsecond line", " payload: \ufffd", "| key: k3"]
    java = list(format_dump(HEAD_PATH, rows, log_start_offset=0, print_data=True, skip_record_metadata=True,
                            kafka_version="4.3.1"))
    assert java[4] == "| payload: \ufffd"
    # The parser reads the payloads back, the one printed over two lines included.
    parsed = of_type(list(parse_dump("\n".join(data).split("\n"))), DumpRecord)
    assert [(r.record.key, r.record.value) for r in parsed] == [
        (b"k 1", b"v: 1\nsecond line"), (None, "\ufffd".encode()), (b"k3", None)]


@pytest.mark.parametrize("version, no_batch_end", [("3.9.2", " "), ("4.4.0", ""), ("3.4", " ")])
def test_producer_snapshot_lines(tmp_path, version, no_batch_end):
    from analytics.kafka.dumplog import dump_file
    from analytics.kafka.sidecars import write_snapshot

    path = tmp_path / "t-0" / "00000000000000000010.snapshot"
    path.parent.mkdir()
    path.write_bytes(write_snapshot([(5, 1, 1, 9, 3, 100, -1, -1), (6, 0, -1, -1, 0, 200, 3, 8)]))
    empty, some = ("None", "Some(8)") if version == "3.4" else ("OptionalLong.empty", "OptionalLong[8]")
    assert list(dump_file(str(path), kafka_version=version)) == [
        f"Dumping {path}",
        f"producerId: 5 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: {empty}"
        " lastTimestamp: 100"
        " firstSequence: 2147483646 lastSequence: 1 lastOffset: 9 offsetDelta: 3 timestamp: 100",
        f"producerId: 6 producerEpoch: 0 coordinatorEpoch: 3 currentTxnFirstOffset: {some} lastTimestamp: 200"
        + no_batch_end,
    ]
    warnings = []
    path.write_bytes(path.read_bytes()[:-1])  # refused by the broker: nothing but the Dumping line
    assert list(dump_file(str(path), warn=warnings.append)) == [f"Dumping {path}"] and len(warnings) == 1


def test_txn_index_lines_stop_at_a_partial_entry(tmp_path):
    from analytics.kafka.dumplog import dump_file
    from analytics.kafka.sidecars import write_txnindex

    path = tmp_path / "t-0" / "00000000000000000000.txnindex"
    path.parent.mkdir()
    path.write_bytes(write_txnindex([(7, 100, 105, 100), (8, 106, 110, 106)]) + b"\x00" * 10)
    assert list(dump_file(str(path).replace("/t-0/", "/t-0//"))) == [  # printed as java.io.File prints it
        f"Dumping {path}",
        "version: 0 producerId: 7 firstOffset: 100 lastOffset: 105 lastStableOffset: 100",
        "version: 0 producerId: 8 firstOffset: 106 lastOffset: 110 lastStableOffset: 106",
    ]


def test_dump_segment_prints_the_records_of_a_batch_failing_its_crc(tmp_path):
    path, data, marker = write_segment(tmp_path)
    corrupt = bytearray(data)
    corrupt[-2] ^= 0x01  # a bit of the last record's value: the records still decode
    write_file(path, [bytes(corrupt), marker])
    dumped = list(dump_segment(path))
    assert " isvalid: false" in dumped[2] and " isvalid: true" in dumped[5]
    assert [line.split(" CreateTime")[0] for line in dumped[3:5]] == ["| offset: 5", "| offset: 6"]


def test_dump_segment_prints_each_inner_legacy_message_with_its_own_crc(tmp_path):
    from analytics.kafka.writer import build_legacy_wrapper
    from analytics.kafka.writer import RecordSpec as Spec

    folder = tmp_path / "t-0"
    folder.mkdir()
    path = folder / "00000000000000000000.log"
    wrapper = build_legacy_wrapper([0, 1], [Spec(b"a", b"x", 10), Spec(b"b", b"y", 11)], compression="gzip")
    write_file(path, [wrapper])
    dumped = list(dump_segment(str(path), kafka_version="4.4.0"))
    wrapper_crc = int.from_bytes(wrapper[12:16], "big")
    inner = [int(re.search(r" crc: (\d+)$", line).group(1)) for line in dumped[3:]]
    assert len(inner) == 2 and wrapper_crc not in inner and len(set(inner)) == 2
    assert all(" isValid: true crc: " in line for line in dumped[3:])


def test_cli_dump_log_takes_kafkas_flags(tmp_path, capsys):
    from analytics.cli import main

    path, _, _ = write_segment(tmp_path)
    flags = ["--print-data-log", "--kafka-version", "4.4.0"]
    assert main(["dump-log", "--files", f"{path},{path}", *flags]) == 0
    printed, err = capsys.readouterr()
    assert_own_lines(err)
    out = printed.splitlines()
    assert out.count(f"Dumping {path}") == 2 and out[3].endswith("headerKeys: [h] key: k payload: v1")
    assert main(["dump-log", path, "--no-deep-iteration"]) == 0
    printed, err = capsys.readouterr()
    assert_own_lines(err)
    assert not any(line.startswith("| ") for line in printed.splitlines())
    assert main(["dump-log", path, "--kafka-version", "2.8"]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "3.2 and later" in err
    assert main(["dump-log", str(tmp_path / "t-0" / "00000000000000000005.index")]) == 2
    assert_own_lines(capsys.readouterr().err)
    assert main(["dump-log", str(tmp_path / "missing.log")]) == 2
    assert_own_lines(capsys.readouterr().err)


def test_keys_and_payloads_printed_over_several_lines_are_read_back():
    # As the real tool prints them (tests/test_dumplog_oracle.py reads 200,711 corpus records back).
    two = BATCH_LINE.replace("count: 1", "count: 2").replace("lastOffset: 10", "lastOffset: 11")
    record = "| offset: {} CreateTime: 5 keySize: {} valueSize: {} sequence: -1 headerKeys: [] "
    rows = list(parse_dump([
        two,
        record.format(10, 3, 2) + "key: k",  # a key "k\\n|": its payload starts the next line
        "| payload: v\r",  # a line that starts as a record line does; a payload ending with "\\r"
        record.format(11, -1, 4) + "payload: \ufffd",  # 1 malformed byte printed as 3: the size tells nothing
        "",  # the payload's newline, then its last byte
        "x",
    ]))
    assert of_type(rows, ParseError) == []
    assert [(r.record.key, r.record.value) for r in of_type(rows, DumpRecord)] == [
        (b"k\n|", b"v\r"), (None, "\ufffd\n\nx".encode())]
    # A dump made on Windows: "\r\n" ends every line, the first one included.
    dump = (two, record.format(10, -1, 2) + "payload: v\r", record.format(11, -1, 1) + "payload: w")
    crlf = [line + "\r\n" for line in dump]
    assert [r.record.value for r in of_type(list(parse_dump(crlf)), DumpRecord)] == [b"v\r", b"w"]
