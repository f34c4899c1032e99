"""A clean leader change caught in a copy: the old leader appended a batch it never replicated, the
producer sent it again to the new leader, which appended it at the same offsets under its own epoch.
The two copies hold the same records (the epoch field lies outside the CRC): no divergence. Other
records at those offsets still are one.

Seen on a real three-broker cluster (tests/test_healthy_cluster.py) when a broker's log dir was
copied within a second of a preferred leader election, before the old leader truncated its tail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.kafka.sidecars import write_leader_epoch_checkpoint
from analytics.kafka.writer import RecordSpec, build_batch, segment_file_name, write_file
from tests.outs import table_dir

pytestmark = pytest.mark.spark

PID = 7000


def _batch(base: int, count: int, epoch: int, tag: str = "v") -> bytes:
    records = [RecordSpec(key=f"k{base + i}".encode(), value=f"{tag}{base + i}".encode(),
                          timestamp=1_700_000_000_000 + base + i, offset_delta=i) for i in range(count)]
    return build_batch(base, records, producer_id=PID, producer_epoch=0, base_sequence=base,
                       partition_leader_epoch=epoch, last_offset_delta=count - 1)


def _partition(log_dir: Path, name: str, batches: list[bytes], epochs: list[tuple[int, int]]) -> None:
    folder = log_dir / name
    folder.mkdir(parents=True)
    write_file(folder / segment_file_name(0), batches)
    (folder / "leader-epoch-checkpoint").write_bytes(write_leader_epoch_checkpoint(epochs))


@pytest.fixture(scope="module")
def divergence(spark, tmp_path_factory) -> list[dict]:
    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export

    root = tmp_path_factory.mktemp("replica-retry")
    old, new = root / "broker-1", root / "broker-2"
    common = [_batch(0, 5, 0), _batch(5, 5, 0)]
    # retried: the old leader's unreplicated 10..11 (epoch 0), the same batch on the new leader (epoch 1)
    _partition(old, "retried-0", [*common, _batch(10, 2, 0)], [(0, 0)])
    _partition(new, "retried-0", [*common, _batch(10, 2, 1), _batch(12, 4, 1)], [(0, 0), (1, 10)])
    # lost: the old leader's 10..11 hold other records than the new leader's
    _partition(old, "lost-0", [*common, _batch(10, 2, 0, tag="x")], [(0, 0)])
    _partition(new, "lost-0", [*common, _batch(10, 2, 1), _batch(12, 4, 1)], [(0, 0), (1, 10)])
    out = str(root / "out")
    export(None, [str(old), str(new)], out)
    audit(spark, out, AuditConfig())
    return [r.asDict() for r in spark.read.parquet(str(table_dir(out, "replica_divergence"))).collect()]


def _rows(found: list[dict], topic: str) -> list[tuple]:
    return sorted((Path(r["log_dir"]).name, r["kind"], r["first_offset"], r["last_offset"], r["leader_epoch"],
                   r["other_leader_epoch"], r["severity"]) for r in found if r["topic"] == topic)


def test_the_same_batch_under_a_newer_leader_epoch_is_no_divergence(divergence):
    # only the new leader's later writes, which the old one lacks (it is behind: info)
    assert _rows(divergence, "retried") == [("broker-2", "truncated_tail", 12, 15, 1, 0, "info")]


def test_other_records_at_the_same_offsets_still_diverge(divergence):
    assert _rows(divergence, "lost") == [
        ("broker-1", "different_batch", 10, 11, 0, 1, "violation"),
        ("broker-2", "truncated_tail", 12, 15, 1, 0, "info"),
    ]
