"""A partition leader's producer-state validation, as a pure-Python model (no Spark, no I/O).

For each idempotent or transactional batch offered to one partition this module decides what
the broker does with it (append, answer as a duplicate, or reject with a named error) and keeps
the per-producer state that decision needs. The caller assigns offsets and writes bytes.
The rules are those of ``docs/kafka-replay-rules.md`` §2.2-§2.5, §2.9, §2.10 and §3.2, with
the version differences of §2.9 selected by a :class:`Profile`.

Upstream sources (apache/kafka; the Java files under
``storage/src/main/java/org/apache/kafka/storage/internals/log/``):

- ``ProducerAppendInfo.java``: checkProducerEpoch, checkSequence, inSequence, appendDataBatch,
  checkCoordinatorEpoch, appendEndTxnMarker (the trunk version after 4.0 for KAFKA-18202,
  KIP-1228 and KAFKA-19999)
- ``ProducerStateEntry.java`` and ``BatchMetadata.java``: addBatch, maybeUpdateProducerEpoch,
  update, findDuplicateBatch, batchWithSequenceRange, NUM_BATCHES_TO_RETAIN
- ``ProducerStateManager.java``: update, isProducerExpired, removeExpiredProducers,
  onLogStartOffsetIncremented, writeSnapshot, readSnapshot, loadProducerEntry
- ``AppendOrigin.java``
- ``core/src/main/scala/kafka/log/UnifiedLog.scala``: analyzeAndValidateProducerState (the
  duplicate check, done before any other rule and against the state before the append)
- ``core/src/main/scala/kafka/log/ProducerStateManager.scala`` on the 0.11.0-3.4 branches: the
  older profiles (``truncateHead`` eviction, UnknownProducerId, ProducerFenced)

One batch per call. A v2 produce request carries exactly one batch per partition, so when the
leader validates a client batch Kafka's ``updatedEntry`` holds no batch of this append yet and
every rule reads the stored entry. Followers and the coordinator append many batches at once,
but those origins skip the sequence rules, so validating them one by one decides the same; only
Kafka's all-or-nothing (one rejected batch rejects the whole append) is left to the caller.

Not modelled: the KIP-890 verification guard is assumed to pass (only its 4.1 sequence rule is,
through ``verified_tv2``); the 3.6 ``lowestSequence`` rule, which with one verified batch compares
the batch's first sequence with itself and never fires; pre-2.8 bookkeeping of empty
transactions (every profile completes nothing for them, as 2.8+ does); and ``firstSeq`` without
the int32 wrap before KAFKA-7692 (Jan 2019).

>>> manager = ProducerStateManager(PROFILES["2.7"])
>>> print(manager.append_data(7, 0, 0, 2, 0, 2, 1000, is_transactional=False).result)
Appended
>>> retry = manager.append_data(7, 0, 0, 2, 3, 5, 1001, is_transactional=False)
>>> print(retry.result, retry.duplicate_of)
Duplicate (0, 2)
>>> print(manager.append_data(7, 0, 5, 5, 3, 3, 1002, is_transactional=False).result)
OutOfOrderSequence
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import NamedTuple

from analytics.kafka.layout import (
    END_TXN_MARKER_TYPES,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
)
from analytics.kafka.util import decrement_sequence, in_sequence, last_sequence

# producer.id.expiration.ms default since 3.4 (KIP-854); before it transactional.id.expiration.ms (7 days).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000
# ProducerStateEntry.coordinatorEpoch before the producer's first marker.
NO_COORDINATOR_EPOCH = -1
# Snapshot sentinels (ProducerSnapshot.json): no data batch, no open transaction.
NO_OFFSET = -1


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


@dataclass(frozen=True, slots=True)
class Profile:
    """The rules of one range of broker versions (§2.9, scenario profiles of §6.5)."""

    name: str
    # NUM_BATCHES_TO_RETAIN: 1 in 0.11 (ProducerIdEntry kept the last batch), 5 since 1.0 (KAFKA-5494).
    dedup_cache_size: int
    # An unknown PID (epoch -1) whose first batch has seq != 0: the error, or None when it is
    # appended (2.5+, KIP-360). Since KIP-360 the same "no current epoch" also accepts any sequence
    # when a batch arrives with epoch -1.
    unknown_pid_nonzero_seq_error: Result | None
    # A known PID and epoch with no sequence (only a marker left) and seq != 0: OutOfOrderSequence
    # up to 2.0.0, UnknownProducerId 2.0.1-2.4 (KAFKA-7298), OutOfOrderSequence again since 2.5
    # (there it is just inSequence(-1, seq) failing).
    marker_only_nonzero_seq_error: Result
    # A lower epoch: ProducerFenced up to 2.6, InvalidProducerEpoch since 2.7 (KAFKA-10687).
    fenced_error: Result
    # truncateHead drops every PID whose last data offset is below the new log start offset (<= 2.3).
    evicts_below_log_start: bool
    # Markers set the entry's timestamp (KAFKA-9144, 2.4.1). Before, the timestamp was the last
    # cached batch's, so a marker left it alone and an epoch-bumping marker left NO_TIMESTAMP.
    marker_sets_timestamp: bool
    # A TV2-verified first transactional append with no cached batch must start at 0 (KAFKA-18202, 4.1).
    tv2_first_append_needs_seq_zero: bool
    # TV2 markers need an epoch above the current one, except an idempotent retry: the same epoch
    # with no open transaction (KIP-1228 with KAFKA-19999).
    strict_tv2_marker_epoch: bool
    # How long an idle producer is kept when producer.id.expiration.ms is not configured: that
    # setting's default since 3.4 (KIP-854, 1 day); before it transactional.id.expiration.ms (7 days).
    default_producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    # Transactions V2 (KIP-890 part 2, 4.0+): every EndTxn bumps the epoch, so COMMIT and ABORT
    # markers carry the epoch after the transaction's data. A TV1 coordinator writes a COMMIT at the
    # data's epoch and bumps only to fence (an ABORT).
    transactions_v2: bool = False


def _profiles() -> dict[str, Profile]:
    v0_11 = Profile(
        name="0.11",
        dedup_cache_size=1,
        unknown_pid_nonzero_seq_error=Result.OUT_OF_ORDER_SEQUENCE,
        marker_only_nonzero_seq_error=Result.OUT_OF_ORDER_SEQUENCE,
        fenced_error=Result.PRODUCER_FENCED,
        evicts_below_log_start=True,
        marker_sets_timestamp=False,
        tv2_first_append_needs_seq_zero=False,
        strict_tv2_marker_epoch=False,
        default_producer_id_expiration_ms=DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
    )
    v1_0 = replace(  # 1.0-2.0.0
        v0_11, name="1.0", dedup_cache_size=5, unknown_pid_nonzero_seq_error=Result.UNKNOWN_PRODUCER_ID
    )
    v2_1 = replace(v1_0, name="2.1", marker_only_nonzero_seq_error=Result.UNKNOWN_PRODUCER_ID)  # 2.0.1-2.3
    # 2.4.1: PIDs survive log-start-offset moves (KAFKA-7190) and markers set the timestamp (KAFKA-9144).
    v2_4 = replace(v2_1, name="2.4", evicts_below_log_start=False, marker_sets_timestamp=True)
    v2_5 = replace(  # 2.5-2.6, KIP-360
        v2_4,
        name="2.5",
        unknown_pid_nonzero_seq_error=None,
        marker_only_nonzero_seq_error=Result.OUT_OF_ORDER_SEQUENCE,
    )
    v2_7 = replace(v2_5, name="2.7", fenced_error=Result.INVALID_PRODUCER_EPOCH)  # 2.7-3.3
    v3_4 = replace(v2_7, name="3.4", default_producer_id_expiration_ms=DEFAULT_PRODUCER_ID_EXPIRATION_MS)  # 3.4-3.9
    # 4.0: TV2 markers carry epoch + 1, which the "not lower" rule of every version already accepts.
    v4_0 = replace(v3_4, name="4.0", transactions_v2=True)
    v4_1 = replace(v4_0, name="4.1", tv2_first_append_needs_seq_zero=True)
    kip1228 = replace(v4_1, name="kip1228", strict_tv2_marker_epoch=True)
    return {p.name: p for p in (v0_11, v1_0, v2_1, v2_4, v2_5, v2_7, v3_4, v4_0, v4_1, kip1228)}


PROFILES: dict[str, Profile] = _profiles()
# The first broker version of each profile's range; a version between two starts takes the lower
# profile. kip1228 (KIP-1228, KAFKA-19999) is in trunk since late 2025: taken for 4.2 and later.
PROFILE_STARTS: dict[str, tuple[int, int, int]] = {
    "0.11": (0, 11, 0), "1.0": (1, 0, 0), "2.1": (2, 0, 1), "2.4": (2, 4, 0), "2.5": (2, 5, 0), "2.7": (2, 7, 0),
    "3.4": (3, 4, 0), "4.0": (4, 0, 0), "4.1": (4, 1, 0), "kip1228": (4, 2, 0),
}
LATEST_PROFILE_NAME = "4.x"  # what a user types for a current broker: the newest profile
DEFAULT_PROFILE = PROFILES["2.7"]  # the simulator's broker unless a scenario asks for another


def resolve_profile(name: str) -> Profile:
    """The profile for a name: a profile's own (``PROFILES``), ``4.x`` (the newest), or a broker
    version ``X.Y`` / ``X.Y.Z`` from 0.11 on (the profile whose range holds it).

    >>> [resolve_profile(n).name for n in ("2.7", "3.9", "2.0", "2.0.1", "4.0.1", "4.4", "4.x")]
    ['2.7', '3.4', '1.0', '2.1', '4.0', 'kip1228', 'kip1228']
    """
    text = str(name).strip()
    if text in PROFILES:
        return PROFILES[text]
    if text == LATEST_PROFILE_NAME:
        return list(PROFILES.values())[-1]
    parts = text.split(".")
    if 2 <= len(parts) <= 4 and all(part.isdigit() for part in parts):  # 0.11.0.2 had four
        version = (tuple(int(part) for part in parts) + (0, 0))[:3]
        if (0, 11, 0) <= version < (5, 0, 0):
            return PROFILES[max((start, key) for key, start in PROFILE_STARTS.items() if start <= version)[1]]
    raise ValueError(f"unknown profile {text!r}; choose from {profile_choices()}")


def profile_choices() -> str:
    """The valid profile names, in one line."""
    return f"{', '.join(PROFILES)}, {LATEST_PROFILE_NAME} (the newest), or a broker version from 0.11 to 4.x such as 3.9"


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One cached data batch of a producer (``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int  # last_offset - first_offset; equal to the sequence span of a v2 batch
    timestamp: int  # the batch's maxTimestamp, epoch ms

    @property
    def first_seq(self) -> int:
        # With the int32 wrap: a batch may run INT_MAX-1, INT_MAX, 0 (KAFKA-7692).
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker (``CompletedTxn``); aborted ones go to the ``.txnindex``."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


class OpenTxn(NamedTuple):
    producer_id: int
    first_offset: int


class ProducerSnapshotEntry(NamedTuple):
    """One producer of a ``.snapshot`` file, the eight fields in on-disk order (§4), so a list of
    them can go straight to :func:`analytics.kafka.sidecars.write_snapshot`."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int  # NO_OFFSET when the entry has no data batch (only a marker)
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # NO_OFFSET when no transaction is open


