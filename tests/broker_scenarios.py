"""What real clients do to a real broker in ``test_real_broker.py``: each scenario writes its own topic
and returns what the clients saw (sent, acknowledged, errors) and what the broker reported (log start
and end offsets), so the audit of the broker's log dir can be compared with both.

Clients: kafka-python and confluent-kafka (librdkafka) for the lost-ACK experiment, Kafka's own Java
producer of the broker's release (``tests/kafka/TxnClient.java``) for transactions, so that a 4.x
broker sees transactions V2.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka import KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec

from tests.fault_proxy import FaultProxy
from tests.kafka_cluster import HERE, QUICK_JVM, KafkaCluster, java

# The broker settings of the scenarios (the audit's configuration restates them).
PRODUCER_ID_EXPIRATION_MS = 5000
TRANSACTION_MAX_TIMEOUT_MS = 60000
TRANSACTIONAL_ID_EXPIRATION_MS = 6000
BROKER_CONFIG = {
    "producer.id.expiration.ms": str(PRODUCER_ID_EXPIRATION_MS),
    "transactional.id.expiration.ms": str(TRANSACTIONAL_ID_EXPIRATION_MS),
    "transactions.remove.expired.transaction.cleanup.interval.ms": "500",
    "producer.id.expiration.check.interval.ms": "500",
    "transaction.max.timeout.ms": str(TRANSACTION_MAX_TIMEOUT_MS),
    "log.flush.start.offset.checkpoint.interval.ms": "1000",
    "log.cleaner.min.compaction.lag.ms": "0",
}
LOST_ACK_RECORDS = 200
LOST_ACK_DROP_RATE = 0.35


@dataclass
class Facts:
    """One scenario: its topic and what the clients and the broker reported."""

    scenario: str
    topic: str
    client: str = ""
    sent: int = 0
    acknowledged: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    responses_dropped: int = 0
    log_start: int = 0
    log_end: int = 0
    notes: dict = field(default_factory=dict)

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


def offsets(cluster: KafkaCluster, topic: str, partition: int = 0) -> tuple[int, int]:
    """The partition's log start and end offsets, as the broker answers ListOffsets."""
    admin = cluster.admin()
    try:
        tp = TopicPartition(topic, partition)
        start = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset
        end = admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset
        return start, end
    finally:
        admin.close()


def finish(cluster: KafkaCluster, facts: Facts) -> Facts:
    """The facts with the partition's log start and end offsets as the broker reports them now."""
    facts.log_start, facts.log_end = offsets(cluster, facts.topic)
    return facts


# -- lost ACKs ---------------------------------------------------------------------------------
def lost_acks_kafka_python(cluster: KafkaCluster, proxy: FaultProxy, topic: str, idempotent: bool, seed: int,
                           **configs: str) -> Facts:
    """200 records one at a time through the proxy dropping 35% of Produce responses (kafka-python);
    ``configs``: the topic's (``message_timestamp_type="LogAppendTime"``: the broker stamps each append)."""
    cluster.create_topic(topic, **configs)
    facts = Facts("lost ACKs", topic, f"kafka-python, {'idempotent' if idempotent else 'plain'}")
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, client_id="segaudit-tests", acks="all", enable_idempotence=idempotent,
        retries=20, retry_backoff_ms=10, reconnect_backoff_ms=10, request_timeout_ms=10000, linger_ms=0,
        max_in_flight_requests_per_connection=1,
    )
    try:
        producer.partitions_for(topic)
        proxy.set_faults(drop_rate=LOST_ACK_DROP_RATE, seed=seed)
        for i in range(LOST_ACK_RECORDS):
            facts.sent += 1
            stamp = int(time.time() * 1000)  # the producer side's record of when it sent what (reconcile)
            facts.notes.setdefault("sent_timestamps", []).append(stamp)
            try:
                producer.send(topic, key=str(i).encode(), value=f"{topic}-{i}".encode(), timestamp_ms=stamp).get(timeout=60)
                facts.acknowledged += 1
            except Exception as e:  # the record may or may not be in the log: the audit tells
                facts.error(type(e).__name__)
        facts.responses_dropped = proxy.stats.produce_responses_dropped
    finally:
        proxy.set_faults()
        producer.close(timeout=10)
    return finish(cluster, facts)


def lost_acks_confluent(cluster: KafkaCluster, proxy: FaultProxy, topic: str, idempotent: bool, seed: int) -> Facts:
    """The same with confluent-kafka (librdkafka)."""
    import logging

    from confluent_kafka import Producer

    cluster.create_topic(topic)
    facts = Facts("lost ACKs", topic, f"confluent-kafka, {'idempotent' if idempotent else 'plain'}")
    quiet = logging.getLogger("segaudit.tests.librdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap, "client.id": "segaudit-tests", "acks": "all",
        "enable.idempotence": idempotent, "retries": 20, "retry.backoff.ms": 10, "reconnect.backoff.ms": 10,
        "linger.ms": 0, "max.in.flight.requests.per.connection": 1, "message.timeout.ms": 60000,
        "logger": quiet,
    })
    outcome: list = []
    try:
        producer.list_topics(topic, timeout=10)
        proxy.set_faults(drop_rate=LOST_ACK_DROP_RATE, seed=seed)
        for i in range(LOST_ACK_RECORDS):
            facts.sent += 1
            outcome.clear()
            stamp = int(time.time() * 1000)
            facts.notes.setdefault("sent_timestamps", []).append(stamp)
            producer.produce(topic, key=str(i).encode(), value=f"{topic}-{i}".encode(), timestamp=stamp,
                             on_delivery=lambda err, msg: outcome.append(err))
            producer.flush(60)
            if outcome and outcome[0] is None:
                facts.acknowledged += 1
            else:
                facts.error(str(outcome[0].name() if outcome and outcome[0] else "no delivery report"))
        facts.responses_dropped = proxy.stats.produce_responses_dropped
    finally:
        proxy.set_faults()
        producer.flush(10)
        del producer
    return finish(cluster, facts)


