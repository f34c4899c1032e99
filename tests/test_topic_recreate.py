"""A topic deleted and created again under its name, on real brokers (issue 63): the two incarnations
are two topics, told apart by their topic ids, and a healthy broker's log dirs audit clean.

One KRaft broker per version (the newest 4.x release and 3.9.x), with two log dirs and
``log.segment.delete.delay.ms`` (the broker's ``file.delete.delay.ms``, which topic deletion waits)
at ten minutes, so the deleted incarnation's ``<topic>-<p>.<uid>-delete`` folders linger, and no
time retention (the records' timestamps are years old). An idempotent producer writes
:data:`PARTITIONS` partitions; the topic is deleted, created again with the same name and refilled
by a new producer with the same keys, values and timestamps.

The broker puts a new partition in the log dir holding the fewest partitions (ties: the first one
listed), so between the deletion and the creation a topic is left in the second log dir (two
one-partition topics created, the first deleted): the new incarnation's partition 0 lands in the
log dir of the old one, the others in the other log dir. Both cases are asserted to have happened.

Audited with ``segaudit run`` as a user runs it, with no flag, in this process on the tests' Spark
session: both log dirs copied while the old folders linger; two nights over the same paths, the
first before the deletion, the second ``--incremental`` after the recreation. And ``segaudit run
kafka://...``, a process of its own, against the broker after the refill (the old folders lingering
beside it), whose rows carry the Metadata API's topic id.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from tests.commands import assert_own_lines, segaudit_here
from tests.kafka_cluster import VERSIONS, KafkaCluster, copy_log_dir, driven, driven_at_once, kafka_jars
from tests.outs import table_dir

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
TOPIC = "orders"
MOVED = "moved"  # a topic whose partition moves to the other log dir and back
PARTITIONS = 4
ROUNDS, PER_ROUND = 5, 10  # per partition: 5 flushes of 10 records (a few batches each)
RECORDS = ROUNDS * PER_ROUND  # per partition and incarnation
FIRST_TIMESTAMP = 1_700_000_000_000
LOG_DIRS = ("data", "data2")
ONE_SPARK_AT_A_TIME = threading.Lock()  # the versions' `run kafka://` one after the other, each broker up meanwhile


@dataclass
class Recreated:
    """One broker's run: its two log dirs copied before the deletion and after the recreation (the old
    folders lingering), and the topic ids the Metadata API gave each incarnation (as on disk)."""

    version: str
    before: list[Path]
    after: list[Path]
    old_id: str
    new_id: str
    fetched: subprocess.CompletedProcess  # `segaudit run kafka://...` after the refill
    fetched_out: Path
    moved: list[Path]  # both log dirs after MOVED's partition moved to the other one and back
    during: dict  # a range captured before the deletion, fetched after the recreation (_fetch_captured)


def _on_disk(topic_id: str) -> str:
    """The Metadata API's topic id (a UUID) as ``partition.metadata`` writes it (base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.UUID(topic_id).bytes).decode().rstrip("=")


def _topic_id(cluster: KafkaCluster, topic: str) -> str:
    admin = cluster.admin()
    try:
        [described] = admin.describe_topics([topic])
    finally:
        admin.close()
    return _on_disk(str(described["topic_id"]))


def _fill(cluster: KafkaCluster) -> None:
    """:data:`RECORDS` records into each partition from a new idempotent producer, keys, values and
    timestamps the same every time; every send acknowledged."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, client_id="segaudit-tests", acks="all",
                             enable_idempotence=True, linger_ms=20)
    try:
        for r in range(ROUNDS):
            sent = [producer.send(TOPIC, key=f"k{p}-{i}".encode(), value=f"v{p}-{i}".encode(), partition=p,
                                  timestamp_ms=FIRST_TIMESTAMP + i)
                    for p in range(PARTITIONS) for i in range(r * PER_ROUND, (r + 1) * PER_ROUND)]
            producer.flush(timeout=60)
            for future in sent:
                future.get(timeout=60)
    finally:
        producer.close(timeout=10)


def _delete(cluster: KafkaCluster, dirs: list[Path], topic: str) -> None:
    """Deletes ``topic`` and waits until the broker renamed its folders ``-delete``."""
    admin = cluster.admin()
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()
    deadline = time.monotonic() + 60
    while any(not p.name.endswith("-delete") for d in dirs for p in d.glob(f"{topic}-[0-9]*")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the broker kept {topic}'s folders after deleting it")
        time.sleep(0.1)


def _fill_moved(cluster: KafkaCluster, round_: int) -> None:
    """:data:`PER_ROUND` records into :data:`MOVED`'s partition from one idempotent producer per call."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, client_id="segaudit-tests-moved", acks="all",
                             enable_idempotence=True)
    try:
        sent = [producer.send(MOVED, key=f"m{round_}-{i}".encode(), value=b"v", partition=0,
                              timestamp_ms=FIRST_TIMESTAMP + i) for i in range(PER_ROUND)]
        producer.flush(timeout=60)
        for future in sent:
            future.get(timeout=60)
    finally:
        producer.close(timeout=10)


