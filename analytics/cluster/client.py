"""A live cluster over the Kafka protocol, through kafka-python's admin client.

Everything the export asks a cluster goes through :class:`Cluster`: the cluster id and its
partitions with their leaders and topic ids (Metadata), offsets (ListOffsets,
``READ_UNCOMMITTED``), producer state (DescribeProducers), the coordinators' transactions
(ListTransactions, DescribeTransactions), and raw record batches (Fetch). kafka-python builds,
sends and parses every request; the one thing it has no method for, a Fetch that returns the
partition's bytes as they are, is a :class:`~kafka.protocol.consumer.FetchRequest` sent on the
admin client's connections (version 12 at most, as kafka-python's own consumer sends: topic names,
not ids).

Failures a user can fix (no broker answers, a refused login, a denied ACL) are one-line
:class:`~analytics.errors.InputError` s; the fetch loop (:mod:`analytics.cluster.fetch`) handles
the per-partition errors a Fetch can return.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from analytics.cluster import login
from analytics.cluster.config import ClientConfig
from analytics.contract import CONFIG_STATIC_BROKER
from analytics.errors import InputError
from analytics.kafka.sidecars.metadata import topic_id_text, topic_id_uuid

READ_UNCOMMITTED = 0  # aborted data and markers are part of the log
# how kafka-python's bootstrap fails when no broker lets it in: the login is then asked directly
NOT_BOOTSTRAPPED = ("KafkaTimeoutError", "NoBrokersAvailable", "KafkaConnectionError")
# kafka-python's, unless the client configuration sets request.timeout.ms / default.api.timeout.ms
TIMEOUTS = {"request_timeout_ms": 30000, "bootstrap_timeout_ms": 15000}
FETCH_VERSION = 12  # by topic name
FETCH_BY_ID_VERSION = 13  # by topic id (Kafka 3.1+): a topic deleted and created again is another topic
# Fetch error codes the fetch loop acts on (Kafka's Errors.java)
NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_ID = 0, 1, 100
RETRIABLE = {
    3: "UNKNOWN_TOPIC_OR_PARTITION", 5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT", 8: "BROKER_NOT_AVAILABLE", 9: "REPLICA_NOT_AVAILABLE", 13: "NETWORK_EXCEPTION",
    56: "KAFKA_STORAGE_ERROR", 74: "FENCED_LEADER_EPOCH", 75: "UNKNOWN_LEADER_EPOCH",
}
DENIED = {29: "TOPIC_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED"}
# DescribeConfigs' config sources the export keeps, as (cluster_configs.resource_type, whether the
# row names its resource): a topic's own config, a broker's dynamic one, the cluster-wide dynamic
# default (resource_name ""), a broker's static one (its server.properties)
CONFIG_SOURCES = {"DYNAMIC_TOPIC_CONFIG": ("topic", True), "DYNAMIC_BROKER_CONFIG": ("broker", True),
                  "DYNAMIC_DEFAULT_BROKER_CONFIG": ("broker", False), "STATIC_BROKER_CONFIG": (CONFIG_STATIC_BROKER, True)}


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader now
    internal: bool
    topic_id: str | None = None  # Metadata v10+, as partition.metadata writes it; None: not given


@dataclass(frozen=True, slots=True)
class Fetched:
    """One partition's answer to a Fetch."""

    error_code: int
    records: bytes
    high_watermark: int
    log_start_offset: int


