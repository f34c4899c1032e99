"""The Great Expectations suites (five, and ``replica_consistency`` when a partition has replicas), declared as data.

Every check is an ``UnexpectedRowsExpectation``: a Spark SQL query over the audit tables that
returns the offending rows (topic, partition, offset, producer, verdict, explanation), so a
failure shows its evidence and the full set stays queryable. ``{batch}`` is the suite's own
table; the other audit tables are registered as views of their names (``segments``,
``parse_errors``, ``batch_verdicts``, ``anomalies``, ``transactions``, ``record_duplicates``).
Queries read the small tables (``anomalies``, ``transactions``, ...) or prune to one or two
columns of ``batch_verdicts``; the expensive work was done by the audit.

Each check has an id. ``ValidationConfig`` may tolerate up to N offending rows for an id
(``allow``) or make its failure a warning (``warn``); the defaults are strict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analytics.audit.config import AuditConfig
from analytics.contract import (
    COMPACTION,
    COORDINATOR_EPOCH_REGRESSION,
    DECOMPRESSION,
    DUPLICATE,
    DUP_DUPLICATE,
    EPOCH_BUMP_NONZERO,
    FENCED_ZOMBIE_WRITE,
    FIRST_SEEN_NONZERO,
    HANGING,
    INVALID_BATCH,
    INVALID_LENGTH,
    INVALID_TXN_STATE,
    MARKER_EPOCH_REGRESSION,
    NOT_READ,
    PARTIAL_HISTORY,
    PRODUCER_EXPIRATION,
    RECORD_DECODE,
    SEQUENCE_GAP,
    SEQUENCE_REGRESSION,
    SEQUENCE_REUSE,
    SEQ_SPACE,
    SEV_VIOLATION,
    STATE_LOSS,
    TRUNCATED,
    UNKNOWN_MAGIC,
    UNREADABLE,
    UNREAD_FILE,
    VANISHED,
    VIEW_ENDED,
    VIEW_UNKNOWN,
)

# What a failing check samples: where the row is and what the audit said of it.
BATCH_COLUMNS = ("topic, `partition`, base_offset AS offset, producer_id, producer_epoch, base_sequence, "
                 "last_sequence, verdict, explained_by, explanation")
STRUCTURAL_ERRORS = (TRUNCATED, INVALID_LENGTH, UNKNOWN_MAGIC, INVALID_BATCH, DECOMPRESSION, RECORD_DECODE)


# The table each suite is validated against (its GX batch); checks on other tables read them
# through their views.
SUITE_TABLES = {
    "segment_integrity": "segments",
    "zero_duplicates": "anomalies",
    "contiguous_sequences": "anomalies",
    "eviction_gaps": "anomalies",
    "transactions": "transactions",
}
# ... and the suites declared only for some exports (a partition from several log dirs)
OPTIONAL_SUITE_TABLES = {"replica_consistency": "replica_divergence"}
TABLE_OF_SUITE = {**SUITE_TABLES, **OPTIONAL_SUITE_TABLES}


@dataclass(frozen=True)
class Check:
    id: str
    table: str  # the table ``{batch}`` stands for in ``query``
    query: str
    description: str

    def query_for(self, suite_table: str) -> str:
        """The query as run in a suite validated against ``suite_table``."""
        return self.query if self.table == suite_table else self.query.replace("{batch}", self.table)


@dataclass(frozen=True)
class ValidationConfig:
    """``allow``: check id -> offending rows tolerated; ``warn``: check ids whose failure is a warning."""

    allow: dict[str, int] = field(default_factory=dict)
    warn: frozenset[str] = frozenset()

    @classmethod
    def from_mapping(cls, data: dict) -> ValidationConfig:
        allow = {str(k): int(v) for k, v in (data.get("allow") or {}).items()}
        return cls(allow=allow, warn=frozenset(str(w) for w in data.get("warn") or ()))


def check_ids() -> list[str]:
    """The id of every check any audit can have (those on records included)."""
    return sorted(c.id for checks in suites(AuditConfig(), has_records=True, has_replicas=True).values() for c in checks)


def unknown_check_ids(validation: ValidationConfig, known: list[str]) -> str | None:
    """Why ``validation`` names a check that is not among ``known``, or None when it does not."""
    from analytics.errors import unknown

    names = sorted((set(validation.allow) | validation.warn) - set(known))
    return "; ".join(unknown("check", n, known) for n in names[:1]) if names else None


def _quote(values) -> str:
    return ", ".join("'" + str(v).replace("'", "''") + "'" for v in values) or "NULL"


def _restart_condition(config: AuditConfig) -> str:
    """SQL true when a configured restart lies between the producer's previous batch and this one."""
    parts = []
    for r in config.broker_restarts:
        if r.offset is not None:
            cond = f"(prev_base_offset < {r.offset} AND base_offset >= {r.offset})"
        else:  # by time: idle_ms reaches back to the previous batch's timestamp
            cond = f"(max_timestamp - idle_ms < {r.time_ms} AND max_timestamp >= {r.time_ms})"
        if r.topic is not None:
            cond += f" AND topic = {_quote([r.topic])}"
        if r.partition is not None:
            cond += f" AND `partition` = {r.partition}"
        parts.append(f"({cond})")
    return " OR ".join(parts) or "FALSE"