def _move(cluster: KafkaCluster, dirs: list[Path]) -> None:
    """:data:`MOVED`'s partition moved to the other log dir of the broker (AlterReplicaLogDirs, as
    ``kafka-reassign-partitions`` does between log dirs); waits until the broker renamed the old copy
    ``-delete`` and the moved one is live."""
    [source] = [d for d in dirs if (d / f"{MOVED}-0").is_dir()]
    target = next(d for d in dirs if d != source)
    admin = cluster.admin()
    try:
        answers = admin.alter_replica_log_dirs({(MOVED, 0, 1): str(target)})
    finally:
        admin.close()
    assert all(error.__name__ == "NoError" for error in answers.values()), answers
    deadline = time.monotonic() + 120
    while (source / f"{MOVED}-0").is_dir() or not (target / f"{MOVED}-0").is_dir():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the broker did not move {MOVED}-0 to {target}")
        time.sleep(0.1)


def _capture(cluster: KafkaCluster):
    """The export's capture of :data:`TOPIC`'s partition 0: its one fetch range, as a task gets it."""
    from analytics.cluster.capture import capture, split
    from analytics.cluster.client import Cluster
    from analytics.cluster.config import load

    with Cluster(load(f"kafka://{cluster.bootstrap}")) as client:
        captured = capture(client, f"{TOPIC}")
    [first] = [r for r in split(captured, range_offsets=10**9) if r.partition == 0]
    return first


def _fetch_captured(cluster: KafkaCluster, r) -> dict:
    """``r`` fetched as an export task fetches it: the offsets it read and the errors it recorded."""
    from analytics.cluster.client import Cluster
    from analytics.cluster.config import load
    from analytics.cluster.fetch import Limits, Throttle, fetch_range
    from analytics.kafka.reader import StreamScanner

    scanner = StreamScanner(topic=r.topic, partition=r.partition, file=r.file, base_offset=r.start, records=True)
    with Cluster(load(f"kafka://{cluster.bootstrap}")) as client:
        chunks = list(fetch_range(client, r, scanner, Limits(retry_seconds=10), Throttle(None)))
    return {"range": (r.start, r.end, r.topic_id), "chunks": len(chunks),
            "errors": [(e.error_kind, e.message) for e in scanner.errors]}