@dataclass(slots=True)
class ProducerStateEntry:
    """What the broker keeps per producer (``ProducerStateEntry``, §2.2)."""

    producer_id: int
    producer_epoch: int
    # Oldest first; maxlen is the profile's dedup cache size, so a full deque drops its oldest batch.
    batch_metadata: deque[BatchMetadata]
    coordinator_epoch: int
    last_timestamp: int  # epoch ms; what expiration compares with the clock
    current_txn_first_offset: int | None

    @classmethod
    def empty(cls, producer_id: int, cache_size: int) -> ProducerStateEntry:
        return cls(
            producer_id, NO_PRODUCER_EPOCH, deque(maxlen=cache_size), NO_COORDINATOR_EPOCH, NO_TIMESTAMP, None
        )

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else NO_OFFSET

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def copy(self) -> ProducerStateEntry:
        return replace(self, batch_metadata=deque(self.batch_metadata, maxlen=self.batch_metadata.maxlen))

    def find_duplicate_batch(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this sequence range in this epoch (``findDuplicateBatch``).
        Only the range is compared: offsets, content and the transactional flag are not."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batch_metadata:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self._maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def end_transaction(
        self, epoch: int, coordinator_epoch: int, timestamp: int, *, marker_sets_timestamp: bool
    ) -> None:
        """A COMMIT/ABORT marker (``ProducerStateEntry.update(epoch, coordinatorEpoch, timestamp)``)."""
        self._maybe_update_producer_epoch(epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        if marker_sets_timestamp:
            self.last_timestamp = timestamp
        else:
            # Before KAFKA-9144 the entry's timestamp was derived from its last cached batch.
            self.last_timestamp = self.batch_metadata[-1].timestamp if self.batch_metadata else NO_TIMESTAMP

    def _maybe_update_producer_epoch(self, epoch: int) -> None:
        # A new epoch restarts the sequence space, so no cached batch can be continued or retried.
        # A marker with the same epoch keeps the cache: the next batch continues the sequence.
        if epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch


@dataclass(frozen=True, slots=True)
class Decision:
    """The leader's answer to one batch."""

    result: Result
    reason: str
    duplicate_of: tuple[int, int] | None = None  # DUPLICATE: the original batch's (first, last) offset
    completed_txn: CompletedTxn | None = None  # an appended marker that closed a non-empty transaction


class ProducerStateManager:
    """The producer state of one partition (``ProducerStateManager``) with the leader's checks.

    Each ``append_*`` call validates one batch against the state before it and changes the state
    only when the answer is APPENDED: a rejected or duplicate batch is not written, so it leaves
    no trace.
    """

    def __init__(
        self,
        profile: Profile = DEFAULT_PROFILE,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.profile = profile
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}

    def append_data(
        self,
        pid: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        *,
        is_transactional: bool,
        origin: Origin = Origin.CLIENT,
        verified_tv2: bool = False,
    ) -> Decision:
        """Validate a data batch (§2.4) and, when it is appended, record it.

        ``verified_tv2`` marks a transactional batch that went through TV2 (KIP-890 part 2)
        verification as the first append of its transaction.
        """
        _check_data_batch_shape(pid, first_seq, last_seq, first_offset, last_offset, origin)
        if verified_tv2 and not is_transactional:
            raise ValueError("only transactional batches are verified")
        if pid == NO_PRODUCER_ID:
            return Decision(Result.APPENDED, "no producer id: not idempotent, no producer state")
        stored = self._producers.get(pid)
        duplicate = _find_duplicate(stored, epoch, first_seq, last_seq, origin)
        if duplicate is not None:
            return duplicate
        current = stored if stored is not None else self._empty_entry(pid)
        rejection = (
            _check_producer_epoch(current, epoch, origin, self.profile)
            or _check_sequence(current, epoch, first_seq, origin, self.profile, verified_tv2=verified_tv2)
            or _check_txn_state(current, is_transactional)
        )
        if rejection is not None:
            return rejection
        updated = current.copy()
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, max_timestamp)
        if is_transactional and updated.current_txn_first_offset is None:
            updated.current_txn_first_offset = first_offset  # the first transactional batch opens a txn
        self._producers[pid] = updated
        return Decision(Result.APPENDED, _acceptance_reason(stored, epoch, first_seq, origin))

    def append_marker(
        self,
        pid: int,
        epoch: int,
        control_type: str | None,
        coordinator_epoch: int | None,
        offset: int,
        timestamp: int,
        *,
        origin: Origin = Origin.COORDINATOR,
        tv2: bool = False,
    ) -> Decision:
        """Validate a COMMIT/ABORT marker (§2.4) and, when it is appended, close the transaction.

        ``control_type`` None is a control batch without records: the cleaner removed the whole
        transaction, and the broker skips it. ``tv2`` says the WriteTxnMarkers request carried
        transaction version 2; nothing on disk records it.
        """
        if origin is Origin.CLIENT:
            raise ValueError("clients cannot write control batches (LogValidator.validateBatch)")
        if control_type is not None and control_type not in END_TXN_MARKER_TYPES:
            raise ValueError(f"{control_type} is not a transaction marker type")
        if control_type is not None and coordinator_epoch is None:
            raise ValueError("a COMMIT/ABORT marker carries a coordinator epoch")
        if pid == NO_PRODUCER_ID:
            return Decision(Result.APPENDED, "no producer id: no producer state")
        stored = self._producers.get(pid)
        current = stored if stored is not None else self._empty_entry(pid)
        if control_type is None:
            # Kafka still runs ProducerStateManager.update, which registers the PID with the entry it had.
            self._producers[pid] = current
            return Decision(Result.APPENDED, "control batch without records: no state change")
        # Kafka gives followers the TV0 rule (the transaction version is not on disk); as they only
        # log epoch regressions, the strict rule needs no origin test here.
        strict = tv2 and self.profile.strict_tv2_marker_epoch
        rejection = _check_producer_epoch(
            current, epoch, origin, self.profile, strict_tv2=strict
        ) or _check_coordinator_epoch(current, coordinator_epoch, origin)
        if rejection is not None:
            return rejection
        completed = None
        if current.current_txn_first_offset is not None:
            completed = CompletedTxn(pid, current.current_txn_first_offset, offset, control_type == "ABORT")
        updated = current.copy()
        updated.end_transaction(
            epoch, coordinator_epoch, timestamp, marker_sets_timestamp=self.profile.marker_sets_timestamp
        )
        self._producers[pid] = updated
        closes = "closes the transaction" if completed else "of an empty transaction"
        reason = f"{control_type} {closes}"
        return Decision(Result.APPENDED, reason, completed_txn=completed)

    def remove_expired(self, now_ms: int) -> list[int]:
        """Forget idle producers (``removeExpiredProducers``, §2.10); returns their ids."""
        expired = sorted(
            pid for pid, entry in self._producers.items() if self._is_expired(entry, now_ms)
        )
        for pid in expired:
            del self._producers[pid]
        return expired

    def lose_state(self, pid: int) -> None:
        """The broker forgets one producer (a restart without a usable snapshot, for example)."""
        self._producers.pop(pid, None)

    def lose_all_state(self) -> None:
        self._producers.clear()

    def on_log_start_offset(self, log_start_offset: int) -> list[int]:
        """The log start offset moved up (§3.2); returns the ids of the evicted producers.

        Up to 2.3 ``truncateHead`` keeps a PID only while its last data offset is at or above the
        new log start offset (a PID with no data batch has -1, so it always goes, open txn and all).
        Since 2.4 (KAFKA-7190) only expiration removes producers.
        """
        if not self.profile.evicts_below_log_start:
            return []
        evicted = sorted(
            pid for pid, entry in self._producers.items() if entry.last_data_offset < log_start_offset
        )
        for pid in evicted:
            del self._producers[pid]
        return evicted

    def snapshot(self) -> list[ProducerSnapshotEntry]:
        """The state as a producer snapshot file holds it (``writeSnapshot``), by producer id."""
        return [_snapshot_entry(self._producers[pid]) for pid in sorted(self._producers)]

    def load_snapshot(self, entries: Iterable, *, now_ms: int | None = None) -> None:
        """Replace the state with a snapshot's, as after a restart (``readSnapshot``,
        ``loadProducerEntry``).

        ``entries`` are :class:`ProducerSnapshotEntry` or ``analytics.kafka.model.SnapshotEntry``
        rows. Only the last batch of each producer survives, so the dedup cache holds one batch
        (§2.5). With ``now_ms``, expired entries are dropped as ``loadFromSnapshot`` does.
        """
        producers = {}
        for row in entries:
            entry = self._entry_from_snapshot(row)
            if now_ms is None or not self._is_expired(entry, now_ms):
                producers[entry.producer_id] = entry
        self._producers = producers

    def entry(self, pid: int) -> ProducerStateEntry | None:
        """A copy of the state kept for ``pid``, or None when the broker does not know it."""
        stored = self._producers.get(pid)
        return None if stored is None else stored.copy()

    def open_transactions(self) -> list[OpenTxn]:
        """The open transactions, by first offset (the first is the first unstable offset)."""
        return sorted(
            (
                OpenTxn(pid, entry.current_txn_first_offset)
                for pid, entry in self._producers.items()
                if entry.current_txn_first_offset is not None
            ),
            key=lambda txn: (txn.first_offset, txn.producer_id),
        )

    def _empty_entry(self, pid: int) -> ProducerStateEntry:
        return ProducerStateEntry.empty(pid, self.profile.dedup_cache_size)

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        # An open transaction pins the producer: its marker still has to find the state.
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def _entry_from_snapshot(self, row) -> ProducerStateEntry:
        entry = self._empty_entry(row.producer_id)
        entry.producer_epoch = row.producer_epoch
        if row.last_offset >= 0:  # a batch is rebuilt only when the producer had a data batch
            entry.batch_metadata.append(
                BatchMetadata(row.last_sequence, row.last_offset, row.offset_delta, row.timestamp)
            )
        entry.coordinator_epoch = row.coordinator_epoch
        entry.last_timestamp = row.timestamp
        entry.current_txn_first_offset = (
            row.current_txn_first_offset if row.current_txn_first_offset >= 0 else None
        )
        return entry


