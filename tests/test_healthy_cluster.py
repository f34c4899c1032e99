"""A healthy cluster audits clean: three brokers beside a dedicated controller, idempotent and
transactional producers and a consumer group running through a rolling restart with leader
movements, and a tiered-storage node whose oldest segments live only in the remote tier.

The replicated cluster (replication 3, ``min.insync.replicas`` 2): each broker in turn is stopped
cleanly and started again while the clients write and read, then the preferred leaders are elected
back. Audited: the three log dirs copied while the producers still write, the three log dirs after
a clean shutdown with the controller's (each a whole log dir; together, so the replicas are compared,
the controller's metadata log among the brokers' copies of it), and the running cluster over
``kafka://``. Every one is expected to pass every check with no violation: the restarts'
traces (producer state reloaded from snapshots, new leader epochs) are no finding.

The tiered node (``LocalTieredStorage``, the test jar of 4.3.1: the only version on Maven Central,
and a 4.4.0 broker cannot load it: ``org.apache.kafka.common.utils.LogContext`` moved to
``...utils.internals`` in 4.4) copies a topic's closed segments to the remote tier and deletes the
local copies: the log dir's history starts past them (partial history, explained), while consumers
and ``kafka://`` still read from offset 0, batch for batch what the remote segments hold.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from tests.commands import segaudit_here
from tests.kafka_cluster import KafkaCluster, copy_log_dir, driven, driven_at_once, kafka_jars
from tests.tiered_storage import (
    TIERED_STORAGE_VERSION,
    broker_config,
    remote_as_log_dir,
    tiered_storage_jars,
    wait_local_start,
)

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]

# 4.4.0 in the suite (the module's budget); SEGAUDIT_HEALTHY_VERSIONS=4.4.0,3.9.2 adds the 3.x line
CLUSTER_VERSIONS = tuple(os.environ.get("SEGAUDIT_HEALTHY_VERSIONS", "4.4.0").split(","))
TOPICS = {"orders": 3, "payments": 3}  # topic -> partitions, each replicated on all three brokers
GROUP = "healthy-readers"
TIERED = "tiered"
TIERED_RECORDS, RECORD_BYTES = 4000, 1000  # about 4 MB: four 1 MiB segments


# -- the replicated cluster ------------------------------------------------------------------------
@dataclass
class Workload:
    """What the clients were told: offsets acknowledged per topic, failures, committed transactions."""

    acked: dict[str, int] = field(default_factory=lambda: {t: 0 for t in TOPICS})
    failures: list[str] = field(default_factory=list)
    committed: int = 0
    aborted: int = 0
    consumed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


def _idempotent(cluster: KafkaCluster, work: Workload) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True,
                             linger_ms=5, retries=2**31 - 1, delivery_timeout_ms=120000)
    i = 0
    try:
        while not work.stop.is_set():
            futures = [producer.send("orders", key=f"o{i + j}".encode(), value=f"order-{i + j}".encode())
                       for j in range(5)]
            i += 5
            for f in futures:
                try:
                    f.get(timeout=120)
                    work.acked["orders"] += 1
                except Exception as e:  # noqa: BLE001 - reported by the test
                    work.failures.append(f"orders: {e!r}")
            time.sleep(0.02)
    finally:
        producer.close()


def _transactional(cluster: KafkaCluster, work: Workload) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="healthy-payments",
                             acks="all", enable_idempotence=True, linger_ms=5)
    producer.init_transactions()
    i = 0
    try:
        while not work.stop.is_set():
            producer.begin_transaction()
            futures = [producer.send("payments", key=f"p{i + j}".encode(), value=f"payment-{i + j}".encode())
                       for j in range(3)]
            i += 3
            try:
                for f in futures:
                    f.get(timeout=60)
                producer.commit_transaction()
                work.committed += 1
                work.acked["payments"] += len(futures)
            except Exception as e:  # noqa: BLE001 - a transaction a restart broke is aborted
                work.failures.append(f"payments: {e!r}")
                producer.abort_transaction()
                work.aborted += 1
            time.sleep(0.05)
    finally:
        producer.close()


def _consumer(cluster: KafkaCluster, work: Workload) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(*TOPICS, bootstrap_servers=cluster.bootstrap, group_id=GROUP,
                             auto_offset_reset="earliest", isolation_level="read_committed",
                             auto_commit_interval_ms=500)
    try:
        while not work.stop.is_set():
            work.consumed += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
        consumer.commit()
    finally:
        consumer.close()


def _partitions(cluster: KafkaCluster, via: int = 1) -> list[dict]:
    """Every partition of the clients' topics, as broker ``via`` knows them (one that runs: a client
    bootstrapped at a broker still starting waits out its request timeout)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.node(via).address, request_timeout_ms=5000)
    try:
        return [_partition_fields(dict(p, topic=t["name"])) for t in admin.describe_topics(list(TOPICS))
                for p in t["partitions"]]
    finally:
        admin.close()


