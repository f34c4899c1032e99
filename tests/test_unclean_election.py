"""An unclean leader election on a real three-broker cluster, and the replicas compared after it.

A partition replicated on brokers 1 and 2 (broker 3 keeps the KRaft quorum): broker 2 stops, broker 1
takes ``acks=1`` writes alone, then stops; broker 2 starts with its stale log and is elected leader
uncleanly (Kafka's ElectLeaders, ``UNCLEAN``), takes other writes at the same offsets, and broker 1
restarts and truncates to follow it. The log dirs copied before broker 1 restarts show the divergence
where the new leader's epoch begins and name the records the old leader acknowledged and lost; the
log dirs after the truncation agree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kafka_cluster import VERSIONS, KafkaCluster, copy_log_dir, require_jars

pytestmark = [pytest.mark.broker, pytest.mark.spark]
TOPIC = "orders"
ACKED_BY_ALL, LOST, NEW = 20, 10, 15  # records written with acks=all, then acks=1 to each leader


@dataclass
class Election:
    version: str
    before: list[Path]  # broker 1's log dir (stopped, the old leader's tail) and broker 2's (the new leader)
    after: list[Path]  # both after broker 1 truncated and caught up, the cluster shut down
    lost: dict[int, str]  # offset -> key the old leader acknowledged with acks=1
    new: dict[int, str]  # offset -> key the new leader acknowledged
    leader_epoch: int  # the new leader's epoch, as the controller reported it


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


def _elect(version: str, root: Path) -> Election:
    from kafka.admin import NewTopic

    cluster = KafkaCluster(version, root / "cluster", nodes=3)
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
        admin = cluster.admin()
        try:
            admin.elect_leaders(1, {TOPIC: [0]}, raise_errors=False)  # 1: UNCLEAN
        finally:
            admin.close()
        elected = _until(cluster, lambda p: p["leader_id"] == 2, "broker 2 elected")
        new = _produce(cluster, 2, [f"new{i}" for i in range(NEW)], 1)
        before = [copy_log_dir(cluster.node(n).log_dir, root / "before" / f"broker-{n}") for n in (1, 2)]
        cluster.start_node(1)
        _until(cluster, lambda p: sorted(p["isr_nodes"]) == [1, 2], "broker 1 back in sync", timeout=90)
    finally:
        cluster.close()
    after = [copy_log_dir(cluster.node(n).log_dir, root / "after" / f"broker-{n}") for n in (1, 2)]
    return Election(version, before, after, lost, new, elected["leader_epoch"])


@pytest.fixture(scope="module", params=VERSIONS)
def election(request, tmp_path_factory) -> Election:
    require_jars(request.param)
    return _elect(request.param, tmp_path_factory.mktemp(f"unclean-{request.param}"))


def _audited(spark, dirs: list[Path], out: Path) -> str:
    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from analytics.export import export

    export(spark, [str(d) for d in dirs], str(out), records=True)
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
