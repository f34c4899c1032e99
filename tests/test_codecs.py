"""Codecs as Kafka's Java clients write them, the decompression cap, and control record types."""

from __future__ import annotations

import os

import lz4.frame
import pytest

from analytics.kafka import layout as L
from analytics.kafka.codecs import XERIAL_MAGIC, compress, decompress, xxh32
from analytics.kafka.errors import DECOMPRESSION, KafkaFormatError
from analytics.kafka.logdir import read_segment
from analytics.kafka.writer import RecordSpec, build_control_batch, build_legacy_message


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_round_trip_and_cap_for_every_codec(codec):
    data = os.urandom(3000) * 100
    assert decompress(codec, compress(codec, data)) == data
    with pytest.raises(KafkaFormatError) as exc:
        decompress(codec, compress(codec, data), limit=len(data) - 1)
    assert exc.value.kind == DECOMPRESSION and "exceeds the cap" in exc.value.message


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_corrupt_streams_are_format_errors(codec):
    z = bytearray(compress(codec, b"hello kafka " * 100))
    z[len(z) // 2] ^= 0xFF
    z = bytes(z[: len(z) - 3])
    with pytest.raises(KafkaFormatError):
        decompress(codec, z)


def test_snappy_uses_the_xerial_framing_java_clients_write():
    z = compress(2, b"a" * 100_000)
    assert z.startswith(XERIAL_MAGIC) and int.from_bytes(z[8:12], "big") == 1
    assert decompress(2, z) == b"a" * 100_000


def test_gzip_with_several_members_reads_them_all():
    assert decompress(1, compress(1, b"first ") + compress(1, b"second")) == b"first second"


def test_unknown_codec_id_is_a_format_error():
    with pytest.raises(KafkaFormatError, match="unknown compression codec id 6"):
        decompress(6, b"\x00")


def test_xxh32_matches_the_reference_values():
    # Reference values of the xxHash specification implementation.
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(bytes(range(40))) == 0xD6A6CF02


def test_magic_0_lz4_with_kafka3160_header_checksum_reads(tmp_path):
    """Kafka before 0.10 hashed the frame magic into the LZ4 header checksum (KAFKA-3160)."""
    inner = build_legacy_message(0, b"k", b"value", magic=0)
    frame = bytearray(lz4.frame.compress(inner, block_size=lz4.frame.BLOCKSIZE_MAX64KB, store_size=False, content_checksum=False))
    frame[6] = (xxh32(bytes(frame[0:6])) >> 8) & 0xFF  # the broken checksum: magic included
    with pytest.raises(Exception):
        lz4.frame.decompress(bytes(frame))  # a strict reader refuses it
    wrapper = build_legacy_message(0, None, bytes(frame), magic=0, attributes=3)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(wrapper)
    read = read_segment(path, records=True)
    assert read.errors == []
    assert [(r["offset"], r["key"], r["value"]) for r in read.records.to_pylist()] == [(0, b"k", b"value")]


@pytest.mark.parametrize("name", ["LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER", "KRAFT_VERSION", "KRAFT_VOTERS"])
def test_kraft_control_records_are_named(tmp_path, name):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(build_control_batch(0, name, producer_id=-1, producer_epoch=-1, timestamp=5, value=b"\x00\x00", is_transactional=False))
    [row] = read_segment(path).batches.to_pylist()
    assert (row["control_type"], row["coordinator_epoch"], row["is_control"]) == (name, None, True)


def test_unknown_control_type_reads_as_unknown(tmp_path):
    from analytics.kafka.writer import build_batch

    key = L.CONTROL_KEY.pack(0, 99)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(build_batch(0, [RecordSpec(key, b"", 1)], is_control=True, is_transactional=True, producer_id=1, producer_epoch=0))
    [row] = read_segment(path).batches.to_pylist()
    assert row["control_type"] == "UNKNOWN"


def test_delete_horizon_and_log_append_time_bits(tmp_path):
    from analytics.kafka.writer import build_batch

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(
        build_batch(0, [RecordSpec(b"k", None, 10)], delete_horizon_ms=1_700_000_000_000, producer_id=1, producer_epoch=0, base_sequence=0)
        + build_batch(1, [RecordSpec(b"k", b"v", 10)], log_append_time=99)
    )
    read = read_segment(path, records=True)
    a, b = read.batches.to_pylist()
    assert a["delete_horizon_ms"] == a["base_timestamp"] == 1_700_000_000_000 and a["attributes"] & L.DELETE_HORIZON_MASK
    assert b["delete_horizon_ms"] is None and b["timestamp_type"] == "LogAppendTime" and b["max_timestamp"] == 99
    assert [r["timestamp"] for r in read.records.to_pylist()] == [10, 99]  # LogAppendTime: every record gets the batch's
