"""The leader's checks of one batch against the producer's stored state (``docs/kafka-replay-rules.md``
§2.3-§2.5, with the version differences of §2.9 read from a :class:`~analytics.replay.profiles.Profile`).

Each check is a function of the stored :class:`~analytics.replay.entries.ProducerStateEntry` and
the batch, returning the rejecting :class:`~analytics.replay.decisions.Decision` or None when the
batch passes; :class:`~analytics.replay.broker.ProducerStateManager` runs them in Kafka's order.

Upstream (apache/kafka): ``ProducerAppendInfo.java`` (checkProducerEpoch, checkSequence,
inSequence, appendDataBatch, checkCoordinatorEpoch; the trunk version after 4.0 for KAFKA-18202,
KIP-1228 and KAFKA-19999) and ``UnifiedLog.analyzeAndValidateProducerState`` (the duplicate check).
"""

from __future__ import annotations

from analytics.kafka.layout import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from analytics.kafka.util import in_sequence, last_sequence
from analytics.replay.decisions import Decision, Origin, Result
from analytics.replay.entries import ProducerStateEntry
from analytics.replay.profiles import Profile


def check_batch_shape(
    pid: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int, origin: Origin
) -> None:
    """Raise ValueError for a batch no leader is offered.

    Caller errors, not broker decisions: a v2 header derives its last sequence from the base
    sequence and lastOffsetDelta, and LogValidator refuses a client batch with a producer id but
    no sequence as INVALID_RECORD before producer state is consulted.
    """
    if last_offset < first_offset:
        raise ValueError(f"last offset {last_offset} is below first offset {first_offset}")
    if last_seq != last_sequence(first_seq, last_offset - first_offset):
        raise ValueError(
            f"sequences {first_seq}..{last_seq} do not span offsets {first_offset}..{last_offset}"
        )
    if origin is Origin.CLIENT and pid != NO_PRODUCER_ID and first_seq < 0:
        raise ValueError(f"a client batch of producer {pid} needs a sequence, got {first_seq}")


def find_duplicate(
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


def check_producer_epoch(
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


def check_sequence(
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


def check_txn_state(entry: ProducerStateEntry, is_transactional: bool) -> Decision | None:
    """appendDataBatch: while a transaction is open every data batch of the PID must belong to it.
    No origin check, so replicas and recovery reject it as well."""
    if entry.current_txn_first_offset is not None and not is_transactional:
        return Decision(
            Result.INVALID_TXN_STATE,
            "non-transactional batch while the transaction from offset "
            f"{entry.current_txn_first_offset} is open",
        )
    return None


def check_coordinator_epoch(
    entry: ProducerStateEntry, coordinator_epoch: int, origin: Origin
) -> Decision | None:
    """checkCoordinatorEpoch: a marker from an older coordinator is a zombie's. Equal is allowed."""
    if entry.coordinator_epoch <= coordinator_epoch or origin is Origin.REPLICATION:
        return None  # a follower only logs it
    return Decision(
        Result.TRANSACTION_COORDINATOR_FENCED,
        f"coordinator epoch {coordinator_epoch} < last seen {entry.coordinator_epoch}",
    )


def acceptance_reason(stored: ProducerStateEntry | None, epoch: int, first_seq: int, origin: Origin) -> str:
    """Why an appended data batch passed, in the words of the rule that let it through."""
    if origin is not Origin.CLIENT:
        return f"{origin.value} append: sequence not checked"
    if stored is None or stored.producer_epoch == NO_PRODUCER_EPOCH:
        return f"unknown producer id, first seq {first_seq}"
    if epoch != stored.producer_epoch:
        return f"new epoch {epoch} from seq 0"
    if stored.is_empty:
        return f"seq 0 opens epoch {epoch}, known only through a marker"
    return f"seq {first_seq} follows {stored.last_seq}"