def _check_data_batch_shape(
    pid: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int, origin: Origin
) -> None:
    # Caller errors, not broker decisions: a v2 header derives its last sequence from the base
    # sequence and lastOffsetDelta, and LogValidator refuses a client batch with a producer id
    # but no sequence as INVALID_RECORD before producer state is consulted.
    if last_offset < first_offset:
        raise ValueError(f"last offset {last_offset} is below first offset {first_offset}")
    if last_seq != last_sequence(first_seq, last_offset - first_offset):
        raise ValueError(
            f"sequences {first_seq}..{last_seq} do not span offsets {first_offset}..{last_offset}"
        )
    if origin is Origin.CLIENT and pid != NO_PRODUCER_ID and first_seq < 0:
        raise ValueError(f"a client batch of producer {pid} needs a sequence, got {first_seq}")


def _find_duplicate(
    stored: ProducerStateEntry | None, epoch: int, first_seq: int, last_seq: int, origin: Origin
) -> Decision | None:
    """UnifiedLog.analyzeAndValidateProducerState: a client retry of a cached batch is answered
    with the original offsets. Followers and recovery append duplicates as they come."""
    if origin is not Origin.CLIENT or stored is None:
        return None
    original = stored.find_duplicate_batch(epoch, first_seq, last_seq)
    if original is None:
        return None
    return Decision(
        Result.DUPLICATE,
        f"seq {first_seq}..{last_seq} of epoch {epoch} was appended at offsets "
        f"{original.first_offset}..{original.last_offset}",
        duplicate_of=(original.first_offset, original.last_offset),
    )