def _drive(version: str, root: Path) -> Recreated:
    cluster = KafkaCluster(version, root / "cluster")
    node = cluster.node(1)
    dirs = [node.log_dir, node.home / LOG_DIRS[1]]
    # no time retention: the records' timestamps are years old, and once the broker's first retention check
    # runs (log.initial.task.delay.ms, 30 s after the start) it would delete them before `run kafka://` reads
    cluster.config.update({"log.dirs": ",".join(map(str, dirs)), "log.segment.delete.delay.ms": "600000",
                           "log.retention.ms": "-1"})
    try:
        cluster.start()
        cluster.create_topic(TOPIC, PARTITIONS)
        old_id = _topic_id(cluster, TOPIC)
        _fill(cluster)
        before = [copy_log_dir(d, root / "before" / name) for d, name in zip(dirs, LOG_DIRS)]
        captured = _capture(cluster)  # an export's capture; its tasks fetch after the recreation below
        _delete(cluster, dirs, TOPIC)
        # the second log dir left one partition ahead: the new incarnation starts in the first one
        cluster.create_topic("ballast-a")
        cluster.create_topic("ballast-b")
        _delete(cluster, dirs, "ballast-a")
        cluster.create_topic(TOPIC, PARTITIONS)
        new_id = _topic_id(cluster, TOPIC)
        _fill(cluster)
        after = [copy_log_dir(d, root / "after" / name) for d, name in zip(dirs, LOG_DIRS)]
        during = _fetch_captured(cluster, captured)
        # a partition moved to the other log dir and back before the broker deleted the first old copy
        cluster.create_topic(MOVED)
        for round_ in range(3):
            _fill_moved(cluster, round_)
            if round_ < 2:
                _move(cluster, dirs)
        moved = [copy_log_dir(d, root / "moved" / name) for d, name in zip(dirs, LOG_DIRS)]
        fetched_out = root / "fetched"
        with ONE_SPARK_AT_A_TIME:  # asserted by the test, not here: a failure is one test's, not the fixture's
            fetched = _process("run", f"kafka://{cluster.bootstrap}", "--out", str(fetched_out))
    finally:
        cluster.close()
    return Recreated(version, before, after, old_id, new_id, fetched, fetched_out, moved, during)


@pytest.fixture(scope="module")
def recreations(tmp_path_factory) -> dict:
    """Each version's broker driven at once (each mostly waits on its clients): version ->
    Recreated, or the reason its jars could not be resolved."""
    return driven_at_once({v: (partial(_drive, v, tmp_path_factory.mktemp(f"recreate-{v}")),
                               (partial(kafka_jars, v),)) for v in VERSIONS})


@pytest.fixture(scope="module", params=VERSIONS)
def recreated(request, recreations) -> Recreated:
    return driven(recreations, request.param)


