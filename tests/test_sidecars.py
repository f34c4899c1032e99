"""Sidecar files: golden bytes, round-trips of every format, and corruption that never crashes.

The round-trips alone would pass a reader and writer that agree on a wrong layout, so each
format also has hand-labelled bytes, and the snapshot layout is checked against the golden
vector of kafka-replay-rules.md §4 and against the broker-written snapshots of the corpus.
"""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.kafka import sidecars as sc
from analytics.kafka.errors import CORRUPT_SIDECAR, UNKNOWN_FILE, UNREADABLE, VANISHED
from analytics.kafka.model import (
    AbortedTxn,
    CheckpointEntry,
    LeaderEpochEntry,
    ParseError,
    PartitionMetadata,
    SnapshotEntry,
)
from analytics.kafka.util import crc32c

TOPIC, PARTITION, FILE = "orders", 3, "00000000000000001234.x"
PROPERTY = settings(max_examples=200, deadline=None)


def _int(bits: int):
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


# --- Producer-state snapshots ------------------------------------------------------------------

# kafka-replay-rules.md §4: one entry, pid 23423, epoch 146, lastSeq 0, lastOffset 1234569,
# offsetDelta 2, ts 3, coordEpoch 15, no open transaction.
GOLDEN = bytes.fromhex(
    "0001"  # version 1
    "ad3e0759"  # CRC-32C of bytes [6, 56)
    "00000001"  # one entry
    "0000000000005b7f"  # producerId 23423
    "0092"  # epoch 146
    "00000000"  # lastSequence 0
    "000000000012d689"  # lastOffset 1234569
    "00000002"  # offsetDelta 2
    "0000000000000003"  # timestamp 3
    "0000000f"  # coordinatorEpoch 15
    "ffffffffffffffff"  # currentTxnFirstOffset -1
)
GOLDEN_FIELDS = (23423, 146, 0, 1234569, 2, 3, 15, -1)

SNAPSHOT_VALUES = st.tuples(_int(64), _int(16), _int(32), _int(64), _int(32), _int(64), _int(32), _int(64))
SNAPSHOT_LISTS = st.lists(SNAPSHOT_VALUES, max_size=12)


def _read_snapshot(data: bytes, offset: int = 1234570):
    return sc.read_snapshot(data, topic=TOPIC, partition=PARTITION, file=FILE, snapshot_offset=offset)


def _with_crc(data: bytes) -> bytes:
    """The same bytes with a CRC that matches them, so a check after the CRC can be reached."""
    return data[:2] + struct.pack(">I", crc32c(data[6:])) + data[6:]


def _assert_whole_file_error(result, data: bytes) -> ParseError:
    assert result.rows == []
    assert len(result.errors) == 1
    error = result.errors[0]
    assert error.error_kind == CORRUPT_SIDECAR
    assert error.bytes_affected == len(data)
    return error


def test_golden_vector_decodes_to_exactly_its_fields():
    result = _read_snapshot(GOLDEN, offset=1234570)
    assert result.errors == []
    assert result.rows == [
        SnapshotEntry(
            topic=TOPIC,
            partition=PARTITION,
            snapshot_offset=1234570,
            producer_id=23423,
            producer_epoch=146,
            last_sequence=0,
            last_offset=1234569,
            offset_delta=2,
            timestamp=3,
            coordinator_epoch=15,
            file=FILE,
            current_txn_first_offset=-1,
        )
    ]


def test_golden_vector_is_written_byte_exact_from_tuples_and_rows():
    assert sc.write_snapshot([GOLDEN_FIELDS]) == GOLDEN
    assert sc.write_snapshot(_read_snapshot(GOLDEN).rows) == GOLDEN


def test_empty_snapshot_has_a_header_and_no_rows():
    data = sc.write_snapshot([])
    assert data == struct.pack(">hIi", 1, crc32c(b"\x00\x00\x00\x00"), 0)
    result = _read_snapshot(data)
    assert (result.rows, result.errors) == ([], [])