def _batches_in() -> str:
    """The rows of ``batch_verdicts`` a check joins to (the expiry point or the previous batch of a
    producer), keyed by their partition folder (one history: a log dir, a topic and a partition)."""
    return ("SELECT regexp_extract(file, '^(.*)/[^/]*$', 1) AS dir, topic, `partition`, producer_id, base_offset, "
            "producer_epoch, state_last_sequence, idle_ms, txn_open, base_sequence, is_control FROM batch_verdicts")


def _same_history(a: str, b: str) -> str:
    return (f"{b}.dir = regexp_extract({a}.file, '^(.*)/[^/]*$', 1) AND {b}.topic = {a}.topic "
            f"AND {b}.`partition` = {a}.`partition` AND {b}.producer_id = {a}.producer_id")


def _reuse_evidence() -> str:
    """SQL of the evidence of each batch ``sequence_reuse`` explains (``file``, ``file_position``):
    ``copies``, the earlier batches with its range; ``all_whole``, it and each of them hold as many
    records as offsets, each in ``records``; ``same``, some position of it holds the key and value of
    that position in one of them (:mod:`analytics.audit.sequence_reuse`)."""
    records = ("SELECT file, batch_base_offset AS base_offset, offset - batch_base_offset AS pos, key_hash, value_hash "
               "FROM records")
    batches = ("SELECT v.*, regexp_extract(v.file, '^(.*)/[^/]*$', 1) AS dir, "
               "CAST(v.record_count AS BIGINT) = v.last_offset - v.base_offset + 1 "
               "AND coalesce(n.found, 0) = v.record_count AS whole FROM batch_verdicts v LEFT JOIN "
               "(SELECT file, batch_base_offset, count(*) AS found FROM records GROUP BY file, batch_base_offset) n "
               "ON n.file = v.file AND n.batch_base_offset = v.base_offset WHERE NOT v.is_control")
    pairs = (f"SELECT a.file, a.file_position, a.base_offset, a.whole, c.file AS c_file, c.base_offset AS c_offset, "
             f"c.whole AS c_whole FROM ({batches}) a JOIN ({batches}) c ON c.dir = a.dir AND c.topic = a.topic "
             "AND c.`partition` = a.`partition` AND c.producer_id = a.producer_id "
             "AND c.producer_epoch = a.producer_epoch AND c.base_sequence = a.base_sequence "
             "AND c.last_sequence = a.last_sequence AND c.base_offset < a.base_offset "
             f"WHERE a.explained_by = '{SEQUENCE_REUSE}'")
    same = (f"SELECT DISTINCT p.file, p.file_position, p.c_file, p.c_offset FROM ({pairs}) p "
            f"JOIN ({records}) ra ON ra.file = p.file AND ra.base_offset = p.base_offset "
            f"JOIN ({records}) rc ON rc.file = p.c_file AND rc.base_offset = p.c_offset AND rc.pos = ra.pos "
            "AND rc.key_hash <=> ra.key_hash AND rc.value_hash <=> ra.value_hash")
    return (f"SELECT p.file, p.file_position, count(*) AS copies, bool_and(p.whole AND p.c_whole) AS all_whole, "
            f"bool_or(s.file IS NOT NULL) AS same FROM ({pairs}) p LEFT JOIN ({same}) s ON s.file = p.file "
            "AND s.file_position = p.file_position AND s.c_file = p.c_file AND s.c_offset = p.c_offset "
            "GROUP BY p.file, p.file_position")


