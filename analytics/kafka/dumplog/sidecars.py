"""What ``kafka-dump-log.sh --files PATH`` prints for a producer-state ``.snapshot`` and for a
``.txnindex``, from the sidecar readers: :func:`dump_producer_snapshot`, :func:`dump_txn_index`."""

from __future__ import annotations

import os
from collections.abc import Iterator

from analytics.contract.vocabulary import INT_MAX
from analytics.kafka.dumplog.source import java_path, read_all
from analytics.kafka.dumplog.style import dump_style
from analytics.kafka.sidecars.snapshot import read_snapshot, snapshot_offset_from_name
from analytics.kafka.sidecars.txnindex import ABORTED_TXN, ABORTED_TXN_VERSION

_INT32 = 1 << 32  # Java's int arithmetic wraps modulo 2^32


def dump_producer_snapshot(path: str, *, kafka_version: str | None = None, warn=None) -> Iterator[str]:
    """``dumpProducerIdSnapshot``: one line per producer of a ``.snapshot`` file, in file order.

    A file the broker refuses (version, size, CRC) prints nothing after its ``Dumping`` line; the
    reason goes to ``warn``, as the tool prints it on stderr.
    """
    style = dump_style(kafka_version)
    shown = java_path(path)
    data = read_all(path)
    yield f"Dumping {shown}"
    name = os.path.basename(shown)
    read = read_snapshot(
        data, topic="", partition=-1, file=path, snapshot_offset=snapshot_offset_from_name(name) or 0
    )
    for error in read.errors:
        if warn is not None:
            warn(f"{shown}: {error.message}")
    for entry in read.rows:
        txn = entry.current_txn_first_offset
        if style.optional_long:
            txn_text = "OptionalLong.empty" if txn < 0 else f"OptionalLong[{txn}]"
        else:
            txn_text = "None" if txn < 0 else f"Some({txn})"
        line = (
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch}"
            f" coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {txn_text}"
            f" lastTimestamp: {entry.timestamp}"
        )
        if entry.last_offset >= 0:  # the entry's last batch (readSnapshot keeps it when lastOffset >= 0)
            first_sequence = _java_decrement_sequence(entry.last_sequence, entry.offset_delta)
            line += (
                f" firstSequence: {first_sequence} lastSequence: {entry.last_sequence}"
                f" lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta}"
                f" timestamp: {entry.timestamp}"
            )
        elif not style.java_tool:
            line += " "  # the Scala tool printed "lastTimestamp: T " before the batch part
        yield line


def dump_txn_index(path: str, *, warn=None) -> Iterator[str]:
    """``dumpTxnIndex``: one line per aborted transaction of a ``.txnindex`` file.

    A partial trailing entry is skipped, as the broker's iterator does; an entry of a version
    above 0 makes the tool throw, so the dump stops there (the reason goes to ``warn``).
    """
    shown = java_path(path)
    data = read_all(path)
    yield f"Dumping {shown}"
    whole = len(data) - len(data) % ABORTED_TXN.size
    for version, producer_id, first, last, last_stable in ABORTED_TXN.iter_unpack(data[:whole]):
        if version > ABORTED_TXN_VERSION:
            if warn is not None:
                warn(f"Unexpected aborted transaction version {version} in transaction index {shown}")
            return
        yield (
            f"version: {version} producerId: {producer_id} firstOffset: {first}"
            f" lastOffset: {last} lastStableOffset: {last_stable}"
        )


def _java_decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence`` with Java's int arithmetic (a snapshot's firstSequence).

    >>> _java_decrement_sequence(5, 2), _java_decrement_sequence(1, 3), _java_decrement_sequence(INT_MAX, -1)
    (3, 2147483646, -2147483648)
    """
    if sequence < decrement:
        result = INT_MAX - (decrement - sequence) + 1
    else:
        result = sequence - decrement
    result %= _INT32
    return result - _INT32 if result > INT_MAX else result
