"""What a healthy cluster runs, driven against a running ``KafkaCluster``: each workload a function of
the cluster (and a folder for its files) returning a :class:`Workload`, the topics it wrote and what
its clients saw. Nothing here injects a fault: an audit of the log dirs must find no violation.

- ``idempotent_producers``: kafka-python and confluent-kafka idempotent producers, batched, 3 partitions
- ``transactional_producers``: Kafka's Java producer (``kafka/TxnClient.java``): commits and aborts
- ``consumer_groups``: a group with a member joining and leaving (two rebalances), offsets committed
  by hand and the same offset committed again at once; a second group auto-committing every 50 ms
- ``share_groups`` (4.x): share consumers (``kafka/ShareClient.java``), so ``__share_group_state`` exists
- ``kafka_streams``: ``kafka/StreamsApp.java`` under ``exactly_once_v2`` (a repartition topic, a
  changelog, an output), killed with SIGKILL while it processes, restarted, run until the input is consumed
- ``kafka_connect``: one distributed worker (``ConnectDistributed``: its config, offset and status
  topics; exactly-once source support, so the leader and the source task write in transactions) with
  FileStreamSource and FileStreamSink created over its REST API, the source restarted
- ``compacted_topic``: keys overwritten, segments rolled every 100 ms, the cleaner run
- ``retention``: a small ``retention.ms`` deletes rolled segments, then DeleteRecords moves the log start

``run_all`` runs them at once. As a script it leaves a stopped node's log dir and a live copy:
``.venv/bin/python tests/healthy_workloads.py --version 4.4.0 --dir /tmp/healthy-4.4.0``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import OffsetSpec  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

from tests import broker_scenarios as sc  # noqa: E402
from tests.kafka_cluster import HERE, QUICK_JVM, KafkaCluster, copy_log_dir, java, resolve  # noqa: E402
from tests.ports import free_port  # noqa: E402

# connect-file is not on Maven Central for 4.4.0, and 4.3.1's does not load in a 4.4.0 worker (AppInfoParser
# moved to an internals package): the 4.4.0 broker gets a 4.3.1 worker, a worker a release behind its brokers
CONNECT = {"4.4.0": "4.3.1"}


@dataclass
class Workload:
    """One workload: the topics it wrote (its framework's internal ones too) and what its clients saw."""

    name: str
    topics: list[str]
    client: str = ""
    sent: int = 0
    acknowledged: int = 0
    notes: dict = field(default_factory=dict)


def framework_jars(version: str) -> list[Path]:
    """The jars the frameworks' workloads run on, resolved once (Maven Central): kafka-streams of the
    broker's version, the Connect worker and its file connectors (raises ``JarsUnavailable``)."""
    connect = CONNECT.get(version, version)
    return [resolve("kafka-streams", version), resolve("connect-runtime", connect), resolve("connect-file", connect)]


def replication(cluster: KafkaCluster) -> int:
    return min(len(cluster.members), 3)


def _end_offsets(cluster: KafkaCluster, topic: str, partitions: int, committed: bool = False) -> dict[int, int]:
    """Each partition's log end offset, or its last stable offset (``committed``: below any open transaction)."""
    from kafka.protocol.consumer.offsets import IsolationLevel

    admin = cluster.admin()
    try:
        tps = {TopicPartition(topic, p): OffsetSpec.LATEST for p in range(partitions)}
        isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        return {tp.partition: o.offset for tp, o in admin.list_partition_offsets(tps, isolation).items()}
    finally:
        admin.close()


def _committed(cluster: KafkaCluster, group: str) -> dict[tuple[str, int], int]:
    admin = cluster.admin()
    try:
        return {(tp.topic, tp.partition): om.offset for tp, om in admin.list_group_offsets(group).get(group, {}).items()}
    finally:
        admin.close()


def _wait(what: str, test, timeout: float = 90.0, every: float = 0.3):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = test()
        if got:
            return got
        time.sleep(every)
    raise TimeoutError(f"{what} after {timeout:.0f} s")


def _producer(cluster: KafkaCluster, **kwargs) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=cluster.bootstrap, client_id="healthy", acks="all",
                         enable_idempotence=True, **kwargs)


