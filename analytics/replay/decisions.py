"""Who appends a batch to a partition and what the leader answers (``docs/kafka-replay-rules.md`` §2.3, §2.4).

The words the rules, the profiles and the state manager share: :class:`Origin` (``AppendOrigin``),
:class:`Result` (the error a client would get, or an append), the :class:`Decision` about one
batch, and the transactions a marker closes or leaves open.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import NamedTuple


class Result(StrEnum):
    """What the leader does with a batch. Every value but APPENDED and DUPLICATE is an error
    returned to the client, and then nothing of the append is written."""

    APPENDED = "Appended"
    # The client gets the original batch's offsets and treats the retry as a success.
    DUPLICATE = "Duplicate"
    OUT_OF_ORDER_SEQUENCE = "OutOfOrderSequence"
    UNKNOWN_PRODUCER_ID = "UnknownProducerId"
    INVALID_PRODUCER_EPOCH = "InvalidProducerEpoch"
    PRODUCER_FENCED = "ProducerFenced"
    INVALID_TXN_STATE = "InvalidTxnState"
    TRANSACTION_COORDINATOR_FENCED = "TransactionCoordinatorFenced"


class Origin(Enum):
    """Who appends (``AppendOrigin``); it decides which checks run (§2.3)."""

    CLIENT = "CLIENT"  # a produce request on the leader: every check
    COORDINATOR = "COORDINATOR"  # transaction markers, transactional offset commits: no sequence checks
    REPLICATION = "REPLICATION"  # followers, log recovery, state rebuild: epochs only logged


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker (``CompletedTxn``); aborted ones go to the ``.txnindex``."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


class OpenTxn(NamedTuple):
    """A transaction with data and no marker yet; the oldest one starts at the first unstable offset."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class Decision:
    """The leader's answer to one batch."""

    result: Result
    reason: str
    duplicate_of: tuple[int, int] | None = None  # DUPLICATE: the original batch's (first, last) offset
    completed_txn: CompletedTxn | None = None  # an appended marker that closed a non-empty transaction
