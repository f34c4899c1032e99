"""The data dir configures the audit: the KRaft metadata log's configs (``cluster_configs``), a
broker's ``server.properties``, and which setting came from where.

Unit tests on a real metadata log of the corpus and on hand-built ones; the resolution's precedence
without Spark; one real broker (module-scoped, KRaft 4.4.0): a compacted topic the cleaner thinned
and a dynamic producer.id.expiration.ms, audited without a flag."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest

from analytics.export.configs import cluster_configs
from analytics.kafka.metadata import (
    CONFIG_RECORD, REMOVE_TOPIC_RECORD, TOPIC_RECORD, ClusterConfigs, apply_records, decode_record, is_known,
)
from analytics.kafka.writer import RecordSpec, build_batch, build_control_batch, segment_file_name, write_file
from tests.conftest import CORPUS

METADATA_LOG = CORPUS / "Danielowo2000__BigDataTechnologies-Version-2" / "kafka_data" / "__cluster_metadata-0"
TOPIC_ID = bytes(range(16))


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _string(s: str | None) -> bytes:
    return b"\x00" if s is None else _uvarint(len(s.encode()) + 1) + s.encode()


def _frame(api_key: int, body: bytes, version: int = 0) -> bytes:
    return _uvarint(1) + _uvarint(api_key) + _uvarint(version) + body + b"\x00"  # no tagged fields


def config(rtype: int, rname: str, name: str, value: str | None) -> bytes:
    return _frame(CONFIG_RECORD, struct.pack(">b", rtype) + _string(rname) + _string(name) + _string(value))


def topic(name: str, tid: bytes = TOPIC_ID) -> bytes:
    return _frame(TOPIC_RECORD, _string(name) + tid)


def remove_topic(tid: bytes = TOPIC_ID) -> bytes:
    return _frame(REMOVE_TOPIC_RECORD, tid)


def _records(values: list[bytes | None]) -> pa.Table:
    return pa.table({"offset": list(range(len(values))), "value": values, "is_control": [False] * len(values)})


def test_config_records_of_a_real_metadata_log_decode():
    """A ConfigRecord of the corpus's metadata log, byte for byte, and the state at the log's end:
    the values kafka-configs would describe for the corpus's topics."""
    if not METADATA_LOG.is_dir():
        pytest.skip(f"corpus not found at {CORPUS}")
    from analytics.kafka.logdir import read_segment

    read = read_segment(METADATA_LOG / "00000000000000000000.log", records=True)
    values = [v for v, c in zip(read.records.column("value").to_pylist(), read.records.column("is_control").to_pylist())
              if not c and v[1] == CONFIG_RECORD]
    first = decode_record(values[0])
    assert (first.api_key, first.version) == (CONFIG_RECORD, 0)
    assert set(first.fields) == {"ResourceType", "ResourceName", "Name", "Value"}
    assert first.fields["ResourceType"] == 2 and first.fields["ResourceName"] in values[0].decode("latin-1")

    rows, errors, read_from = cluster_configs([str(METADATA_LOG.parent)])
    got = {(r["resource_type"], r["resource_name"], r["name"]): r["value"] for r in rows}
    assert errors == [] and len(rows) == 34
    assert got[("topic", "CURRENTLOCATION", "cleanup.policy")] == "compact"
    assert got[("topic", "locations", "retention.ms")] == "604800000"
    assert got[("topic", "__consumer_offsets", "cleanup.policy")] == "compact"
    [note] = read_from.values()
    assert note["snapshot"] is None and note["end_offset"] == 16594 and note["skipped"] == 0
    assert note["records"] == 16593  # every record but the one control record