def _fill(cluster: KafkaCluster, topic: str, records: int, prefix: str = "r", words: int = 20,
          pause_every: int = 0, pause: float = 0.0) -> int:
    """``records`` records into ``topic`` from one idempotent producer, values ``word:i``."""
    producer = _producer(cluster, linger_ms=5)
    try:
        for i in range(records):
            producer.send(topic, key=f"{prefix}{i}".encode(), value=f"w{i % words}:{i}".encode())
            if pause_every and i % pause_every == pause_every - 1:
                producer.flush()
                time.sleep(pause)
        producer.flush()
    finally:
        producer.close()
    return records


# -- producers -----------------------------------------------------------------------------------
def idempotent_producers(cluster: KafkaCluster, topic: str = "healthy-idempotent", records: int = 600) -> Workload:
    """kafka-python and confluent-kafka, both idempotent, batching (linger) over 3 partitions."""
    from confluent_kafka import Producer

    cluster.create_topic(topic, 3, replication(cluster))
    w = Workload("idempotent producers", [topic], "kafka-python, confluent-kafka (idempotent)")
    python = _producer(cluster, linger_ms=20, batch_size=4096)
    futures = [python.send(topic, key=f"p{i}".encode(), value=f"python-{i}".encode()) for i in range(records)]
    python.flush()
    w.acknowledged += sum(1 for f in futures if f.succeeded())
    python.close()
    delivered = []
    confluent = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "linger.ms": 20,
                          "client.id": "healthy-confluent"})
    for i in range(records):
        confluent.produce(topic, key=f"c{i}".encode(), value=f"confluent-{i}".encode(),
                          on_delivery=lambda err, msg: delivered.append(err is None))
        confluent.poll(0)
    confluent.flush(60)
    w.sent = 2 * records
    w.acknowledged += sum(delivered)
    return w


def transactional_producers(cluster: KafkaCluster, topic: str = "healthy-txn",
                            steps: tuple[str, ...] = ("commit:3", "abort:2", "commit:2", "abort:1", "commit:4")
                            ) -> Workload:
    """Kafka's Java producer of the broker's release: transactions committed and aborted."""
    cluster.create_topic(topic, 1, replication(cluster))
    facts, lines = sc.java_transactions(cluster, topic, f"{topic}-id", list(steps), 60000, create=False)
    w = Workload("transactional producers", [topic, "__transaction_state"], facts.client, facts.sent,
                 facts.acknowledged)
    w.notes["steps"] = list(steps)
    return w


# -- consumer groups -----------------------------------------------------------------------------
def _consumer(cluster: KafkaCluster, topic: str, group: str, **kwargs) -> KafkaConsumer:
    return KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, client_id=f"{group}-member",
                         auto_offset_reset="earliest", max_poll_records=20, session_timeout_ms=10000,
                         heartbeat_interval_ms=500, **kwargs)


def _commit_positions(consumer: KafkaConsumer, times: int = 1) -> int:
    """Commits each assigned partition's position, ``times`` times in a row (the same offsets again)."""
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    offsets = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in consumer.assignment()}
    for _ in range(times):
        if offsets:
            try:
                consumer.commit(offsets)
            except (CommitFailedError, RebalanceInProgressError):  # as an application does: poll, commit later
                return 0
    return len(offsets)