def _until(cluster: KafkaCluster, done, what: str, via: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # metadata not there yet
            if all(done(p) for p in _partitions(cluster, via)):
                return
        time.sleep(0.3)
    raise TimeoutError(f"{what} within {timeout} s")


def _elect_preferred(cluster: KafkaCluster, via: int) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.node(via).address, request_timeout_ms=30000)
    try:
        admin.elect_leaders(0, {t: list(range(n)) for t, n in TOPICS.items()}, raise_errors=False)  # 0: PREFERRED
    finally:
        admin.close()


@dataclass
class ClusterRun:
    version: str
    live: list[Path]  # each broker's log dir copied while the producers wrote
    final: list[Path]  # each broker's log dir after a clean shutdown, and the controller's (its metadata log)
    fetched: str  # OUT of `segaudit run kafka://...` after the producers stopped
    fetched_code: int
    work: Workload
    leader_moves: int  # leadership changes seen across the restarts
    seconds: float


def _rolling(version: str, root: Path) -> ClusterRun:
    started = time.monotonic()
    cluster = KafkaCluster(version, root / "cluster", nodes=3, controllers=1, config={"min.insync.replicas": "2"})
    work = Workload()
    phases: dict[str, float] = {}
    threads = []
    try:
        cluster.start()
        for topic, partitions in TOPICS.items():
            cluster.create_topic(topic, partitions=partitions, replication=3)
        threads = [threading.Thread(target=f, args=(cluster, work), daemon=True)
                   for f in (_idempotent, _transactional, _consumer)]
        for t in threads:
            t.start()
        time.sleep(1)
        phases["up"] = time.monotonic() - started
        before = {(p["topic"], p["partition"]): p["leader"] for p in _partitions(cluster)}
        moves = 0
        for broker in (1, 2, 3):
            mark = time.monotonic()
            via = broker % 3 + 1  # another broker
            cluster.stop_node(broker)
            _until(cluster, lambda p, b=broker: p["leader"] != b and b not in p["isr"], f"broker {broker} out", via)
            moves += sum(1 for p in _partitions(cluster, via) if before[(p["topic"], p["partition"])] == broker)
            time.sleep(0.5)  # the producers write while it is down
            phases[f"stop {broker}"] = time.monotonic() - mark
            mark = time.monotonic()
            cluster.start_node(broker, wait=False)
            _until(cluster, lambda p: sorted(p["isr"]) == [1, 2, 3], f"broker {broker} back in sync", via)
            phases[f"start {broker}"] = time.monotonic() - mark
            mark = time.monotonic()
            _elect_preferred(cluster, via)
            _until(cluster, lambda p: p["leader"] == p["replicas"][0], "the preferred leaders", via)
            phases[f"elect {broker}"] = time.monotonic() - mark
        time.sleep(3)  # the old leaders truncate their unreplicated tails (docs/real-broker.md, healthy cluster)
        live = [copy_log_dir(cluster.node(n).log_dir, root / "live" / f"broker-{n}") for n in (1, 2, 3)]
        work.stop.set()
        for t in threads:
            t.join(180)
        fetched = str(root / "fetched")
        mark = time.monotonic()
        fetched_code = _segaudit(["run", f"kafka://{cluster.bootstrap}", "--out", fetched, "--no-history"])
        phases["segaudit run kafka://"] = time.monotonic() - mark
    finally:
        work.stop.set()
        cluster.close()
    final = [*(cluster.node(n).log_dir for n in (1, 2, 3)), *(c.log_dir for c in cluster.quorum)]
    print(f"cluster {version}: {', '.join(f'{k} {v:.1f} s' for k, v in phases.items())}", flush=True)
    return ClusterRun(version, live, final, fetched, fetched_code, work, moves, time.monotonic() - started)


