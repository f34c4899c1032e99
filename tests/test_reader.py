"""The segment reader: golden bytes, round-trips through the writer, bad input, byte accounting."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.kafka import errors as E
from analytics.kafka import layout as L
from analytics.kafka.logdir import read_segment
from analytics.kafka.reader import batches_from_arrow
from analytics.kafka.writer import RecordSpec, build_batch, build_end_txn_marker, build_legacy_message
from tests.kafka_builders import entries

GOLDEN_BATCH = bytes.fromhex(
    "000000000012d6870000004c00000007020f504b85000000000002000000000000000100000000000000030000000000005b7f00917ffffffe"
    "00000003100000000261027600100000020262027600100000040263027600"
)
GOLDEN_COMMIT = bytes.fromhex(
    "000000000000002a000000420000000702d7700c000030000000000000018bcfe568000000018bcfe568000000000000005b7f0092ffffffff"
    "000000012000000008000000010c00000000000f00"
)


def _read(tmp_path: Path, data: bytes, *, records: bool = True, **kw):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return read_segment(path, topic="t", partition=0, records=records, **kw)


def _accounted(read) -> int:
    return read.info.valid_bytes + sum(e.bytes_affected for e in read.errors)


def test_golden_idempotent_batch_decodes_to_the_listed_fields(tmp_path):
    read = _read(tmp_path, GOLDEN_BATCH)
    [b] = batches_from_arrow(read.batches.to_batches()[0])
    assert (b.base_offset, b.last_offset, b.record_count, b.batch_size) == (1234567, 1234569, 3, 88)
    assert (b.partition_leader_epoch, b.producer_id, b.producer_epoch) == (7, 23423, 145)
    assert (b.base_sequence, b.last_sequence) == (L.INT_MAX - 1, 0)  # crosses the int32 wrap
    assert (b.base_timestamp, b.max_timestamp, b.timestamp_type) == (1, 3, "CreateTime")
    assert b.crc_valid and b.compression == "none" and not b.is_transactional and not b.is_control
    assert int.from_bytes(GOLDEN_BATCH[17:21], "big") == 256920453
    recs = read.records.to_pylist()
    assert [(r["offset"], r["key"], r["value"], r["sequence"]) for r in recs] == [
        (1234567, b"a", b"v", L.INT_MAX - 1),
        (1234568, b"b", b"v", L.INT_MAX),
        (1234569, b"c", b"v", 0),
    ]
    assert read.errors == [] and read.info.valid_bytes == 88


def test_golden_commit_marker_decodes_to_the_listed_fields(tmp_path):
    read = _read(tmp_path, GOLDEN_COMMIT)
    [b] = batches_from_arrow(read.batches.to_batches()[0])
    assert (b.base_offset, b.batch_size, b.attributes, b.partition_leader_epoch) == (42, 78, 0x30, 7)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (23423, 146, -1, -1)
    assert (b.control_type, b.coordinator_epoch, b.max_timestamp) == ("COMMIT", 15, 1700000000000)
    assert b.is_control and b.is_transactional and b.crc_valid


def test_writer_reproduces_the_golden_vectors():
    batch = build_batch(
        1234567,
        [RecordSpec(b"a", b"v", 1), RecordSpec(b"b", b"v", 1), RecordSpec(b"c", b"v", 1)],
        producer_id=23423,
        producer_epoch=145,
        base_sequence=L.INT_MAX - 1,
        partition_leader_epoch=7,
        max_timestamp=3,
    )
    marker = build_end_txn_marker(
        42, "COMMIT", producer_id=23423, producer_epoch=146, coordinator_epoch=15, timestamp=1700000000000, partition_leader_epoch=7
    )
    assert batch == GOLDEN_BATCH
    assert marker == GOLDEN_COMMIT


def _check_round_trip(read, expected) -> None:
    rows = [r for rb in read.batches.to_batches() for r in batches_from_arrow(rb)]
    assert len(rows) == len(expected)
    for row, (data, exp) in zip(rows, expected):
        assert row.crc_valid and row.batch_size == len(data)
        got = (
            row.magic, row.base_offset, row.last_offset, row.record_count, row.compression, row.producer_id,
            row.producer_epoch, row.base_sequence, row.last_sequence, row.is_transactional, row.is_control,
            row.control_type, row.coordinator_epoch,
        )
        assert got == (
            exp.magic, exp.base_offset, exp.last_offset, exp.record_count, exp.compression, exp.producer_id,
            exp.producer_epoch, exp.base_sequence, exp.last_sequence, exp.is_transactional, exp.is_control,
            exp.control_type, exp.coordinator_epoch,
        )
    recs = read.records.to_pylist()
    want = [r for _, exp in expected for r in exp.records]
    assert [(r["offset"], r["key"], r["value"], tuple((h["key"], h["value"]) for h in r["headers"])) for r in recs] == want
    assert read.errors == []
    assert read.info.valid_bytes == read.info.size_bytes == sum(len(d) for d, _ in expected)


@given(entries())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_valid_segment_round_trips(tmp_path, expected):
    _check_round_trip(_read(tmp_path, b"".join(d for d, _ in expected)), expected)


@pytest.mark.parametrize("codec", L.CODEC_NAMES)
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_every_codec_and_magic_round_trips(tmp_path, codec, magic):
    recs = [RecordSpec(f"k{i}".encode(), os.urandom(50) * 20, 1000 + i) for i in range(30)]
    if magic == 2:
        data = build_batch(100, recs, compression=codec, producer_id=7, producer_epoch=1, base_sequence=5)
    elif codec == "none":
        data = b"".join(build_legacy_message(100 + i, r.key, r.value, magic=magic, timestamp=r.timestamp if magic else -1) for i, r in enumerate(recs))
    else:
        from analytics.kafka.writer import build_legacy_wrapper

        data = build_legacy_wrapper(list(range(100, 130)), recs, compression=codec, magic=magic)
    read = _read(tmp_path, data)
    assert read.errors == []
    assert [(r["offset"], r["key"], r["value"]) for r in read.records.to_pylist()] == [
        (100 + i, r.key, r.value) for i, r in enumerate(recs)
    ]
    rows = batches_from_arrow(read.batches.to_batches()[0])
    assert {r.compression for r in rows} == {codec}
    assert (rows[0].base_offset, rows[-1].last_offset) == (100, 129)


def test_windows_smaller_than_entries_give_the_same_rows(tmp_path):
    big = [RecordSpec(b"k", os.urandom(3000), 1)]
    small = [RecordSpec(b"k", b"v", 1)]
    data = b"".join(build_batch(i, big if i % 3 == 0 else small, producer_id=1, producer_epoch=0, base_sequence=i) for i in range(40))
    whole = _read(tmp_path, data)
    for window in (21, 100, 1000, 4096):
        part = _read(tmp_path, data, window=window)
        assert part.batches.equals(whole.batches) and part.records.equals(whole.records)
        assert part.info == whole.info and part.errors == []


@given(entries(), st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_grown_segment_read_on_from_its_head_gives_the_rows_of_a_whole_read(tmp_path, expected, data):
    """An export reads a segment that grew from where the previous read ended (its ``segments`` row,
    ``after``): the rows are those of a whole read after that point, and the file's row and errors
    are those of a whole read, whatever follows the head (a torn last batch included)."""
    parts = [d for d, _ in expected]
    cut = data.draw(st.integers(0, len(parts)))
    torn = data.draw(st.sampled_from([b"", parts[-1][:-3] if len(parts[-1]) > 3 else b""]))
    head = _read(tmp_path, b"".join(parts[:cut]))
    whole_bytes = b"".join(parts) + torn
    whole = _read(tmp_path, whole_bytes)
    rest = _read(tmp_path, whole_bytes, after=head.info)
    at = len(b"".join(parts[:cut]))
    rows = whole.batches.filter(pc.greater_equal(whole.batches["file_position"], at))
    assert rest.batches.to_pylist() == rows.to_pylist()
    assert rest.records.to_pylist() == whole.records.to_pylist()[len(head.records):]
    assert rest.info == whole.info and rest.errors == whole.errors


def _three_batches() -> list[bytes]:
    return [build_batch(i, [RecordSpec(b"k", b"value", 10)], producer_id=1, producer_epoch=0, base_sequence=i) for i in range(3)]


def test_crc_mismatch_is_reported_and_the_walk_goes_on(tmp_path):
    a, b, c = _three_batches()
    bad = bytearray(b)
    bad[-1] ^= 0xFF
    read = _read(tmp_path, a + bytes(bad) + c)
    rows = batches_from_arrow(read.batches.to_batches()[0])
    assert [r.crc_valid for r in rows] == [True, False, True]
    [err] = read.errors
    assert (err.error_kind, err.file_position, err.bytes_affected) == (E.CRC_MISMATCH, len(a), len(b))
    assert [r["offset"] for r in read.records.to_pylist()] == [0, 2]  # the corrupt batch's records are not trusted
    assert read.info.valid_bytes == len(a) + len(c) and _accounted(read) == read.info.size_bytes


@pytest.mark.parametrize("cut", [1, 5, 12, 20, 40, 60])
def test_truncated_last_batch_is_one_error_for_the_tail(tmp_path, cut):
    a, b, _ = _three_batches()
    read = _read(tmp_path, a + b[:cut])
    [err] = read.errors
    assert err.error_kind in (E.TRUNCATED, E.ZERO_FILLED) and err.file_position == len(a) and err.bytes_affected == cut
    assert read.info.status == err.error_kind and _accounted(read) == len(a) + cut


def test_zero_filled_tail_of_a_preallocated_segment(tmp_path):
    a, b, _ = _three_batches()
    read = _read(tmp_path, a + b + bytes(10_000))
    [err] = read.errors
    assert (err.error_kind, err.file_position, err.bytes_affected) == (E.ZERO_FILLED, len(a) + len(b), 10_000)
    assert read.batches.num_rows == 2 and read.info.status == E.ZERO_FILLED


@pytest.mark.parametrize(("size", "kind"), [(-5, E.INVALID_LENGTH), (10, E.INVALID_LENGTH), (2**31 - 1, E.TRUNCATED)])
def test_bad_length_field_stops_the_file_and_accounts_for_the_rest(tmp_path, size, kind):
    a, b, c = _three_batches()
    bad = bytearray(b)
    bad[8:12] = size.to_bytes(4, "big", signed=True)
    read = _read(tmp_path, a + bytes(bad) + c)
    [err] = read.errors
    assert (err.error_kind, err.file_position, err.bytes_affected) == (kind, len(a), len(b) + len(c))
    assert read.batches.num_rows == 1 and _accounted(read) == read.info.size_bytes


def test_unknown_magic_stops_the_file(tmp_path):
    a, b, c = _three_batches()
    bad = bytearray(b)
    bad[16] = 7
    read = _read(tmp_path, a + bytes(bad) + c)
    [err] = read.errors
    assert (err.error_kind, err.bytes_affected) == (E.UNKNOWN_MAGIC, len(b) + len(c))
    assert "magic byte 7" in err.message


def test_decompression_bomb_is_an_error_row_not_an_allocation(tmp_path):
    bomb = build_batch(0, [RecordSpec(None, bytes(4_000_000), 1)], compression="zstd", producer_id=1, producer_epoch=0, base_sequence=0)
    assert len(bomb) < 2000
    read = _read(tmp_path, bomb, max_decompressed_bytes=1_000_000)
    [err] = read.errors
    assert err.error_kind == E.DECOMPRESSION and "exceeds the cap" in err.message
    assert err.bytes_affected == 0 and read.info.valid_bytes == len(bomb)  # the header is a valid batch
    assert read.batches.num_rows == 1 and read.records.num_rows == 0


def test_records_that_do_not_fill_the_batch_are_a_record_error(tmp_path):
    data = bytearray(build_batch(0, [RecordSpec(b"k", b"v", 1)] * 2, producer_id=1, producer_epoch=0, base_sequence=0))
    data[57:61] = (3).to_bytes(4, "big")  # recordsCount 3, only 2 present: fix the CRC so only the count is wrong
    from analytics.kafka.util import crc32c

    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    read = _read(tmp_path, bytes(data))
    [err] = read.errors
    assert err.error_kind == E.RECORD_DECODE and read.batches.num_rows == 1


def test_unreadable_file_is_one_error(tmp_path):
    directory = tmp_path / "00000000000000000000.log"
    directory.mkdir()
    read = read_segment(directory, topic="t", partition=0)
    [err] = read.errors
    assert err.error_kind == E.UNREADABLE and read.info.status == E.UNREADABLE


def test_a_file_gone_when_read_is_vanished_not_unreadable(tmp_path):
    """Listed, then deleted before its read (retention on a live data dir): its own kind, no crash."""
    read = read_segment(tmp_path / "00000000000000000017.log", topic="t", partition=0)
    [err] = read.errors
    assert err.error_kind == E.VANISHED and read.info.status == E.VANISHED and err.bytes_affected == 0
    assert "deleted while the export ran" in err.message


def test_empty_file_is_ok(tmp_path):
    read = _read(tmp_path, b"")
    assert read.errors == [] and read.info.status == "ok" and read.batches.num_rows == 0


def test_compacted_and_empty_batches_keep_their_sequence_range(tmp_path):
    from analytics.kafka.writer import build_empty_batch

    thinned = build_batch(
        10,
        [RecordSpec(b"a", b"1", 5, offset_delta=0), RecordSpec(b"b", b"2", 6, offset_delta=3)],
        producer_id=9, producer_epoch=2, base_sequence=100, last_offset_delta=4,
    )
    empty = build_empty_batch(15, 19, producer_id=9, producer_epoch=2, base_sequence=105, max_timestamp=7)
    read = _read(tmp_path, thinned + empty)
    a, b = batches_from_arrow(read.batches.to_batches()[0])
    assert (a.base_offset, a.last_offset, a.record_count, a.last_sequence) == (10, 14, 2, 104)
    assert (b.base_offset, b.last_offset, b.record_count, b.last_sequence, b.base_timestamp) == (15, 19, 0, 109, -1)
    assert [r["offset"] for r in read.records.to_pylist()] == [10, 13]


@given(entries(min_size=1, max_size=4), st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_corruption_gives_only_error_rows_and_loses_no_byte(tmp_path, expected, data):
    original = b"".join(d for d, _ in expected)
    how = data.draw(st.sampled_from(["flip", "truncate", "append", "flip_many"]))
    corrupt = bytearray(original)
    if how == "flip":
        i = data.draw(st.integers(0, len(corrupt) - 1))
        corrupt[i] ^= data.draw(st.integers(1, 255))
    elif how == "flip_many":
        for _ in range(data.draw(st.integers(2, 20))):
            corrupt[data.draw(st.integers(0, len(corrupt) - 1))] = data.draw(st.integers(0, 255))
    elif how == "truncate":
        corrupt = corrupt[: data.draw(st.integers(0, len(corrupt) - 1))]
    else:
        corrupt += data.draw(st.binary(min_size=1, max_size=200))
    for records in (False, True):
        read = _read(tmp_path, bytes(corrupt), records=records, window=data.draw(st.sampled_from([64, 1 << 20])))
        assert _accounted(read) == len(corrupt)
        assert all(e.bytes_affected >= 0 and e.error_kind for e in read.errors)
        # every valid batch's bytes lie inside the file, and valid batches never overlap
        spans = sorted((r.file_position, r.file_position + r.batch_size) for rb in read.batches.to_batches() for r in batches_from_arrow(rb))
        assert all(end <= len(corrupt) for _, end in spans)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
