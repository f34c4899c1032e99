"""The broker's producer rules as named Column predicates, each over the columns of one row.

A row is a batch with the facts the steps of :mod:`analytics.audit.steps` add to it: the state
its producer's earlier rows left (``prev_epoch``, ``seq_mark``, ``last_txn_data`` ...), its place
in the partition (``offset_holes``, ``partition_first_offset``) and, for the explanations, the
history's ``log_start_offset``. Each rule reads its inputs by name, so each is tested alone on a
hand-built frame (``tests/test_rules.py``), and the verdict, the explanation and the sentence are
short ``F.when`` chains of them. Native Column expressions only: no Python UDF in the hot path.

Sequences wrap at INT_MAX (mod 2^31, ``DefaultRecordBatch.incrementSequence``) and are compared
in 64 bits. The rules are those of ``docs/architecture.md`` (labelling rules) and the replay rules
§7.3; the broker profile (``AuditConfig.profile``, replay rules §2.9) decides which explanations
a version allows. A predicate whose facts are missing (a producer's first batch has no previous
one) may be null; ``F.when`` and ``where`` read that as false, and so do the callers here.

Functions rather than Column constants: building a Column needs a running Spark session, and
importing this module must not.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from analytics.audit.config import AuditConfig
from analytics.contract.vocabulary import (
    CHECK_REPLAY, COMPACTION, CONTROL_MARKER, COORDINATOR_EPOCH_REGRESSION, CORRUPT, DUPLICATE, EPOCH_BUMP,
    EPOCH_BUMP_NONZERO, FENCED_ZOMBIE_WRITE, FIRST_SEEN_NONZERO, INFO_EXPLANATIONS, INFO_VERDICTS, INT_MAX,
    INVALID_TXN_STATE,
    MARKER_EPOCH_REGRESSION, NEVER_EXPLAINED, NON_IDEMPOTENT, OK, OK_VERDICTS, PARTIAL_HISTORY,
    PRODUCER_EXPIRATION, SEQ_SPACE, SEQUENCE_GAP, SEQUENCE_REGRESSION, SEQUENCE_REUSE, SEQUENCE_VERDICTS,
    SEV_EXPLAINED,
    SEV_INFO, SEV_OK, SEV_VIOLATION, STATE_LOSS, UNREAD_FILE, VERDICT_MEANING, topics_exempt,
)


# -- sequences ---------------------------------------------------------------------------------
def seq_distance(last: Column, nxt: Column) -> Column:
    """Sequences from ``last + 1`` up to ``nxt``, mod 2^31 (in 64 bits: int32 arithmetic overflows
    at INT_MAX)."""
    return F.pmod(nxt.cast("long") - last.cast("long") - 1, F.lit(SEQ_SPACE))


def in_sequence(last: Column, nxt: Column) -> Column:
    """ProducerAppendInfo.inSequence: next == last + 1 (computed as a long), or 0 after INT_MAX."""
    return (nxt.cast("long") == last.cast("long") + 1) | ((nxt == 0) & (last == INT_MAX))


def ahead(last: Column, nxt: Column) -> Column:
    """``nxt`` lies beyond ``last + 1`` going forward mod 2^31: a gap, not a rewind."""
    d = seq_distance(last, nxt)
    return (d > 0) & (d < SEQ_SPACE // 2)


def wrap_crossing() -> Column:
    """For a data batch, the crossings of INT_MAX (an exact multiple of 2^31: -1, 0 or 1) on the
    shorter way round mod 2^31 from the producer's previous data batch (``prev_data_seq``) to its
    ``last_sequence``: 1 forward across the wrap, -1 back across it (a rewind). Their running sum
    puts a producer's sequences on a line: ``last_sequence + wraps * 2^31``."""
    step = F.pmod(F.col("last_sequence").cast("long") - F.col("prev_data_seq"), F.lit(SEQ_SPACE))
    step = F.when(step > SEQ_SPACE // 2, step - SEQ_SPACE).otherwise(step)
    crossings = (F.col("prev_data_seq") + step - F.col("last_sequence")) / SEQ_SPACE
    return F.when(is_data(), crossings.cast("int"))


# -- which batches the broker tracks -----------------------------------------------------------
def is_data() -> Column:
    """A data batch, not a control batch (a transaction marker)."""
    return ~F.col("is_control")


def has_state() -> Column:
    """Batches that update producer state (hasProducerId, magic 2, not an emptied control batch)."""
    return (
        F.col("crc_valid")
        & (F.col("magic") == 2)
        & (F.col("producer_id") >= 0)
        & ~(F.col("is_control") & (F.col("record_count") == 0))
    )


def is_replayed() -> Column:
    """Batches whose sequences are validated: those with state, in topics the replay applies to
    (``contract.TOPIC_KINDS``: not the internal topics, whose appends come from coordinators)."""
    return has_state() & checked(CHECK_REPLAY)


def checked(check: str) -> Column:
    """Rows of topics ``check`` (a name of ``contract.TOPIC_CHECKS``) applies to, by the treatment of
    their topic (``contract.topic_kind``): exact names, then one regular expression when some kind has one."""
    names, pattern = topics_exempt(check)
    exempt = F.col("topic").isin(*names) if names else F.lit(False)
    if pattern is not None:
        exempt = exempt | F.col("topic").rlike(pattern)
    return ~exempt


# -- the state before a batch, and the state it leaves -------------------------------------------
def first_seen() -> Column:
    """The producer's first visible batch: no earlier batch left an epoch."""
    return F.col("prev_epoch").isNull()


def epoch_changed() -> Column:
    """The batch starts an epoch run: the producer's first, or an epoch other than the previous batch's."""
    return first_seen() | (F.col("producer_epoch") != F.col("prev_epoch"))


def transaction_open() -> Column:
    """The producer's latest transactional data batch (``last_txn_data``) came after its latest
    marker (``last_marker``): a transaction was open before this batch. Never null."""
    return F.col("last_txn_data").isNotNull() & (
        F.col("last_marker").isNull() | (F.col("last_txn_data") > F.col("last_marker")))


def idle() -> Column:
    """Epoch ms since the producer's previous batch (max timestamps: the broker's lastTimestamp)."""
    return F.col("max_timestamp") - F.col("prev_max_timestamp")


def sequence_left() -> Column:
    """The last sequence a follower keeps after the batch: its own (data), -1 (a marker changing
    the epoch), or null (a marker at the same epoch leaves the sequence unchanged)."""
    return F.when(is_data(), F.col("last_sequence")).when(epoch_changed(), F.lit(-1))


def offset_left() -> Column:
    """The last offset a follower keeps after the batch, like :func:`sequence_left`."""
    return F.when(is_data(), F.col("last_offset")).when(epoch_changed(), F.lit(-1).cast("long"))


# -- verdicts ------------------------------------------------------------------------------------
def verdict_of_data() -> Column:
    """A replayed data batch against its producer's state: a copy of an earlier range, first
    sight, a new epoch (at 0 or not), a lower epoch, then the sequence against the mark."""
    base, epoch, prev_epoch = F.col("base_sequence"), F.col("producer_epoch"), F.col("prev_epoch")
    return (
        F.when(F.col("dup_rank") > 1, DUPLICATE)
        .when(first_seen() & (base == 0), OK)
        .when(first_seen(), FIRST_SEEN_NONZERO)
        .when(epoch > prev_epoch, F.when(base == 0, EPOCH_BUMP).otherwise(EPOCH_BUMP_NONZERO))
        .when(epoch < prev_epoch, FENCED_ZOMBIE_WRITE)
        .when(in_sequence(F.col("seq_mark"), base), OK)
        .when(ahead(F.col("seq_mark"), base), SEQUENCE_GAP)
        .otherwise(SEQUENCE_REGRESSION)
    )


def verdict_of_marker() -> Column:
    """A replayed marker: below the producer's epoch, below the highest coordinator epoch so far, or fine."""
    below_epoch = F.col("prev_epoch").isNotNull() & (F.col("producer_epoch") < F.col("prev_epoch"))
    return (
        F.when(below_epoch, MARKER_EPOCH_REGRESSION)
        .when(F.col("coordinator_epoch") < F.col("prev_coordinator_epoch"), COORDINATOR_EPOCH_REGRESSION)
        .otherwise(CONTROL_MARKER)
    )


def verdict_of_untracked() -> Column:
    """A valid batch the broker keeps no sequences for: a marker, a batch without a producer id or
    of a legacy format, or the internal topics' (an emptied marker, magic 2, is still a marker)."""
    return (
        F.when(F.col("is_control") & (F.col("magic") == 2), CONTROL_MARKER)
        .when((F.col("producer_id") < 0) | (F.col("magic") < 2), NON_IDEMPOTENT)
        .otherwise(OK)
    )


def outside_open_transaction() -> Column:
    """A non-transactional data batch while its producer's transaction is open (``txn_open``)."""
    return is_data() & F.col("txn_open") & ~F.col("is_transactional")


def verdict() -> Column:
    """``verdict``: CORRUPT, the replay's (an in-order batch outside its producer's open
    transaction is INVALID_TXN_STATE), or the untracked batch's."""
    replayed = F.when(is_data(), verdict_of_data()).otherwise(verdict_of_marker())
    replayed = (F.when(replayed.isin(*OK_VERDICTS) & outside_open_transaction(), INVALID_TXN_STATE)
                .otherwise(replayed))
    return (F.when(~F.col("crc_valid"), CORRUPT).when(F.col("tracked"), replayed)
            .otherwise(verdict_of_untracked()))


def expected_sequence() -> Column:
    """The sequence the broker expected of a replayed data batch: 0 in a new epoch run, else the
    one after the sequence mark (0 after INT_MAX)."""
    return (
        F.when(~F.col("tracked") | ~is_data(), None)
        .when(epoch_changed(), F.lit(0))
        .otherwise(F.pmod(F.col("seq_mark").cast("long") + 1, F.lit(SEQ_SPACE)).cast("int"))
    )


def conflict_offset() -> Column:
    """The earlier batch an anomaly conflicts with: the original of a copy, the batch holding the
    sequence mark a gap or a rewind is judged against, the previous batch an epoch is judged against."""
    v = F.col("verdict")
    return (
        F.when(v == DUPLICATE, F.col("dup_original"))
        .when(v.isin(SEQUENCE_GAP, SEQUENCE_REGRESSION), F.col("mark_offset"))
        .when(v.isin(EPOCH_BUMP_NONZERO, FENCED_ZOMBIE_WRITE), F.col("prev_base_offset"))
    )


# -- explanations --------------------------------------------------------------------------------
def taken_when_forgotten(config: AuditConfig) -> Column:
    """The broker took the batch from a producer it had forgotten. Before KIP-360 (2.5) it refused
    a forgotten producer's non-zero sequences (UnknownProducerId; OutOfOrderSequence in 0.11)."""
    if config.broker_profile.unknown_pid_nonzero_seq_error is None:
        return F.lit(True)
    return F.col("base_sequence") == 0


def restart_between(config: AuditConfig) -> Column:
    """A configured broker restart or truncation lies between the producer's previous batch and
    this one (by offset or by time, on its topic and partition when it names them)."""
    hit = F.lit(False)
    for r in config.broker_restarts:
        if r.offset is not None:
            at = (F.col("prev_base_offset") < F.lit(r.offset)) & (F.col("base_offset") >= F.lit(r.offset))
        else:
            at = ((F.col("prev_max_timestamp") < F.lit(r.time_ms))
                  & (F.col("max_timestamp") >= F.lit(r.time_ms)))
        if r.topic is not None:
            at &= F.col("topic") == r.topic
        if r.partition is not None:
            at &= F.col("partition") == r.partition
        hit |= at
    return F.coalesce(hit, F.lit(False))


def expiry_point(config: AuditConfig) -> Column:
    """The broker had forgotten the producer before this batch: a replayed batch at least
    producer.id.expiration.ms after its previous one, with no transaction open (a producer with one
    never expires) and one a forgotten producer could send (:func:`taken_when_forgotten`). The
    state since is rebuilt from this batch on."""
    return expiry_candidate(config) & (idle() >= config.expiration_ms) & ~transaction_open()


def expiry_candidate(config: AuditConfig) -> Column:
    """What :func:`expiry_point` reads of the row alone: a replayed batch a forgotten producer could
    send (:func:`taken_when_forgotten`)."""
    return F.col("tracked") & taken_when_forgotten(config)


def rebuilt_state_takes() -> Column:
    """The state rebuilt after an expiry point takes the batch: in sequence with the previous
    batch's last sequence (``state_last_seq``, a follower's) at the same epoch, or a higher epoch at 0."""
    base = F.col("base_sequence")
    same_epoch = F.col("producer_epoch") == F.col("prev_epoch")
    return (same_epoch & in_sequence(F.col("state_last_seq"), base)) | (
        (F.col("producer_epoch") > F.col("prev_epoch")) & (base == 0))


def after_expiry() -> Column:
    """A copy, gap or rewind of sequences written before the latest expiry point (its original or
    mark lies before ``expired_offset``) that the rebuilt state took in sequence: it got in because
    of the expiration (§7.3, duplicates after state loss). One the rebuilt state would still have
    refused is not explained."""
    return F.coalesce(
        F.col("verdict").isin(*SEQUENCE_VERDICTS) & rebuilt_state_takes()
        & (F.col("conflict_offset") < F.col("expired_offset")),
        F.lit(False))


def on_compacted_topic(config: AuditConfig) -> Column:
    """The batch's topic is compacted (``cleanup_policy`` in the configuration)."""
    topics = config.compacted_topics()
    return F.col("topic").isin(*topics) if topics else F.lit(False)


def compaction_covers(config: AuditConfig) -> Column:
    """A gap on a compacted topic no wider than the offset holes since the producer's previous batch:
    sequences missing after the mark (``SEQUENCE_GAP``), or a new epoch's first visible batch past 0
    (``EPOCH_BUMP_NONZERO``: the cleaner removed the batch that opened the epoch, as it does a
    transaction's first batch once its keys are overwritten). A new epoch run's mark is -1, so the
    missing sequences are then 0 .. base_sequence - 1."""
    missing = seq_distance(F.col("seq_mark"), F.col("base_sequence"))
    return (F.col("verdict").isin(SEQUENCE_GAP, EPOCH_BUMP_NONZERO) & on_compacted_topic(config)
            & (missing <= F.col("offset_holes")))


def unread_file_covers() -> Column:
    """A gap no wider than the offset holes since the producer's previous batch, in a partition with a
    segment file the export could not read (``unread_files``): the missing sequences may be in it, as
    a compacted topic's may be in the holes (:func:`compaction_covers`). Not seen is not lost."""
    missing = seq_distance(F.col("seq_mark"), F.col("base_sequence"))
    return (F.col("verdict").isin(SEQUENCE_GAP, EPOCH_BUMP_NONZERO) & (F.col("unread_files") > 0)
            & (missing <= F.col("offset_holes")))


def partial_history(config: AuditConfig) -> Column:
    """The producer's earlier batches are gone: a first sight at a non-zero sequence (its first
    batch, or its first data batch after markers only) where the log start moved, the export starts
    above offset 0, or compaction ran; and on brokers before 2.4
    the restarts at 0 after the log start passed the producer, and the batches going on from them."""
    below_start = F.col("log_start_offset") > 0
    evidence = below_start | (F.col("partition_first_offset") > 0) | on_compacted_topic(config)
    # A producer seen first by its markers only (the cleaner removed its data batches and kept the
    # markers, as transactions on a compacted topic leave them): its first data batch is its first
    # sight of sequences, whatever the markers' epochs did to the run.
    first_data = F.col("prev_base_offset").isNotNull() & F.col("prev_data_seq").isNull()
    partial = (((F.col("verdict") == FIRST_SEEN_NONZERO)
                | (F.col("verdict").isin(SEQUENCE_GAP, EPOCH_BUMP_NONZERO) & first_data)) & evidence)
    profile = config.broker_profile
    if profile.evicts_below_log_start:
        # Up to 2.3 the broker forgot a producer once the log start passed its last batch: the client
        # then restarted at sequence 0 (same producer id and epoch, replay rules §2.8, §3.2).
        partial |= ((F.col("base_sequence") == 0) & below_start
                    & (F.col("prev_base_offset") < F.col("log_start_offset")))
    if profile.unknown_pid_nonzero_seq_error is not None:
        # ... and the batches after such a restart, in sequence with it, repeat sequences that only
        # batches below the log start hold.
        partial |= (F.col("verdict").isin(SEQUENCE_REGRESSION, DUPLICATE) & below_start
                    & in_sequence(F.col("state_last_seq"), F.col("base_sequence"))
                    & (F.col("mark_offset") < F.col("log_start_offset")))
    return partial


def sequence_reuse(config: AuditConfig) -> Column:
    """A DUPLICATE that is no copy: its records differ from those of every earlier batch with its
    epoch and sequence range (``records_differ``, from the export's records:
    :mod:`analytics.audit.sequence_reuse`), and the broker had forgotten the producer, so it took the
    batch (what :func:`expiry_point` or :func:`after_expiry` says of it). One the broker still knew
    the producer for stays a DUPLICATE of its own: the leader answers a cached range as a duplicate
    and refuses another (§2.5), so it never writes such a batch."""
    return F.coalesce((F.col("verdict") == DUPLICATE) & F.col("records_differ")
                      & (expiry_point(config) | after_expiry()), F.lit(False))


def explained_by(config: AuditConfig) -> Column:
    """``explained_by``: the first piece of evidence, in the order of ``EXPLANATIONS``, for a
    verdict that evidence may explain."""
    return (
        F.when(F.col("verdict").isin(*NEVER_EXPLAINED), None)
        .when(restart_between(config) & taken_when_forgotten(config), STATE_LOSS)
        .when(sequence_reuse(config), SEQUENCE_REUSE)
        .when(expiry_point(config), PRODUCER_EXPIRATION)
        .when(after_expiry(), PRODUCER_EXPIRATION)
        .when(compaction_covers(config), COMPACTION)
        .when(partial_history(config), PARTIAL_HISTORY)
        .when(unread_file_covers(), UNREAD_FILE)
    )


# -- what the output says ------------------------------------------------------------------------
def severity() -> Column:
    """``severity``: did the broker keep its rules? ok, info, explained (evidence says it was
    right to accept the batch; info again where it shows the batch breaks no rule of the data
    either: ``INFO_EXPLANATIONS``) or violation."""
    v = F.col("verdict")
    return (
        F.when(v.isin(*OK_VERDICTS), SEV_OK)
        .when(v.isin(*INFO_VERDICTS) | F.col("explained_by").isin(*INFO_EXPLANATIONS), SEV_INFO)
        .when(F.col("explained_by").isNotNull(), SEV_EXPLAINED)
        .otherwise(SEV_VIOLATION)
    )


def marker_bumps_txn() -> Column:
    """A marker above the epoch of its producer's open transaction: a TV2 commit or abort (4.0+),
    or a TV1 fencing abort."""
    return F.col("is_control") & F.col("txn_open") & (F.col("producer_epoch") > F.col("prev_epoch"))


def explanation_text(config: AuditConfig) -> Column:
    """``explanation``: a sentence per verdict, from the row's own columns.

    The ``ok`` verdicts (nearly every row of a sound log) get a fixed sentence: their epoch and
    sequences are columns of the same row, and a constant costs nothing to build and is stored once
    per Parquet page by dictionary encoding. Every other verdict names its epoch and sequences.
    Under a profile before transactions V2 (4.0), a COMMIT marker above its transaction's epoch
    (``marker_bumps_txn``) says that only a TV2 coordinator writes one (no broker rule breaks: the
    verdict stays).
    """
    def text(name: str) -> Column:
        return F.col(name).cast("string")

    seen = F.concat_ws("", F.lit("epoch "), text("producer_epoch"), F.lit(", sequence "),
                       text("base_sequence"), F.lit(".."), text("last_sequence"))
    # F.concat is null when a part is: a missing fact drops its clause
    expected = F.concat(F.lit("expected sequence "), text("expected_sequence"))
    idle_clause = F.concat(F.lit("idle "), text("idle_ms"), F.lit(" ms since the producer's previous batch"))
    v = F.col("verdict")
    tv2_commit = F.lit(None).cast("string")
    if not config.broker_profile.transactions_v2:
        tv2_commit = F.when(F.col("marker_bumps_txn") & (F.col("control_type") == "COMMIT"), F.lit(
            f"above its transaction's epoch: a transactions V2 commit (Kafka 4.0+), which a coordinator of "
            f"profile {config.profile} never writes (it commits at the data's epoch): check the profile"))
    broken = (  # only these can carry an explained_by
        F.when(v == DUPLICATE, F.concat(F.lit("the same epoch and sequence range as an earlier batch: "),
                                        seen))
        .otherwise(F.concat_ws("; ", F.concat(v, F.lit(": "), seen), expected, idle_clause))
    )
    marker = F.concat_ws(" ", F.coalesce(F.col("control_type"), F.lit("control")), F.lit("marker at epoch"),
                         text("producer_epoch"), tv2_commit)
    because = F.coalesce(F.concat(F.lit(" — explained by "), F.col("explained_by")), F.lit(""))
    return (
        F.when(v == OK, F.lit(VERDICT_MEANING[OK]))
        .when(v == EPOCH_BUMP, F.lit(VERDICT_MEANING[EPOCH_BUMP]))
        .when(v == NON_IDEMPOTENT, F.lit(VERDICT_MEANING[NON_IDEMPOTENT]))
        .when(v == CORRUPT, F.lit(VERDICT_MEANING[CORRUPT]))
        .when(v == CONTROL_MARKER, marker)
        .otherwise(F.concat(broken, because))
    )

