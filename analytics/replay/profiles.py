"""The broker's producer-state rules by Kafka version: one :class:`Profile` per range of releases.

``docs/kafka-replay-rules.md`` §2.9 lists where the versions differ; each difference is one field
of :class:`Profile`, and :data:`PROFILES` holds the ten ranges from 0.11 to trunk (the scenario
profiles of §6.5). :func:`resolve_profile` turns what a user types (a profile's name, ``4.x`` or
a broker version) into one of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from analytics.replay.decisions import Result

# producer.id.expiration.ms default since 3.4 (KIP-854); before it transactional.id.expiration.ms (7 days).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000


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