def test_an_empty_snapshot_file_is_one_marker_row_with_its_offset(tmp_path):
    """The export reads an empty .snapshot (every producer expired) as one row with null producer
    fields, so its offset is known; the reader of the bytes alone (and dump-log) gives no row."""
    path = tmp_path / "t-0" / "00000000000000000027.snapshot"
    path.parent.mkdir()
    path.write_bytes(sc.write_snapshot([]))
    result = sc.read_sidecar(path, topic="t", partition=0)
    assert result.errors == []
    assert result.rows == [SnapshotEntry("t", 0, 27, *[None] * 8, file=str(path))]
    assert not sc.is_snapshot_entry(result.rows[0])
    full = tmp_path / "t-0" / "00000000000000000030.snapshot"
    full.write_bytes(sc.write_snapshot([GOLDEN_FIELDS]))
    assert [sc.is_snapshot_entry(r) for r in sc.read_sidecar(full, topic="t", partition=0).rows] == [True]


@PROPERTY
@given(SNAPSHOT_LISTS, _int(64))
def test_snapshot_round_trip(entries, offset):
    data = sc.write_snapshot(entries)
    assert len(data) == 10 + 46 * len(entries)
    result = _read_snapshot(data, offset)
    assert result.errors == []
    assert result.rows == [SnapshotEntry(TOPIC, PARTITION, offset, *values, file=FILE) for values in entries]
    assert sc.write_snapshot(result.rows) == data


def _set(data: bytes, position: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, position, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("data", "position", "message"),
    [
        (b"", 0, "snapshot is 0 bytes, shorter than its 10-byte header"),
        (GOLDEN[:9], 0, "snapshot is 9 bytes, shorter than its 10-byte header"),
        (_set(GOLDEN, 0, ">h", 2), 0, "unknown snapshot version 2, expected 1"),
        (_set(GOLDEN, 0, ">h", 0), 0, "unknown snapshot version 0, expected 1"),
        (_with_crc(_set(GOLDEN, 6, ">i", 2)), 6, "entry count 2 needs 102 bytes, the file has 56"),
        (_with_crc(_set(GOLDEN, 6, ">i", 0)), 6, "entry count 0 needs 10 bytes, the file has 56"),
        (_with_crc(_set(GOLDEN, 6, ">i", -1)), 6, "entry count -1 is negative"),
        # A count far beyond the file is refused from the header alone.
        (
            _with_crc(_set(GOLDEN, 6, ">i", 2**31 - 1)),
            6,
            "entry count 2147483647 needs 98784247772 bytes, the file has 56",
        ),
        (_set(GOLDEN, 2, ">I", 0), 2, "CRC-32C mismatch: stored 0x00000000, computed 0xad3e0759"),
        (_set(GOLDEN, 10, ">q", 23424), 2, "CRC-32C mismatch: stored 0xad3e0759, computed 0x70b54a3c"),
    ],
)
def test_snapshot_errors_are_exact(data, position, message):
    error = _assert_whole_file_error(_read_snapshot(data), data)
    assert (error.file_position, error.message) == (position, message)
    assert (error.topic, error.partition, error.file) == (TOPIC, PARTITION, FILE)


@st.composite
def _snapshot_and_flip(draw):
    data = sc.write_snapshot(draw(SNAPSHOT_LISTS))
    return data, draw(st.integers(0, len(data) - 1)), draw(st.integers(1, 255))


@PROPERTY
@given(_snapshot_and_flip())
def test_any_flipped_snapshot_byte_is_one_whole_file_error(case):
    # The version is checked and the CRC covers everything else (and itself), so no flip gets through.
    data, position, mask = case
    flipped = bytearray(data)
    flipped[position] ^= mask
    _assert_whole_file_error(_read_snapshot(bytes(flipped)), flipped)


@PROPERTY
@given(SNAPSHOT_LISTS, st.data())
def test_any_truncated_snapshot_is_one_whole_file_error(entries, data):
    full = sc.write_snapshot(entries)
    cut = full[: data.draw(st.integers(0, len(full) - 1))]
    _assert_whole_file_error(_read_snapshot(cut), cut)


@PROPERTY
@given(SNAPSHOT_LISTS, st.binary(min_size=1, max_size=100))
def test_snapshot_with_appended_garbage_is_one_whole_file_error(entries, garbage):
    data = sc.write_snapshot(entries) + garbage
    _assert_whole_file_error(_read_snapshot(data), data)


@PROPERTY
@given(st.binary(max_size=200))
def test_arbitrary_bytes_as_snapshot_never_raise_and_are_all_or_nothing(data):
    result = _read_snapshot(data)
    if result.errors:
        _assert_whole_file_error(result, data)
    else:
        assert len(data) == 10 + 46 * len(result.rows)


