"""A topic is its id: two incarnations of a topic name (deleted, then created again) are two topics.

Kafka renames a deleted partition's folder ``<topic>-<p>.<uid>-delete`` and removes it after
``file.delete.delay.ms``; a copy of the data dir taken before then holds both incarnations, each
folder's ``partition.metadata`` naming its topic id. The log dirs here are written byte for byte:

- ``one``: a recreated topic whose new incarnation repeats the old one's records (keys, values and
  timestamps), the old folder still beside it, and a folder with no ``partition.metadata`` (a
  broker before 2.8), whose identity is its name;
- ``left`` and ``right``: the new incarnation in one log dir and the old one (another producer's
  batches at the same offsets) in the other; and a folder moved between the two (the leftover
  ``-delete`` folder shares the topic id), which stays a replica of the live one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.kafka.sidecars import write_leader_epoch_checkpoint, write_partition_metadata
from analytics.kafka.writer import RecordSpec, build_batch, segment_file_name, write_file
from tests.outs import table_dir

pytestmark = pytest.mark.spark

OLD, NEW, MOVED = "b2xkLWluY2FybmF0aW9uMA", "bmV3LWluY2FybmF0aW9uMA", "bW92ZWQtdG9waWMtaWQwMA"
UID = "9fcb5b7f1ba24c1a8d5d8ebae6cafb6b"


START = 1_700_000_000_000


def _batches(pid: int, count: int = 6, size: int = 10, start: int = START) -> list[bytes]:
    """``count`` batches of ``size`` records from offset 0, producer ``pid`` in sequence, written from
    ``start`` (epoch ms)."""
    out = []
    for base in range(0, count * size, size):
        records = [RecordSpec(key=f"k{base + i}".encode(), value=f"v{base + i}".encode(),
                              timestamp=start + base + i, offset_delta=i) for i in range(size)]
        out.append(build_batch(base, records, producer_id=pid, producer_epoch=0, base_sequence=base,
                               partition_leader_epoch=0, last_offset_delta=size - 1))
    return out


def _partition(log_dir: Path, folder: str, batches: list[bytes], topic_id: str | None) -> None:
    path = log_dir / folder
    path.mkdir(parents=True)
    write_file(path / segment_file_name(0), batches)
    (path / "leader-epoch-checkpoint").write_bytes(write_leader_epoch_checkpoint([(0, 0)]))
    if topic_id is not None:
        (path / "partition.metadata").write_bytes(write_partition_metadata(topic_id))


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    import pyarrow.parquet as pq

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export

    root = tmp_path_factory.mktemp("incarnations")
    one, left, right = root / "one", root / "left", root / "right"
    # the old incarnation's producer 4000 wrote 60 records; the new one's 5000 wrote them again
    _partition(one, f"orders-0.{UID}-delete", _batches(4000), OLD)
    _partition(one, "orders-0", _batches(5000), NEW)
    _partition(one, "legacy-0", _batches(6000), None)
    _partition(left, "orders-0", _batches(5000), NEW)
    _partition(right, f"orders-0.{UID}-delete", _batches(4000), OLD)
    # moved from right to left: right's leftover is the same incarnation, 20 offsets behind
    _partition(left, "moved-0", _batches(7000), MOVED)
    _partition(right, f"moved-0.{UID}-delete", _batches(7000, count=4), MOVED)
    out = str(root / "out")
    export(None, [str(one), str(left), str(right)], out, records=True)
    result = audit(spark, out, AuditConfig())

    def table(name: str) -> list[dict]:
        return pq.read_table(str(table_dir(out, name))).to_pylist()

    return result, table


def test_two_incarnations_in_one_log_dir_are_two_histories(audited):
    _, table = audited
    verdicts = [v for v in table("batch_verdicts") if v["file"].split("/")[-3] == "one"]
    ids = {v["file"].split("/")[-2]: v["topic_id"] for v in verdicts}
    assert ids == {f"orders-0.{UID}-delete": OLD, "orders-0": NEW, "legacy-0": None}
    # each history starts at offset 0 with its producer's sequence 0: nothing overlaps, nothing repeats
    assert {(v["topic_id"], v["verdict"]) for v in verdicts} == {(OLD, "OK"), (NEW, "OK"), (None, "OK")}
    assert [v for v in verdicts if v["offset_overlap"]] == []
    assert sum(v["topic_id"] == OLD for v in verdicts) == sum(v["topic_id"] == NEW for v in verdicts) == 6
    # the old incarnation is a deleted one (its -delete folders beside the name another id holds)
    assert {(v["topic_id"], v["topic_deleted"]) for v in verdicts} == {(OLD, True), (NEW, False), (None, False)}


def test_records_repeated_by_a_new_incarnation_are_no_duplicates(audited):
    _, table = audited
    assert table("record_duplicates") == []


def test_another_incarnation_in_another_log_dir_is_no_replica(audited):
    _, table = audited
    divergence = table("replica_divergence")
    assert [r for r in divergence if r["topic"] == "orders"] == []
    # the moved partition's leftover is the same topic (its id): compared, and only behind
    assert [(Path(r["log_dir"]).name, Path(r["other_log_dir"]).name, r["kind"], r["first_offset"],
             r["last_offset"], r["severity"], r["topic_id"]) for r in divergence if r["topic"] == "moved"] == [
        ("left", "right", "truncated_tail", 40, 59, "info", MOVED)]


def test_the_derived_tables_name_the_incarnation(audited):
    result, table = audited
    sessions = {(s["topic"], s["producer_id"]): s["topic_id"] for s in table("producer_sessions")
                if s["topic"] == "orders" and s["log_dir"].endswith("/one")}
    assert sessions == {("orders", 4000): OLD, ("orders", 5000): NEW}
    deleted = {(s["topic"], s["producer_id"], s["topic_deleted"]) for s in table("producer_sessions")}
    assert deleted == {("orders", 4000, True), ("orders", 5000, False), ("legacy", 6000, False),
                       ("moved", 7000, False)}  # the moved replica's -delete folder holds the live id
    assert result.verdicts.get("DUPLICATE", 0) == 0 and result.record_duplicates == 0


def test_the_summary_counts_the_folders_known_by_name_alone(audited):
    """legacy-0 has no partition.metadata: the summary and the command's line say so."""
    import json

    from analytics.audit.audit_plan import described_identity

    result, _ = audited
    summary = json.loads(Path(result.out, "summary.json").read_text())
    assert summary["topic_identity"] == {
        "partition_folders": 7, "without_topic_id": 1, "deleted_skipped": False,
        "deleted_incarnations": {OLD: {"topic": "orders", "folders": 2, "deleted_at_ms": None,
                                       "evidence": f"its -delete folder beside the name held by topic id {NEW}"}}}
    line = described_identity(summary["topic_identity"])
    assert line.startswith("1 of 7 partition folders has no topic id"), line
    assert f"; a deleted incarnation of orders (topic id {OLD}: its -delete folder beside" in line, line


