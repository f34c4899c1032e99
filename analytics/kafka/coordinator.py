"""The transaction coordinator's log, ``__transaction_state``: who each producer id was.

Each record of the topic is one state change of a transactional id. Its key is
``TransactionLogKey`` (version 0: the transactional id) and its value ``TransactionLogValue``
(``TransactionLog.valueToBytes``), both prefixed by an int16 version:

- version 0: ``producerId:int64 producerEpoch:int16 transactionTimeoutMs:int32 transactionStatus:int8
  transactionPartitions:[topic:string partitionIds:[int32]] (nullable) lastUpdateTimestampMs:int64
  startTimestampMs:int64``, with int16-length strings and int32-length arrays;
- version 1 (flexible, transaction.version 2, KIP-890): the same fields with compact strings and
  arrays (unsigned varint length + 1), a tagged-field section after each partitions entry and after
  the value, whose tags are 0 ``previousProducerId``, 1 ``nextProducerId``, 2 ``clientTransactionVersion``.

A null value is a tombstone: the coordinator removed the transactional id
(``TransactionStateManager.removeExpiredTransactionalIds``, after ``transactional.id.expiration.ms``).
"""

from __future__ import annotations

import struct

from analytics.contract.vocabulary import TOMBSTONE, TXN_ID_STATES
from analytics.kafka.errors import RECORD_DECODE, KafkaFormatError
from analytics.kafka.fields import Fields
from analytics.kafka.model import TransactionalIdChange

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)
FLEXIBLE_VERSION = 1
NO_PRODUCER_ID = -1
_TAG_PREVIOUS, _TAG_NEXT, _TAG_CLIENT_VERSION = 0, 1, 2


def transactional_id_of(key: bytes | None) -> str:
    """The transactional id a ``__transaction_state`` record key names; KafkaFormatError otherwise."""
    if key is None:
        raise KafkaFormatError(RECORD_DECODE, "a __transaction_state record without a key")
    r = Fields(key, "transaction log key")
    version = r.fixed(">h")
    if version != KEY_VERSION:
        raise KafkaFormatError(RECORD_DECODE, f"transaction log key version {version}: Kafka writes {KEY_VERSION}")
    tid = r.string(flexible=False)
    r.done()
    return tid


def decode_change(key: bytes | None, value: bytes | None, *, partition: int, file: str, offset: int,
                  timestamp: int) -> TransactionalIdChange:
    """One record of ``__transaction_state`` partition ``partition`` as a state change; raises KafkaFormatError."""
    where = dict(coordinator_partition=partition, file=file, offset=offset, timestamp=timestamp,
                 transactional_id=transactional_id_of(key))
    if value is None:
        return TransactionalIdChange(**where, state=TOMBSTONE)
    r = Fields(value, "transaction log value")
    version = r.fixed(">h")
    if version not in VALUE_VERSIONS:
        raise KafkaFormatError(RECORD_DECODE, f"transaction log value version {version}: Kafka writes 0 or 1")
    flexible = version >= FLEXIBLE_VERSION
    producer_id, epoch, timeout, status = r.fixed(">q"), r.fixed(">h"), r.fixed(">i"), r.fixed(">b")
    if not 0 <= status < len(TXN_ID_STATES):
        raise KafkaFormatError(RECORD_DECODE, f"transaction status {status}: Kafka's are 0 to {len(TXN_ID_STATES) - 1}")
    partitions = []
    count = r.length(flexible)
    for _ in range(max(count, 0)):
        name = r.string(flexible)
        ids = r.length(flexible)
        if ids < 0:
            raise KafkaFormatError(RECORD_DECODE, f"{r.what}: a null partition list for topic {name}")
        partitions += [f"{name}-{r.fixed('>i')}" for _ in range(ids)]
        if flexible:
            r.tags()
    updated, started = r.fixed(">q"), r.fixed(">q")
    tags = r.tags() if flexible else {}
    r.done()

    def tagged(tag: int, fmt: str, default: int) -> int:
        data = tags.get(tag)
        if data is None:
            return default
        if len(data) != struct.calcsize(fmt):
            raise KafkaFormatError(RECORD_DECODE, f"{r.what}: tagged field {tag} of {len(data)} bytes")
        return struct.unpack(fmt, data)[0]

    return TransactionalIdChange(
        **where, state=TXN_ID_STATES[status], producer_id=producer_id, producer_epoch=epoch,
        previous_producer_id=tagged(_TAG_PREVIOUS, ">q", NO_PRODUCER_ID),
        next_producer_id=tagged(_TAG_NEXT, ">q", NO_PRODUCER_ID), timeout_ms=timeout,
        partitions=tuple(sorted(partitions)), update_timestamp=updated, start_timestamp=started,
        client_transaction_version=tagged(_TAG_CLIENT_VERSION, ">h", 0), value_version=version)


def encode_change(change: TransactionalIdChange, version: int = 0) -> tuple[bytes, bytes | None]:
    """The record key and value the coordinator writes for ``change`` (the generator's and the tests')."""
    key = struct.pack(">hh", KEY_VERSION, len(change.transactional_id.encode())) + change.transactional_id.encode()
    if change.state == TOMBSTONE:
        return key, None
    flexible = version >= FLEXIBLE_VERSION

    def uvarint(n: int) -> bytes:
        out = bytearray()
        while n >= 0x80:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        return bytes(out + bytes([n]))

    def string(s: str) -> bytes:
        data = s.encode()
        return (uvarint(len(data) + 1) if flexible else struct.pack(">h", len(data))) + data

    def length(n: int) -> bytes:
        return uvarint(n + 1) if flexible else struct.pack(">i", n)

    by_topic: dict[str, list[int]] = {}
    for tp in change.partitions or ():
        topic, _, part = tp.rpartition("-")
        by_topic.setdefault(topic, []).append(int(part))
    body = struct.pack(">hqhib", version, change.producer_id, change.producer_epoch, change.timeout_ms,
                       TXN_ID_STATES.index(change.state))
    if change.state == TXN_ID_STATES[0]:  # Empty: a null partition list
        body += length(-1)
    else:
        body += length(len(by_topic))
        for topic, parts in by_topic.items():
            body += string(topic) + length(len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
            body += uvarint(0) if flexible else b""
    body += struct.pack(">qq", change.update_timestamp, change.start_timestamp)
    if flexible:
        tags = [(t, struct.pack(fmt, v)) for t, fmt, v, default in (
            (_TAG_PREVIOUS, ">q", change.previous_producer_id, NO_PRODUCER_ID),
            (_TAG_NEXT, ">q", change.next_producer_id, NO_PRODUCER_ID),
            (_TAG_CLIENT_VERSION, ">h", change.client_transaction_version, 0)) if v != default]
        body += uvarint(len(tags)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in tags)
    return key, body