def _check_producer_epoch(
    entry: ProducerStateEntry, epoch: int, origin: Origin, profile: Profile, *, strict_tv2: bool = False
) -> Decision | None:
    """checkProducerEpoch, for data and markers: a lower epoch is a fenced (zombie) producer."""
    current = entry.producer_epoch
    if epoch > current or (epoch == current and not strict_tv2):
        return None
    if strict_tv2 and epoch == current and entry.current_txn_first_offset is None:
        # KAFKA-19999: the transaction already ended, so this is a resent marker; it is written again.
        return None
    if origin is Origin.REPLICATION:
        return None  # the leader already decided; a follower only logs a warning
    comparison = "<=" if strict_tv2 else "<"
    return Decision(profile.fenced_error, f"epoch {epoch} {comparison} last seen epoch {current}")


def _check_sequence(
    entry: ProducerStateEntry,
    epoch: int,
    first_seq: int,
    origin: Origin,
    profile: Profile,
    *,
    verified_tv2: bool,
) -> Decision | None:
    """checkSequence, for client batches only. ``entry`` is empty (epoch -1) for an unknown PID."""
    if origin is not Origin.CLIENT:
        return None  # coordinator appends carry no usable sequence; replicas take what the leader wrote
    if verified_tv2 and profile.tv2_first_append_needs_seq_zero and first_seq != 0 and entry.is_empty:
        return Decision(
            Result.OUT_OF_ORDER_SEQUENCE,
            f"seq {first_seq}: a TV2 transaction without producer state must start at 0 (KAFKA-18202)",
        )
    if epoch != entry.producer_epoch:
        return _check_new_epoch_sequence(entry, epoch, first_seq, profile)
    if entry.producer_epoch == NO_PRODUCER_EPOCH and profile.unknown_pid_nonzero_seq_error is None:
        return None  # KIP-360: with no current epoch any sequence is taken
    if entry.last_seq == NO_SEQUENCE and first_seq != 0:
        # Only a marker is left for this epoch, so the broker cannot tell the next sequence.
        return Decision(
            profile.marker_only_nonzero_seq_error,
            f"seq {first_seq} in epoch {epoch}, which has no batch (only a marker); expected 0",
        )
    if not in_sequence(entry.last_seq, first_seq):
        return Decision(
            Result.OUT_OF_ORDER_SEQUENCE, f"seq {first_seq} does not follow last seq {entry.last_seq}"
        )
    return None