def consumer_groups(cluster: KafkaCluster, topic: str = "healthy-groups", group: str = "healthy-group",
                    records: int = 400) -> Workload:
    """A member consumes and commits; a second joins (a rebalance), both commit, each commit repeated
    at once; the second leaves (another rebalance) and the first consumes the rest. A second group
    auto-commits every 50 ms, the same offsets again and again once it is idle."""
    cluster.create_topic(topic, 2, replication(cluster))
    w = Workload("consumer groups", [topic, "__consumer_offsets"], "kafka-python consumers")
    w.sent = w.acknowledged = _fill(cluster, topic, records, prefix="g")
    consumed = 0
    first = _consumer(cluster, topic, group, enable_auto_commit=False)
    auto = _consumer(cluster, topic, f"{group}-auto", enable_auto_commit=True, auto_commit_interval_ms=50)
    try:
        for _ in range(5):
            consumed += sum(len(v) for v in first.poll(500).values())
            _commit_positions(first, times=3)
            auto.poll(100)
        second = _consumer(cluster, topic, group, enable_auto_commit=False)
        joined = False
        for _ in range(60):  # until the rebalance gave the second member a partition
            consumed += sum(len(v) for v in first.poll(100).values())
            consumed += sum(len(v) for v in second.poll(100).values())
            _commit_positions(first, times=2)
            _commit_positions(second, times=2)
            auto.poll(50)
            if second.assignment() and first.assignment():
                joined = True
                if consumed >= records * 3 // 4:
                    break
        w.notes["second_member_joined"] = joined
        _commit_positions(second)
        second.close()  # leaves the group: the first member takes its partition back
        ends = _end_offsets(cluster, topic, 2)
        for _ in range(200):
            consumed += sum(len(v) for v in first.poll(100).values())
            _commit_positions(first, times=2)
            auto.poll(50)
            if len(first.assignment()) == 2 and all(first.position(tp) >= ends[tp.partition]
                                                    for tp in first.assignment()):
                break
        _commit_positions(first, times=3)
        for _ in range(10):  # idle: the auto-committer commits the same offsets every 50 ms
            auto.poll(60)
    finally:
        first.close()
        auto.close()
    committed = _committed(cluster, group)
    w.notes["consumed"] = consumed
    w.notes["committed"] = sum(committed.values())
    return w


