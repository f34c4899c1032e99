"""Real broker data directories (../shared/corpus): every file reads cleanly, and an independent
decoder (kafka-python's ``MemoryRecords``) sees the same batches and records."""

from __future__ import annotations

import pytest

from analytics.kafka.discovery import discover
from analytics.kafka.logdir import read_log_dirs, read_segment
from analytics.kafka.reader import batches_from_arrow
from analytics.kafka.sidecars import read_sidecar

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def corpus_partitions(corpus_dir):
    return [part for log_dir in discover(corpus_dir) for part in log_dir.partitions]


def test_discovery_finds_every_segment_and_snapshot(corpus_dir, corpus_partitions):
    logs = sorted(p for p in corpus_dir.rglob("*.log"))
    snapshots = sorted(p for p in corpus_dir.rglob("*.snapshot"))
    assert len(logs) == 241 and len(snapshots) == 221
    assert sorted(s.path for part in corpus_partitions for s in part.segments) == logs
    assert sorted(s.path for part in corpus_partitions for s in part.snapshots) == snapshots
    for part in corpus_partitions:  # segments are in base-offset order
        offsets = [s.base_offset for s in part.segments]
        assert offsets == sorted(offsets)


def test_every_segment_reads_with_no_error_and_every_crc_valid(corpus_partitions):
    for part in corpus_partitions:
        for segment in part.segments:
            read = read_segment(segment.path, topic=part.topic, partition=part.partition, records=True)
            assert read.errors == [], segment.path
            assert read.info.valid_bytes == read.info.size_bytes == segment.path.stat().st_size
            assert all(read.batches.column("crc_valid").to_pylist())


def test_every_snapshot_reads_with_no_error(corpus_partitions):
    entries = 0
    for part in corpus_partitions:
        for snap in part.snapshots:
            result = read_sidecar(snap.path, topic=part.topic, partition=part.partition)
            assert result.errors == [], snap.path
            assert all(r.snapshot_offset == snap.base_offset for r in result.rows)
            entries += len(result.rows)
    assert entries > 0


def test_batches_and_records_match_an_independent_decoder(corpus_partitions):
    from kafka.record.memory_records import MemoryRecords

    total_batches = total_records = 0
    for part in corpus_partitions:
        for segment in part.segments:
            data = segment.path.read_bytes()
            read = read_segment(segment.path, topic=part.topic, partition=part.partition, records=True)
            ours = [r for rb in read.batches.to_batches() for r in batches_from_arrow(rb)]
            theirs = []
            records = 0
            mr = MemoryRecords(data)
            while mr.has_next():
                batch = mr.next_batch()
                crc_ok = batch.validate_crc()  # kafka-python validates only before iterating
                recs = list(batch)
                records += len(recs)
                assert crc_ok, segment.path
                if batch.magic == 2:
                    theirs.append(
                        (batch.base_offset, batch.base_offset + batch.last_offset_delta, len(recs), batch.producer_id,
                         batch.producer_epoch, batch.base_sequence, batch.is_transactional, batch.is_control_batch,
                         batch.max_timestamp)
                    )
                else:
                    theirs.append((recs[0].offset, recs[-1].offset, len(recs), -1, -1, -1, False, False, None))
            mine = [
                (b.base_offset, b.last_offset, b.record_count, b.producer_id, b.producer_epoch, b.base_sequence,
                 b.is_transactional, b.is_control, b.max_timestamp if b.magic == 2 else None)
                for b in ours
            ]
            assert mine == theirs, segment.path
            assert read.records.num_rows == records
            offsets = read.records.column("offset").to_pylist()
            assert offsets == sorted(offsets)
            total_batches += len(ours)
            total_records += records
    assert total_batches > 90_000 and total_records > 200_000


def test_the_corpus_holds_the_forms_it_is_said_to_hold(corpus_dir):
    tables = read_log_dirs([corpus_dir])
    batches = tables.table("batches")
    assert tables.parse_errors == []
    assert set(batches.column("compression").to_pylist()) >= {"none", "gzip", "snappy", "lz4"}
    assert set(batches.column("magic").to_pylist()) == {1, 2}
    assert "COMMIT" in batches.column("control_type").to_pylist()
    assert any(batches.column("is_transactional").to_pylist())
    assert len(tables.producer_snapshots) > 0