@pytest.mark.parametrize(
    ("name", "offset"),
    [
        ("00000000000000000000.snapshot", 0),
        ("00000000000001234570.snapshot", 1234570),
        ("09223372036854775807.snapshot", 2**63 - 1),
        ("09223372036854775808.snapshot", None),  # past int64: Long.parseLong refuses it
        ("0000000000001234570.snapshot", None),  # 19 digits
        ("000000000000001234570.snapshot", None),  # 21 digits
        ("00000000000001234570.snapshot.deleted", None),
        ("00000000000001234570.log", None),
        ("\u0660" * 20 + ".snapshot", None),  # Arabic-Indic digits are not an offset
    ],
)
def test_snapshot_offset_from_name(name, offset):
    assert sc.snapshot_offset_from_name(name) == offset


@pytest.mark.corpus
def test_every_broker_written_snapshot_reads_clean_and_rewrites_byte_exact(corpus_dir):
    paths = sorted(corpus_dir.rglob("*.snapshot"))
    if not paths:
        pytest.skip("no .snapshot files in the corpus")
    for path in paths:
        data = path.read_bytes()
        result = sc.read_sidecar(path, topic=TOPIC, partition=PARTITION)
        assert result.errors == [], path
        entries = [row for row in result.rows if sc.is_snapshot_entry(row)]  # an empty file: one marker row
        assert len(entries) == (len(data) - 10) // 46 and len(result.rows) == max(len(entries), 1), path
        assert {row.snapshot_offset for row in result.rows} == {int(path.name[:20])}, path
        assert sc.write_snapshot(entries) == data, path


# --- Transaction index -------------------------------------------------------------------------

TXN_VALUES = st.tuples(_int(64), _int(64), _int(64), _int(64))  # producerId, first, last, lastStable


def _read_txnindex(data: bytes):
    return sc.read_txnindex(data, topic=TOPIC, partition=PARTITION, file=FILE)


def _txn_row(values, version: int = 0) -> AbortedTxn:
    return AbortedTxn(TOPIC, PARTITION, FILE, version, *values)


def test_txnindex_entry_layout():
    data = sc.write_txnindex([(7, 100, 105, 99)])
    assert data == bytes.fromhex(
        "0000"  # version 0
        "0000000000000007"  # producerId 7
        "0000000000000064"  # firstOffset 100
        "0000000000000069"  # lastOffset 105
        "0000000000000063"  # lastStableOffset 99
    )
    result = _read_txnindex(data)
    assert (result.rows, result.errors) == ([_txn_row((7, 100, 105, 99))], [])


def test_empty_txnindex_is_no_rows_and_no_errors():
    result = _read_txnindex(b"")
    assert (result.rows, result.errors) == ([], [])


@st.composite
def _increasing_txns(draw):
    last_offsets = sorted(draw(st.sets(_int(64), max_size=12)))
    return [(draw(_int(64)), draw(_int(64)), last, draw(_int(64))) for last in last_offsets]


@PROPERTY
@given(_increasing_txns())
def test_txnindex_round_trip(entries):
    data = sc.write_txnindex(entries)
    assert len(data) == 34 * len(entries)
    result = _read_txnindex(data)
    assert result.errors == []
    assert result.rows == [_txn_row(values) for values in entries]
    assert sc.write_txnindex(result.rows) == data


@PROPERTY
@given(st.lists(TXN_VALUES, max_size=12))
def test_txnindex_keeps_rows_and_flags_each_last_offset_that_does_not_increase(entries):
    result = _read_txnindex(sc.write_txnindex(entries))
    assert result.rows == [_txn_row(values) for values in entries]
    expected_positions = [34 * i for i in range(1, len(entries)) if entries[i][2] <= entries[i - 1][2]]
    assert [error.file_position for error in result.errors] == expected_positions
    assert all(error.bytes_affected == 0 and error.error_kind == CORRUPT_SIDECAR for error in result.errors)


def test_txnindex_repeated_last_offset_message():
    result = _read_txnindex(sc.write_txnindex([(1, 5, 10, 5), (2, 6, 10, 6)]))
    assert len(result.rows) == 2
    assert [(e.file_position, e.message) for e in result.errors] == [
        (34, "lastOffset 10 is not above the previous entry's 10")
    ]


