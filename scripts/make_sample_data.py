"""Write the bundled sample log directory ``data/sample-logdir`` (deterministic: same bytes every run).

    .venv/bin/python scripts/make_sample_data.py [OUT_DIR]

A small broker data directory with the forms the reader handles: idempotent producers with
every codec, a transactional producer with COMMIT and ABORT markers (and its ``.txnindex``), a
rolled segment with its producer snapshot, a legacy magic-1 segment from before a format
upgrade, a torn last batch in an active segment, and the partition and log-dir checkpoints.
``tests/test_sample_data.py`` checks that the committed files equal this script's output.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics.kafka import sidecars  # noqa: E402
from analytics.kafka.model import AbortedTxn, CheckpointEntry, LeaderEpochEntry, SnapshotEntry  # noqa: E402
from analytics.kafka.writer import (  # noqa: E402
    RecordSpec,
    build_batch,
    build_end_txn_marker,
    build_legacy_message,
    build_legacy_wrapper,
    segment_file_name,
    write_file,
)

T0 = 1_763_700_000_000  # epoch ms
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _value(i: int) -> bytes:
    return b'{"order":%d,"amount":%d,"currency":"EUR"}' % (i, (i * 37) % 1000)


def orders_0(part: Path) -> list[sidecars.SnapshotEntry]:
    """Two idempotent producers across every codec, then a transactional one; one roll."""
    first, second = [], []
    offset = 0
    seqs = {4001: 0, 4002: 0}
    for i in range(40):
        pid = 4001 + i % 2
        n = 1 + i % 4
        recs = [RecordSpec(b"order-%d" % (offset + k), _value(offset + k), T0 + offset * 50 + k) for k in range(n)]
        batch = build_batch(offset, recs, compression=CODECS[i % 5], producer_id=pid, producer_epoch=0,
                            base_sequence=seqs[pid], partition_leader_epoch=3)
        (first if i < 24 else second).append(batch)
        seqs[pid] += n
        offset += n
        if i == 23:
            roll = offset
            snapshot = [
                SnapshotEntry("orders", 0, roll, pid, 0, seqs[pid] - 1, -1, 0, 0, -1, -1) for pid in (4001, 4002)
            ]
    # a transactional producer: one committed and one aborted transaction
    txn_pid, ce = 5001, 7
    aborted = []
    for txn, end in enumerate(("COMMIT", "ABORT")):
        start = offset
        for k in range(3):
            second.append(build_batch(offset, [RecordSpec(b"pay-%d" % offset, _value(offset), T0 + 90_000 + offset)],
                                      producer_id=txn_pid, producer_epoch=2, base_sequence=txn * 3 + k,
                                      is_transactional=True, partition_leader_epoch=3))
            offset += 1
        second.append(build_end_txn_marker(offset, end, producer_id=txn_pid, producer_epoch=2, coordinator_epoch=ce,
                                           timestamp=T0 + 95_000 + offset, partition_leader_epoch=3))
        if end == "ABORT":
            aborted.append(AbortedTxn("orders", 0, "", 0, txn_pid, start, offset, start))
        offset += 1
    write_file(part / segment_file_name(0), first)
    write_file(part / segment_file_name(roll), second)
    # The snapshot at the roll holds each producer's last batch (lastOffset/offsetDelta from the log).
    snapshot = _with_last_batches(part / segment_file_name(0), snapshot)
    (part / segment_file_name(roll, ".snapshot")).write_bytes(sidecars.write_snapshot(snapshot))
    (part / segment_file_name(roll, ".txnindex")).write_bytes(sidecars.write_txnindex(aborted))
    (part / "leader-epoch-checkpoint").write_bytes(
        sidecars.write_leader_epoch_checkpoint([LeaderEpochEntry("orders", 0, 0, 0), LeaderEpochEntry("orders", 0, 3, 0)])
    )
    (part / "partition.metadata").write_bytes(sidecars.write_partition_metadata("jzT4n1BvQqSCKUwKWvlh1A"))
    return offset


def _with_last_batches(segment: Path, entries: list[SnapshotEntry]) -> list[SnapshotEntry]:
    from analytics.kafka.logdir import read_segment

    rows = read_segment(segment).batches.to_pylist()
    out = []
    for e in entries:
        last = [r for r in rows if r["producer_id"] == e.producer_id][-1]
        out.append(
            SnapshotEntry(e.topic, e.partition, e.snapshot_offset, e.producer_id, e.producer_epoch, last["last_sequence"],
                          last["last_offset"], last["last_offset"] - last["base_offset"], last["max_timestamp"], -1, -1)
        )
    return out


def orders_1(part: Path) -> int:
    """A legacy magic-1 segment (uncompressed and a gzip wrapper), then v2 with a torn last batch."""
    legacy = [build_legacy_message(i, b"k%d" % i, _value(i), magic=1, timestamp=T0 + i) for i in range(5)]
    legacy.append(build_legacy_wrapper([5, 6, 7], [RecordSpec(b"k%d" % i, _value(i), T0 + i) for i in (5, 6, 7)],
                                       compression="gzip", magic=1))
    write_file(part / segment_file_name(0), legacy)
    v2 = [build_batch(8 + i, [RecordSpec(b"k%d" % (8 + i), _value(8 + i), T0 + 10_000 + i)], producer_id=4003,
                      producer_epoch=0, base_sequence=i, partition_leader_epoch=5) for i in range(10)]
    v2[-1] = v2[-1][:45]  # the broker stopped mid-write: recovery would truncate these bytes
    write_file(part / segment_file_name(8), v2)
    return 17


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for p in out.rglob("*"):
        if p.is_file():
            p.unlink()
    (out / "orders-0").mkdir(exist_ok=True)
    (out / "orders-1").mkdir(exist_ok=True)
    end0 = orders_0(out / "orders-0")
    end1 = orders_1(out / "orders-1")
    checkpoints = {
        "log-start-offset-checkpoint": [CheckpointEntry("log-start-offset", "orders", 0, 0), CheckpointEntry("log-start-offset", "orders", 1, 0)],
        "recovery-point-offset-checkpoint": [CheckpointEntry("recovery-point-offset", "orders", 0, end0), CheckpointEntry("recovery-point-offset", "orders", 1, 8)],
        "replication-offset-checkpoint": [CheckpointEntry("replication-offset", "orders", 0, end0), CheckpointEntry("replication-offset", "orders", 1, end1)],
    }
    for name, entries in checkpoints.items():
        (out / name).write_bytes(sidecars.write_offset_checkpoint(entries))
    (out / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=segaudit-sample\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "data" / "sample-logdir")