def test_the_report_names_the_incarnations_of_a_partition(audited, spark):
    """The report's partitions are keyed by name in a log dir: the row of ``one``'s orders-0 names
    its two topic ids and the deleted one; a partition of one live incarnation names none."""
    from analytics.report.build import report_data
    from analytics.report.sections import partitions

    result, _ = audited
    data = report_data(spark, result.out)
    named = {(Path(p["log_dir"]).name, p["topic"]): p.get("incarnations") for p in data["partitions"]}
    assert named[("one", "orders")] == [{"topic_id": OLD, "deleted": True}, {"topic_id": NEW, "deleted": False}]
    assert named[("right", "orders")] == [{"topic_id": OLD, "deleted": True}]
    assert named[("left", "orders")] is None and named[("one", "legacy")] is None and named[("right", "moved")] is None
    assert f"topic ids {OLD} (deleted), {NEW}" in partitions(data)


def test_explain_tells_the_folders_of_one_log_dir_apart(audited):
    """``explain`` in a log dir holding two incarnations of ``orders-0``: the live folder's batch by
    default, the other folder named, never "the log repeats offsets"; ``--log-dir`` naming a folder
    explains that one; the neighbours are the explained folder's only."""
    from analytics.forensics.offset import explain

    result, _ = audited
    live = explain(result.out, "orders", 0, 25, log_dir="one")
    assert Path(live.folder).name == "orders-0" and [Path(b["file"]).parent.name for b in live.batches] == ["orders-0"]
    assert live.batches[0]["producer_id"] == 5000
    assert {b["producer_id"] for b in [*live.before, *live.after]} == {5000}
    assert not any("repeats offsets" in line for line in live.reasoning), live.reasoning
    assert any(line.startswith("The log dir holds 2 folders of the partition") and f"orders-0.{UID}-delete" in line
               for line in live.reasoning), live.reasoning
    old = explain(result.out, "orders", 0, 25, log_dir=f"one/orders-0.{UID}-delete")
    assert Path(old.folder).name == f"orders-0.{UID}-delete" and old.batches[0]["producer_id"] == 4000
    assert {b["producer_id"] for b in [*old.before, *old.after]} == {4000}
    # the answer names the incarnation: each folder's topic id
    from analytics.cli.forensic import explain_text

    assert explain_text(live).splitlines()[0].endswith(f"(topic id {NEW})") and live.batches[0]["topic_id"] == NEW
    assert explain_text(old).splitlines()[0].endswith(f"(topic id {OLD}, deleted)") and old.batches[0]["topic_id"] == OLD
    assert old.batches[0]["topic_deleted"] and not live.batches[0]["topic_deleted"]
    # replicas are folders of the same incarnation: right's orders-0 is the deleted topic's, no replica
    left = explain(result.out, "orders", 0, 25, log_dir="left")
    assert [(Path(r["log_dir"]).name, r["same"]) for r in left.replicas] == [("one", True)], left.replicas
    gone = explain(result.out, "orders", 0, 25, log_dir="right")
    assert [(Path(r["log_dir"]).name, r["same"]) for r in gone.replicas] == [("one", True)], gone.replicas
    legacy = explain(result.out, "legacy", 0, 25, log_dir="one")
    assert "topic id" not in explain_text(legacy).splitlines()[0]  # a folder without partition.metadata