# -- share groups (4.x) ----------------------------------------------------------------------------
def share_groups(cluster: KafkaCluster, topic: str = "healthy-share", group: str = "healthy-share-group",
                 records: int = 200) -> Workload | None:
    """Two share consumers of one share group (one leaves halfway); None on a 3.x broker (no share groups)."""
    if not cluster.release.tv2:
        return None
    cluster.create_topic(topic, 1, replication(cluster))
    w = Workload("share groups", [topic, "__share_group_state"], f"Kafka Java KafkaShareConsumer {cluster.version}")
    w.sent = w.acknowledged = _fill(cluster, topic, records, prefix="s")
    cmd = [java(), "-Xmx256m", *QUICK_JVM, "-cp", f"{cluster.jars}/*", str(HERE / "kafka" / "ShareClient.java"),
           cluster.bootstrap, group, topic, str(records), "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"ShareClient failed ({done.returncode}): {done.stderr[-3000:]}")
    w.notes["received"] = json.loads(done.stdout.strip().splitlines()[-1])["received"]
    return w


# -- Kafka Streams ---------------------------------------------------------------------------------
def _streams_process(cluster: KafkaCluster, root: Path, app: str, source: str, output: str, n: int,
                     commit_ms: int = 200):
    jars = resolve("kafka-streams", cluster.version)
    log = open(root / f"streams-{n}.log", "ab")
    cmd = [java(), "-Xmx256m", *QUICK_JVM, "-cp", f"{jars}/*", str(HERE / "kafka" / "StreamsApp.java"),
           cluster.bootstrap, app, source, output, str(root / "state"), str(replication(cluster)), str(commit_ms)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, start_new_session=True)


def _stop(process: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 60) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def kafka_streams(cluster: KafkaCluster, root: Path, app: str = "healthy-streams", records: int = 3000) -> Workload:
    """``StreamsApp`` (kafka-streams of the broker's version, exactly_once_v2) over 3 input partitions:
    killed with SIGKILL while records still arrive, restarted, run until it committed the whole input
    and its repartition topic, then closed cleanly."""
    root = Path(root) / "streams"
    root.mkdir(parents=True, exist_ok=True)
    source, output = f"{app}-input", f"{app}-output"
    rf = replication(cluster)
    cluster.create_topic(source, 3, rf)
    cluster.create_topic(output, 3, rf)
    repartition, changelog = f"{app}-by-word-repartition", f"{app}-counts-changelog"
    w = Workload("Kafka Streams (exactly_once_v2)", [source, output, repartition, changelog, "__consumer_offsets",
                                                     "__transaction_state"],
                 f"kafka-streams {cluster.version}, exactly_once_v2, killed once")
    feeder = ThreadPoolExecutor(max_workers=1)
    # the first instance commits every 5 s: killed while its first transaction is open
    first = _streams_process(cluster, root, app, source, output, 1, commit_ms=5000)
    try:
        _wait("Streams not running", lambda: b"RUNNING" in first.stdout.readline(), timeout=120, every=0)
        fed = feeder.submit(_fill, cluster, source, records, "r", 20, 50, 0.1)  # about 6 s of input

        def open_transaction():
            return sum(_end_offsets(cluster, output, 3).values()) > sum(_end_offsets(cluster, output, 3, True).values())

        _wait("no open transaction in the output", open_transaction, timeout=60, every=0.2)
        w.notes["fed_at_kill"] = not fed.done()
    finally:
        _stop(first, signal.SIGKILL)  # mid-processing: a transaction open, no clean close
    w.notes["output_at_kill"] = sum(_end_offsets(cluster, output, 3).values())
    second = _streams_process(cluster, root, app, source, output, 2)
    try:
        w.sent = w.acknowledged = fed.result()
        feeder.shutdown()

        def caught_up():
            done = _committed(cluster, app)
            ends = {(source, p): o for p, o in _end_offsets(cluster, source, 3).items()}
            ends.update({(repartition, p): o for p, o in _end_offsets(cluster, repartition, 3).items()})
            return all(done.get(tp, -1) >= end for tp, end in ends.items())

        _wait("Streams did not consume its input", caught_up, timeout=150, every=1.0)
    finally:
        _stop(second)
    w.notes["output"] = sum(_end_offsets(cluster, output, 3).values())
    return w


# -- Kafka Connect -----------------------------------------------------------------------------------
CONNECT_TOPICS = ("connect-configs", "connect-offsets", "connect-status")


def _rest(port: int, method: str, path: str, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read()
    return json.loads(text) if text else None


def _rest_ok(port: int, method: str, path: str, body: dict | None = None):
    try:
        return _rest(port, method, path, body)
    except OSError:
        return None


def kafka_connect(cluster: KafkaCluster, root: Path, lines: int = 500) -> Workload:
    """One distributed worker (its config, offset and status topics; ``exactly.once.source.support``
    enabled: the leader writes the configs and the source task its records and offsets in transactions),
    FileStreamSource (a file into ``healthy-connect-lines``) and FileStreamSink (the topic into a file)
    created over REST; the source restarted with its tasks halfway (its task's producer fenced); the
    worker stopped cleanly once the sink wrote every line."""
    root = Path(root) / "connect"
    root.mkdir(parents=True, exist_ok=True)
    topic, rf = "healthy-connect-lines", replication(cluster)
    cluster.create_topic(topic, 1, rf)
    version = CONNECT.get(cluster.version, cluster.version)
    runtime, connect_file = resolve("connect-runtime", version), resolve("connect-file", version)
    port = free_port()
    (root / "worker.properties").write_text("".join(f"{k}={v}\n" for k, v in {
        "bootstrap.servers": cluster.bootstrap, "group.id": "healthy-connect",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "config.storage.topic": CONNECT_TOPICS[0], "offset.storage.topic": CONNECT_TOPICS[1],
        "status.storage.topic": CONNECT_TOPICS[2], "config.storage.replication.factor": rf,
        "offset.storage.replication.factor": rf, "status.storage.replication.factor": rf,
        "offset.storage.partitions": 2, "status.storage.partitions": 2, "offset.flush.interval.ms": 500,
        "listeners": f"http://127.0.0.1:{port}",
        "plugin.discovery": "service_load",  # the connectors from their ServiceLoader manifests (a classpath scan takes minutes)
        "exactly.once.source.support": "enabled",  # the source task and the leader write in transactions (KIP-618)
    }.items()))
    (root / "log4j.properties").write_text("log4j.rootLogger=WARN, F\nlog4j.appender.F=org.apache.log4j.FileAppender\n"
                                           f"log4j.appender.F.File={root / 'worker.log'}\n"
                                           "log4j.appender.F.layout=org.apache.log4j.PatternLayout\n")
    source_file, sink_file = root / "source.txt", root / "sink.txt"
    source_file.write_text("".join(f"line-{i}\n" for i in range(lines // 2)))
    w = Workload("Kafka Connect (distributed, file connectors)", [topic, *CONNECT_TOPICS],
                 f"Connect worker {version}, FileStreamSource/Sink")
    classpath = f"{runtime}/*:" + str(next(connect_file.glob("connect-file-*.jar")))
    cmd = [java(), "-Xmx256m", *QUICK_JVM, f"-Dlog4j.configuration=file:{root / 'log4j.properties'}",
           "-cp", classpath, "org.apache.kafka.connect.cli.ConnectDistributed", str(root / "worker.properties")]
    out = open(root / "worker.out", "ab")
    worker = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait("Connect's REST API did not answer", lambda: _rest_ok(port, "GET", "/connectors") is not None,
              timeout=120, every=0.5)
        _rest(port, "POST", "/connectors", {"name": "healthy-file-source", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(source_file), "topic": topic}})
        _rest(port, "POST", "/connectors", {"name": "healthy-file-sink", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
            "file": str(sink_file), "topics": topic}})

        def sunk(n):
            return lambda: sink_file.exists() and len(sink_file.read_text().splitlines()) >= n

        _wait("the sink did not write the first half", sunk(lines // 2), timeout=120, every=0.5)
        _rest(port, "POST", "/connectors/healthy-file-source/restart?includeTasks=true")
        with source_file.open("a") as f:
            f.write("".join(f"line-{i}\n" for i in range(lines // 2, lines)))
        _wait("the sink did not write every line", sunk(lines), timeout=120, every=0.5)
        w.notes["status"] = {c: _rest(port, "GET", f"/connectors/{c}/status")["connector"]["state"]
                             for c in ("healthy-file-source", "healthy-file-sink")}
        time.sleep(1.0)  # one more offset flush
    finally:
        _stop(worker)
        out.close()
    w.sent = w.acknowledged = lines
    w.notes["sunk"] = len(sink_file.read_text().splitlines())
    return w


# -- compaction, retention, DeleteRecords ------------------------------------------------------------
def compacted_topic(cluster: KafkaCluster, topic: str = "healthy-compacted", records: int = 120) -> Workload:
    """One record per batch from an idempotent producer while segments roll every 100 ms: every other
    batch overwrites one hot key (the cleaner removes those, holes in the producer's sequences), the
    others carry keys of their own, some overwritten once more at the end; then a second producer
    overwrites the hot key (the cleaner empties the first producer's last batch and keeps it, for its
    state); until the cleaner has compacted past all of it."""
    cluster.create_topic(topic, 1, replication(cluster), cleanup_policy="compact", segment_ms=100,
                         min_cleanable_dirty_ratio=0.01, delete_retention_ms=100)
    w = Workload("compacted topic (cleaned)", [topic], "kafka-python, idempotent (two producers)")
    producer = _producer(cluster, linger_ms=0)
    try:
        for i in range(records):
            key = "hot" if i % 2 == 0 else f"k{i % (records // 3)}"
            producer.send(topic, key=key.encode(), value=f"v{i}".encode()).get(timeout=30)
            time.sleep(0.01)
        successor = _producer(cluster, linger_ms=0)
        rewritten = []
        for value in (b"second", b"third"):  # the second rolls the segment holding the first
            time.sleep(0.2)
            rewritten.append(successor.send(topic, key=b"hot", value=value).get(timeout=30).offset)
        successor.close()
    finally:
        producer.close()
    w.sent = w.acknowledged = records + 2

    def cleaned():
        for log_dir in cluster.log_dirs:
            checkpoint = log_dir / "cleaner-offset-checkpoint"
            if checkpoint.exists():
                for line in checkpoint.read_text().splitlines()[2:]:
                    parts = line.split()
                    if len(parts) == 3 and parts[0] == topic and int(parts[2]) > rewritten[0]:
                        return int(parts[2])
        return None

    w.notes["cleaned_up_to"] = _wait(f"the cleaner did not compact {topic}", cleaned, timeout=90, every=0.25)
    return w


def _markers_on_disk(cluster: KafkaCluster, topic: str) -> int:
    """The control batches the partition's segments hold now, read from the brokers' own files."""
    from analytics.kafka.logdir import stream_segment

    found = 0
    for log_dir in cluster.log_dirs:
        for segment in sorted(log_dir.glob(f"{topic}-0/*.log")):
            stream = stream_segment(segment)
            try:
                while True:
                    found += sum(next(stream).batches.column("is_control").to_pylist())
            except (StopIteration, OSError):
                pass
    return found


def compacted_transactions(cluster: KafkaCluster, topic: str = "healthy-txn-compacted",
                           steps: tuple[str, ...] = ("commit:3", "abort:2", "commit:2", "abort:2", "commit:3")
                           ) -> Workload:
    """Transactions (Kafka's Java producer) committed and aborted on a compacted topic, then keys
    overwritten by an idempotent producer while segments roll, until the cleaner has removed aborted
    records and transaction markers (past ``delete.retention.ms``), as it does to Streams' changelogs
    and ``__consumer_offsets``."""
    cluster.create_topic(topic, 1, replication(cluster), cleanup_policy="compact", segment_ms=100,
                         min_cleanable_dirty_ratio=0.01, delete_retention_ms=100)
    facts, lines = sc.java_transactions(cluster, topic, f"{topic}-id", list(steps), 60000, create=False)
    w = Workload("transactions on a compacted topic (markers cleaned)", [topic], facts.client, facts.sent,
                 facts.acknowledged)
    markers = len(steps)
    # every ABORT marker goes once its aborted records went; a COMMIT marker once its records were
    # overwritten (the first transaction's keys, overwritten first)
    wanted = sum(1 for step in steps if step.startswith("commit")) - 1
    keys = [f"{topic}-id-{4 + step}-{i}" for step, part in enumerate(steps) for i in range(int(part.split(":")[1]))]
    producer = _producer(cluster, linger_ms=0)
    try:
        deadline = time.monotonic() + 60
        i = 0
        while _markers_on_disk(cluster, topic) > wanted and time.monotonic() < deadline:
            producer.send(topic, key=keys[i % len(keys)].encode(), value=f"again-{i}".encode()).get(timeout=30)
            w.sent += 1
            w.acknowledged += 1
            i += 1
            time.sleep(0.15)
    finally:
        producer.close()
    w.notes["markers_left"] = _markers_on_disk(cluster, topic)
    w.notes["transactions"] = markers
    return w


def retention(cluster: KafkaCluster, topic: str = "healthy-retention") -> Workload:
    """Segments rolled every 500 ms by an idempotent producer; ``retention.ms`` of 2 s deletes the old
    ones while the producer goes on; then, with rolls stopped, DeleteRecords moves the log start into the
    active segment."""
    cluster.create_topic(topic, 1, replication(cluster), segment_ms=500)
    w = Workload("retention and DeleteRecords", [topic], "kafka-python, idempotent")
    producer = _producer(cluster, linger_ms=0)
    sent = 0
    try:
        def send(n):
            nonlocal sent
            for _ in range(n):
                producer.send(topic, key=f"t{sent}".encode(), value=f"retained-{sent}".encode()).get(timeout=30)
                sent += 1

        for _ in range(6):
            send(10)
            time.sleep(0.6)
        sc.set_topic_config(cluster, topic, retention_ms=2000)
        w.notes["log_start_after_retention"] = sc.wait_for_log_start(cluster, topic, 0)
        # no more rolls: the segment DeleteRecords lands in then holds batches below the new log start
        # however slowly the sends go (with rolls every 500 ms, one could begin right at it, and the one
        # before it, wholly below the log start, would be deleted)
        sc.set_topic_config(cluster, topic, retention_ms=-1, segment_ms=7 * 24 * 3600 * 1000)
        send(20)
        end = sc.offsets(cluster, topic)[1]
        sc.delete_records(cluster, topic, end - 5)
        w.notes["log_start_after_delete_records"] = end - 5
        send(10)
    finally:
        producer.close()
    w.sent = w.acknowledged = sent
    return w


# -- all of them ---------------------------------------------------------------------------------------
WORKLOADS = ("idempotent", "transactional", "consumer_groups", "share_groups", "streams", "connect", "compacted",
             "compacted_transactions", "retention")


def run_all(cluster: KafkaCluster, root: Path, only: tuple[str, ...] = WORKLOADS) -> dict[str, Workload]:
    """Every workload (``only``) at once against ``cluster``, files under ``root``: name -> Workload (a
    workload the version does not have is left out)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    calls = {
        "idempotent": lambda: idempotent_producers(cluster),
        "transactional": lambda: transactional_producers(cluster),
        "consumer_groups": lambda: consumer_groups(cluster),
        "share_groups": lambda: share_groups(cluster),
        "streams": lambda: kafka_streams(cluster, root),
        "connect": lambda: kafka_connect(cluster, root),
        "compacted": lambda: compacted_topic(cluster),
        "compacted_transactions": lambda: compacted_transactions(cluster),
        "retention": lambda: retention(cluster),
    }
    def timed(name):
        started = time.monotonic()
        w = calls[name]()
        if w is not None:
            w.notes["seconds"] = round(time.monotonic() - started, 1)
        return w

    with ThreadPoolExecutor(max_workers=len(only)) as pool:
        futures = {name: pool.submit(timed, name) for name in only}
        done = {name: f.result() for name, f in futures.items()}
    return {name: w for name, w in done.items() if w is not None}


# the share coordinator's topic in one partition (50 by default: 50 folders to export, each nearly empty)
NODE_CONFIG = {"share.coordinator.state.topic.num.partitions": "1"}


def healthy_node(version: str, root: Path) -> tuple[dict[str, Workload], Path, Path, str]:
    """A combined KRaft node of ``version`` under ``root`` driven through every workload: the workloads,
    a copy of its log dir taken while it ran, its own log dir after a clean shutdown, its bootstrap."""
    root = Path(root)
    cluster = KafkaCluster(version, root / "cluster", config=NODE_CONFIG)
    try:
        cluster.start()
        workloads = run_all(cluster, root / "clients")
        live = copy_log_dir(cluster.node(1).log_dir, root / "live")
        bootstrap = cluster.bootstrap
    finally:
        cluster.close()
    return workloads, live, cluster.node(1).log_dir, bootstrap


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="drive a combined KRaft node through the healthy workloads")
    parser.add_argument("--version", default="4.4.0")
    parser.add_argument("--dir", required=True, type=Path)
    args = parser.parse_args(argv)
    started = time.monotonic()
    workloads, live, final, _ = healthy_node(args.version, args.dir)
    for name, w in workloads.items():
        print(json.dumps({"workload": name, "topics": w.topics, "sent": w.sent, "acknowledged": w.acknowledged,
                          "notes": w.notes}))
    print(f"live copy: {live}\nlog dir (stopped): {final}\n{time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