def test_txnindex_unknown_version_is_an_error_for_that_entry_only():
    bad = AbortedTxn(TOPIC, PARTITION, FILE, 1, 9, 25, 30, 25)
    data = sc.write_txnindex([(1, 5, 10, 5), bad, (2, 15, 20, 15)])
    assert data[34:36] == b"\x00\x01"  # a row is written with its own version
    result = _read_txnindex(data)
    assert result.rows == [_txn_row((1, 5, 10, 5)), _txn_row((2, 15, 20, 15))]
    # The bad entry's lastOffset 30 is not trusted, so 20 after it is not reported as a decrease.
    assert result.errors == [
        ParseError(
            TOPIC,
            PARTITION,
            FILE,
            34,
            CORRUPT_SIDECAR,
            "unknown aborted transaction version 1, expected 0",
            34,
        )
    ]


@PROPERTY
@given(_increasing_txns(), st.binary(min_size=1, max_size=33))
def test_txnindex_partial_tail_is_an_error_for_its_bytes_and_keeps_whole_entries(entries, tail):
    data = sc.write_txnindex(entries)
    result = _read_txnindex(data + tail)
    assert result.rows == [_txn_row(values) for values in entries]
    assert result.errors == [
        ParseError(
            TOPIC,
            PARTITION,
            FILE,
            len(data),
            CORRUPT_SIDECAR,
            f"{len(tail)} trailing bytes do not make a whole 34-byte entry",
            len(tail),
        )
    ]


@PROPERTY
@given(st.binary(max_size=400))
def test_arbitrary_bytes_as_txnindex_never_raise_and_every_byte_is_accounted_for(data):
    result = _read_txnindex(data)
    assert 34 * len(result.rows) + sum(error.bytes_affected for error in result.errors) == len(data)
    assert all(row.version == 0 for row in result.rows)


@st.composite
def _txnindex_and_flip(draw):
    data = sc.write_txnindex(draw(st.lists(TXN_VALUES, min_size=1, max_size=8)))
    return data, draw(st.integers(0, len(data) - 1)), draw(st.integers(1, 255))


@PROPERTY
@given(_txnindex_and_flip())
def test_flipped_txnindex_byte_never_raises_and_keeps_the_other_entries(case):
    data, position, mask = case
    flipped = bytearray(data)
    flipped[position] ^= mask
    before, after = _read_txnindex(data), _read_txnindex(bytes(flipped))
    hit = position // 34
    if position % 34 < 2:
        # The flip hit a version, which is 0 in every written entry: that entry alone becomes an error.
        assert after.rows == before.rows[:hit] + before.rows[hit + 1 :]
        assert any(e.bytes_affected == 34 and e.file_position == hit * 34 for e in after.errors)
    else:
        assert len(after.rows) == len(before.rows)
        assert [r for i, r in enumerate(after.rows) if i != hit] == [
            r for i, r in enumerate(before.rows) if i != hit
        ]


# --- leader-epoch-checkpoint and log-dir offset checkpoints (CheckpointFile text) ----------------

EPOCH_PAIRS = st.lists(st.tuples(_int(32), _int(64)), max_size=12)
TOPICS = st.from_regex(r"[A-Za-z0-9._-]{1,60}", fullmatch=True)
OFFSET_TRIPLES = st.lists(st.tuples(TOPICS, _int(32), _int(64)), max_size=12)


def _read_epochs(data):
    return sc.read_leader_epoch_checkpoint(data, topic=TOPIC, partition=PARTITION, file=FILE)


def _read_offsets(data, checkpoint: str = "log-start-offset"):
    return sc.read_offset_checkpoint(data, checkpoint=checkpoint, file=FILE)


def test_leader_epoch_checkpoint_layout():
    data = sc.write_leader_epoch_checkpoint([(0, 0), (4, 1500), LeaderEpochEntry(TOPIC, PARTITION, 7, 2**40)])
    assert data == b"0\n3\n0 0\n4 1500\n7 1099511627776\n"
    result = _read_epochs(data)
    assert result.errors == []
    assert result.rows == [
        LeaderEpochEntry(TOPIC, PARTITION, 0, 0),
        LeaderEpochEntry(TOPIC, PARTITION, 4, 1500),
        LeaderEpochEntry(TOPIC, PARTITION, 7, 2**40),
    ]


