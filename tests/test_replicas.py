"""Replicas of a partition exported from several log dirs: compared with each other
(``replica_divergence``), never counted as duplicates of each other.

The log dirs are written byte for byte with the writer: three brokers' copies of a partition after
an unclean election (the old leader's tail, the new leader's batches of a newer leader epoch, a
follower that is only behind), a partition with a hole in one replica, a compacted partition whose
cleaner ran on one replica only, and a sound partition held identically by all three.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.kafka.sidecars import write_leader_epoch_checkpoint
from analytics.kafka.writer import RecordSpec, build_batch, segment_file_name, write_file
from tests.outs import table_dir

pytestmark = pytest.mark.spark

PID = 4000


def _batch(base: int, count: int, *, epoch: int, pid: int = PID, seq: int | None = None, tag: str = "v",
           keep: int | None = None) -> bytes:
    """``count`` records at ``base``.. by ``pid`` (sequence = offset unless given), written under leader
    ``epoch``; ``keep`` thins it as a cleaner does (its first ``keep`` records, the same offsets)."""
    records = [RecordSpec(key=f"k{base + i}".encode(), value=f"{tag}{base + i}".encode(), timestamp=1_700_000_000_000 + base + i,
                          offset_delta=i) for i in range(count)]
    return build_batch(base, records[:keep] if keep is not None else records, producer_id=pid, producer_epoch=0,
                       base_sequence=base if seq is None else seq, partition_leader_epoch=epoch,
                       last_offset_delta=count - 1)


def _partition(log_dir: Path, name: str, batches: list[bytes], epochs: list[tuple[int, int]]) -> None:
    folder = log_dir / name
    folder.mkdir(parents=True)
    write_file(folder / segment_file_name(0), batches)
    (folder / "leader-epoch-checkpoint").write_bytes(write_leader_epoch_checkpoint(epochs))


def _replicas(root: Path) -> list[Path]:
    a, b, c = (root / f"broker-{i}" for i in (1, 2, 3))
    common = [_batch(o, 10, epoch=0) for o in range(0, 80, 10)]
    # unclean election: a (the old leader) wrote 80..129 under epoch 0 with acks=1; b (a stale follower
    # that ended at 79) was elected under epoch 1 and took other writes at 80..109; c is behind at 59
    _partition(a, "orders-0", common + [_batch(o, 10, epoch=0) for o in range(80, 130, 10)], [(0, 0)])
    _partition(b, "orders-0", common + [_batch(80, 15, epoch=1, pid=PID + 1, seq=0, tag="w"),
                                        _batch(95, 15, epoch=1, pid=PID + 1, seq=15, tag="w")], [(0, 0), (1, 80)])
    _partition(c, "orders-0", common[:6], [(0, 0)])
    # c lacks 20..29 in the middle of what every replica holds
    sound = [_batch(o, 10, epoch=0) for o in range(0, 50, 10)]
    for d in (a, b):
        _partition(d, "holes-0", sound, [(0, 0)])
    _partition(c, "holes-0", sound[:2] + sound[3:], [(0, 0)])
    # compacted: a's cleaner thinned 10..19 and removed 20..29; b and c hold them whole
    for d in (b, c):
        _partition(d, "table-0", sound, [(0, 0)])
    _partition(a, "table-0", [sound[0], _batch(10, 10, epoch=0, keep=3), *sound[3:]], [(0, 0)])
    # the same bytes on all three brokers
    for d in (a, b, c):
        _partition(d, "sound-0", sound, [(0, 0)])
    # a second producer wrote the first one's five records again: a duplicate within each of two replicas
    again = build_batch(5, [RecordSpec(key=f"k{o}".encode(), value=f"v{o}".encode(), timestamp=1_700_000_000_000 + o)
                            for o in range(5)], producer_id=PID + 9, producer_epoch=0, base_sequence=0,
                        partition_leader_epoch=0)
    for d in (a, b):
        _partition(d, "copied-0", [_batch(0, 5, epoch=0), again], [(0, 0)])
    return [a, b, c]


@pytest.fixture(scope="module")
def replicated(spark, tmp_path_factory):
    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export

    root = tmp_path_factory.mktemp("replicas")
    dirs = _replicas(root)
    out = str(root / "out")
    export(None, [str(d) for d in dirs], out, records=True)
    result = audit(spark, out, AuditConfig(cleanup_policy={"table": "compact"}))
    rows = spark.read.parquet(str(table_dir(out, "replica_divergence"))).collect()
    return dirs, out, result, [r.asDict() for r in rows]


def _rows(found, topic):
    return sorted((Path(r["log_dir"]).name, Path(r["other_log_dir"]).name, r["kind"], r["first_offset"],
                   r["last_offset"], r["leader_epoch"], r["other_leader_epoch"], r["severity"], r["batches"],
                   r["other_batches"]) for r in found if r["topic"] == topic)


def test_an_unclean_election_diverges_where_the_leader_epochs_say(replicated):
    _, _, _, found = replicated
    assert _rows(found, "orders") == [
        # the old leader's 80..109 and the new leader's differ; its 110..129 past the new leader's end
        # were written under epoch 0, and the new leader's epoch there is 1: the broker truncates them
        ("broker-1", "broker-2", "different_batch", 80, 109, 0, 1, "violation", 3, 2),
        ("broker-1", "broker-2", "truncated_tail", 110, 129, 0, 1, "violation", 2, 0),
        # the follower is only behind both
        ("broker-1", "broker-3", "truncated_tail", 60, 129, 0, 0, "info", 7, 0),
        ("broker-2", "broker-3", "truncated_tail", 60, 109, 1, 0, "info", 4, 0),
    ]


def test_a_hole_in_one_replica_is_missing_there_and_compaction_explains_it(replicated):
    _, _, _, found = replicated
    assert _rows(found, "holes") == [
        ("broker-1", "broker-3", "missing", 20, 29, 0, 0, "violation", 1, 0),
        ("broker-2", "broker-3", "missing", 20, 29, 0, 0, "violation", 1, 0),
    ]
    table = [r for r in found if r["topic"] == "table"]
    # the thinned batch (same offsets, producer and sequence, fewer records) is no divergence
    assert sorted((Path(r["log_dir"]).name, Path(r["other_log_dir"]).name, r["first_offset"], r["severity"],
                   r["explained_by"]) for r in table) == [
        ("broker-2", "broker-1", 20, "explained", "compaction"),
        ("broker-3", "broker-1", 20, "explained", "compaction"),
    ]


def test_identical_replicas_neither_diverge_nor_duplicate(replicated):
    _, out, _, found = replicated
    import pyarrow.parquet as pq

    assert not [r for r in found if r["topic"] == "sound"]
    # every record is held by three replicas: copies are counted within each log dir, so none
    duplicates = pq.read_table(str(table_dir(out, "record_duplicates"))).to_pylist()
    assert not [r for r in duplicates if r["topic"] != "copied"]
    summary = json.loads(Path(out, "summary.json").read_text())
    assert summary["replica_divergence"] == {"info": 2, "explained": 2, "violation": 4}
    verdicts = pq.read_table(str(table_dir(out, "batch_verdicts")), columns=["topic", "verdict"]).to_pylist()
    assert not [v for v in verdicts if v["topic"] == "sound" and v["verdict"] == "DUPLICATE"]


def test_a_record_copied_within_one_replica_is_a_duplicate_of_that_replica(replicated):
    import pyarrow.parquet as pq

    _, out, result, found = replicated
    rows = pq.read_table(str(table_dir(out, "record_duplicates"))).to_pylist()
    assert sorted((Path(r["log_dir"]).name, r["topic"], r["offset"], r["first_offset"]) for r in rows) == [
        ("broker-1", "copied", o, o - 5) for o in range(5, 10)] + [("broker-2", "copied", o, o - 5) for o in range(5, 10)]
    assert result.record_duplicates == 10
    assert not [r for r in found if r["topic"] == "copied"]


def test_replica_consistency_fails_on_the_violations_alone(spark, replicated):
    from expectations.validate import validate

    _, out, _, found = replicated
    result = validate(spark, out)
    check = [c for c in result.checks if c.suite == "replica_consistency"]
    assert [c.id for c in check] == ["no_replica_divergence"]
    # the unclean election's two ranges and the hole's two: not the follower behind, not compaction
    assert not check[0].success and check[0].unexpected_count == 4
    assert sorted(r["kind"] for r in check[0].sample) == ["different_batch", "missing", "missing", "truncated_tail"]
    assert len([r for r in found if r["severity"] == "violation"]) == 4


def test_the_report_shows_the_divergent_ranges(spark, replicated):
    from analytics.report.build import report_data
    from analytics.report.render import render

    _, out, _, _ = replicated
    page = render(report_data(spark, out))
    section = page[page.index('id="replicas"'):]
    section = section[:section.index("</section>")]
    assert "5 partitions exported from several log dirs" in section
    assert section.count("different_batch") == 1 and section.count("truncated_tail") == 3
    rows = section[section.index("<tbody>"):]
    assert rows.rindex(">violation<") < rows.index(">info<")  # violations first


def test_explain_names_what_every_other_replica_holds_at_the_offset(replicated):
    from analytics.forensics import explain

    _, out, _, _ = replicated
    e = explain(out, "orders", 0, 100, log_dir="broker-1")
    others = {Path(r["log_dir"]).name: r for r in e.replicas}
    assert set(others) == {"broker-2", "broker-3"}
    two, three = others["broker-2"], others["broker-3"]
    # the new leader holds other records at the offset, written under leader epoch 1 by another producer
    assert not two["same"] and (two["batch"]["base_offset"], two["batch"]["producer_id"],
                                two["batch"]["partition_leader_epoch"]) == (95, PID + 1, 1)
    assert (two["divergence"]["kind"], two["divergence"]["severity"]) == ("different_batch", "violation")
    # the follower holds nothing there: its log ends at 59, and it is only behind
    assert three["batch"] is None and three["log_end"] == 59
    assert (three["divergence"]["kind"], three["divergence"]["severity"]) == ("truncated_tail", "info")
    text = " ".join(e.reasoning)
    assert "broker-2 holds a different batch 95..109: producer 4001 epoch 0 sequences 15..29" in text
    assert "replica_divergence: different_batch 80..109 (violation; leader epoch 0 in" in text
    assert "broker-3 holds no batch at offset 100: its log ends at offset 59" in text
    # where they agree, the same batch
    same = explain(out, "orders", 0, 5, log_dir="broker-1")
    assert all(r["same"] and r["divergence"] is None for r in same.replicas)
    assert "holds the same batch 0..9 (CRC 0x" in " ".join(same.reasoning)