def suites(config: AuditConfig, *, has_records: bool, has_replicas: bool = False) -> dict[str, list[Check]]:
    """The suites for one audit configuration (the explanation checks restate its thresholds);
    ``replica_consistency`` when some partition was exported from several log dirs."""
    missing = f"pmod(CAST(base_sequence AS BIGINT) - expected_sequence, {SEQ_SPACE})"
    profile = config.broker_profile
    # Before KIP-360 (2.5) a broker that had forgotten a producer took only sequence 0 from it.
    forgotten = "" if profile.unknown_pid_nonzero_seq_error is None else " AND base_sequence = 0"
    # ... and a restart at 0 after the log start passed the producer (up to 2.3), or the batches
    # continuing such a restart (before 2.5), are partial history too: the audit compares their
    # previous batch, or the batch holding the producer's highest sequence, with the log start.
    restarted = ("" if profile.unknown_pid_nonzero_seq_error is None else
                 f" OR (verdict IN ({_quote((SEQUENCE_REGRESSION, DUPLICATE))}) AND prev_base_offset IS NOT NULL)")
    if profile.evicts_below_log_start:
        restarted += " OR (base_sequence = 0 AND prev_base_offset IS NOT NULL)"
    # The rows producer expiration may explain, with the expiry point (expiry_found) and the previous
    # batch's epoch and sequence (p_epoch, p_seq) joined; and what it takes of them (replay rules §7.3).
    expiry_facts = (
        f"SELECT a.*, e.base_offset AS expiry_found, p.producer_epoch AS p_epoch, p.state_last_sequence AS p_seq "
        f"FROM {{batch}} a LEFT JOIN ({_batches_in()} WHERE idle_ms >= {config.expiration_ms} "
        f"AND NOT txn_open{forgotten}) e ON {_same_history('a', 'e')} AND e.base_offset = a.expired_offset "
        f"LEFT JOIN ({_batches_in()}) p ON {_same_history('a', 'p')} AND p.base_offset = a.prev_base_offset")
    after_expiry = (
        f"(idle_ms >= {config.expiration_ms} AND NOT txn_open{forgotten}) "
        f"OR (conflict_offset < expired_offset AND expired_offset < base_offset AND expiry_found IS NOT NULL "
        f"AND verdict IN ({_quote((DUPLICATE, SEQUENCE_GAP, SEQUENCE_REGRESSION))}) "
        f"AND ((producer_epoch = p_epoch AND (CAST(base_sequence AS BIGINT) = CAST(p_seq AS BIGINT) + 1 "
        f"OR (base_sequence = 0 AND p_seq = {SEQ_SPACE - 1}))) OR (producer_epoch > p_epoch AND base_sequence = 0)))")
    zero_duplicates = [
        Check("no_duplicate_batch", "anomalies",
              f"SELECT {BATCH_COLUMNS} FROM {{batch}} WHERE verdict = '{DUPLICATE}' "
              f"AND coalesce(explained_by, '') <> '{SEQUENCE_REUSE}'",
              "No batch repeats the producer, epoch and sequence range of an earlier batch of its partition, "
              f"unless with other records after the broker forgot the producer ({SEQUENCE_REUSE}, checked by "
              "sequence_reuse_justified): a reuse of sequence numbers, which repeats nothing."),
    ]
    if has_records:
        zero_duplicates.append(Check(
            "no_duplicate_record", "record_duplicates",
            "SELECT topic, `partition`, offset, producer_id, first_offset, first_producer_id, dedup_key FROM {batch} "
            f"WHERE kind = '{DUP_DUPLICATE}'",
            f"No record repeats an earlier record's dedup key ({config.dedup_key}) in its partition: a copy a "
            "read_committed consumer receives twice (copies after or in an aborted transaction are information; "
            "internal and framework topics are not checked, docs/internal-topics.md)."))
    reuse_checks = [] if not has_records else [Check(
        "sequence_reuse_justified", "anomalies",
        f"SELECT {BATCH_COLUMNS}, idle_ms, expired_offset, conflict_offset FROM ({expiry_facts}) a "
        f"LEFT JOIN ({_reuse_evidence()}) r ON r.file = a.file AND r.file_position = a.file_position "
        f"WHERE explained_by = '{SEQUENCE_REUSE}' AND NOT (verdict = '{DUPLICATE}' AND ({after_expiry}) "
        "AND coalesce(r.copies > 0 AND r.all_whole AND NOT r.same, false))",
        "Every duplicate explained as a sequence reuse is one producer expiration explains (as "
        "producer_expiration_justified checks) whose records, whole, differ in key or value at every position "
        "from those of every earlier batch with its producer, epoch and sequence range, each whole too: other "
        "records under reused sequence numbers, not a batch appended twice.")]
    declared = {
        "segment_integrity": [
            Check("no_crc_failure", "batch_verdicts",
                  f"SELECT {BATCH_COLUMNS}, file, file_position FROM {{batch}} WHERE NOT crc_valid",
                  "Every batch's CRC-32C matches its bytes."),
            Check("no_unaccounted_bytes", "segments",
                  "SELECT s.topic, s.`partition`, s.file, s.size_bytes, s.valid_bytes, coalesce(e.affected, 0) AS bytes_in_errors "
                  "FROM {batch} s LEFT JOIN (SELECT file, sum(bytes_affected) AS affected FROM parse_errors GROUP BY file) e "
                  "ON s.file = e.file WHERE s.valid_bytes + coalesce(e.affected, 0) <> s.size_bytes",
                  "Every byte of every segment is in a parsed batch or counted by a parse error."),
            Check("offsets_strictly_increasing", "batch_verdicts",
                  f"SELECT {BATCH_COLUMNS}, offset_overlap FROM {{batch}} WHERE offset_overlap > 0",
                  "Offsets strictly increase through each partition: no batch shares an offset with an earlier one."),
            Check("every_file_read", "parse_errors", _EVERY_FILE_READ,
                  "Every segment and sidecar file present was read whole: none refused (permissions, I/O) and none "
                  "gone while the export ran, unless the partition's log start offset reached the segment after it "
                  "(retention deleted it). A file not read leaves its batches out of every other check."),
            Check("magic_and_framing_valid", "parse_errors",
                  "SELECT topic, `partition`, file, file_position, error_kind, message, bytes_affected FROM {batch} "
                  f"WHERE error_kind IN ({_quote(STRUCTURAL_ERRORS)})",
                  "Every entry has a known magic, a sound length, a consistent header and readable records."),
        ],
        "zero_duplicates": zero_duplicates,
        "contiguous_sequences": [
            Check(f"no_unexplained_{v.lower()}", "anomalies",
                  f"SELECT {BATCH_COLUMNS} FROM {{batch}} WHERE verdict = '{v}' AND explained_by IS NULL",
                  f"No unexplained {v}: {text}.")
            for v, text in (
                (SEQUENCE_GAP, "a first sequence beyond the producer's highest + 1 in the same epoch"),
                (SEQUENCE_REGRESSION, "a sequence overlapping or rewinding within an epoch"),
                (EPOCH_BUMP_NONZERO, "a new epoch that does not start at sequence 0"),
                (FIRST_SEEN_NONZERO, "a producer whose first visible batch does not start at sequence 0"),
            )
        ],
        "eviction_gaps": [
            Check("producer_expiration_justified", "anomalies",
                  f"SELECT {BATCH_COLUMNS}, idle_ms, txn_open, expired_offset, conflict_offset FROM ("
                  f"{expiry_facts}) WHERE explained_by = '{PRODUCER_EXPIRATION}' AND NOT ({after_expiry})",
                  f"Every break explained by producer expiration follows at least producer.id.expiration.ms "
                  f"({config.expiration_ms} ms) of idleness with no transaction open"
                  + (f" and starts at sequence 0 (profile {config.profile})" if forgotten else "")
                  + ", or repeats or rewinds sequences written before such a batch of its producer (expired_offset, "
                    "after conflict_offset) and is in sequence with the state the producer's previous batch left."),
            *reuse_checks,
            Check("partial_history_justified", "anomalies",
                  f"SELECT {BATCH_COLUMNS}, prev_base_offset FROM (SELECT a.*, d.first_data FROM {{batch}} a "
                  f"LEFT JOIN (SELECT dir, topic, `partition`, producer_id, min(base_offset) AS first_data "
                  f"FROM ({_batches_in()} WHERE NOT is_control) GROUP BY dir, topic, `partition`, producer_id) d "
                  f"ON {_same_history('a', 'd')}) "
                  f"WHERE explained_by = '{PARTIAL_HISTORY}' "
                  f"AND NOT ((verdict = '{FIRST_SEEN_NONZERO}' AND prev_base_offset IS NULL) "
                  f"OR (verdict IN ({_quote((SEQUENCE_GAP, EPOCH_BUMP_NONZERO))}) AND first_data = base_offset){restarted})",
                  "Every gap explained by partial history is the producer's first visible batch, or its first "
                  "data batch after markers only"
                  + (f" or (profile {config.profile}) a restart after, or a continuation repeating, batches below "
                     "the log start." if restarted else ".")),
            Check("compaction_justified", "anomalies",
                  f"SELECT {BATCH_COLUMNS}, offset_holes, {missing} AS missing_sequences FROM {{batch}} "
                  f"WHERE explained_by = '{COMPACTION}' AND NOT (topic IN ({_quote(config.compacted_topics())}) "
                  f"AND verdict IN ({_quote((SEQUENCE_GAP, EPOCH_BUMP_NONZERO))}) AND offset_holes >= {missing})",
                  "Every gap explained by compaction (missing sequences, or a new epoch's first ones) is on a "
                  "compacted topic, with offset holes covering the missing sequences."),
            Check("unread_file_justified", "anomalies",
                  f"SELECT {BATCH_COLUMNS}, offset_holes, {missing} AS missing_sequences FROM {{batch}} a "
                  f"LEFT JOIN (SELECT DISTINCT topic AS unread_topic, `partition` AS unread_partition "
                  f"FROM parse_errors WHERE error_kind IN ({_quote(NOT_READ)}) AND file LIKE '%.log') u "
                  f"ON u.unread_topic = a.topic AND u.unread_partition = a.`partition` "
                  f"WHERE explained_by = '{UNREAD_FILE}' AND NOT (u.unread_partition IS NOT NULL "
                  f"AND verdict IN ({_quote((SEQUENCE_GAP, EPOCH_BUMP_NONZERO))}) AND offset_holes >= {missing})",
                  "Every gap explained by an unread file is in a partition with a segment the export could not "
                  "read (every_file_read fails for it), with offset holes covering the missing sequences."),
            Check("state_loss_justified", "anomalies",
                  f"SELECT {BATCH_COLUMNS}, prev_base_offset FROM {{batch}} WHERE explained_by = '{STATE_LOSS}' "
                  f"AND NOT (({_restart_condition(config)}){forgotten})",
                  "Every break explained by state loss spans a configured broker restart"
                  + (f" and starts at sequence 0 (profile {config.profile})." if forgotten else ".")),
            Check("no_zombie_write", "anomalies",  # even when explained: expiration is how a zombie gets in
                  f"SELECT {BATCH_COLUMNS} FROM {{batch}} WHERE verdict = '{FENCED_ZOMBIE_WRITE}'",
                  "No fenced producer (an epoch lower than one already seen) wrote to the log, "
                  "not even after the broker forgot it."),
            Check("no_epoch_regression", "anomalies",
                  f"SELECT {BATCH_COLUMNS} FROM {{batch}} WHERE verdict IN "
                  f"({_quote((MARKER_EPOCH_REGRESSION, COORDINATOR_EPOCH_REGRESSION))})",
                  "No producer or coordinator epoch goes backwards."),
        ],
        "transactions": [
            Check("no_hanging_transaction", "transactions",
                  "SELECT topic, `partition`, producer_id, producer_epoch, first_offset, status FROM {batch} "
                  f"WHERE status = '{HANGING}'",
                  "No transaction stays open past transaction.max.timeout.ms plus the broker's 5-minute buffer."),
            Check("no_open_transaction_unknown_to_its_coordinator", "transactions",
                  "SELECT topic, `partition`, producer_id, producer_epoch, first_offset, status, coordinator_view "
                  f"FROM {{batch}} WHERE coordinator_view = '{VIEW_UNKNOWN}' "
                  f"OR (status = '{HANGING}' AND coordinator_view = '{VIEW_ENDED}')",
                  "Every transaction the log of a live cluster shows open is one its coordinator knows: no producer "
                  "id that no coordinator holds (nobody will write its marker), and none past the timeout that its "
                  "coordinator already ended (its marker never reached the partition). Exports of log dirs have "
                  "no coordinator view and pass."),
            Check("no_invalid_transaction_state", "anomalies",
                  f"SELECT {BATCH_COLUMNS} FROM {{batch}} WHERE verdict = '{INVALID_TXN_STATE}'",
                  "No non-transactional batch while its producer has a transaction open."),
            Check("no_fenced_marker", "anomalies",
                  f"SELECT {BATCH_COLUMNS} FROM {{batch}} WHERE is_control AND verdict IN "
                  f"({_quote((MARKER_EPOCH_REGRESSION, COORDINATOR_EPOCH_REGRESSION))})",
                  "No COMMIT or ABORT marker the leader would have fenced."),
        ],
    }
    if has_replicas:
        columns = ("topic, `partition`, log_dir, other_log_dir, kind, first_offset, last_offset, leader_epoch, "
                   "other_leader_epoch, batches, records")
        declared["replica_consistency"] = [
            Check("no_replica_divergence", "replica_divergence",
                  f"SELECT {columns} FROM {{batch}} WHERE severity = '{SEV_VIOLATION}'",
                  "Every replica of a partition holds the same batches in the range they all hold, and no replica "
                  "keeps a tail its peers' newer leader epoch cut off (a follower only behind is no failure)."),
        ]
    return declared