def test_offset_checkpoint_layout():
    data = sc.write_offset_checkpoint(
        [("my.topic_v-2", 0, 1234), CheckpointEntry("x", "__consumer_offsets", 31, 0)]
    )
    assert data == b"0\n2\nmy.topic_v-2 0 1234\n__consumer_offsets 31 0\n"
    result = _read_offsets(data, "cleaner-offset")
    assert result.errors == []
    assert result.rows == [
        CheckpointEntry("cleaner-offset", "my.topic_v-2", 0, 1234),
        CheckpointEntry("cleaner-offset", "__consumer_offsets", 31, 0),
    ]


@PROPERTY
@given(EPOCH_PAIRS)
def test_leader_epoch_checkpoint_round_trip(entries):
    data = sc.write_leader_epoch_checkpoint(entries)
    result = _read_epochs(data)
    assert result.errors == []
    assert result.rows == [LeaderEpochEntry(TOPIC, PARTITION, *entry) for entry in entries]
    assert sc.write_leader_epoch_checkpoint(result.rows) == data


@PROPERTY
@given(OFFSET_TRIPLES, st.sampled_from(sorted(sc.CHECKPOINT_FILES.values())))
def test_offset_checkpoint_round_trip(entries, checkpoint):
    data = sc.write_offset_checkpoint(entries)
    result = _read_offsets(data, checkpoint)
    assert result.errors == []
    assert result.rows == [CheckpointEntry(checkpoint, *entry) for entry in entries]
    assert sc.write_offset_checkpoint(result.rows) == data


@pytest.mark.parametrize(
    ("data", "rows"),
    [
        (b"", []),  # Kafka creates checkpoint files empty
        (b"0\n", []),  # CheckpointReadBuffer stops after the version line
        (b"0\n0\n", []),
        (
            b"0\r\n1\r\n3\t17  \r\n",
            [(3, 17)],
        ),  # readLine ends lines at \r\n; \s+ splits; trailing blanks drop
        (b"0\r1\r3 17", [(3, 17)]),  # bare \r ends a line too, and the last line needs no newline
        (b"0\n1\n3\x0c17\n", [(3, 17)]),  # form feed is Java whitespace, not a readLine break
        (b"+0\n1\n+3 -1\n", [(3, -1)]),  # Integer.parseInt takes a sign
        (b"0\n1\n-2147483648 9223372036854775807\n", [(-(2**31), 2**63 - 1)]),
    ],
)
def test_leader_epoch_checkpoint_forms_the_broker_accepts(data, rows):
    result = _read_epochs(data)
    assert result.errors == []
    assert [(row.leader_epoch, row.start_offset) for row in result.rows] == rows