def _check_new_epoch_sequence(
    entry: ProducerStateEntry, epoch: int, first_seq: int, profile: Profile
) -> Decision | None:
    # A new epoch (or a PID the broker does not know) must start at 0.
    if first_seq == 0:
        return None
    if entry.producer_epoch != NO_PRODUCER_EPOCH:
        return Decision(
            Result.OUT_OF_ORDER_SEQUENCE,
            f"seq {first_seq} for new epoch {epoch} (current {entry.producer_epoch}); "
            "a new epoch starts at 0",
        )
    if profile.unknown_pid_nonzero_seq_error is not None:
        return Decision(
            profile.unknown_pid_nonzero_seq_error,
            f"unknown producer id with seq {first_seq}; its state may have been removed",
        )
    return None  # KIP-360 (2.5+): the state may have expired or been deleted, so any sequence is taken


def _check_txn_state(entry: ProducerStateEntry, is_transactional: bool) -> Decision | None:
    """appendDataBatch: while a transaction is open every data batch of the PID must belong to it.
    No origin check, so replicas and recovery reject it as well."""
    if entry.current_txn_first_offset is not None and not is_transactional:
        return Decision(
            Result.INVALID_TXN_STATE,
            "non-transactional batch while the transaction from offset "
            f"{entry.current_txn_first_offset} is open",
        )
    return None