# The files not read (parse_errors rows of NOT_READ kinds), less those that vanished below the log start:
# a vanished segment (or its .txnindex) whose next segment starts at or below the partition's log start
# offset, or a vanished .snapshot at or below it, was deleted by retention while the export read.
_EVERY_FILE_READ = (
    "SELECT e.topic, e.`partition`, e.file, e.error_kind, e.message, e.bytes_affected FROM {batch} e "
    "LEFT JOIN (SELECT file, lead(base_offset) OVER (PARTITION BY regexp_replace(file, '/[^/]*$', ''), topic, "
    "`partition` ORDER BY base_offset) AS next_base FROM segments) n "
    "ON n.file = regexp_replace(e.file, '[.]txnindex$', '.log') "
    "LEFT JOIN (SELECT topic, `partition`, max(log_start_offset) AS log_start FROM log_start_offsets "
    "GROUP BY topic, `partition`) l ON l.topic = e.topic AND l.`partition` = e.`partition` "
    f"WHERE e.error_kind = '{UNREADABLE}' OR (e.error_kind = '{VANISHED}' AND NOT coalesce(CASE "
    "WHEN e.file LIKE '%.snapshot' THEN CAST(regexp_extract(e.file, '([0-9]+)[.]snapshot$', 1) AS BIGINT) "
    "<= l.log_start ELSE n.next_base <= l.log_start END, false))")


def with_allowance(check: Check, allowed: int, suite_table: str) -> str:
    """The check's query in its suite, returning rows only when there are more than ``allowed``."""
    query = check.query_for(suite_table)
    if not allowed:
        return query
    return (f"SELECT * FROM ({query}) AS offending "
            f"WHERE (SELECT count(*) FROM ({query}) AS counted) > {int(allowed)}")