@pytest.mark.parametrize(
    ("data", "position", "message"),
    [
        (b"1\n0\n", 0, "unknown checkpoint version 1, expected 0"),
        (b"x\n0\n", 0, "malformed version line: 'x'"),
        (b"0 \n0\n", 0, "malformed version line: '0 '"),
        (b"0\nzz\n", 2, "malformed count line: 'zz'"),
        (b"0\n2\n0 0\n", 2, "the count line says 2 entries, the file has 1"),
        (b"0\n0\n0 0\n", 2, "the count line says 0 entries, the file has 1"),
        (b"0\n-1\n", 2, "the count line says -1 entries, the file has 0"),
        (b"0\n1\n0 0 0\n", 4, "malformed line 3: '0 0 0'"),
        (b"0\n1\n 0 0\n", 4, "malformed line 3: ' 0 0'"),  # Java's split keeps the leading empty field
        (b"0\n1\n0 0\n\n", 8, "malformed line 4: ''"),
        (b"0\n1\n2147483648 0\n", 4, "malformed line 3: '2147483648 0'"),  # epoch is int32
        (b"0\n1\n0 9223372036854775808\n", 4, "malformed line 3: '0 9223372036854775808'"),  # offset is int64
        (b"0\n1\n0 1_000\n", 4, "malformed line 3: '0 1_000'"),  # Python's int() would take it
        (b"0\n1\n0\xc2\xa00\n", 4, "malformed line 3: '0\\xa00'"),  # NBSP is not Java whitespace
        (b"0\n1\n0 \xff\n", 6, "not UTF-8: byte 0xff at position 6"),
        (b"\xef\xbb\xbf0\n0\n", 0, "malformed version line: '\\ufeff0'"),  # a BOM is not stripped
        (b"0\n1\n" + b"9" * 200 + b"\n", 4, "malformed line 3: '" + "9" * 80 + "...'"),
    ],
)
def test_leader_epoch_checkpoint_errors_are_exact_and_cover_the_whole_file(data, position, message):
    result = _read_epochs(data)
    error = _assert_whole_file_error(result, data)
    assert (error.file_position, error.message) == (position, message)
    assert (error.topic, error.partition, error.file) == (TOPIC, PARTITION, FILE)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"0\n1\nt 0\n", "malformed line 3: 't 0'"),
        (b"0\n1\nt 0 5 6\n", "malformed line 3: 't 0 5 6'"),
        (b"0\n1\n 0 5\n", "malformed line 3: ' 0 5'"),  # an empty topic
        (b"0\n1\n t 0 5\n", "malformed line 3: ' t 0 5'"),  # Java's split gives four fields
        (b"0\n1\nt x 5\n", "malformed line 3: 't x 5'"),
        (b"0\n1\nt 2147483648 5\n", "malformed line 3: 't 2147483648 5'"),
        (b"0\n2\nt 0 5\n", "the count line says 2 entries, the file has 1"),
        (b"3\n0\n", "unknown checkpoint version 3, expected 0"),
        (b"0\n1\nt\xe9 0 5\n", "not UTF-8: byte 0xe9 at position 5"),
    ],
)
def test_offset_checkpoint_errors_belong_to_the_log_dir(data, message):
    error = _assert_whole_file_error(_read_offsets(data), data)
    assert error.message == message
    assert (error.topic, error.partition) == (sc.LOG_DIR_TOPIC, sc.LOG_DIR_PARTITION)


def test_text_readers_take_str_and_survive_lone_surrogates():
    assert _read_epochs("0\n1\n3 17\n").rows == [LeaderEpochEntry(TOPIC, PARTITION, 3, 17)]
    assert _read_offsets("0\n1\nt 1 2\n").rows == [CheckpointEntry("log-start-offset", "t", 1, 2)]
    bad = "0\n1\n3 \udcff\n"
    error = _assert_whole_file_error(_read_epochs(bad), bad.encode("utf-8", "surrogatepass"))
    assert error.message == "not UTF-8: byte 0xed at position 6"


@pytest.mark.parametrize(
    "call",
    [
        lambda: sc.write_offset_checkpoint([("has space", 0, 0)]),
        lambda: sc.write_offset_checkpoint([("", 0, 0)]),
        lambda: sc.write_offset_checkpoint([("t", 2**31, 0)]),
        lambda: sc.write_offset_checkpoint([("t", 0, 2**63)]),
        lambda: sc.write_leader_epoch_checkpoint([(-(2**31) - 1, 0)]),
        lambda: sc.write_partition_metadata("two words"),
        lambda: sc.write_partition_metadata(""),
    ],
)
def test_text_writers_refuse_what_would_not_read_back(call):
    with pytest.raises(ValueError):
        call()


def _all_or_nothing(result, data: bytes):
    """A text sidecar is trusted whole or not at all."""
    if result.errors:
        _assert_whole_file_error(result, data)


@PROPERTY
@given(st.binary(max_size=120))
def test_arbitrary_bytes_as_text_sidecars_never_raise(data):
    _all_or_nothing(_read_epochs(data), data)
    _all_or_nothing(_read_offsets(data), data)
    _all_or_nothing(_read_metadata(data), data)


@st.composite
def _checkpoint_and_edit(draw):
    if draw(st.booleans()):
        data = sc.write_leader_epoch_checkpoint(draw(EPOCH_PAIRS))
    else:
        data = sc.write_offset_checkpoint(draw(OFFSET_TRIPLES))
    position = draw(st.integers(0, len(data) - 1))
    return data, position, draw(st.integers(1, 255))


@PROPERTY
@given(_checkpoint_and_edit())
def test_flipped_byte_in_a_checkpoint_never_raises_and_is_all_or_nothing(case):
    data, position, mask = case
    flipped = bytearray(data)
    flipped[position] ^= mask
    _all_or_nothing(_read_epochs(bytes(flipped)), flipped)
    _all_or_nothing(_read_offsets(bytes(flipped)), flipped)


