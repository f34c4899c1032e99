"""The audit's classification as a plain Python state machine: the differential oracle of the Spark job.

One pass per partition in offset order, one state per producer, written the way the rules read
(``docs/architecture.md``, labelling rules and profiles; replay rules §7.3, §2.9) rather than as
window functions, so the two implementations can disagree only if one of them is wrong. Too slow for real volumes
(it is what the Spark job is measured against), exact for tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analytics.audit.config import AuditConfig
from analytics.contract import (
    COMPACTION,
    CONTROL_MARKER,
    COORDINATOR_EPOCH_REGRESSION,
    CORRUPT,
    DUPLICATE,
    EPOCH_BUMP,
    EPOCH_BUMP_NONZERO,
    FENCED_ZOMBIE_WRITE,
    FIRST_SEEN_NONZERO,
    INVALID_TXN_STATE,
    MARKER_EPOCH_REGRESSION,
    NEVER_EXPLAINED,
    NON_IDEMPOTENT,
    OK,
    OK_VERDICTS,
    PARTIAL_HISTORY,
    PRODUCER_EXPIRATION,
    SEQUENCE_REUSE,
    SEQ_SPACE,
    SEQUENCE_GAP,
    SEQUENCE_REGRESSION,
    SEQUENCE_VERDICTS,
    STATE_LOSS,
    log_dir_of,
    topic_kind,
)
from analytics.kafka.util import in_sequence, sequence_ahead
from analytics.replay.severity import severity


@dataclass
class _State:
    epoch: int
    last_seq: int  # a follower's: the last data batch's last sequence, -1 after an epoch-changing marker
    last_ts: int
    last_base_offset: int
    cum_holes: int
    last_offset: int = -1
    txn_open: bool = False
    coordinator_epoch: int | None = None
    seen: dict = field(default_factory=dict)  # (epoch, base, last) -> the first copy's base offset
    # The base offset of the producer's latest expiry point (a batch after which the broker had
    # forgotten it, and rebuilt its state from that batch on), None before the first.
    expired_offset: int | None = None
    # The producer's sequences on a line that wraps at INT_MAX: ``position`` is the last data batch's
    # last sequence on it, each batch a step from the one before the shorter way round mod 2^31.
    position: int | None = None
    # The highest position of the current epoch run (None before its first data batch) and the last
    # offset of the batch holding it.
    mark: int | None = None
    mark_offset: int | None = None

    @property
    def seq_mark(self) -> int:
        """The sequence mark: the highest sequence so far in this epoch run, -1 if it has no data yet."""
        return -1 if self.mark is None else self.mark % SEQ_SPACE


def replay(batches: list[dict], config: AuditConfig, log_starts: dict[tuple[str, int], int] | None = None,
           reused: set[tuple[str, int]] | None = None) -> dict:
    """Verdicts of batch rows (dicts with the ``batches`` columns), keyed by (file, file_position).
    ``reused``: the (file, file_position) of the batches whose records differ from those of every
    earlier batch with their epoch and sequence range (:mod:`analytics.audit.sequence_reuse`).

    Each value holds verdict, severity, explained_by, expected_sequence, prev_base_offset, idle_ms
    and offset_holes; replayed rows also the state they leave (state_last_sequence, state_last_offset),
    the latest expiry point (expired_offset) and the earlier batch an anomaly conflicts with
    (conflict_offset).
    """
    log_starts = dict(log_starts or {}) | config.log_start_offsets
    compacted = set(config.compacted_topics())
    partitions: dict[tuple, list[dict]] = {}
    for b in batches:
        partitions.setdefault((log_dir_of(b["file"]), b["topic"], b["partition"]), []).append(b)
    out = {}
    for (_, topic, partition), rows in partitions.items():
        rows.sort(key=lambda b: (b["base_offset"], b["file_position"]))
        valid = [b for b in rows if b["crc_valid"]]
        first_offset = min((b["base_offset"] for b in valid), default=None)
        producers: dict[int, _State] = {}
        carried = 0  # offsets carried by the valid batches before this one
        for b in rows:
            key = (b["file"], b["file_position"])
            if not b["crc_valid"]:
                out[key] = _row(CORRUPT, None)
                continue
            # offsets from the partition's first up to this batch that no batch carries
            cum_holes = b["base_offset"] - first_offset - carried
            carried += b["last_offset"] - b["base_offset"] + 1
            tracked = (b["magic"] == 2 and b["producer_id"] >= 0 and not (b["is_control"] and b["record_count"] == 0)
                       and topic_kind(topic).replay)
            if not tracked:
                verdict = (CONTROL_MARKER if b["is_control"] and b["magic"] == 2
                           else NON_IDEMPOTENT if b["producer_id"] < 0 or b["magic"] < 2 else OK)
                out[key] = _row(verdict, None)
                continue
            s = producers.get(b["producer_id"])
            facts = {
                "prev_base_offset": s.last_base_offset if s else None,
                "idle_ms": b["max_timestamp"] - s.last_ts if s else None,
                "offset_holes": cum_holes - s.cum_holes if s else None,
            }
            if b["is_control"]:
                if s is not None and b["producer_epoch"] < s.epoch:
                    verdict = MARKER_EPOCH_REGRESSION
                elif (s is not None and s.coordinator_epoch is not None and b["coordinator_epoch"] is not None
                      and b["coordinator_epoch"] < s.coordinator_epoch):
                    verdict = COORDINATOR_EPOCH_REGRESSION
                else:
                    verdict = CONTROL_MARKER
                expected = None
            else:
                seq, epoch = b["base_sequence"], b["producer_epoch"]
                if s is not None and (epoch, seq, b["last_sequence"]) in s.seen:
                    verdict = DUPLICATE
                elif s is None:
                    verdict = OK if seq == 0 else FIRST_SEEN_NONZERO
                elif epoch > s.epoch:
                    verdict = EPOCH_BUMP if seq == 0 else EPOCH_BUMP_NONZERO
                elif epoch < s.epoch:
                    verdict = FENCED_ZOMBIE_WRITE
                elif in_sequence(s.seq_mark, seq):
                    verdict = OK
                elif sequence_ahead(s.seq_mark, seq):
                    verdict = SEQUENCE_GAP
                else:
                    verdict = SEQUENCE_REGRESSION
                if verdict in OK_VERDICTS and s is not None and s.txn_open and not b["is_transactional"]:
                    verdict = INVALID_TXN_STATE
                expected = 0 if s is None or epoch != s.epoch else (s.seq_mark + 1) % SEQ_SPACE
            # an expiry point: idle past the expiration with no transaction open (before 2.5: at sequence 0)
            expiry = (s is not None and facts["idle_ms"] >= config.expiration_ms and not s.txn_open
                      and _forgotten_ok(b, config))
            facts["expired_offset"] = b["base_offset"] if expiry else s.expired_offset if s else None
            facts["conflict_offset"] = (
                s.seen[(b["producer_epoch"], b["base_sequence"], b["last_sequence"])] if verdict == DUPLICATE
                else s.mark_offset if verdict in (SEQUENCE_GAP, SEQUENCE_REGRESSION)
                else s.last_base_offset if verdict in (EPOCH_BUMP_NONZERO, FENCED_ZOMBIE_WRITE)
                else None)
            explained = _explain(verdict, b, s, facts, config, compacted,
                                 log_starts.get((topic, partition)), first_offset)
            if explained == PRODUCER_EXPIRATION and verdict == DUPLICATE and key in (reused or ()):
                explained = SEQUENCE_REUSE  # other records under a reused range, taken once forgotten
            out[key] = _row(verdict, explained) | facts | {"expected_sequence": expected}
            # the state after, as a follower appending whatever is on disk
            new_run = s is None or b["producer_epoch"] != s.epoch
            if s is None:
                s = producers[b["producer_id"]] = _State(b["producer_epoch"], -1, b["max_timestamp"], b["base_offset"], cum_holes)
            elif b["is_control"] and b["producer_epoch"] != s.epoch:
                s.last_seq = s.last_offset = -1
            if new_run:
                s.mark = s.mark_offset = None
            if b["is_control"]:
                s.txn_open = False
                if b["coordinator_epoch"] is not None:
                    s.coordinator_epoch = max(s.coordinator_epoch or b["coordinator_epoch"], b["coordinator_epoch"])
            else:
                if s.position is None:
                    s.position = b["last_sequence"]
                else:  # one step the shorter way round: forward up to 2^30, else back
                    step = (b["last_sequence"] - s.position) % SEQ_SPACE
                    s.position += step - SEQ_SPACE if step > SEQ_SPACE // 2 else step
                if s.mark is None or s.position >= s.mark:
                    s.mark, s.mark_offset = s.position, b["last_offset"]
                s.last_seq, s.last_offset = b["last_sequence"], b["last_offset"]
                s.seen.setdefault((b["producer_epoch"], b["base_sequence"], b["last_sequence"]), b["base_offset"])
                s.txn_open = s.txn_open or b["is_transactional"]
            s.epoch = b["producer_epoch"]
            s.last_ts = b["max_timestamp"]
            s.last_base_offset = b["base_offset"]
            s.cum_holes = cum_holes
            s.expired_offset = facts["expired_offset"]
            out[key] |= {"state_last_sequence": s.last_seq, "state_last_offset": s.last_offset}
    return out


def _row(verdict: str, explained: str | None) -> dict:
    return {"verdict": verdict, "severity": severity(verdict, explained), "explained_by": explained}


def _forgotten_ok(b: dict, config: AuditConfig) -> bool:
    """Before KIP-360 (2.5) a broker that had forgotten the producer took only sequence 0 from it."""
    return config.broker_profile.unknown_pid_nonzero_seq_error is None or b["base_sequence"] == 0


def _explain(verdict, b, s, facts, config: AuditConfig, compacted: set, log_start, first_offset) -> str | None:
    """The evidence for a rule break, in order; the profile (replay rules §2.9) says which the brokers allowed."""
    if verdict in NEVER_EXPLAINED:
        return None
    profile = config.broker_profile
    kip360 = profile.unknown_pid_nonzero_seq_error is None
    forgotten_ok = _forgotten_ok(b, config)
    for r in config.broker_restarts:
        if r.topic is not None and r.topic != b["topic"] or r.partition is not None and r.partition != b["partition"]:
            continue
        if s is None or not forgotten_ok:
            continue
        if r.offset is not None and s.last_base_offset < r.offset <= b["base_offset"]:
            return STATE_LOSS
        if r.offset is None and s.last_ts < r.time_ms <= b["max_timestamp"]:
            return STATE_LOSS
    if s is not None and facts["idle_ms"] >= config.expiration_ms and not s.txn_open and forgotten_ok:
        return PRODUCER_EXPIRATION
    # A batch repeating or rewinding sequences written before the latest expiry point, which the state
    # the broker rebuilt since (the previous batch's epoch and last sequence) takes in sequence.
    if s is not None and verdict in SEQUENCE_VERDICTS:
        epoch, seq = b["producer_epoch"], b["base_sequence"]
        taken = (epoch == s.epoch and in_sequence(s.last_seq, seq)) or (epoch > s.epoch and seq == 0)
        expired, conflict = facts["expired_offset"], facts["conflict_offset"]
        if taken and expired is not None and conflict is not None and conflict < expired:
            return PRODUCER_EXPIRATION
    is_compacted = b["topic"] in compacted
    if verdict in (SEQUENCE_GAP, EPOCH_BUMP_NONZERO) and is_compacted:
        # a new epoch's sequences missing from 0: the cleaner removed the batch that opened it
        missing = (b["base_sequence"] if verdict == EPOCH_BUMP_NONZERO
                   else (b["base_sequence"] - s.seq_mark - 1) % SEQ_SPACE)
        if missing <= facts["offset_holes"]:
            return COMPACTION
    evidence = (log_start or 0) > 0 or (first_offset or 0) > 0 or is_compacted
    if verdict == FIRST_SEEN_NONZERO and evidence:
        return PARTIAL_HISTORY
    # the producer's first data batch after markers only: its data batches before them are gone
    if verdict in (SEQUENCE_GAP, EPOCH_BUMP_NONZERO) and s is not None and s.position is None and evidence:
        return PARTIAL_HISTORY
    if s is not None and (log_start or 0) > 0:
        # Up to 2.3 the log start passing the producer's last batch made the broker forget it, and the
        # client restarted at sequence 0.
        if profile.evicts_below_log_start and b["base_sequence"] == 0 and s.last_base_offset < log_start:
            return PARTIAL_HISTORY
        # Before 2.5, the batches after such a restart, in sequence with it, repeat sequences that
        # only batches below the log start hold.
        if (not kip360 and verdict in (SEQUENCE_REGRESSION, DUPLICATE)
                and in_sequence(s.last_seq, b["base_sequence"])
                and s.mark_offset is not None and s.mark_offset < log_start):
            return PARTIAL_HISTORY
    return None