# -- transactions: Kafka's Java producer -------------------------------------------------------
def java_transactions(cluster: KafkaCluster, topic: str, txn_id: str, steps: list[str], timeout_ms: int,
                      create: bool = True) -> tuple[Facts, list[dict]]:
    """Runs ``TxnClient.java`` with the broker's own client jars; returns its JSON lines."""
    if create:
        cluster.create_topic(topic)
    facts = Facts("transactions", topic, f"Kafka Java producer {cluster.version}, transactional.id {txn_id}")
    cmd = [java(), "-Xmx256m", *QUICK_JVM, "-cp", f"{cluster.jars}/*", str(HERE / "kafka" / "TxnClient.java"),
           cluster.bootstrap, topic, txn_id, str(timeout_ms), *steps]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"TxnClient failed ({done.returncode}): {done.stderr[-3000:]}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    for line in lines:
        facts.sent += len(line["offsets"]) + (1 if line["step"] == "fence" else 0)
        facts.acknowledged += len(line["offsets"])
        if line.get("zombie_error", "none") != "none":
            facts.error(line["zombie_error"])
    facts.notes["steps"] = steps
    return finish(cluster, facts), lines


def wait_for_end_offset(cluster: KafkaCluster, topic: str, at_least: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        end = offsets(cluster, topic)[1]
        if end >= at_least:
            return end
        time.sleep(0.2)
    raise TimeoutError(f"{topic} did not reach offset {at_least}")


# -- retention, DeleteRecords, an idle producer --------------------------------------------------
def idempotent_producer(cluster: KafkaCluster) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=cluster.bootstrap, client_id="segaudit-tests", acks="all",
                         enable_idempotence=True, linger_ms=0)


def send_each(producer: KafkaProducer, topic: str, values: range, facts: Facts, key: str | None = None) -> list[int]:
    """One record per batch (each send waits for its acknowledgement)."""
    got = []
    for i in values:
        facts.sent += 1
        k = (key or str(i)).encode()
        got.append(producer.send(topic, key=k, value=f"{topic}-{i}".encode()).get(timeout=30).offset)
        facts.acknowledged += 1
    return got


def set_topic_config(cluster: KafkaCluster, topic: str, **configs: str) -> None:
    admin = cluster.admin()
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                            configs={k.replace("_", "."): str(v) for k, v in configs.items()})])
    finally:
        admin.close()


def delete_records(cluster: KafkaCluster, topic: str, before: int) -> None:
    admin = cluster.admin()
    try:
        admin.delete_records({TopicPartition(topic, 0): before})
    finally:
        admin.close()


def wait_for_log_start(cluster: KafkaCluster, topic: str, above: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        start = offsets(cluster, topic)[0]
        if start > above:
            return start
        time.sleep(0.25)
    raise TimeoutError(f"{topic}: the log start stayed at {above}")


def wait_for_tombstone(log_dir: Path, txn_id: str, timeout: float = 60) -> int:
    """Until the coordinator's log holds a tombstone of ``txn_id`` (it expired); returns its offset.
    Read from the broker's own files while it runs, with segaudit's reader."""
    from analytics.kafka.coordinator import transactional_id_of
    from analytics.kafka.logdir import stream_segment

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for segment in sorted(log_dir.glob("__transaction_state-*/*.log")):
            stream = stream_segment(segment, records=True)
            try:
                while True:
                    chunk = next(stream)
                    for key, value, offset in zip(*(chunk.records.column(c).to_pylist() for c in ("key", "value", "offset"))):
                        if value is None and key is not None and transactional_id_of(key) == txn_id:
                            return offset
            except StopIteration:
                pass
        time.sleep(0.25)
    raise TimeoutError(f"the coordinator did not expire {txn_id}")


def wait_for_cleaning(log_dir: Path, topic: str, beyond: int = 0, timeout: float = 90) -> int:
    """Until the cleaner's checkpoint for the topic's partition passes ``beyond`` (it has compacted so far)."""
    checkpoint = log_dir / "cleaner-offset-checkpoint"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if checkpoint.exists():
            for line in checkpoint.read_text().splitlines()[2:]:
                parts = line.split()
                if len(parts) == 3 and parts[0] == topic and int(parts[2]) > beyond:
                    return int(parts[2])
        time.sleep(0.25)
    raise TimeoutError(f"the cleaner did not compact {topic}")
