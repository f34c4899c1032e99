"""Transaction indexes (``<offset>.txnindex``): a bare sequence of AbortedTxn entries, no header.

Upstream sources, under https://github.com/apache/kafka/blob/trunk/:
- storage/src/main/java/org/apache/kafka/storage/internals/log/AbortedTxn.java
- storage/src/main/java/org/apache/kafka/storage/internals/log/TransactionIndex.java
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from analytics.kafka.errors import CORRUPT_SIDECAR
from analytics.kafka.model import AbortedTxn, ParseError, SidecarResult
from analytics.kafka.sidecars.results import entry_values

ABORTED_TXN = struct.Struct(
    ">h"  # version: ABORTED_TXN_VERSION
    "q"  # producerId
    "q"  # firstOffset: the transaction's first offset
    "q"  # lastOffset: the ABORT marker's offset
    "q"  # lastStableOffset: the last stable offset when the marker was appended
)
ABORTED_TXN_VERSION = 0
TXNINDEX_SUFFIX = ".txnindex"
_ABORTED_TXN_FIELDS = ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset")


def read_txnindex(data: bytes, *, topic: str, partition: int, file: str) -> SidecarResult:
    """The aborted transactions of a ``.txnindex`` file.

    Entries are independent records, so one bad entry does not condemn the others: an unknown
    version is an error for its 34 bytes; a partial trailing entry (which the broker's iterator
    skips) is an error for its bytes; a lastOffset that does not increase keeps its row and adds an
    error with no bytes affected, since TransactionIndex.append would have refused to write it.

    >>> data = write_txnindex([(7, 100, 105, 100), (7, 110, 104, 110)])
    >>> result = read_txnindex(data, topic="t", partition=0, file="f")
    >>> [row.last_offset for row in result.rows], [error.bytes_affected for error in result.errors]
    ([105, 104], [0])
    """
    result = SidecarResult()
    whole = len(data) - len(data) % ABORTED_TXN.size
    previous_last_offset = None
    for index, values in enumerate(ABORTED_TXN.iter_unpack(memoryview(data)[:whole])):
        position = index * ABORTED_TXN.size
        row = AbortedTxn(topic, partition, file, *values)
        if row.version != ABORTED_TXN_VERSION:
            # Kafka writes only version 0, so the other fields of this entry cannot be interpreted.
            message = f"unknown aborted transaction version {row.version}, expected {ABORTED_TXN_VERSION}"
            result.errors.append(
                ParseError(topic, partition, file, position, CORRUPT_SIDECAR, message, ABORTED_TXN.size)
            )
            continue
        if previous_last_offset is not None and row.last_offset <= previous_last_offset:
            message = f"lastOffset {row.last_offset} is not above the previous entry's {previous_last_offset}"
            result.errors.append(ParseError(topic, partition, file, position, CORRUPT_SIDECAR, message, 0))
        previous_last_offset = row.last_offset
        result.rows.append(row)
    tail = len(data) - whole
    if tail:
        message = f"{tail} trailing bytes do not make a whole {ABORTED_TXN.size}-byte entry"
        result.errors.append(ParseError(topic, partition, file, whole, CORRUPT_SIDECAR, message, tail))
    return result


def write_txnindex(entries: Iterable) -> bytes:
    """A ``.txnindex`` file holding ``entries`` in the given order.

    ``entries`` are :class:`AbortedTxn` rows (written with their own version) or tuples
    (producerId, firstOffset, lastOffset, lastStableOffset) written as version 0, like Kafka's
    ``AbortedTxn`` constructor. The order is not checked, so a file that breaks
    TransactionIndex.append's rule can be built on purpose.
    """
    return b"".join(ABORTED_TXN.pack(*_aborted_txn_fields(entry)) for entry in entries)


def _aborted_txn_fields(entry) -> tuple:
    if isinstance(entry, AbortedTxn):
        return entry_values(entry, AbortedTxn, _ABORTED_TXN_FIELDS)
    return (ABORTED_TXN_VERSION, *entry)