class Cluster:
    """A connection to one cluster (a kafka-python admin client); use it as a context manager."""

    def __init__(self, config: ClientConfig):
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        self.config = config
        try:
            self.admin = KafkaAdminClient(**{**TIMEOUTS, **config.kwargs()})
        except KafkaError as e:
            if type(e).__name__ not in NOT_BOOTSTRAPPED:
                raise InputError(_cannot_reach(config, e)) from None
            tls = login.tls_problem(config)
            if tls:
                raise InputError(f"cannot use kafka://{config.bootstrap}: {tls}") from None
            raise InputError(_cannot_reach(config, e, login.refusal(config))) from None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.admin.close()

    # -- the driver's questions ---------------------------------------------------------------------
    def cluster_id(self) -> str:
        return self._ask(self.admin.describe_cluster)["cluster_id"]

    def partitions(self, pattern: str = ".*") -> list[PartitionInfo]:
        """Every partition of the topics whose whole name matches ``pattern`` (a regex), sorted."""
        try:
            wanted = re.compile(pattern)
        except re.error as e:
            raise InputError(f"--topics {pattern!r} is not a regular expression: {e}") from None
        names = sorted(t for t in self._ask(self.admin.list_topics) if wanted.fullmatch(t))
        if not names:
            return []
        out = []
        for topic in self._ask(self.admin.describe_topics, names):
            if topic["error_code"]:
                raise InputError(f"cannot describe topic {topic['name']}: {_error_name(topic['error_code'])}")
            topic_id = topic_id_text(topic.get("topic_id"))
            for p in topic["partitions"]:
                out.append(PartitionInfo(topic["name"], p["partition_index"], p.get("leader_id", -1),
                                         bool(topic.get("is_internal")), topic_id))
        return sorted(out, key=lambda p: (p.topic, p.partition))

    def offsets(self, partitions: list[tuple[str, int]], spec: str | int) -> dict[tuple[str, int], int]:
        """Each partition's ``earliest`` or ``latest`` offset (the high watermark), or for a timestamp in
        ms the first offset at or after it (the latest when no record is that late)."""
        from kafka import OffsetSpec, TopicPartition

        if not partitions:
            return {}
        specs = {"earliest": OffsetSpec.EARLIEST, "latest": OffsetSpec.LATEST}
        wanted = specs[spec] if isinstance(spec, str) else int(spec)
        got = self._ask(self.admin.list_partition_offsets, {TopicPartition(t, p): wanted for t, p in partitions})
        out = {(tp.topic, tp.partition): o.offset for tp, o in got.items()}
        if not isinstance(spec, str) and any(o < 0 for o in out.values()):
            late = [k for k, o in out.items() if o < 0]
            out.update(self.offsets(late, "latest"))
        return out

    def producers(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], list]:
        """DescribeProducers at each partition's leader: kafka-python's ``ProducerState`` s."""
        from kafka import TopicPartition

        if not partitions:
            return {}
        got = self._ask(self.admin.describe_producers, [TopicPartition(t, p) for t, p in partitions])
        return {(tp.topic, tp.partition): list(state.active_producers) for tp, state in got.items()}

    def transactions(self) -> list:
        """Every transactional id the coordinators hold now, described: kafka-python's
        ``TransactionDescription`` s with their ids, as ``(transactional_id, description)``."""
        listed = self._ask(self.admin.list_transactions)
        ids = sorted({t.transactional_id for per_broker in listed.values() for t in per_broker})
        described = {}
        for i in range(0, len(ids), 100):
            chunk = ids[i:i + 100]
            got = self._ask(self.admin.describe_transactions, chunk, tolerate=True)
            if got is None:  # one id ended between the listing and now: the others one by one
                got = {}
                for tid in chunk:
                    got.update(self._ask(self.admin.describe_transactions, [tid], tolerate=True) or {})
            described.update(got)
        return sorted(described.items())

    # -- the executors' fetches ---------------------------------------------------------------------
    def configs(self, topics: list[str]) -> list[dict]:
        """The configs the cluster holds for ``topics`` and its brokers, as ``cluster_configs`` rows
        (resource_type, resource_name, name, value), from DescribeConfigs' non-default values: a topic's
        own configs; each broker's dynamic configs (resource_name its id), the cluster-wide dynamic
        defaults (resource_name ""), and its static ones, those of its server.properties (resource_type
        ``contract.CONFIG_STATIC_BROKER``). Sensitive values are left out. A principal not allowed to describe
        configs gets none: the audit then takes its other sources."""
        from kafka.admin import ConfigResource, ConfigResourceType
        from kafka.errors import KafkaError

        brokers = sorted(b["broker_id"] for b in self._ask(self.admin.describe_cluster)["brokers"]
                         if not b.get("is_fenced"))
        resources = ([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics]
                     + [ConfigResource(ConfigResourceType.BROKER, str(b)) for b in brokers])
        try:
            got = self.admin.describe_configs(resources)
        except KafkaError:
            return []
        rows = []
        for by_name in got.values():
            for name, entries in by_name.items():
                for key, entry in entries.items():
                    where = CONFIG_SOURCES.get(entry.get("config_source"))
                    if where is None or entry.get("is_sensitive") or entry.get("value") is None:
                        continue
                    resource_type, own = where
                    rows.append({"resource_type": resource_type, "resource_name": name if own else "",
                                 "name": key, "value": str(entry["value"])})
        return sorted({tuple(r.items()): r for r in rows}.values(), key=lambda r: tuple(r.values()))

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader now (metadata asked again), -1 when it has none."""
        for p in self.partitions(re.escape(topic)):
            if p.partition == partition:
                return p.leader
        return -1

    def fetch(self, node: int, topic: str, partition: int, offset: int, max_bytes: int,
              max_wait_ms: int = 500, topic_id: str | None = None) -> Fetched:
        """The bytes of ``topic``-``partition`` from ``offset`` (the whole entry holding it first), at
        most about ``max_bytes`` (one entry larger than that comes whole), from broker ``node``. With
        ``topic_id`` (``partition.metadata``'s form) a broker of Kafka 3.1 or later is asked for that
        topic, as Kafka's own consumers ask: once the topic is deleted it answers
        ``UNKNOWN_TOPIC_ID``, never with another topic that took the name since. An older broker is
        asked by name."""
        from kafka.protocol.consumer import FetchRequest

        topic_request = FetchRequest.FetchTopic
        by_id = {"topic_id": topic_id_uuid(topic_id)} if topic_id else {}
        request = FetchRequest(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
            isolation_level=READ_UNCOMMITTED, session_id=0, session_epoch=-1,
            topics=[topic_request(topic=topic, **by_id, partitions=[topic_request.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=max_bytes)])],
            forgotten_topics_data=[], rack_id="", max_version=FETCH_BY_ID_VERSION if topic_id else FETCH_VERSION)
        manager = self.admin._manager  # kafka-python's connections (its admin methods send the same way)

        async def send():
            return await manager.send(request, node_id=node)

        response = manager.run(send)
        for answer in response.responses:
            for p in answer.partitions:
                if p.partition_index == partition:
                    return Fetched(p.error_code, bytes(p.records or b""), p.high_watermark, p.log_start_offset)
        return Fetched(3, b"", -1, -1)  # the broker did not answer for the partition

    def _ask(self, method, *args, tolerate: bool = False):
        from kafka.errors import KafkaError

        try:
            return method(*args)
        except KafkaError as e:
            if tolerate and type(e).__name__ == "TransactionalIdNotFoundError":
                return None
            raise InputError(_cannot_reach(self.config, e)) from None


def _cannot_reach(config: ClientConfig, e: Exception, refused: str | None = None) -> str:
    name = type(e).__name__
    if refused:
        return f"cannot use kafka://{config.bootstrap}: login refused ({refused})"
    what = {"NoBrokersAvailable": "no broker answered",
            "KafkaConnectionError": "the connection failed",
            "KafkaTimeoutError": "no broker answered in time"}.get(name)
    if "Authorization" in name:
        what = f"access denied ({name}): the principal needs DESCRIBE on the cluster and the topics, READ on the topics"
    elif "Authentication" in name or "Sasl" in name:
        what = f"login refused ({name})"
    detail = str(e).splitlines()[0] if str(e) else name
    return f"cannot use kafka://{config.bootstrap}: {what or detail}"


def _error_name(code: int) -> str:
    from kafka.errors import for_code

    return for_code(code).__name__
