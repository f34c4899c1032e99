"""A partition leader's producer-state validation, as a pure-Python model (no Spark, no I/O).

For each idempotent or transactional batch offered to one partition, :class:`ProducerStateManager`
decides what the broker does with it (append, answer as a duplicate, or reject with a named error)
and keeps the per-producer state that decision needs. The caller assigns offsets and writes bytes.
The rules are those of ``docs/kafka-replay-rules.md`` §2.2-§2.5, §2.9, §2.10 and §3.2, with the
version differences of §2.9 selected by a :class:`Profile`.

This module is the package's public face; the model is split by what changes together:

- :mod:`analytics.replay.decisions`: who appends (:class:`Origin`) and the answer (:class:`Result`,
  :class:`Decision`), the transactions a marker closes (:class:`CompletedTxn`) or leaves open
- :mod:`analytics.replay.profiles`: the version profiles (:class:`Profile`, :data:`PROFILES`,
  :func:`resolve_profile`)
- :mod:`analytics.replay.entries`: what is kept per producer (:class:`ProducerStateEntry`) and
  what a ``.snapshot`` file keeps of it (:class:`ProducerSnapshotEntry`)
- :mod:`analytics.replay.rules`: the checks of one batch against the stored entry
- here: the state of one partition, the order the checks run in, expiration, eviction, snapshots

Upstream sources (apache/kafka; the Java files under
``storage/src/main/java/org/apache/kafka/storage/internals/log/``):

- ``ProducerAppendInfo.java``: appendDataBatch, appendEndTxnMarker (the trunk version after 4.0
  for KAFKA-18202, KIP-1228 and KAFKA-19999)
- ``ProducerStateManager.java``: update, isProducerExpired, removeExpiredProducers,
  onLogStartOffsetIncremented, writeSnapshot, readSnapshot
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

from collections.abc import Iterable

from analytics.kafka.layout import END_TXN_MARKER_TYPES, NO_PRODUCER_ID
from analytics.replay.decisions import CompletedTxn, Decision, OpenTxn, Origin, Result
from analytics.replay.entries import ProducerSnapshotEntry, ProducerStateEntry
from analytics.replay.profiles import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    DEFAULT_PROFILE,
    LATEST_PROFILE_NAME,
    PROFILE_STARTS,
    PROFILES,
    Profile,
    resolve_profile,
)
from analytics.replay.rules import (
    acceptance_reason,
    check_batch_shape,
    check_coordinator_epoch,
    check_producer_epoch,
    check_sequence,
    check_txn_state,
    find_duplicate,
)

__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "DEFAULT_PROFILE",
    "LATEST_PROFILE_NAME",
    "PROFILES",
    "PROFILE_STARTS",
    "CompletedTxn",
    "Decision",
    "OpenTxn",
    "Origin",
    "ProducerSnapshotEntry",
    "ProducerStateEntry",
    "ProducerStateManager",
    "Profile",
    "Result",
    "resolve_profile",
]


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
        check_batch_shape(pid, first_seq, last_seq, first_offset, last_offset, origin)
        if verified_tv2 and not is_transactional:
            raise ValueError("only transactional batches are verified")
        if pid == NO_PRODUCER_ID:
            return Decision(Result.APPENDED, "no producer id: not idempotent, no producer state")
        stored = self._producers.get(pid)
        duplicate = find_duplicate(stored, epoch, first_seq, last_seq, origin)
        if duplicate is not None:
            return duplicate
        current = stored if stored is not None else self._empty_entry(pid)
        rejection = (
            check_producer_epoch(current, epoch, origin, self.profile)
            or check_sequence(current, epoch, first_seq, origin, self.profile, verified_tv2=verified_tv2)
            or check_txn_state(current, is_transactional)
        )
        if rejection is not None:
            return rejection
        updated = current.copy()
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, max_timestamp)
        if is_transactional and updated.current_txn_first_offset is None:
            updated.current_txn_first_offset = first_offset  # the first transactional batch opens a txn
        self._producers[pid] = updated
        return Decision(Result.APPENDED, acceptance_reason(stored, epoch, first_seq, origin))

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
        rejection = check_producer_epoch(
            current, epoch, origin, self.profile, strict_tv2=strict
        ) or check_coordinator_epoch(current, coordinator_epoch, origin)
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
        return [self._producers[pid].to_snapshot() for pid in sorted(self._producers)]

    def load_snapshot(self, entries: Iterable, *, now_ms: int | None = None) -> None:
        """Replace the state with a snapshot's, as after a restart (``readSnapshot``,
        ``loadProducerEntry``).

        ``entries`` are :class:`ProducerSnapshotEntry` or ``analytics.kafka.model.SnapshotEntry``
        rows. Only the last batch of each producer survives, so the dedup cache holds one batch
        (§2.5). With ``now_ms``, expired entries are dropped as ``loadFromSnapshot`` does.
        """
        producers = {}
        for row in entries:
            entry = ProducerStateEntry.from_snapshot(row, self.profile.dedup_cache_size)
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
