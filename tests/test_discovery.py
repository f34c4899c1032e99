"""Finding files in log directories, and accounting for every file of a directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.kafka import errors as E
from analytics.kafka.discovery import discover, parse_partition_dir
from analytics.kafka.logdir import read_log_dirs
from analytics.kafka.writer import RecordSpec, build_batch, segment_file_name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", ("orders", 0, None)),
        ("my.topic_with-dashes-12", ("my.topic_with-dashes", 12, None)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49, None)),
        ("t-3.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete", ("t", 3, "delete")),
        ("a.b-0.0123456789abcdef0123456789abcdef-future", ("a.b", 0, "future")),
        ("x-7.0123456789abcdef0123456789abcdef-stray", ("x", 7, "stray")),
        ("orders", None),
        ("orders-", None),
        ("orders-x", None),
        ("t-3.9fcb-delete", None),
    ],
)
def test_partition_folder_names(name, expected):
    assert parse_partition_dir(name) == expected


def _segment(path: Path, base: int, n: int = 2) -> None:
    data = b"".join(build_batch(base + i, [RecordSpec(b"k", b"v", 1)]) for i in range(n))
    path.write_bytes(data)


def test_segments_are_ordered_by_their_offset_and_files_are_classified(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    for base in (100, 2, 30):
        _segment(part / segment_file_name(base), base)
    for extra in ("00000000000000000002.index", "00000000000000000002.timeindex", "00000000000000000030.snapshot",
                  "00000000000000000030.txnindex", "00000000000000000002.log.deleted", "00000000000000000030.log.swap",
                  "notes.txt", "leader-epoch-checkpoint", "partition.metadata"):
        (part / extra).write_bytes(b"")
    [log_dir] = discover(tmp_path)
    [p] = log_dir.partitions
    assert [s.base_offset for s in p.segments] == [2, 30, 100]
    assert [s.base_offset for s in p.snapshots] == [30] and [s.base_offset for s in p.txn_indexes] == [30]
    assert sorted(x.name for x in p.ignored) == ["00000000000000000002.index", "00000000000000000002.timeindex"]
    assert sorted(x.name for x in p.temporary) == ["00000000000000000002.log.deleted", "00000000000000000030.log.swap"]
    assert [x.name for x in p.unknown] == ["notes.txt"]
    assert p.leader_epoch_checkpoint and p.partition_metadata


def test_a_partition_folder_or_a_single_file_is_accepted(tmp_path):
    part = tmp_path / "orders.v2-5"
    part.mkdir()
    _segment(part / segment_file_name(0), 0)
    [by_folder] = discover(part)
    [by_file] = discover(part / segment_file_name(0))
    for log_dir in (by_folder, by_file):
        [p] = log_dir.partitions
        assert (p.topic, p.partition, [s.base_offset for s in p.segments]) == ("orders.v2", 5, [0])


def test_a_folder_named_like_a_partition_that_holds_folders_is_walked_into(tmp_path):
    # "project-2" parses as topic "project", partition 2, but it is a copied tree holding a log dir.
    inner = tmp_path / "project-2" / "kafka-data" / "t-1"
    inner.mkdir(parents=True)
    _segment(inner / segment_file_name(0), 0)
    [log_dir] = discover(tmp_path)
    assert log_dir.path == tmp_path / "project-2" / "kafka-data"
    assert [(p.topic, p.partition) for p in log_dir.partitions] == [("t", 1)]


def test_missing_path_raises():
    with pytest.raises(FileNotFoundError):
        discover("/nonexistent/segaudit")


def test_every_byte_of_every_file_of_a_log_dir_is_accounted_for(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    _segment(part / segment_file_name(0), 0, 5)
    with open(part / segment_file_name(5), "wb") as f:  # a torn tail
        f.write(build_batch(5, [RecordSpec(b"k", b"v", 1)]) + b"\x00\x00\x00\x00\x00\x00\x00\x06\x00\x00")
    (part / "00000000000000000005.snapshot").write_bytes(b"\x00\x01garbage")
    (part / "stray.bin").write_bytes(b"x" * 33)
    (part / "00000000000000000000.log.deleted").write_bytes(b"y" * 7)
    (tmp_path / "log-start-offset-checkpoint").write_bytes(b"0\n1\nt 0 0\n")
    (tmp_path / "what-is-this").write_bytes(b"z" * 11)
    tables = read_log_dirs([tmp_path])
    errors_by_file: dict[str, int] = {}
    for e in tables.parse_errors:
        errors_by_file[Path(e.file).name] = errors_by_file.get(Path(e.file).name, 0) + e.bytes_affected
    for seg in tables.segments:
        assert seg.valid_bytes + errors_by_file.get(Path(seg.file).name, 0) == seg.size_bytes
    kinds = {Path(e.file).name: e.error_kind for e in tables.parse_errors}
    assert kinds == {
        "00000000000000000005.log": E.TRUNCATED,
        "00000000000000000005.snapshot": E.CORRUPT_SIDECAR,
        "stray.bin": E.UNKNOWN_FILE,
        "00000000000000000000.log.deleted": E.TEMPORARY_FILE,
        "what-is-this": E.UNKNOWN_FILE,
    }
    assert errors_by_file["00000000000000000005.snapshot"] == 9
    assert errors_by_file["stray.bin"] == 33 and errors_by_file["what-is-this"] == 11
    assert [(c.checkpoint, c.topic, c.partition, c.offset) for c in tables.checkpoints] == [("log-start-offset", "t", 0, 0)]
    assert tables.table("batches").num_rows == 6


def test_a_brokers_temporary_segments_are_accounted_for_and_not_replayed(tmp_path):
    """``.deleted`` (retention or compaction removing a segment), ``.cleaned`` (a compaction's output
    being written) and ``.swap`` (one about to replace its originals): a broker recovering from a
    crash deletes the first two and completes the swap. The export reads the log as it stands: each
    is one ``temporary_file`` row holding its bytes, counted in the coverage as left unread by
    design, and none of their batches is a row (they copy the segment's here)."""
    import json

    import pyarrow.parquet as pq

    from analytics.export import export
    from tests.outs import table_dir

    part = tmp_path / "logs" / "orders-0"
    part.mkdir(parents=True)
    segment = b"".join(build_batch(base, [RecordSpec(key=b"k", value=b"v", timestamp=1, offset_delta=0)])
                       for base in range(3))
    (part / segment_file_name(0)).write_bytes(segment)
    leftovers = [segment_file_name(0) + suffix for suffix in (".deleted", ".cleaned", ".swap")]
    for name in leftovers:
        (part / name).write_bytes(segment)
    out = tmp_path / "out"
    export(None, [str(tmp_path / "logs")], str(out))
    errors = pq.read_table(str(table_dir(str(out), "parse_errors"))).to_pylist()
    assert sorted((Path(e["file"]).name, e["error_kind"], e["bytes_affected"]) for e in errors) == sorted(
        (name, E.TEMPORARY_FILE, len(segment)) for name in leftovers)
    assert pq.read_table(str(table_dir(str(out), "batches"))).num_rows == 3
    coverage = json.loads((out / "_export.json").read_text())["coverage"]
    assert coverage["not_data"] == {E.TEMPORARY_FILE: {"files": 3, "bytes": 3 * len(segment)}}
    assert coverage["not_read"] == {}
