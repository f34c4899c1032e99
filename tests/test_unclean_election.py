"""An unclean leader election on a real three-broker cluster, and the replicas compared after it;
then the running cluster exported over the Kafka protocol.

A partition replicated on brokers 1 and 2 (broker 3 keeps the KRaft quorum): broker 2 stops, broker 1
takes ``acks=1`` writes alone, then stops; broker 2 starts with its stale log and is elected leader
uncleanly (Kafka's ElectLeaders, ``UNCLEAN``), takes other writes at the same offsets, and broker 1
restarts and truncates to follow it. The log dirs copied before broker 1 restarts show the divergence
where the new leader's epoch begins and name the records the old leader acknowledged and lost; the
log dirs after the truncation agree.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kafka_cluster import VERSIONS, KafkaCluster, copy_log_dir, require_jars

pytestmark = [pytest.mark.broker, pytest.mark.spark]
TOPIC = "orders"
ACKED_BY_ALL, LOST, NEW = 20, 10, 15  # records written with acks=all, then acks=1 to each leader
SHRINKING, DELETED_BEFORE = 3000, 2400  # records of 1 kB; DeleteRecords during the slow export
MOVED = 3000  # records of 1 kB in spread-2, exported slowly while its leader shuts down


@dataclass
class Election:
    version: str
    before: list[Path]  # broker 1's log dir (stopped, the old leader's tail) and broker 2's (the new leader)
    after: list[Path]  # both after broker 1 truncated and caught up, the cluster shut down
    lost: dict[int, str]  # offset -> key the old leader acknowledged with acks=1
    new: dict[int, str]  # offset -> key the new leader acknowledged
    leader_epoch: int  # the new leader's epoch, as the controller reported it
    live: Live  # the three brokers exported over the protocol before they stopped
    every: list[Path]  # the three log dirs after the cluster stopped


@dataclass
class Live:
    """Exports of the running cluster over the protocol (``segaudit export kafka://...``)."""

    fetched: str  # OUT: orders, spread (three leaders) and ghost
    ghost: int  # the broker's answer to a transactional write no coordinator knows (0: appended)
    shrunk: str  # OUT: shrinking, exported slowly while DeleteRecords moved its log start
    deleted_before: int  # the log start DeleteRecords set during that export
    shrinking_end: int
    moved: str  # OUT: spread, exported slowly while broker 3, the leader of spread-2, shut down


def _partition(cluster: KafkaCluster) -> dict:
    admin = cluster.admin()
    try:
        return admin.describe_topics([TOPIC])[0]["partitions"][0]
    finally:
        admin.close()


def _until(cluster: KafkaCluster, done, what: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = _partition(cluster)
            if done(state):
                return state
        except Exception:  # noqa: BLE001 - metadata not there yet
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{TOPIC}-0: {what} within {timeout} s")


def _produce(cluster: KafkaCluster, node: int, keys: list[str], acks) -> dict[int, str]:
    from kafka import KafkaProducer

    # retries: a producer's metadata may still name the previous leader (nothing is lost on loopback,
    # so a retry never writes a record twice)
    producer = KafkaProducer(bootstrap_servers=cluster.node(node).address, acks=acks, enable_idempotence=False,
                             retries=10, retry_backoff_ms=200, linger_ms=0)
    try:
        return {producer.send(TOPIC, key=k.encode(), value=f"value-{k}".encode()).get(timeout=30).offset: k
                for k in keys}
    finally:
        producer.close()


def _over_the_protocol(cluster: KafkaCluster, root: Path, spark) -> Live:
    """With all three brokers up: a topic led by each of them, a transactional write under an id no
    coordinator holds (transaction verification off, as a 3.x broker allows), a slow export during
    which DeleteRecords deletes most of a partition, and one during which broker 3 shuts down."""
    from kafka import KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    from analytics import pipeline
    from analytics.kafka.writer import RecordSpec, build_batch
    from tests.raw_producer import RawProducer, now_ms

    admin = cluster.admin()
    try:
        admin.create_topics([NewTopic("spread", replica_assignments={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}),
                             NewTopic("ghost", replica_assignments={0: [3]}),
                             NewTopic("shrinking", replica_assignments={0: [1]})])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True,
                             compression_type="gzip", linger_ms=5)
    for i in range(600):
        producer.send("spread", key=f"s{i}".encode(), value=b"x" * 50, partition=i % 3)
    for i in range(MOVED):  # enough for a slow export to be under way when its leader goes
        producer.send("spread", key=f"m{i}".encode(), value=os.urandom(1000), partition=2)
        if i % 10 == 0:
            producer.flush()
    for i in range(SHRINKING):
        producer.send("shrinking", key=f"k{i}".encode(), value=os.urandom(1000), partition=0)
        if i % 10 == 0:
            producer.flush()  # small batches: the slow export below fetches many
    producer.flush()
    producer.close()
    raw = RawProducer(cluster.bootstrap)
    try:
        pid, epoch = raw.init_producer_id()
        ghost = raw.produce("ghost", 0, build_batch(0, [RecordSpec(b"g", b"ghost", now_ms())], producer_id=pid,
                                                    producer_epoch=epoch, base_sequence=0, is_transactional=True),
                            transactional_id="segaudit-ghost").error_code
    finally:
        raw.close()
    fetched = str(root / "fetched")
    pipeline.export(spark, [f"kafka://{cluster.bootstrap}"], fetched, records=True,
                    cluster={"topics": "orders|spread|ghost"})
    shrunk = str(root / "shrunk")

    def delete():
        admin = cluster.admin()
        try:
            admin.delete_records({TopicPartition("shrinking", 0): DELETED_BEFORE})
        finally:
            admin.close()
    _slowly(spark, cluster, shrunk, "shrinking", 150_000, delete)
    moved = str(root / "moved")  # three leaders, so three tasks sharing the rate: spread-2's gets half on 2 cores
    _slowly(spark, cluster, moved, "spread", 300_000, lambda: cluster.stop_node(3))
    return Live(fetched, ghost, shrunk, DELETED_BEFORE, SHRINKING, moved)


def _slowly(spark, cluster: KafkaCluster, out: str, topics: str, rate: int, meanwhile) -> None:
    """An export at ``rate`` bytes/s, and ``meanwhile`` done three seconds after its fetching tasks
    started (they start after the capture of its offsets: seconds after it on a busy machine)."""
    import threading

    from analytics import pipeline

    slow = threading.Thread(target=pipeline.export, args=(spark, [f"kafka://{cluster.bootstrap}"], out),
                            kwargs={"cluster": {"topics": topics, "max_bytes_per_second": rate}})
    slow.start()
    tracker = spark.sparkContext.statusTracker()

    def fetching() -> bool:
        return bool(list(Path(out).glob("_runs/*/_owner.json"))) and any(
            (info := tracker.getStageInfo(stage)) is not None and info.numActiveTasks > 0
            for stage in tracker.getActiveStageIds())

    deadline = time.monotonic() + 60
    while not fetching() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(3.0)
    meanwhile()
    slow.join()


def _elect_unclean(cluster: KafkaCluster, timeout: float = 60) -> None:
    """ElectLeaders ``UNCLEAN`` for the topic, asked again while the restarted node's registration has
    not reached the metadata the admin client bootstrapped from (it may name a controller it does not list)."""
    deadline = time.monotonic() + timeout
    while True:
        admin = cluster.admin()
        try:
            admin.elect_leaders(1, {TOPIC: [0]}, raise_errors=False)  # 1: UNCLEAN
            return
        except Exception:  # noqa: BLE001 - UnknownBrokerIdError, NodeNotReadyError: not everywhere yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        finally:
            admin.close()


def _elect(version: str, root: Path, spark) -> Election:
    from kafka.admin import NewTopic

    # transaction verification off: a 3.x broker then takes a transactional write its coordinator never saw
    cluster = KafkaCluster(version, root / "cluster", nodes=3, config={"transaction.partition.verification.enable": "false"})
    cluster.start()
    try:
        admin = cluster.admin()
        try:
            admin.create_topics([NewTopic(TOPIC, replica_assignments={0: [1, 2]},
                                          topic_configs={"min.insync.replicas": "1"})])
        finally:
            admin.close()
        _until(cluster, lambda p: p["leader_id"] == 1 and sorted(p["isr_nodes"]) == [1, 2], "leader 1, in sync")
        _produce(cluster, 1, [f"a{i}" for i in range(ACKED_BY_ALL)], "all")
        cluster.stop_node(2)
        _until(cluster, lambda p: p["isr_nodes"] == [1], "broker 2 out of the ISR")
        lost = _produce(cluster, 1, [f"lost{i}" for i in range(LOST)], 1)  # acknowledged by broker 1 alone
        cluster.stop_node(1)
        _until(cluster, lambda p: p["leader_id"] == -1, "no leader")
        cluster.start_node(2)
        _elect_unclean(cluster)
        elected = _until(cluster, lambda p: p["leader_id"] == 2, "broker 2 elected")
        new = _produce(cluster, 2, [f"new{i}" for i in range(NEW)], 1)
        before = [copy_log_dir(cluster.node(n).log_dir, root / "before" / f"broker-{n}") for n in (1, 2)]
        cluster.start_node(1)
        _until(cluster, lambda p: sorted(p["isr_nodes"]) == [1, 2], "broker 1 back in sync", timeout=90)
        live = _over_the_protocol(cluster, root, spark)
    finally:
        cluster.close()
    every = [copy_log_dir(cluster.node(n).log_dir, root / "after" / f"broker-{n}") for n in (1, 2, 3)]
    return Election(version, before, every[:2], lost, new, elected["leader_epoch"], live, every)


@pytest.fixture(scope="module", params=VERSIONS)
def election(request, tmp_path_factory, spark) -> Election:
    require_jars(request.param)
    return _elect(request.param, tmp_path_factory.mktemp(f"unclean-{request.param}"), spark)


def _audited(spark, dirs: list[Path], out: Path) -> str:
    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from analytics.export import export

    export(None, [str(d) for d in dirs], str(out), records=True)
    audit(spark, str(out), load_config(None))
    return str(out)


def _query(spark, out: str, sql: str) -> list[dict]:
    from analytics.forensics import run_sql

    return [r.asDict() for r in run_sql(spark, out, sql).collect()]


def test_the_copies_before_the_truncation_diverge_where_the_new_leaders_epoch_begins(election, spark, tmp_path):
    from analytics.forensics import explain

    assert sorted(election.lost) == sorted(election.new)[:LOST] == list(range(ACKED_BY_ALL, ACKED_BY_ALL + LOST))
    out = _audited(spark, election.before, tmp_path / "before")
    rows = _query(spark, out, f"SELECT * FROM replica_divergence WHERE topic = '{TOPIC}' ORDER BY first_offset")
    named = [(Path(r["log_dir"]).name, r["kind"], r["first_offset"], r["last_offset"], r["severity"]) for r in rows]
    first, last = ACKED_BY_ALL, ACKED_BY_ALL + LOST - 1
    # the same offsets, other batches: the old leader's acks=1 writes; past its end, the new leader's
    # later writes, which broker 1 only lacks
    assert sorted(named[:1]) == [(named[0][0], "different_batch", first, last, "violation")]
    assert named[1:] == [("broker-2", "truncated_tail", last + 1, ACKED_BY_ALL + NEW - 1, "info")]
    split = rows[0]
    epochs = {Path(split["log_dir"]).name: split["leader_epoch"], Path(split["other_log_dir"]).name: split["other_leader_epoch"]}
    assert epochs == {"broker-1": 0, "broker-2": election.leader_epoch}
    # exactly where broker 2's leader-epoch-checkpoint starts its epoch
    checkpoint = _query(spark, out, f"SELECT start_offset, file FROM leader_epochs WHERE topic = '{TOPIC}' "
                                    f"AND leader_epoch = {election.leader_epoch}")
    assert [(r["start_offset"], Path(r["file"]).parts[-3]) for r in checkpoint] == [(first, "broker-2")]
    # the records lost: what broker 1 acknowledged in that range, by key
    held = _query(spark, out, f"SELECT offset, CAST(key AS STRING) AS key, file FROM records WHERE topic = '{TOPIC}' "
                              f"AND offset BETWEEN {first} AND {last}")
    assert {r["offset"]: r["key"] for r in held if "/broker-1/" in r["file"]} == election.lost
    assert {r["offset"]: r["key"] for r in held if "/broker-2/" in r["file"]} == {
        o: k for o, k in election.new.items() if o <= last}
    e = explain(out, TOPIC, 0, first + 3, log_dir="broker-1")
    (other,) = e.replicas
    assert other["batch"]["partition_leader_epoch"] == election.leader_epoch and not other["same"]
    assert other["divergence"]["kind"] == "different_batch"


def test_after_the_truncation_the_replicas_agree_and_the_lost_records_are_gone(election, spark, tmp_path):
    out = _audited(spark, election.after, tmp_path / "after")
    assert _query(spark, out, f"SELECT * FROM replica_divergence WHERE topic = '{TOPIC}'") == []
    keys = _query(spark, out, f"SELECT CAST(key AS STRING) AS key, count(*) AS n FROM records WHERE topic = '{TOPIC}' "
                              "GROUP BY key")
    assert {r["key"]: r["n"] for r in keys} == {
        **{f"a{i}": 2 for i in range(ACKED_BY_ALL)}, **{k: 2 for k in election.new.values()}}
    assert _query(spark, out, "SELECT count(*) AS n FROM anomalies WHERE severity = 'violation'") == [{"n": 0}]


# -- the running cluster over the protocol ------------------------------------------------------------
def _leader_dirs(spark, election: Election, tmp_path) -> tuple[str, dict]:
    """The three log dirs exported together, and each fetched partition's leader's log dir name."""
    import json

    from analytics.export import export

    out = str(tmp_path / "every")
    export(None, [str(d) for d in election.every], out)
    manifest = json.loads(Path(election.live.fetched, "_export.json").read_text())
    return out, {(p["topic"], p["partition"]): f"broker-{p['leader']}" for p in manifest["cluster"]["partitions"]}


def test_three_leaders_fetched_equal_their_log_dirs(election, spark, tmp_path):
    out, leaders = _leader_dirs(spark, election, tmp_path)
    assert sorted(set(leaders.values())) == ["broker-1", "broker-2", "broker-3"]  # every broker served fetches
    columns = "topic, partition, base_offset, last_offset, crc, producer_id, producer_epoch, base_sequence, " \
              "record_count, partition_leader_epoch, attributes, batch_size, max_timestamp"
    fetched = sorted(tuple(r.values()) for r in _query(spark, election.live.fetched, f"SELECT {columns} FROM batches"))
    on_disk = sorted(tuple(v for k, v in r.items() if k != "file") for r in _query(
        spark, out, f"SELECT {columns}, file FROM batches") if (r["topic"], r["partition"]) in leaders
        and f"/{leaders[(r['topic'], r['partition'])]}/" in r["file"])
    assert fetched == on_disk and len(fetched) > 20
    assert {t for t, *_ in fetched} == {"orders", "spread"} | ({"ghost"} if election.live.ghost == 0 else set())
    # orders over the protocol is the new leader's history: its keys, none of those the old leader lost
    keys = _query(spark, election.live.fetched, f"SELECT CAST(key AS STRING) AS k FROM records WHERE topic = '{TOPIC}'")
    assert {r["k"] for r in keys} == {f"a{i}" for i in range(ACKED_BY_ALL)} | set(election.new.values())


def test_a_transaction_no_coordinator_knows_is_a_finding(election, spark):
    """A transactional write under an id no coordinator holds: a 3.9 broker with transaction verification
    off appends it, and nobody will ever write its marker; a 4.x broker refuses it whatever the setting."""
    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from expectations.validate import validate

    if election.version.startswith("4."):
        assert election.live.ghost == 19  # NOT_ENOUGH_REPLICAS: the write is refused, retriably
        assert _query(spark, election.live.fetched, "SELECT count(*) AS n FROM batches WHERE topic = 'ghost'") == [{"n": 0}]
        return
    assert election.live.ghost == 0
    out = election.live.fetched
    audit(spark, out, load_config(None))
    rows = _query(spark, out, "SELECT topic, status, coordinator_view FROM transactions")
    assert rows == [{"topic": "ghost", "status": "OPEN", "coordinator_view": "unknown"}]
    held = {r["transactional_id"] for r in _query(spark, out, "SELECT transactional_id FROM coordinator_transactions")}
    assert "segaudit-ghost" not in held
    result = validate(spark, out)
    failed = {c.id for c in result.checks if not c.success}
    assert failed == {"no_open_transaction_unknown_to_its_coordinator"}


def test_retention_during_the_export_is_a_lost_range_and_the_rest_is_exported(election, spark):
    """DeleteRecords while the export fetches: the offsets it took are one error naming them, and every
    other offset is exported (from the batch holding the new log start on: it began a little below)."""
    live = election.live
    [error] = _query(spark, live.shrunk, "SELECT error_kind, message, bytes_affected, file FROM parse_errors")
    assert error["error_kind"] == "offsets_lost" and error["bytes_affected"] == 0
    span = error["message"].split("offsets ")[1].split(" ")[0]
    lost_from, lost_to = (int(x) for x in span.split(".."))
    assert error["message"].endswith(f"not fetched: deleted during the export (the log starts at {live.deleted_before} now)")
    assert 0 < lost_from and live.deleted_before - 10 <= lost_to < live.deleted_before  # batches of up to 10 records
    offsets = [r["o"] for r in _query(
        spark, live.shrunk, "SELECT explode(sequence(base_offset, last_offset)) AS o FROM batches ORDER BY o")]
    assert offsets == list(range(lost_from)) + list(range(lost_to + 1, live.shrinking_end))
    segments = _query(spark, live.shrunk, "SELECT size_bytes, valid_bytes, status FROM segments")
    assert all(s["size_bytes"] == s["valid_bytes"] for s in segments)


def test_a_leader_shutting_down_during_the_export_is_fetched_from_its_successor(election, spark, tmp_path):
    import json

    out, _ = _leader_dirs(spark, election, tmp_path)
    captured = json.loads(Path(election.live.moved, "_export.json").read_text())["cluster"]["partitions"]
    assert [p["leader"] for p in captured if p["partition"] == 2] == [3]
    assert _query(spark, election.live.moved, "SELECT * FROM parse_errors") == []
    columns = "partition, base_offset, last_offset, crc, producer_id, base_sequence, record_count"
    fetched = _query(spark, election.live.moved, f"SELECT {columns} FROM batches ORDER BY partition, base_offset")
    on_disk = _query(spark, out, f"SELECT {columns} FROM batches WHERE topic = 'spread' AND file LIKE '%/broker-1/%' "
                                 "ORDER BY partition, base_offset")
    assert fetched == on_disk and sum(r["record_count"] for r in fetched if r["partition"] == 2) == MOVED + 200