def _check_coordinator_epoch(
    entry: ProducerStateEntry, coordinator_epoch: int, origin: Origin
) -> Decision | None:
    """checkCoordinatorEpoch: a marker from an older coordinator is a zombie's. Equal is allowed."""
    if entry.coordinator_epoch <= coordinator_epoch or origin is Origin.REPLICATION:
        return None  # a follower only logs it
    return Decision(
        Result.TRANSACTION_COORDINATOR_FENCED,
        f"coordinator epoch {coordinator_epoch} < last seen {entry.coordinator_epoch}",
    )


def _acceptance_reason(stored: ProducerStateEntry | None, epoch: int, first_seq: int, origin: Origin) -> str:
    if origin is not Origin.CLIENT:
        return f"{origin.value} append: sequence not checked"
    if stored is None or stored.producer_epoch == NO_PRODUCER_EPOCH:
        return f"unknown producer id, first seq {first_seq}"
    if epoch != stored.producer_epoch:
        return f"new epoch {epoch} from seq 0"
    if stored.is_empty:
        return f"seq 0 opens epoch {epoch}, known only through a marker"
    return f"seq {first_seq} follows {stored.last_seq}"


def _snapshot_entry(entry: ProducerStateEntry) -> ProducerSnapshotEntry:
    txn = entry.current_txn_first_offset
    return ProducerSnapshotEntry(
        entry.producer_id,
        entry.producer_epoch,
        entry.last_seq,
        entry.last_data_offset,
        entry.last_offset_delta,
        entry.last_timestamp,
        entry.coordinator_epoch,
        NO_OFFSET if txn is None else txn,
    )