@PROPERTY
@given(_checkpoint_and_edit())
def test_truncated_checkpoint_never_raises_and_is_all_or_nothing(case):
    data, position, _ = case
    _all_or_nothing(_read_epochs(data[:position]), data[:position])
    _all_or_nothing(_read_offsets(data[:position]), data[:position])


# --- partition.metadata ------------------------------------------------------------------------

KAFKA_UUIDS = (
    st.binary(min_size=16, max_size=16)
    .filter(any)
    .map(lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=").decode())
)
TOKENS = st.one_of(
    KAFKA_UUIDS, st.from_regex(r"[^\s]{1,40}", fullmatch=True).filter(lambda t: t != sc.ZERO_TOPIC_ID)
)


def _read_metadata(data):
    return sc.read_partition_metadata(data, topic=TOPIC, partition=PARTITION, file=FILE)


def test_partition_metadata_layout_is_kafkas_encode():
    data = sc.write_partition_metadata("ECE8pXTPS4K8OWe9Uc0cUQ")
    assert data == b"version: 0\ntopic_id: ECE8pXTPS4K8OWe9Uc0cUQ"  # no newline after the id
    assert _read_metadata(data).rows == [PartitionMetadata(TOPIC, PARTITION, 0, "ECE8pXTPS4K8OWe9Uc0cUQ")]


@PROPERTY
@given(TOKENS, st.integers(0, 2**31 - 1))
def test_partition_metadata_round_trip(topic_id, version):
    data = sc.write_partition_metadata(topic_id, version=version)
    result = _read_metadata(data)
    assert result.errors == []
    assert result.rows == [PartitionMetadata(TOPIC, PARTITION, version, topic_id)]


@pytest.mark.parametrize(
    ("data", "row"),
    [
        (b"", None),  # 2.8-3.0 brokers created it empty before the topic id was known
        (b"version: 0\ntopic_id: ECE8pXTPS4K8OWe9Uc0cUQ\n", (0, "ECE8pXTPS4K8OWe9Uc0cUQ")),
        (b"version:\t 1\r\ntopic_id:  abc\r\nanything after\n", (1, "abc")),
    ],
)
def test_partition_metadata_forms_the_broker_accepts(data, row):
    result = _read_metadata(data)
    assert result.errors == []
    assert result.rows == ([] if row is None else [PartitionMetadata(TOPIC, PARTITION, *row)])


@pytest.mark.parametrize(
    ("data", "position", "message"),
    [
        (b"version: -1\ntopic_id: abc", 0, "unknown partition.metadata version -1"),
        (b"version: x\ntopic_id: abc", 0, "malformed version line: 'version: x'"),
        (b"version:0\ntopic_id: abc", 0, "malformed version line: 'version:0'"),
        (b"verison: 0\ntopic_id: abc", 0, "malformed version line: 'verison: 0'"),
        (b"\n", 0, "malformed version line: ''"),
        (b"version: 0\n", 11, "the topic_id line is missing"),
        (b"version: 0\ntopic: abc", 11, "malformed topic_id line: 'topic: abc'"),
        (b"version: 0\ntopic_id: ", 11, "malformed topic_id line: 'topic_id: '"),
        (b"version: 0\ntopic_id: a b", 11, "malformed topic_id line: 'topic_id: a b'"),
        (
            b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",
            11,
            "the topic id is the zero Uuid, which Kafka rejects",
        ),
        (b"version: 0\ntopic_id: \x80", 21, "not UTF-8: byte 0x80 at position 21"),
    ],
)
def test_partition_metadata_errors_are_exact(data, position, message):
    error = _assert_whole_file_error(_read_metadata(data), data)
    assert (error.file_position, error.message) == (position, message)


# --- read_sidecar ------------------------------------------------------------------------------


def test_read_sidecar_dispatches_on_the_file_name(tmp_path):
    files = {
        "00000000000001234570.snapshot": GOLDEN,
        "00000000000000001000.txnindex": sc.write_txnindex([(7, 1000, 1005, 1000)]),
        "leader-epoch-checkpoint": sc.write_leader_epoch_checkpoint([(2, 40)]),
        "partition.metadata": sc.write_partition_metadata("ECE8pXTPS4K8OWe9Uc0cUQ"),
        **{name: sc.write_offset_checkpoint([("t", 1, 2)]) for name in sc.CHECKPOINT_FILES},
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)

    def read(name):
        result = sc.read_sidecar(tmp_path / name, topic=TOPIC, partition=PARTITION)
        assert result.errors == []
        return result.rows

    file = str(tmp_path / "00000000000000001000.txnindex")
    snapshot = str(tmp_path / "00000000000001234570.snapshot")
    assert read("00000000000001234570.snapshot") == [SnapshotEntry(TOPIC, PARTITION, 1234570, *GOLDEN_FIELDS, file=snapshot)]
    assert read("00000000000000001000.txnindex") == [
        AbortedTxn(TOPIC, PARTITION, file, 0, 7, 1000, 1005, 1000)
    ]
    assert read("leader-epoch-checkpoint") == [LeaderEpochEntry(TOPIC, PARTITION, 2, 40)]
    assert read("partition.metadata") == [PartitionMetadata(TOPIC, PARTITION, 0, "ECE8pXTPS4K8OWe9Uc0cUQ")]
    assert read("log-start-offset-checkpoint") == [CheckpointEntry("log-start-offset", "t", 1, 2)]
    assert read("recovery-point-offset-checkpoint") == [CheckpointEntry("recovery-point-offset", "t", 1, 2)]
    assert read("replication-offset-checkpoint") == [CheckpointEntry("replication-offset", "t", 1, 2)]
    assert read("cleaner-offset-checkpoint") == [CheckpointEntry("cleaner-offset", "t", 1, 2)]


def test_read_sidecar_errors_name_the_path_and_log_dir_files_name_no_partition(tmp_path):
    (tmp_path / "leader-epoch-checkpoint").write_bytes(b"9\n")
    (tmp_path / "replication-offset-checkpoint").write_bytes(b"9\n")
    epochs = sc.read_sidecar(tmp_path / "leader-epoch-checkpoint", topic=TOPIC, partition=PARTITION)
    offsets = sc.read_sidecar(tmp_path / "replication-offset-checkpoint", topic=TOPIC, partition=PARTITION)
    assert [(e.topic, e.partition, e.file) for e in epochs.errors] == [
        (TOPIC, PARTITION, str(tmp_path / "leader-epoch-checkpoint"))
    ]
    assert [(e.topic, e.partition, e.file) for e in offsets.errors] == [
        (sc.LOG_DIR_TOPIC, sc.LOG_DIR_PARTITION, str(tmp_path / "replication-offset-checkpoint"))
    ]


def test_read_sidecar_reports_what_the_os_refuses(tmp_path):
    (tmp_path / "leader-epoch-checkpoint").mkdir()
    # a folder the OS refuses to read as a file, then a file gone since it was listed (deleted meanwhile)
    for name, kind in (("leader-epoch-checkpoint", UNREADABLE), ("00000000000000000005.snapshot", VANISHED)):
        result = sc.read_sidecar(tmp_path / name, topic=TOPIC, partition=PARTITION)
        assert result.rows == []
        [error] = result.errors
        assert (error.error_kind, error.file_position, error.bytes_affected) == (kind, 0, 0)
        assert error.message.startswith(f"cannot read {name}: ") if kind == UNREADABLE else "deleted" in error.message
        assert (error.topic, error.partition, error.file) == (TOPIC, PARTITION, str(tmp_path / name))


def test_read_sidecar_flags_a_snapshot_without_an_offset_name(tmp_path):
    path = tmp_path / "latest.snapshot"
    path.write_bytes(GOLDEN)
    result = sc.read_sidecar(path, topic=TOPIC, partition=PARTITION)
    assert result.rows == []
    assert [(e.error_kind, e.bytes_affected) for e in result.errors] == [(UNKNOWN_FILE, len(GOLDEN))]


@pytest.mark.parametrize(
    "name", ["00000000000000000000.log", "meta.properties", "00000000000000000005.snapshot.deleted"]
)
def test_read_sidecar_refuses_names_that_are_not_sidecars(tmp_path, name):
    with pytest.raises(ValueError, match="is not a sidecar file"):
        sc.read_sidecar(tmp_path / name, topic=TOPIC, partition=PARTITION)