def test_deletions_topic_removals_and_aborted_metadata_transactions():
    state = ClusterConfigs()
    errors = apply_records(state, _records([
        topic("orders"), config(2, "orders", "cleanup.policy", "compact"),
        config(2, "orders", "retention.ms", "1000"), config(2, "orders", "retention.ms", None),  # deleted
        config(4, "", "producer.id.expiration.ms", "60000"), config(4, "1", "producer.id.expiration.ms", "5000"),
        topic("gone", b"\x01" * 16), config(2, "gone", "cleanup.policy", "compact"), remove_topic(b"\x01" * 16),
        _frame(23, _string(None)), config(2, "orders", "cleanup.policy", "delete"), _frame(25, b""),  # aborted
        _frame(23, _string(None)), config(2, "orders", "segment.ms", "100"), _frame(24, b""),  # committed
    ]), "f")
    assert errors == []
    assert {k: v[0] for k, v in state.configs.items()} == {
        ("topic", "orders", "cleanup.policy"): "compact", ("topic", "orders", "segment.ms"): "100",
        ("broker", "", "producer.id.expiration.ms"): "60000", ("broker", "1", "producer.id.expiration.ms"): "5000"}
    assert state.end_offset == 15 and state.skipped == 0


def test_unknown_types_and_versions_are_skipped_and_counted_a_corrupt_record_is_an_error():
    unknown_version = _frame(CONFIG_RECORD, b"whatever", version=7)
    unknown_type = _frame(99, b"")
    truncated = config(2, "orders", "cleanup.policy", "compact")[:-4]
    assert not is_known(decode_record(unknown_version)) and not is_known(decode_record(unknown_type))
    state = ClusterConfigs()
    errors = apply_records(state, _records([unknown_version, unknown_type, truncated, b"\x05\x04\x00",
                                            config(2, "orders", "cleanup.policy", "compact")]), "f")
    assert [e.error_kind for e in errors] == ["record_decode", "record_decode"]  # truncated, frame version 5
    assert "offset 2" in errors[0].message and "offset 3" in errors[1].message
    assert state.skipped == 2 and {k: v[0] for k, v in state.configs.items()} == {
        ("topic", "orders", "cleanup.policy"): "compact"}


def write_metadata_dir(log_dir: Path, log: list[bytes], snapshot: tuple[int, list[bytes]] | None = None,
                       node_id: int = 1) -> Path:
    """A log dir holding ``__cluster_metadata-0``: one segment of ``log`` (offsets from the snapshot's
    end offset, else 0) and the snapshot ``(end offset, values)``, and its meta.properties."""
    part = log_dir / "__cluster_metadata-0"
    part.mkdir(parents=True)
    (log_dir / "meta.properties").write_text(f"version=1\nnode.id={node_id}\ncluster.id=x\n")
    start = 0
    if snapshot is not None:
        start, values = snapshot
        write_file(part / f"{start:020d}-{1:010d}.checkpoint", [
            build_control_batch(0, "SNAPSHOT_HEADER", producer_id=-1, producer_epoch=-1, timestamp=0,
                                value=bytes(14), is_transactional=False),
            *[build_batch(i + 1, [RecordSpec(value=v)]) for i, v in enumerate(values)]])
    write_file(part / segment_file_name(start), [build_batch(start + i, [RecordSpec(value=v)]) for i, v in enumerate(log)])
    return part


def test_a_snapshot_holds_the_state_below_its_offset_the_log_goes_on_from_it(tmp_path):
    write_metadata_dir(tmp_path / "d", snapshot=(100, [topic("orders"), config(2, "orders", "cleanup.policy", "compact"),
                                                       config(2, "orders", "retention.ms", "1")]),
                       log=[config(2, "orders", "retention.ms", None), config(4, "", "x", "1")], node_id=3)
    rows, errors, read = cluster_configs([str(tmp_path / "d")])
    assert errors == []
    assert [(r["resource_type"], r["resource_name"], r["name"], r["value"], r["offset"], r["node_id"]) for r in rows] == [
        ("broker", "", "x", "1", 101, 3), ("topic", "orders", "cleanup.policy", "compact", 2, 3)]
    [note] = read.values()
    assert note["snapshot"] == f"{100:020d}-{1:010d}.checkpoint" and note["end_offset"] == 102