def test_the_metadata_logs_removal_marks_a_deleted_incarnation_and_a_flag_leaves_it_out(spark, tmp_path):
    """The KRaft metadata log removed the old id (a RemoveTopicRecord) and holds the new one: the
    old folder is a deleted incarnation on that evidence; ``skip_deleted_topics`` leaves its rows
    out of every table, and the summary says so."""
    import base64
    import json

    import pyarrow.parquet as pq

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export
    from tests.test_cluster_configs import remove_topic, topic, write_metadata_dir

    def raw(topic_id: str) -> bytes:
        return base64.urlsafe_b64decode(topic_id + "==")

    log = tmp_path / "broker"
    _partition(log, f"orders-0.{UID}-delete", _batches(4000), OLD)
    _partition(log, "orders-0", _batches(5000), NEW)
    write_metadata_dir(log, [topic("orders", raw(OLD)), remove_topic(raw(OLD)), topic("orders", raw(NEW))])
    audited = {}
    for skip in (False, True):
        out = str(tmp_path / f"out-{skip}")
        export(None, [str(log)], out, records=True)
        audit(spark, out, AuditConfig(skip_deleted_topics=skip))
        verdicts = pq.read_table(str(table_dir(out, "batch_verdicts"))).to_pylist()
        sessions = pq.read_table(str(table_dir(out, "producer_sessions"))).to_pylist()
        audited[skip] = ({(v["topic_id"], v["topic_deleted"]) for v in verdicts if v["topic"] == "orders"},
                         {(s["producer_id"], s["topic_deleted"]) for s in sessions if s["topic"] == "orders"},
                         json.loads(Path(out, "summary.json").read_text())["topic_identity"])
    evidence = {OLD: {"topic": "orders", "folders": 1, "evidence": "the metadata log removed it at offset 1",
                      "deleted_at_ms": 0}}  # the record's timestamp, as write_metadata_dir writes it
    assert audited[False][:2] == ({(OLD, True), (NEW, False)}, {(4000, True), (5000, False)})
    assert audited[False][2]["deleted_incarnations"] == evidence and not audited[False][2]["deleted_skipped"]
    assert audited[True][:2] == ({(NEW, False)}, {(5000, False)})
    assert audited[True][2]["deleted_incarnations"] == evidence and audited[True][2]["deleted_skipped"]