def _partition_fields(p: dict) -> dict:
    """kafka-python's metadata names (``partition_index``, ``leader_id``, ...) as short ones."""
    return {**p, "partition": p["partition_index"], "leader": p["leader_id"], "isr": p["isr_nodes"],
            "replicas": p["replica_nodes"]}


# -- the tiered node -------------------------------------------------------------------------------
@dataclass
class TieredRun:
    log_dir: Path  # the node's log dir after a clean shutdown
    remote: Path  # the remote segments laid out as a log dir (topic-partition/<offset>.log)
    fetched: str  # OUT of `segaudit export kafka://...` and `audit`: from offset 0, through the remote tier
    fetched_code: int
    local_start: int  # the first offset of the node's local log when it stopped
    remote_end: int  # the last offset the remote segments hold
    end: int
    audit: tuple[int, str]  # `segaudit run` over the log dir: exit code, OUT
    seconds: float


def _tiered(root: Path) -> TieredRun:
    from kafka import KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType

    started = time.monotonic()
    remote = root / "remote"
    cluster = KafkaCluster(TIERED_STORAGE_VERSION, root / "cluster", config=broker_config(remote),
                           classpath=(tiered_storage_jars(),))
    try:
        cluster.start()
        cluster.create_topic(TIERED, remote_storage_enable="true", local_retention_ms="1000",
                             segment_bytes="1048576")
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=5)
        for i in range(TIERED_RECORDS):
            producer.send(TIERED, key=f"t{i}".encode(), value=os.urandom(RECORD_BYTES))
        producer.flush()
        local_start = wait_local_start(cluster.node(1).log_dir / f"{TIERED}-0", above=0)
        # the same producer goes on above the remote part, and that stays local: its first local batch
        # is not at sequence 0 (-2: local retention as long as the topic's)
        admin = cluster.admin()
        try:
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TIERED, configs={"local.retention.ms": "-2"})])
        finally:
            admin.close()
        for i in range(TIERED_RECORDS, TIERED_RECORDS + 50):
            producer.send(TIERED, key=f"t{i}".encode(), value=os.urandom(RECORD_BYTES))
        producer.flush()
        producer.close()
        fetched = str(root / "fetched")  # exported and audited (the validation is the log dir's and the cluster's)
        assert _segaudit(["export", f"kafka://{cluster.bootstrap}", "--out", fetched, "--topics", TIERED]) == 0
        fetched_code = _segaudit(["audit", fetched, "--no-history"])
    finally:
        cluster.close()
    laid, remote_end = remote_as_log_dir(remote, root / "remote-log-dir")
    audited = str(root / "audit")  # here, while the replicated cluster restarts its brokers
    code = _segaudit(["run", str(cluster.node(1).log_dir), "--out", audited, "--no-history"])
    print(f"tiered node: local start {local_start}, {time.monotonic() - started:.1f} s", flush=True)
    return TieredRun(cluster.node(1).log_dir, laid, fetched, fetched_code, local_start, remote_end,
                     TIERED_RECORDS + 50, (code, audited), time.monotonic() - started)


# -- running segaudit --------------------------------------------------------------------------------
def _segaudit(args: list[str]) -> int:
    """``segaudit ARGS`` in this process (the tests' Spark session): its exit code."""
    return segaudit_here(*args).returncode


@pytest.fixture(scope="module")
def runs(tmp_path_factory, spark) -> dict:
    """The replicated cluster of each version and the tiered node, driven at once (the tiered node mostly
    waits for its remote copies); then ``segaudit run`` over the log dirs. name -> run or skip reason."""
    drives = {f"cluster-{v}": (partial(_rolling, v, tmp_path_factory.mktemp(f"cluster-{v}")),
                               (partial(kafka_jars, v),)) for v in CLUSTER_VERSIONS}
    drives["tiered"] = (partial(_tiered, tmp_path_factory.mktemp("tiered")),
                        (partial(kafka_jars, TIERED_STORAGE_VERSION), tiered_storage_jars))
    return driven_at_once(drives)


