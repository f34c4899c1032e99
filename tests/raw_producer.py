"""A raw idempotent producer for probing a real broker one batch at a time.

kafka-python's protocol layer does the talking (``KafkaNetClient``, ``InitProducerIdRequest``,
``MetadataRequest``, ``ProduceRequest``); the batch bytes are our own
(:func:`analytics.kafka.writer.build_batch`), with the producer id, epoch, base sequence and
timestamps the test chooses. Every produce request carries exactly one batch for one partition, as
a v2 produce does (§1.10 of the replay rules), with acks=-1, and the broker's answer comes back
unchanged: the error code and the base offset (for a duplicate, a 3.x/4.x broker answers error 0
with the original batch's base offset).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import kafka.errors as Errors
from kafka.net.compat import KafkaNetClient
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from analytics.kafka.util import last_sequence
from analytics.kafka.writer import RecordSpec, build_batch

# Produce v13 names topics by id; 12 is the newest version that names them (3.9 answers up to 11).
PRODUCE_MAX_VERSION = 12


@dataclass(frozen=True, slots=True)
class Answer:
    """The broker's answer to one produce request (its only partition)."""

    error_code: int
    base_offset: int
    # an append to a LogAppendTime topic: the broker's time; to a CreateTime topic: -1;
    # a duplicate: the original batch's timestamp, from the broker's cache
    log_append_time: int
    log_start_offset: int

    @property
    def error_name(self) -> str:
        return "NONE" if self.error_code == 0 else Errors.for_code(self.error_code).__name__


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def idempotent_batch(producer_id: int, epoch: int, base_sequence: int, count: int, timestamp: int) -> bytes:
    """``count`` records from ``base_sequence`` on; record i's value names its (epoch, sequence), so a
    retry of the same range carries the same records. All records carry ``timestamp``, which is
    therefore the batch's maxTimestamp (what the broker's expiration compares with its clock)."""
    records = [
        RecordSpec(key=b"p%d" % producer_id, value=b"%d:%d" % (epoch, last_sequence(base_sequence, i)),
                   timestamp=timestamp)
        for i in range(count)
    ]
    return build_batch(0, records, producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence)


class RawProducer:
    """A producer id from InitProducerId, and produce requests of one hand-built batch each."""

    def __init__(self, bootstrap: str, *, client_id: str = "segaudit-probe", request_timeout_ms: int = 30000):
        self.client = KafkaNetClient(bootstrap_servers=bootstrap, client_id=client_id,
                                     request_timeout_ms=request_timeout_ms)
        self.request_timeout_ms = request_timeout_ms
        self.client.check_version()
        self._leaders: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        self.client.close()

    def _any_node(self) -> int:
        node = self.client.least_loaded_node(bootstrap_fallback=True)
        if node is None:
            raise RuntimeError("no broker to send to")
        return node

    def _call(self, node: int, request):
        return self.client.send_and_receive(node, request, timeout_ms=self.request_timeout_ms)

    def init_producer_id(self, timeout: float = 60.0) -> tuple[int, int]:
        """(producer id, epoch) of a new idempotent (non-transactional) producer. Right after start
        the broker answers COORDINATOR_LOAD_IN_PROGRESS until it has a block of producer ids."""
        deadline = time.monotonic() + timeout
        while True:
            response = self._call(self._any_node(), InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=2**31 - 1, producer_id=-1, producer_epoch=-1,
                max_version=5))
            if response.error_code == 0:
                return response.producer_id, response.producer_epoch
            error = Errors.for_code(response.error_code)
            if not error.retriable or time.monotonic() > deadline:
                raise error(f"InitProducerId failed: {error.__name__}")
            time.sleep(0.2)

    def leader(self, topic: str, partition: int, timeout: float = 30.0) -> int:
        key = (topic, partition)
        if key in self._leaders:
            return self._leaders[key]
        deadline = time.monotonic() + timeout
        Topic = MetadataRequest.MetadataRequestTopic
        while True:
            response = self._call(self._any_node(), MetadataRequest(
                topics=[Topic(name=topic)], allow_auto_topic_creation=False, max_version=12))
            for t in response.topics:
                if t.error_code == 0:
                    for p in t.partitions:
                        if p.error_code == 0 and p.leader_id >= 0:
                            self._leaders[(topic, p.partition_index)] = p.leader_id
            if key in self._leaders:
                return self._leaders[key]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no leader for {topic}-{partition}")
            time.sleep(0.1)

    def log_end_offsets(self, topic: str, partitions: list[int], timeout: float = 30.0) -> dict[int, int]:
        """ListOffsets (latest) from each partition's leader. A partition whose leader has not taken
        over yet answers NOT_LEADER_OR_FOLLOWER; this waits until every one answers."""
        deadline = time.monotonic() + timeout
        Topic = ListOffsetsRequest.ListOffsetsTopic
        Partition = Topic.ListOffsetsPartition
        ends: dict[int, int] = {}
        while True:
            for partition in partitions:
                if partition in ends:
                    continue
                latest = Topic(name=topic, partitions=[Partition(partition_index=partition, timestamp=-1)])
                response = self._call(self.leader(topic, partition), ListOffsetsRequest(
                    replica_id=-1, isolation_level=0, topics=[latest], max_version=7))
                [answer] = response.topics[0].partitions
                if answer.error_code == 0:
                    ends[partition] = answer.offset
                elif not Errors.for_code(answer.error_code).retriable:
                    raise Errors.for_code(answer.error_code)(f"ListOffsets {topic}-{partition}")
            if len(ends) == len(partitions):
                return ends
            if time.monotonic() > deadline:
                missing = sorted(set(partitions) - set(ends))
                raise TimeoutError(f"{topic}: no answer from the leaders of partitions {missing}")
            self._leaders = {k: v for k, v in self._leaders.items() if k[0] != topic}
            time.sleep(0.1)

    def produce(self, topic: str, partition: int, batch: bytes, *, acks: int = -1,
                transactional_id: str | None = None) -> Answer:
        """Send ``batch`` alone in one produce request and return the broker's answer (a transactional
        batch needs the request's ``transactional_id``)."""
        Topic = ProduceRequest.TopicProduceData
        Partition = Topic.PartitionProduceData
        request = ProduceRequest(
            transactional_id=transactional_id, acks=acks, timeout_ms=self.request_timeout_ms,
            topic_data=[Topic(name=topic, partition_data=[Partition(index=partition, records=batch)])],
            min_version=3, max_version=PRODUCE_MAX_VERSION)
        response = self._call(self.leader(topic, partition), request)
        [topic_response] = response.responses
        [answer] = topic_response.partition_responses
        return Answer(answer.error_code, answer.base_offset, answer.log_append_time_ms,
                      answer.log_start_offset)
