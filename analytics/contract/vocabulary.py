"""The words of the interface contract (``docs/design.md``), each written once.

Verdicts and severities, explanations, transaction and snapshot-check statuses, parse-error
kinds, table and manifest names, and the key of a partition's history. Every module names
these through this one; none writes a literal copy. Pure Python: the reader, the replay and
the generator import it without Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# -- sequences -------------------------------------------------------------------------------
INT_MAX = 2**31 - 1
SEQ_SPACE = INT_MAX + 1  # sequences run mod 2^31 (DefaultRecordBatch.incrementSequence)
# ProducerStateManager.LATE_TRANSACTION_BUFFER_MS: a transaction open this long past its timeout hangs
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000

# -- verdicts (batch_verdicts.verdict) ---------------------------------------------------------
OK = "OK"
EPOCH_BUMP = "EPOCH_BUMP"
NON_IDEMPOTENT = "NON_IDEMPOTENT"
CONTROL_MARKER = "CONTROL_MARKER"
DUPLICATE = "DUPLICATE"
SEQUENCE_GAP = "SEQUENCE_GAP"
SEQUENCE_REGRESSION = "SEQUENCE_REGRESSION"
EPOCH_BUMP_NONZERO = "EPOCH_BUMP_NONZERO"
FENCED_ZOMBIE_WRITE = "FENCED_ZOMBIE_WRITE"
FIRST_SEEN_NONZERO = "FIRST_SEEN_NONZERO"
INVALID_TXN_STATE = "INVALID_TXN_STATE"
MARKER_EPOCH_REGRESSION = "MARKER_EPOCH_REGRESSION"
COORDINATOR_EPOCH_REGRESSION = "COORDINATOR_EPOCH_REGRESSION"
CORRUPT = "CORRUPT"

VERDICTS = (
    OK, EPOCH_BUMP, NON_IDEMPOTENT, CONTROL_MARKER, DUPLICATE, SEQUENCE_GAP, SEQUENCE_REGRESSION,
    EPOCH_BUMP_NONZERO, FENCED_ZOMBIE_WRITE, FIRST_SEEN_NONZERO, INVALID_TXN_STATE,
    MARKER_EPOCH_REGRESSION, COORDINATOR_EPOCH_REGRESSION, CORRUPT,
)
OK_VERDICTS = (OK, EPOCH_BUMP)
INFO_VERDICTS = (NON_IDEMPOTENT, CONTROL_MARKER)
# Rule breaks that evidence may explain (the broker was right to accept them) ...
EXPLAINABLE_VERDICTS = (DUPLICATE, SEQUENCE_GAP, SEQUENCE_REGRESSION, EPOCH_BUMP_NONZERO, FENCED_ZOMBIE_WRITE,
                        FIRST_SEEN_NONZERO, MARKER_EPOCH_REGRESSION, COORDINATOR_EPOCH_REGRESSION)
# ... and the verdicts that never carry an explanation
NEVER_EXPLAINED = (OK, EPOCH_BUMP, NON_IDEMPOTENT, CONTROL_MARKER, CORRUPT, INVALID_TXN_STATE)
# Broken sequences of one epoch, judged against the producer's sequence mark
SEQUENCE_VERDICTS = (DUPLICATE, SEQUENCE_GAP, SEQUENCE_REGRESSION)

# One sentence per verdict: what the batch is. The sentences of OK, EPOCH_BUMP, NON_IDEMPOTENT and
# CORRUPT are also the ``explanation`` column of those rows (stored once per Parquet page).
VERDICT_MEANING = {
    OK: "in sequence for its producer and epoch",
    EPOCH_BUMP: "a higher epoch starting at sequence 0",
    NON_IDEMPOTENT: "no producer id or a legacy message: not tracked by the broker",
    CONTROL_MARKER: "a transaction marker that breaks no rule",
    DUPLICATE: "the same producer, epoch and sequence range as an earlier batch of the partition",
    SEQUENCE_GAP: "the same epoch, but the first sequence is beyond the highest one seen + 1",
    SEQUENCE_REGRESSION: "the same epoch, overlapping or rewinding sequences that are not an exact duplicate",
    EPOCH_BUMP_NONZERO: "a higher epoch that does not start at sequence 0",
    FENCED_ZOMBIE_WRITE: "an epoch lower than one the producer already used: a fenced (zombie) producer wrote",
    FIRST_SEEN_NONZERO: "the producer's first visible batch does not start at sequence 0",
    INVALID_TXN_STATE: "a non-transactional batch while the producer's transaction was open",
    MARKER_EPOCH_REGRESSION: "a marker with an epoch lower than the producer's: the leader would have fenced it",
    COORDINATOR_EPOCH_REGRESSION: "a marker from an older transaction coordinator than an earlier marker's",
    CORRUPT: "CRC mismatch: the batch is not replayed",
}

# -- severities (batch_verdicts.severity): "did the broker keep its rules?" -----------------------
SEV_OK, SEV_INFO, SEV_EXPLAINED, SEV_VIOLATION = "ok", "info", "explained", "violation"
SEVERITIES = (SEV_OK, SEV_INFO, SEV_EXPLAINED, SEV_VIOLATION)
FINDING_SEVERITIES = (SEV_EXPLAINED, SEV_VIOLATION)

# -- the two questions every output answers, and the sentences that keep them apart ------------------
BROKER_QUESTION = "Did the broker keep its rules?"
BROKER_ANSWER = ("Each batch's severity: a violation broke a rule the broker enforces; an explained batch broke one "
                 "with evidence the broker was right to accept it (it had forgotten the producer, say). Right for the "
                 "broker is not right for the data: an explained duplicate or zombie write is still a bad batch in the log.")
DATA_QUESTION = "Is the data sound?"
DATA_ANSWER = ("The expectation suites judge the data, whatever the broker's reasons: an explained duplicate or "
               "zombie write still fails its check, so failed checks can outnumber violations. A sequence reuse "
               "(a duplicate range holding other records) repeats nothing and fails none.")

# -- explanations (batch_verdicts.explained_by), in the order the audit tries them ----------------
STATE_LOSS = "state_loss"
# A DUPLICATE that is no copy: the producer sent other records under an epoch and sequence range it had
# used, after the broker forgot it; nothing repeats for a consumer: severity info, no_duplicate_batch passes it
SEQUENCE_REUSE = "sequence_reuse"
PRODUCER_EXPIRATION = "producer_expiration"
COMPACTION = "compaction"
PARTIAL_HISTORY = "partial_history"
UNREAD_FILE = "unread_file"
EXPLANATIONS = (STATE_LOSS, SEQUENCE_REUSE, PRODUCER_EXPIRATION, COMPACTION, PARTIAL_HISTORY, UNREAD_FILE)
# The explanations of a batch that breaks no rule of the data: severity info, not explained
INFO_EXPLANATIONS = (SEQUENCE_REUSE,)
EXPLANATION_MEANING = {
    STATE_LOSS: "a broker restart or truncation given in the configuration lies between this batch and the previous one",
    SEQUENCE_REUSE: "a DUPLICATE taken after the broker had forgotten the producer (as producer_expiration) whose "
                    "records differ, key and value at every position, from those of every earlier batch with its "
                    "epoch and sequence range (the export's records, whole batches on both sides): the producer "
                    "reused its sequence numbers, nothing repeats for a consumer",
    PRODUCER_EXPIRATION: "the broker had forgotten the producer: idle at least producer.id.expiration.ms, no open transaction",
    COMPACTION: "offset holes cover the missing sequences on a compacted topic",
    PARTIAL_HISTORY: "earlier batches are below the log start or missing from the export",
    UNREAD_FILE: "the missing sequences lie in offsets of a segment of the partition the export could not read "
                 "(every_file_read fails for it): what it holds was not seen, which is no evidence of a lost write",
}

# -- transactions.status ----------------------------------------------------------------------
COMMITTED, ABORTED, OPEN, HANGING = "COMMITTED", "ABORTED", "OPEN", "HANGING"
TXN_STATUSES = (COMMITTED, ABORTED, OPEN, HANGING)
TXN_STATUS_OF_MARKER = {"COMMIT": COMMITTED, "ABORT": ABORTED}

# -- transactional_ids.state: the coordinator's TransactionState, by its id in __transaction_state -----------
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT = "Empty", "Ongoing", "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"
TXN_ID_STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD,
                 PREPARE_EPOCH_FENCE)
# The states in which a coordinator holds a transaction open (its markers not all written yet)
TXN_ID_OPEN_STATES = (ONGOING, PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE)

# -- transactions.coordinator_view: a transaction the log shows open, against the coordinators of a
# live cluster (coordinator_transactions); null when the export holds no coordinator view or the
# log shows the transaction ended
VIEW_OPEN = "open"  # the coordinator holds it open: same producer id and epoch, an open state, the partition
VIEW_ENDED = "ended"  # the coordinator has the producer id but not this transaction open: it ended or moved on
VIEW_UNKNOWN = "unknown"  # no coordinator has the producer id: nobody will ever write its marker
COORDINATOR_VIEWS = (VIEW_OPEN, VIEW_ENDED, VIEW_UNKNOWN)
TOMBSTONE = "Tombstone"  # a null value: the coordinator removed the transactional id (it expired)
# -- snapshot_checks.status ---------------------------------------------------------------------
MATCH, MISMATCH, NOT_IN_LOG, NOT_IN_SNAPSHOT = "match", "mismatch", "not_in_log", "not_in_snapshot"
SNAPSHOT_STATUSES = (MATCH, MISMATCH, NOT_IN_LOG, NOT_IN_SNAPSHOT)

# -- replica_divergence.kind: one replica of a partition against another ------------------------------
MISSING = "missing"  # offsets one replica holds inside the range both hold, in no batch of the other
DIFFERENT_BATCH = "different_batch"  # the same offsets in batches that differ (bytes, producer, epoch, sequence)
TRUNCATED_TAIL = "truncated_tail"  # offsets past the other replica's end: behind (info), or a tail its newer
#                                    leader epoch cut off, which a broker truncates (violation)
DIVERGENCE_KINDS = (MISSING, DIFFERENT_BATCH, TRUNCATED_TAIL)
DIVERGENCE_MEANING = {
    MISSING: "offsets inside the range both replicas hold, in no batch of the other replica",
    DIFFERENT_BATCH: "the same offsets held in batches that differ: CRC, producer, epoch, sequence or leader epoch",
    TRUNCATED_TAIL: "offsets past the other replica's end: a follower behind (info), or a tail written under an "
                    "older leader epoch than the other replica's at that offset, which the broker truncates (violation)",
}

# -- record_duplicates.kind: what a read_committed consumer makes of a repeat -------------------------
# Only ``duplicate`` rows are copies a consumer receives twice: they fail ``no_duplicate_record`` and are
# ``summary.json``'s ``record_duplicates``. The others are information (``record_duplicate_kinds``).
DUP_DUPLICATE = "duplicate"  # an earlier copy outside any aborted transaction exists: delivered twice
DUP_AFTER_ABORT = "after_abort"  # every earlier copy was in an aborted transaction: reprocessed after an abort
DUP_ABORTED = "aborted"  # the repeat itself is in an aborted transaction: no read_committed consumer gets it
DUPLICATE_KINDS = (DUP_DUPLICATE, DUP_AFTER_ABORT, DUP_ABORTED)
DUPLICATE_KIND_MEANING = {
    DUP_DUPLICATE: "an earlier copy outside any aborted transaction exists: a consumer receives the record twice",
    DUP_AFTER_ABORT: "reprocessed after an abort: every earlier copy was in an aborted transaction, which "
                     "read_committed consumers never receive",
    DUP_ABORTED: "the copy is in an aborted transaction: read_committed consumers never receive it",
}


# -- dedup keys: what makes two records copies of one (record_duplicates.dedup_key) ---------------------
# ``delivery`` (the default) finds what a producer's retry writes again: the same key, value, headers and,
# in a CreateTime batch, the same producer timestamp (a LogAppendTime batch's timestamp is the broker's,
# new at each append, and is left out). ``key_value`` also counts an application that sends one payload
# twice; ``header:<name>`` compares an application's own id. docs/real-broker.md measures them.
DEDUP_DELIVERY = "delivery"
DEDUP_KEY_VALUE = "key_value"
DEDUP_HEADER_PREFIX = "header:"
DEFAULT_DEDUP_KEY = DEDUP_DELIVERY
LOG_APPEND_TIME = "LogAppendTime"  # batches.timestamp_type of a batch the broker stamped
# cluster_configs.resource_type of a broker's static config (its server.properties), as a live cluster
# reports it (DescribeConfigs); "topic" and "broker" rows are the KRaft metadata's configs
CONFIG_STATIC_BROKER = "static_broker"
DEDUP_KEY_MEANING = {
    DEDUP_DELIVERY: "the record's key, value and headers, and its producer timestamp in a CreateTime batch: "
                    "what a producer's retry writes again",
    DEDUP_KEY_VALUE: "the record's key and value: an application sending one payload twice counts too",
}


def dedup_key_meaning(dedup_key: str) -> str:
    """What makes two records copies under ``dedup_key``.

    >>> dedup_key_meaning("header:event-id")
    "the value of the record's header event-id"
    """
    if dedup_key.startswith(DEDUP_HEADER_PREFIX):
        return f"the value of the record's header {dedup_key[len(DEDUP_HEADER_PREFIX):]}"
    return DEDUP_KEY_MEANING.get(dedup_key, dedup_key)


# -- internal and framework topics: which checks apply to each, and why --------------------------------
# Checks named by the fields of TopicKind (the treatment of a topic, docs/internal-topics.md)
CHECK_REPLAY, CHECK_RECORD_DUPLICATES, CHECK_SNAPSHOTS, CHECK_TRANSACTIONS = (
    "replay", "record_duplicates", "snapshots", "transactions")
TOPIC_CHECKS = (CHECK_REPLAY, CHECK_RECORD_DUPLICATES, CHECK_SNAPSHOTS, CHECK_TRANSACTIONS)


@dataclass(frozen=True)
class TopicKind:
    """The treatment of a kind of topic: who writes it and which checks apply to it.

    ``names``: exact topic names; ``pattern``: a regular expression the whole name matches, written so
    that Python's ``re`` and Java's (Spark's ``rlike``) read it alike. The checks: ``replay``, the
    producer-state replay validates its batches' sequences (``is_replayed``); ``record_duplicates``,
    its repeated records are counted by ``record_duplicates`` and ``no_duplicate_record``;
    ``snapshots``, its producer snapshots have entries to compare (``snapshot_checks``);
    ``transactions``, transaction markers can close transactions in it (``transactions``). The last
    two run on every topic; they say whether there is anything for them to find."""

    kind: str
    written_by: str
    replay: bool
    record_duplicates: bool
    snapshots: bool
    transactions: bool
    why: str
    names: tuple[str, ...] = ()
    pattern: str | None = None

    def applies(self, check: str) -> bool:
        """Whether ``check`` (one of ``TOPIC_CHECKS``) applies to this kind of topic."""
        if check not in TOPIC_CHECKS:
            raise ValueError(f"unknown check {check!r}: one of {', '.join(TOPIC_CHECKS)}")
        return getattr(self, check)


# Connect's topics are named by the worker's config.storage.topic, offset.storage.topic and
# status.storage.topic, which have no default: these patterns take the names of Kafka's sample
# connect-distributed.properties (connect-configs, connect-offsets, connect-status), the names with more
# around "connect" (Strimzi's connect-cluster-configs, docker-connect-offsets) and MirrorMaker 2's
# (mm2-status.<source>.internal). A Connect topic named otherwise is audited as a user topic.
CONNECT_PATTERN = r"(?:.+-)?connect(?:-.+)?-(?:configs|offsets|status)|mm2-(?:configs|offsets|status)\..+\.internal"
TOPIC_KINDS = (
    TopicKind(
        "cluster_metadata", "the KRaft controller quorum (the Raft leader's appends), producer id -1",
        replay=False, record_duplicates=False, snapshots=False, transactions=False, names=("__cluster_metadata",),
        why="The metadata log repeats identical records by design: a NoOpRecord every "
            "metadata.max.idle.interval.ms, the same PartitionChangeRecord at each restart. No producer ids, so no "
            "producer state, snapshot entry or Kafka transaction (its BeginTransactionRecord is a metadata record)."),
    TopicKind(
        "consumer_offsets", "the group coordinator (coordinator origin): producer id -1, or the producer id and "
        "epoch of a transactional offset commit (sendOffsetsToTransaction)",
        replay=False, record_duplicates=False, snapshots=True, transactions=True, names=("__consumer_offsets",),
        why="The leader skips sequence checks for coordinator appends: every transactional offset commit starts at "
            "sequence 0. Those commits are closed by COMMIT/ABORT markers and leave producer state the broker "
            "snapshots. A member committing the same offset twice in one millisecond writes byte-identical records: "
            "the log is the groups' state, read last-wins by key, not data delivered."),
    TopicKind(
        "transaction_state", "the transaction coordinator, producer id -1",
        replay=False, record_duplicates=False, snapshots=False, transactions=False, names=("__transaction_state",),
        why="The coordinator's state changes, read last-wins by transactional id (segaudit reads them into "
            "transactional_ids). No producer ids: nothing to replay, snapshot or close."),
    TopicKind(
        "share_group_state", "the share coordinator (KIP-932), producer id -1",
        replay=False, record_duplicates=False, snapshots=False, transactions=False, names=("__share_group_state",),
        why="The share groups' state, read last-wins by key, written by a coordinator with no producer id."),
    TopicKind(
        "remote_log_metadata", "the brokers' remote log metadata manager (KIP-405), through a producer of its own",
        replay=True, record_duplicates=False, snapshots=True, transactions=False, names=("__remote_log_metadata",),
        why="Its producer is a client of the leader (client origin): its sequences are validated like any client's. "
            "The records are events about remote segments, applied as state by segment id: a repeat changes "
            "nothing. It is not transactional."),
    TopicKind(
        "streams_changelog", "Kafka Streams' producer (transactional under exactly_once_v2)",
        replay=True, record_duplicates=False, snapshots=True, transactions=True, pattern=r".+-changelog",
        why="A client like any other for the broker's rules. A changelog is a state store's log, compacted and "
            "restored last-write-wins by key: writing the same value for a key again (an unchanged put, a restore "
            "after a crash under at_least_once) is no second delivery. A user topic whose name ends in -changelog "
            "is treated so too."),
    TopicKind(
        "streams_repartition", "Kafka Streams' producer (transactional under exactly_once_v2)",
        replay=True, record_duplicates=True, snapshots=True, transactions=True, pattern=r".+-repartition",
        why="The application's records on their way to the next sub-topology, which processes each one it reads: "
            "a repeat is processed twice, so every check applies. Streams deletes what it consumed "
            "(DeleteRecords): histories start past offset 0 (partial_history)."),
    TopicKind(
        "connect_internal", "Kafka Connect workers' producers (transactional for exactly-once source connectors)",
        replay=True, record_duplicates=False, snapshots=True, transactions=True, pattern=CONNECT_PATTERN,
        why="Clients for the broker's rules. Configs, source offsets and statuses are state keyed by connector and "
            "task, read last-wins; workers write the same status and task configs again at rebalances and "
            "restarts. The names are the worker's to choose (config.storage.topic, offset.storage.topic, "
            "status.storage.topic): only the usual ones are recognised."),
)
USER_TOPIC = TopicKind(
    "user", "applications' producers", replay=True, record_duplicates=True, snapshots=True, transactions=True,
    why="Data that consumers read: every check applies.")


def topic_kind(topic: str) -> TopicKind:
    """The treatment of ``topic``: the first of ``TOPIC_KINDS`` naming it or whose pattern its whole
    name matches, else ``USER_TOPIC``.

    >>> topic_kind("__consumer_offsets").kind, topic_kind("app-store-changelog").kind, topic_kind("orders").kind
    ('consumer_offsets', 'streams_changelog', 'user')
    >>> [topic_kind(t).kind for t in ("connect-offsets", "connect-cluster-status", "mm2-configs.eu.internal")]
    ['connect_internal', 'connect_internal', 'connect_internal']
    >>> topic_kind("payments-status").record_duplicates, topic_kind("__cluster_metadata").applies("replay")
    (True, False)
    """
    for k in TOPIC_KINDS:
        if topic in k.names or (k.pattern is not None and re.fullmatch(k.pattern, topic)):
            return k
    return USER_TOPIC


def topics_exempt(check: str) -> tuple[tuple[str, ...], str | None]:
    """The topics ``check`` does not apply to: their exact names, and one regular expression of the
    whole name (None: no pattern), for a Spark predicate (``analytics.audit.predicates.checked``).

    >>> topics_exempt("replay")
    (('__cluster_metadata', '__consumer_offsets', '__transaction_state', '__share_group_state'), None)
    """
    exempt = [k for k in TOPIC_KINDS if not k.applies(check)]
    patterns = [k.pattern for k in exempt if k.pattern is not None]
    names = tuple(n for k in exempt for n in k.names)
    return names, ("^(?:" + "|".join(f"(?:{p})" for p in patterns) + ")$") if patterns else None


# -- parse_errors.error_kind --------------------------------------------------------------------
# Kinds marked "stops the file" end the walk of a segment: after them the framing cannot be
# trusted, so the rest of the file is one error.
TRUNCATED = "truncated"  # an entry runs past the end of the file (stops the file)
ZERO_FILLED = "zero_filled"  # the rest of the file is zeros: a preallocated segment's tail (stops)
INVALID_LENGTH = "invalid_length"  # size field negative or below its magic's minimum (stops)
UNKNOWN_MAGIC = "unknown_magic"  # magic not 0, 1 or 2 (stops)
CRC_MISMATCH = "crc_mismatch"  # checksum differs; the walk goes on with the next entry
INVALID_BATCH = "invalid_batch"  # framing fine, header contradicts itself; the walk goes on
RECORD_DECODE = "record_decode"  # records of a CRC-valid batch do not parse (records level only)
DECOMPRESSION = "decompression"  # codec unknown, stream corrupt, or over the size cap
UNKNOWN_FILE = "unknown_file"  # a file in a partition folder that Kafka does not write
TEMPORARY_FILE = "temporary_file"  # .deleted / .cleaned / .swap files, left for the broker to finish
UNREADABLE = "unreadable"  # the operating system refused to read it (permissions, I/O): its data is not audited
# Listed, then gone when read: deleted while the export ran (retention, compaction, a live data dir).
# Its data is not audited; the check every_file_read takes it as deleted by retention when the
# partition's log start offset reached the next segment.
VANISHED = "vanished"
CORRUPT_SIDECAR = "corrupt_sidecar"  # a snapshot, index or checkpoint file that does not parse
# Offsets of a captured range that an export over the protocol could not fetch: deleted by retention
# or truncated while it ran, or a leader unreachable past the retries. The message names the offset
# range; bytes_affected is 0 (no bytes were received). The fetch goes on where the log goes on.
OFFSETS_LOST = "offsets_lost"
ERROR_KINDS = (TRUNCATED, ZERO_FILLED, INVALID_LENGTH, UNKNOWN_MAGIC, CRC_MISMATCH, INVALID_BATCH, RECORD_DECODE,
               DECOMPRESSION, UNKNOWN_FILE, TEMPORARY_FILE, UNREADABLE, VANISHED, CORRUPT_SIDECAR, OFFSETS_LOST)
# Kinds of a file present but not read: its data is missing from the audit (coverage, every_file_read) ...
NOT_READ = (UNREADABLE, VANISHED)
# ... and of a file left unread by design: a broker's temporary file, a file Kafka does not write
NOT_DATA = (TEMPORARY_FILE, UNKNOWN_FILE)
# Kinds after which the rest of a segment is not walked.
STOPS_FILE = frozenset({TRUNCATED, ZERO_FILLED, INVALID_LENGTH, UNKNOWN_MAGIC})

# -- tables under OUT, by the stage that writes them ------------------------------------------------
SIDECAR_TABLES = ("producer_snapshots", "aborted_transactions", "leader_epochs", "checkpoints", "partition_metadata")
EXPORT_TABLES = ("batches", "records", "segments", "parse_errors", "log_start_offsets", *SIDECAR_TABLES,
                 "transactional_ids", "coordinator_transactions", "cluster_configs")
AUDIT_TABLES = ("batch_verdicts", "anomalies", "producer_sessions", "transactions", "snapshot_checks",
                "record_duplicates", "producer_state", "partition_state", "producer_files", "file_state",
                "replica_divergence")
RECONCILE_TABLES = ("reconciliation",)
# Every table a reader of OUT may query (``sql``, ``explain``): the stages' tables
TABLES = (*EXPORT_TABLES, *AUDIT_TABLES, *RECONCILE_TABLES)

# -- stages and their manifests (written last: a stage without one is not complete) -------------------
EXPORT, AUDIT, VALIDATE, REPORT = "export", "audit", "validate", "report"
STAGES = (EXPORT, AUDIT, VALIDATE, REPORT)  # the stages of ``segaudit run``
RECONCILE = "reconcile"  # counts against the producers' (``segaudit reconcile``), built from an audit
MANIFESTS = {EXPORT: "_export.json", AUDIT: "_audit.json", VALIDATE: "_validation.json", REPORT: "_report.json",
             RECONCILE: "_reconcile.json"}
SUMMARY = "summary.json"
VALIDATION_DIR = "validation"
REPORT_DIR = "report"

# -- the key of a partition's history ---------------------------------------------------------------
# A partition's history is one broker's log of one incarnation of a topic: the same topic-partition in
# two log directories (two brokers, two clusters) is replayed, counted and shown apart, and so are two
# topics of the same name, one deleted and one created after it (KIP-516): each partition folder's
# ``partition.metadata`` names its topic id. log_dir is the folder above the partition folder;
# topic_id is null for a folder without the file (brokers before 2.8, kafka-dump-log text, copied
# segments), whose identity is then its name.
TOPIC_ID = "topic_id"
HISTORY_KEY = ("log_dir", "topic", "partition", TOPIC_ID)
# Inside the audit, a leftover folder (``-delete``, ``-stray``) beside another folder of the same topic
# id in its log dir (a replica moved away and back before the broker deleted the old copy) keys its
# history by its id, this mark and the folder's own suffix: its own history. Outputs show the id alone.
APART = "@"
# A deleted incarnation (analytics.audit.incarnations): its folders' histories are keyed inside the audit
# by the id, APART and DELETED; outputs show the id alone, and TOPIC_DELETED true.
DELETED = "deleted"
TOPIC_DELETED = "topic_deleted"
# What the log dir's checkpoints key their entries by: the name (they describe its live partitions).
NAME_KEY = ("log_dir", "topic", "partition")

# URI schemes an OUT may have besides a local path: object stores whose conditional create (the commit
# of analytics.publish) is implemented. gs:// and abfs:// have the same primitive and are not wired yet.
OUT_SCHEMES = ("s3", "s3a")


def log_dir_of(file: str, levels: int = 2) -> str:
    """The log dir of a file path: ``file`` without its last ``levels`` components (a segment's:
    the partition folder and the file name; a log-dir checkpoint's: the file name). The Spark
    expression of the same rule is :func:`analytics.spark.columns.with_log_dir`."""
    parts = file.rsplit("/", levels)
    return parts[0] if len(parts) > levels else ""

# -- exit codes of every command and job ------------------------------------------------------------
EXIT_OK = 0  # done; every expectation met
EXIT_VIOLATION = 1  # done; the data violates an expectation (only this means a finding)
EXIT_USAGE = 2  # bad usage, unreadable input, a missing or stale stage: one line on stderr
EXIT_BUG = 3  # a failure segaudit did not expect: one line asking for a report
EXIT_NOT_FOUND = 4  # done; no batch holds the offset asked for (``explain``): the answer says where it falls
EXIT_SIGINT = 130  # interrupted (Ctrl-C): 128 + SIGINT
EXIT_SIGTERM = 143  # terminated: 128 + SIGTERM