def _failed_checks(out: str) -> list[str]:
    results = json.loads(Path(out, "validation", "results.json").read_text())
    return sorted(c["id"] for s in results["suites"].values() for c in s["checks"] if not c["success"])


def _summary(out: str) -> dict:
    return json.loads(Path(out, "summary.json").read_text())


def _rows(spark, out: str, query: str) -> list[dict]:
    from analytics.forensics import run_sql

    return [r.asDict() for r in run_sql(spark, out, query).collect()]


NODE = "regexp_extract(file, '(broker|node|controller)-[0-9]+', 0)"  # the node a row's file came from


@pytest.fixture(scope="module")
def audits(runs, tmp_path_factory) -> dict:
    """``segaudit run`` over each cluster's three log dirs together (live copies; after shutdown) and
    over the tiered node's log dir: (name, copy) -> (exit code, OUT)."""
    root = tmp_path_factory.mktemp("healthy-audits")
    out = {}
    for name, run in runs.items():
        if isinstance(run, str):
            continue
        if isinstance(run, TieredRun):
            out[name, "final"] = run.audit
            continue
        for copy, dirs in {"live": run.live, "final": run.final}.items():
            target = str(root / f"{name}-{copy}")
            out[name, copy] = (_segaudit(["run", *map(str, dirs), "--out", target, "--no-history"]), target)
    return out


# -- the replicated cluster: the rolling restart ----------------------------------------------------
@pytest.fixture(scope="module", params=CLUSTER_VERSIONS)
def cluster_run(request, runs) -> ClusterRun:
    return driven(runs, f"cluster-{request.param}")


def test_the_rolling_restart_moved_leaders_while_the_clients_ran(cluster_run):
    work = cluster_run.work
    assert cluster_run.leader_moves >= 3  # every broker led partitions it gave up when it stopped
    assert work.acked["orders"] > 100 and work.committed > 10 and work.consumed > 0
    assert work.failures == []  # acks=all with two replicas in sync: no send refused


@pytest.mark.parametrize("copy", ["live", "final"])
def test_every_log_dir_passes_every_check(cluster_run, audits, spark, copy):
    code, out = audits[f"cluster-{cluster_run.version}", copy]
    summary = _summary(out)
    assert summary["severities"]["violation"] == 0 and summary["replica_divergence"]["violation"] == 0, summary
    assert _failed_checks(out) == [] and code == 0
    # each broker's whole log dir was read: every partition of the clients' topics on every broker, and
    # the metadata log on every node (the controller's after the shutdown)
    held = _rows(spark, out, f"SELECT DISTINCT {NODE} AS node, topic, partition FROM batches "
                             f"WHERE topic IN ('orders', 'payments', '__cluster_metadata')")
    assert len([r for r in held if r["topic"] != "__cluster_metadata"]) == 3 * sum(TOPICS.values())
    assert sorted(r["node"] for r in held if r["topic"] == "__cluster_metadata") == (
        ["broker-1", "broker-2", "broker-3"] if copy == "live" else ["controller-100", "node-1", "node-2", "node-3"])


def test_the_logs_hold_what_the_producers_were_told(cluster_run, audits, spark):
    """Every acknowledged record once on each replica, every committed payment, nothing else."""
    _, out = audits[f"cluster-{cluster_run.version}", "final"]
    counts = _rows(spark, out, f"SELECT {NODE} AS node, topic, sum(record_count) AS n FROM batches "
                               "WHERE NOT is_control AND topic IN ('orders', 'payments') GROUP BY 1, 2")
    work = cluster_run.work
    assert {(r["node"], r["topic"]): r["n"] for r in counts} == {
        (f"node-{n}", t): work.acked[t] for n in (1, 2, 3) for t in TOPICS}
    transactions = _summary(out)["transactions"]  # per partition a transaction wrote, on each replica
    assert transactions["OPEN"] == transactions["HANGING"] == 0 and transactions["ABORTED"] == 0 == work.aborted
    assert transactions["COMMITTED"] >= 3 * work.committed