def test_a_deleted_topics_open_transaction_is_judged_as_of_its_deletion(spark, tmp_path):
    """Two topics deleted with a transaction open, their -delete folders in a log dir whose newest
    batch (another topic's) is two hours later: each is judged as of its RemoveTopicRecord's
    timestamp, not the export's time. Deleted a minute after its last write, the transaction is open
    (the deletion ended it, the broker broke no rule); deleted an hour after, it was already hanging:
    a violation of its own."""
    import base64

    import pyarrow.parquet as pq

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export
    from tests.test_cluster_configs import remove_topic, topic

    ids = {"gone-a": "Z29uZS1hLXRvcGljLWlkMA", "gone-b": "Z29uZS1iLXRvcGljLWlkMA"}
    after = {"gone-a": 60_000, "gone-b": 3_600_000}  # the deletion, after the open transaction's write
    log = tmp_path / "broker"
    metadata = []
    for name, topic_id in ids.items():
        opened = build_batch(60, [RecordSpec(key=b"k", value=b"v", timestamp=START + 100)], producer_id=4001,
                             producer_epoch=0, base_sequence=0, is_transactional=True, partition_leader_epoch=0)
        _partition(log, f"{name}-0.{UID}-delete", [*_batches(4000), opened], topic_id)
        raw = base64.urlsafe_b64decode(topic_id + "==")
        metadata += [(topic(name, raw), START), (remove_topic(raw), START + 100 + after[name])]
    _partition(log, "live-0", _batches(5000, start=START + 7_200_000), NEW)
    part = log / "__cluster_metadata-0"
    part.mkdir()
    (log / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=x\n")
    write_file(part / segment_file_name(0), [build_batch(i, [RecordSpec(value=v, timestamp=t)])
                                             for i, (v, t) in enumerate(metadata)])
    out = str(tmp_path / "out")
    export(None, [str(log)], out, records=True)
    audit(spark, out, AuditConfig())
    statuses = {(r["topic"], r["producer_id"]): (r["status"], r["topic_deleted"])
                for r in pq.read_table(str(table_dir(out, "transactions"))).to_pylist()}
    assert statuses == {("gone-a", 4001): ("OPEN", True), ("gone-b", 4001): ("HANGING", True)}


def test_a_future_folder_is_a_replica_and_a_stray_one_of_another_incarnation_is_not(spark, tmp_path):
    """A JBOD move in progress (``-future``: the same topic id in another log dir) is compared with the
    live folder as a replica; a stray replica of an older incarnation (``-stray``, KRaft) is its own
    history, compared with nothing: the same records in all three, and nothing diverges or repeats."""
    import pyarrow.parquet as pq

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export

    live, moving, stray = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _partition(live, "orders-0", _batches(5000), NEW)
    _partition(moving, f"orders-0.{UID}-future", _batches(5000, count=4), NEW)
    _partition(stray, f"orders-0.{UID}-stray", _batches(4000), OLD)
    out = str(tmp_path / "out")
    export(None, [str(live), str(moving), str(stray)], out, records=True)
    result = audit(spark, out, AuditConfig())
    verdicts = pq.read_table(str(table_dir(out, "batch_verdicts"))).to_pylist()
    assert {(Path(v["file"]).parent.name, v["topic_id"], v["verdict"]) for v in verdicts} == {
        ("orders-0", NEW, "OK"), (f"orders-0.{UID}-future", NEW, "OK"), (f"orders-0.{UID}-stray", OLD, "OK")}
    divergence = pq.read_table(str(table_dir(out, "replica_divergence"))).to_pylist()
    assert [(Path(r["log_dir"]).name, Path(r["other_log_dir"]).name, r["kind"], r["severity"], r["topic_id"])
            for r in divergence] == [("a", "b", "truncated_tail", "info", NEW)]  # the move has 40 of 60 offsets
    assert result.record_duplicates == 0 and result.verdicts.get("DUPLICATE", 0) == 0


def test_a_replica_moved_away_and_back_leaves_its_old_copy_apart(spark, tmp_path):
    """A replica moved off a broker and back before ``file.delete.delay.ms`` leaves its old copy as
    ``-delete`` beside the new live folder, with the same topic id: the old copy is a history of its
    own, so its batches (the live log's first 40 offsets, the same producer's) repeat nothing; the
    outputs show the topic id alone, the summary and the command's line count the folder, and an
    incremental audit after it is a full one (the state tables show both under one key)."""
    import json

    import pyarrow.parquet as pq

    from analytics.audit.audit_plan import described_identity
    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export

    log = tmp_path / "broker"
    _partition(log, "orders-0", _batches(5000), NEW)
    _partition(log, f"orders-0.{UID}-delete", _batches(5000, count=4), NEW)
    out = str(tmp_path / "out")
    export(None, [str(log)], out, records=True)
    result = audit(spark, out, AuditConfig())

    def table(name: str) -> list[dict]:
        return pq.read_table(str(table_dir(out, name))).to_pylist()

    verdicts = table("batch_verdicts")
    assert sorted((Path(v["file"]).parent.name, v["topic_id"], v["verdict"]) for v in verdicts) == sorted(
        [("orders-0", NEW, "OK")] * 6 + [(f"orders-0.{UID}-delete", NEW, "OK")] * 4)
    assert result.verdicts.get("DUPLICATE", 0) == 0 and result.record_duplicates == 0
    assert table("record_duplicates") == [] and [v for v in verdicts if v["offset_overlap"]] == []
    # the producer's sessions: one per folder's history, each with its own batches
    assert sorted((s["batches"], s["topic_id"]) for s in table("producer_sessions")) == [(4, NEW), (6, NEW)]
    summary = json.loads(Path(result.out, "summary.json").read_text())
    assert summary["topic_identity"] == {"partition_folders": 2, "without_topic_id": 0, "leftovers_apart": 1}
    assert described_identity(summary["topic_identity"]).startswith("1 leftover folder (-delete, -stray)")
    heard: list[str] = []
    again = audit(spark, out, AuditConfig(), incremental=True, progress=heard.append)
    assert any("leftover folder" in line and "a full audit" in line for line in heard), heard
    assert again.verdicts == result.verdicts


def test_the_log_start_checkpoint_names_the_live_folders_incarnation_alone(spark, tmp_path):
    """A log dir's ``log-start-offset-checkpoint`` names partitions by topic name, and the broker keeps
    the entry for the live folder: the leftover ``-delete`` folder of the deleted incarnation takes
    none of it, while a folder without ``partition.metadata`` (a broker before 2.8) still takes its
    name's entry."""
    import pyarrow.parquet as pq

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export
    from analytics.kafka.sidecars import write_offset_checkpoint

    log = tmp_path / "broker"
    _partition(log, f"orders-0.{UID}-delete", _batches(4000), OLD)
    _partition(log, "orders-0", _batches(5000), NEW)
    _partition(log, "legacy-0", _batches(6000), None)
    (log / "log-start-offset-checkpoint").write_bytes(write_offset_checkpoint([("orders", 0, 30), ("legacy", 0, 20)]))
    out = str(tmp_path / "out")
    export(None, [str(log)], out, records=True)
    audit(spark, out, AuditConfig())
    state = pq.read_table(str(table_dir(out, "partition_state"))).to_pylist()
    assert {(s["topic"], s["topic_id"]): s["log_start_offset"] for s in state} == {
        ("orders", NEW): 30, ("orders", OLD): None, ("legacy", None): 20}