def _process(*args: str) -> subprocess.CompletedProcess:
    """``segaudit ARGS`` as a process of its own."""
    return subprocess.run([sys.executable, "-m", "analytics", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=900)


def _lay(copies: list[Path], night: Path) -> list[str]:
    """The log dirs of ``copies`` at the same paths under ``night``, as a nightly job finds them."""
    shutil.rmtree(night, ignore_errors=True)
    return [str(copy_log_dir(c, night / c.name)) for c in copies]


@pytest.fixture(scope="module")
def audits(recreated, tmp_path_factory, spark) -> dict:
    """name -> (the finished command, OUT): ``both``, the copy with both incarnations; ``night-1``, the
    copy before the deletion; ``night-2``, the copy after the recreation at the same paths,
    ``--incremental`` into the same OUT. Each in this process, on the tests' Spark session."""
    root = tmp_path_factory.mktemp(f"audits-{recreated.version}")
    out = {"both": (segaudit_here("run", *map(str, recreated.after), "--out", str(root / "both")), root / "both")}
    night = root / "night"
    nightly = root / "nightly"
    out["night-1"] = (segaudit_here("run", *_lay(recreated.before, night), "--out", str(nightly)), nightly)
    written = nightly / "summary.json"  # the next night writes over it
    summary_1 = json.loads(written.read_text()) if written.exists() else None
    again = segaudit_here("run", *_lay(recreated.after, night), "--out", str(nightly), "--incremental")
    out["night-2"] = (again, nightly)
    out["night-1-summary"] = summary_1
    return out


def _table(out: Path, name: str) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(str(table_dir(out, name))).to_pylist()


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _failed_checks(out: Path) -> list[str]:
    results = json.loads((out / "validation" / "results.json").read_text())
    return sorted(c["id"] for s in results["suites"].values() for c in s["checks"] if not c["success"])


def _clean(summary: dict) -> None:
    assert summary["severities"]["violation"] == 0, summary
    assert summary["replica_divergence"]["violation"] == 0 and summary["record_duplicates"] == 0, summary
    assert summary["topic_identity"]["without_topic_id"] == 0, summary  # every folder known by its id


def _folders(copies: list[Path]) -> dict[tuple[int, bool], tuple[str, str]]:
    """(partition, deleted) -> (the log dir holding the folder, its partition.metadata's topic id)."""
    found = {}
    for log_dir in copies:
        for folder in log_dir.glob(f"{TOPIC}-[0-9]*"):
            partition = int(folder.name.split(".")[0].rsplit("-", 1)[1])
            metadata = (folder / "partition.metadata").read_text().splitlines()
            lines = dict(line.split(": ", 1) for line in metadata)
            found[partition, folder.name.endswith("-delete")] = (log_dir.name, lines["topic_id"])
    return found


# -- what the broker left ----------------------------------------------------------------------
def test_the_copy_holds_both_incarnations_in_one_log_dir_and_across_two(recreated):
    assert recreated.old_id != recreated.new_id
    before = _folders(recreated.before)
    assert before == {(p, False): (before[p, False][0], recreated.old_id) for p in range(PARTITIONS)}
    after = _folders(recreated.after)
    # every old folder lingers as <topic>-<p>.<uid>-delete in the log dir it was in, with the old id
    assert {k: v for k, v in after.items() if k[1]} == {(p, True): v for (p, _), v in before.items()}
    live = {k: v[1] for k, v in after.items() if not k[1]}
    assert live == {(p, False): recreated.new_id for p in range(PARTITIONS)}
    moved = {p: after[p, True][0] != after[p, False][0] for p in range(PARTITIONS)}
    assert moved == {p: p != 0 for p in range(PARTITIONS)}, after  # both cases, as the module says why


# -- the copy with both incarnations --------------------------------------------------------------
def test_both_incarnations_across_two_log_dirs_audit_clean(recreated, audits):
    done, out = audits["both"]
    assert done.returncode == 0, done.stderr[-3000:]
    _clean(_summary(out))
    assert _failed_checks(out) == []
    assert _table(out, "record_duplicates") == []
    # no incarnation is another's replica: nothing compared, so nothing diverges
    divergence = _table(out, "replica_divergence")
    assert [r for r in divergence if r["topic"] == TOPIC or r["severity"] == "violation"] == []


def test_each_incarnation_is_a_history_of_its_own(recreated, audits):
    """Both incarnations' batches, told apart by topic id: each partition of each starts at offset 0
    with its producer's sequence 0 and holds every record once, every batch in sequence."""
    _, out = audits["both"]
    verdicts = [v for v in _table(out, "batch_verdicts") if v["topic"] == TOPIC]
    assert {v["topic_id"] for v in verdicts} == {recreated.old_id, recreated.new_id}
    for v in verdicts:
        deleted = Path(v["file"]).parent.name.endswith("-delete")
        assert v["topic_id"] == (recreated.old_id if deleted else recreated.new_id), v
        assert (v["verdict"], v["severity"]) == ("OK", "ok") and not v["offset_overlap"], v
        assert v["topic_deleted"] == deleted, v  # the old incarnation is a deleted one
    for topic_id in (recreated.old_id, recreated.new_id):
        for p in range(PARTITIONS):
            held = sorted((v["base_offset"], v["last_offset"]) for v in verdicts
                          if v["topic_id"] == topic_id and v["partition"] == p)
            assert held[0][0] == 0 and held[-1][1] == RECORDS - 1, held
            assert all(a[1] + 1 == b[0] for a, b in zip(held, held[1:])), held
    records = _table(out, "records")
    assert sum(r["topic"] == TOPIC for r in records) == 2 * PARTITIONS * RECORDS
    # on the metadata log's evidence: the broker's RemoveTopicRecord of the old id
    gone = _summary(out)["topic_identity"]["deleted_incarnations"]  # and the ballast topic _drive deleted
    assert [i for i, e in gone.items() if e["topic"] == TOPIC] == [recreated.old_id], gone
    assert gone[recreated.old_id]["folders"] == PARTITIONS, gone
    assert gone[recreated.old_id]["evidence"].startswith("the metadata log removed it at offset "), gone
    done, _ = audits["both"]
    assert f"{TOPIC} (topic id {recreated.old_id}: the metadata log removed it at offset" in done.stdout


# -- two nights over the same paths -----------------------------------------------------------------
def test_an_incremental_night_after_a_recreate_starts_a_new_history(recreated, audits):
    first, _ = audits["night-1"]
    assert first.returncode == 0, first.stderr[-3000:]
    _clean(audits["night-1-summary"])
    second, out = audits["night-2"]
    assert second.returncode == 0, second.stderr[-3000:]
    summary = _summary(out)
    _clean(summary)
    assert summary["incremental"] is not None and _failed_checks(out) == []
    assert _table(out, "record_duplicates") == []
    verdicts = [v for v in _table(out, "batch_verdicts") if v["topic"] == TOPIC]
    starts = sorted((v["partition"], v["verdict"], v["severity"]) for v in verdicts
                    if v["topic_id"] == recreated.new_id and v["base_offset"] == 0)
    assert starts == [(p, "OK", "ok") for p in range(PARTITIONS)]
    # every verdict the one a full audit of the same log dirs gives
    key = ("topic", "partition", "topic_id", "base_offset", "verdict", "severity", "explained_by")
    full = [v for v in _table(audits["both"][1], "batch_verdicts") if v["topic"] == TOPIC]
    rows = [sorted(tuple(v[k] for k in key) for v in vs) for vs in (verdicts, full)]
    assert rows[0] == rows[1] and len(rows[0]) >= 2 * PARTITIONS * ROUNDS  # a batch per flush at least
    assert {(v["topic_id"], v["topic_deleted"]) for v in verdicts} == {(recreated.old_id, True),
                                                                       (recreated.new_id, False)}


# -- a partition moved to the other log dir and back ----------------------------------------------------
def test_a_partition_moved_away_and_back_audits_clean(recreated, spark, tmp_path):
    """One log dir holds the old copy (``-delete``, left by the first move) beside the live
    folder the second move made, both with the topic's id; the other log dir holds the copy the
    second move left. The old copy beside the live folder is a history of its own (its batches are the
    live log's first ones again, not duplicates); the other log dir's copy is compared as a replica
    and is only behind."""
    moved = _folders_of(recreated.moved, MOVED)
    held = {name: sorted(deleted for log_dir, deleted, _ in moved if log_dir == name) for name in LOG_DIRS}
    assert sorted(held.values()) == [[False, True], [True]], moved  # live and old beside it; the other's old
    assert len({topic_id for _, _, topic_id in moved}) == 1  # one topic: three copies of its partition
    out = tmp_path / "out"
    done = segaudit_here("run", *map(str, recreated.moved), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = _summary(out)
    _clean(summary)
    assert summary["topic_identity"].get("leftovers_apart") == 1, summary
    assert "1 leftover folder (-delete, -stray) beside a live folder" in done.stdout
    verdicts = [v for v in _table(out, "batch_verdicts") if v["topic"] == MOVED]
    assert {(v["verdict"], v["severity"]) for v in verdicts} == {("OK", "ok")}
    assert [v for v in verdicts if v["offset_overlap"]] == []
    divergence = [r for r in _table(out, "replica_divergence") if r["topic"] == MOVED]
    assert {(r["kind"], r["severity"]) for r in divergence} <= {("truncated_tail", "info")}, divergence


def test_a_log_dir_without_partition_metadata_audits_as_before(recreated, audits, spark, tmp_path):
    """A pre-2.8 layout: the broker's log dirs before the deletion, every ``partition.metadata``
    removed. The audit keys each history by name alone, as for a broker before 2.8; its verdicts are
    the ones the same copy gave with the files, and the summary and the command's line count every
    partition folder as without an id."""
    copies = [copy_log_dir(c, tmp_path / c.name) for c in recreated.before]
    removed = [f.unlink() or f for c in copies for f in c.glob("*/partition.metadata")]
    assert len(removed) >= PARTITIONS
    out = tmp_path / "out"
    done = segaudit_here("run", *map(str, copies), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    summary, before = _summary(out), audits["night-1-summary"]
    identity = summary["topic_identity"]
    assert identity["without_topic_id"] == identity["partition_folders"] == before["topic_identity"][
        "partition_folders"], identity
    assert "partition folders have no topic id (no partition.metadata" in done.stdout
    assert summary["verdicts"] == before["verdicts"] and summary["severities"] == before["severities"]
    assert summary["severities"]["violation"] == 0 and summary["record_duplicates"] == 0
    assert {v["topic_id"] for v in _table(out, "batch_verdicts")} == {None}


def _folders_of(copies: list[Path], topic: str) -> list[tuple[str, bool, str]]:
    """(log dir, deleted, topic id) of every folder of ``topic``'s partition 0."""
    found = []
    for log_dir in copies:
        for folder in log_dir.glob(f"{topic}-0*"):
            lines = dict(line.split(": ", 1) for line in (folder / "partition.metadata").read_text().splitlines())
            found.append((log_dir.name, folder.name.endswith("-delete"), lines["topic_id"]))
    return found


# -- the same broker over the Kafka protocol ------------------------------------------------------------
def test_over_kafka_the_rows_carry_the_recreated_topics_id(recreated):
    """``segaudit run kafka://...`` after the refill, the deleted incarnation's folders lingering on
    the broker: the rows are the recreated topic's, keyed by the id the Metadata API gives it (in
    ``partition.metadata``'s form), never the deleted one's; the audit is clean."""
    done, out = recreated.fetched, recreated.fetched_out
    assert_own_lines(done.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = _summary(out)
    _clean(summary)
    assert summary["topic_identity"]["partition_folders"] >= PARTITIONS, summary
    assert summary["topic_identity"]["source"] == "metadata_api" and not summary["topic_identity"]["without_topic_id"]
    assert _failed_checks(out) == []
    assert _table(out, "record_duplicates") == []
    # the export: every partition of the topic known by the Metadata API's id, in the manifest too
    log_dir = f"kafka://{json.loads((out / '_export.json').read_text())['cluster']['cluster_id']}"
    ids = {(r["partition"], r["topic_id"], r["file"]) for r in _table(out, "partition_metadata") if r["topic"] == TOPIC}
    assert ids == {(p, recreated.new_id, f"{log_dir}/{TOPIC}-{p}/partition.metadata") for p in range(PARTITIONS)}
    captured = json.loads((out / "_export.json").read_text())["cluster"]["partitions"]
    assert {(c["partition"], c["topic_id"]) for c in captured if c["topic"] == TOPIC} == {
        (p, recreated.new_id) for p in range(PARTITIONS)}
    # the audit's rows: one history per partition, the new incarnation's, from offset 0, every batch OK
    verdicts = [v for v in _table(out, "batch_verdicts") if v["topic"] == TOPIC]
    assert {v["topic_id"] for v in verdicts} == {recreated.new_id} and recreated.old_id != recreated.new_id
    for v in verdicts:
        assert (v["verdict"], v["severity"]) == ("OK", "ok") and not v["offset_overlap"], v
        assert v["topic_deleted"] is False, v  # the live incarnation: the Metadata API names it
    for p in range(PARTITIONS):
        held = sorted((v["base_offset"], v["last_offset"]) for v in verdicts if v["partition"] == p)
        assert held[0][0] == 0 and held[-1][1] == RECORDS - 1, held
        assert all(a[1] + 1 == b[0] for a, b in zip(held, held[1:])), held
    assert sorted(r["key"] for r in _table(out, "records") if r["topic"] == TOPIC) == sorted(
        f"k{p}-{i}".encode() for p in range(PARTITIONS) for i in range(RECORDS))
    # the producer state the broker described (DescribeProducers) is the same history's
    for table in ("producer_state", "snapshot_checks"):
        rows = [r for r in _table(out, table) if r["topic"] == TOPIC]
        assert rows and {r["topic_id"] for r in rows} == {recreated.new_id}, (table, rows)


def test_a_topic_recreated_during_an_export_is_not_read_under_the_old_ones_id(recreated):
    """A range captured before the deletion, fetched after the topic was created again under its name
    and refilled with as many offsets: fetched by the id it had at the capture (Fetch v13+), the
    broker answers that the topic is unknown, and the range is recorded as lost, saying why; not one
    record of the new incarnation is read as the old one's."""
    during = recreated.during
    start, end, topic_id = during["range"]
    assert (start, end, topic_id) == (0, RECORDS, recreated.old_id)
    assert during["chunks"] == 0
    [(kind, message)] = during["errors"]
    assert kind == "offsets_lost" and message.startswith(f"offsets 0..{RECORDS - 1} of {TOPIC}-0 not fetched")
    assert f"the topic was deleted during the export (its id {recreated.old_id} is gone" in message