def test_the_restarts_left_their_traces_and_no_finding(cluster_run, audits, spark):
    """Leader epochs grew with every movement, and the restarted brokers' producer snapshots match
    the replayed state; none of it is a finding."""
    _, out = audits[f"cluster-{cluster_run.version}", "final"]
    epochs = _rows(spark, out, "SELECT topic, partition, max(partition_leader_epoch) AS e FROM batches "
                               "WHERE topic IN ('orders', 'payments') GROUP BY 1, 2")
    assert len(epochs) == sum(TOPICS.values()) and all(r["e"] >= 2 for r in epochs), epochs  # away and back
    checks = _summary(out)["snapshot_checks"]
    assert checks["match"] > 0 and checks["mismatch"] == checks["not_in_log"] == checks["not_in_snapshot"] == 0


def test_the_running_cluster_over_the_protocol_equals_the_log_dirs(cluster_run, audits, spark):
    assert _summary(cluster_run.fetched)["severities"]["violation"] == 0
    assert _failed_checks(cluster_run.fetched) == [] and cluster_run.fetched_code == 0
    _, out = audits[f"cluster-{cluster_run.version}", "final"]
    columns = "topic, partition, base_offset, last_offset, crc, producer_id, base_sequence, record_count"
    where = "WHERE topic IN ('orders', 'payments') ORDER BY topic, partition, base_offset"
    fetched = [tuple(r.values()) for r in _rows(spark, cluster_run.fetched, f"SELECT {columns} FROM batches {where}")]
    on_disk = {}
    for r in _rows(spark, out, f"SELECT {NODE} AS node, {columns} FROM batches {where}"):
        on_disk.setdefault(r.pop("node"), []).append(tuple(r.values()))
    assert len(fetched) > 100 and on_disk == {f"node-{n}": fetched for n in (1, 2, 3)}


# -- tiered storage ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiered(runs) -> TieredRun:
    return driven(runs, "tiered")


def test_a_log_dir_past_its_remote_segments_is_partial_history(tiered, audits, spark):
    code, out = audits["tiered", "final"]
    assert tiered.local_start > 0 and tiered.remote_end >= tiered.local_start - 1
    assert _summary(out)["severities"]["violation"] == 0
    assert _failed_checks(out) == [] and code == 0
    # the producer's first local batch continues its remote ones: the history before it is elsewhere
    first = _rows(spark, out, f"SELECT base_offset, base_sequence, verdict, explained_by FROM batch_verdicts "
                              f"WHERE topic = '{TIERED}' ORDER BY base_offset LIMIT 1")
    assert first == [{"base_offset": tiered.local_start, "base_sequence": tiered.local_start,
                      "verdict": "FIRST_SEEN_NONZERO", "explained_by": "partial_history"}]
    # the remote log metadata manager's own topic: replayed (its producer's sequences), not counted
    # for record duplicates (docs/internal-topics.md)
    metadata = _rows(spark, out, "SELECT verdict, count(*) AS n FROM batch_verdicts "
                                 "WHERE topic = '__remote_log_metadata' GROUP BY verdict")
    assert [r["verdict"] for r in metadata] == ["OK"] and metadata[0]["n"] > 0


def test_the_protocol_reads_the_remote_tier_batch_for_batch(tiered, spark):
    from analytics.kafka.logdir import read_segment

    assert _summary(tiered.fetched)["severities"] == {"ok": tiered_batches(spark, tiered), "info": 0, "explained": 0,
                                                      "violation": 0}
    assert tiered.fetched_code == 0
    columns = ("base_offset", "last_offset", "crc", "producer_id", "base_sequence", "record_count")
    stored = sorted(tuple(row[c] for c in columns) for f in (tiered.remote / f"{TIERED}-0").glob("*.log")
                    for row in read_segment(f).batches.select(list(columns)).to_pylist())
    fetched = [tuple(r.values()) for r in _rows(spark, tiered.fetched, f"SELECT {', '.join(columns)} FROM batches "
                                                                       f"WHERE topic = '{TIERED}' ORDER BY base_offset")]
    # from offset 0 to the end, every remote batch as the broker served it, then the local ones
    assert stored[0][0] == 0 and stored == fetched[:len(stored)]
    assert sum(r[-1] for r in fetched) == tiered.end and fetched[-1][1] == tiered.end - 1


def tiered_batches(spark, tiered: TieredRun) -> int:
    return _rows(spark, tiered.fetched, f"SELECT count(*) AS n FROM batches WHERE topic = '{TIERED}'")[0]["n"]
