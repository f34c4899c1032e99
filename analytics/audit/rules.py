"""The replay as Spark window functions: every batch gets a verdict, a severity and, where its own
columns and the configuration prove it, an explanation.

One shuffle of the replay's columns: rows are hash-partitioned by their history id (one per log
dir, topic and partition); the partition, producer and duplicate windows cluster on supersets of
that key, so Spark reuses the exchange and only sorts, on integers. The rest of ``batches`` joins
back co-partitioned. Native Column expressions only.

The state before a batch is what the previous visible batches of its producer left: its epoch;
the producer's highest sequence so far in its current epoch run (the sequence mark: a duplicate
or a rewind does not lower it; the run restarts when the epoch changes, -1 after a marker that
changed it; sequences wrap at INT_MAX); whether a transaction is open; the highest coordinator
epoch of its markers. The state a batch leaves (``state_last_sequence``, ``state_last_offset``)
is a follower's: the last batch's. Corrupt batches are not replayed. The rules are those of
``docs/architecture.md`` (labelling rules) and the replay rules §7.3; the broker profile
(``AuditConfig.profile``, replay rules §2.9) decides which explanations a version allows.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analytics.audit.config import INTERNAL_TOPICS, AuditConfig
from analytics.contract import HISTORY_KEY
from analytics.spark.columns import with_log_dir

SEQ_SPACE = 2**31  # sequences run mod 2^31 (DefaultRecordBatch.incrementSequence)
INT_MAX = SEQ_SPACE - 1

OK_VERDICTS = ("OK", "EPOCH_BUMP")
INFO_VERDICTS = ("NON_IDEMPOTENT", "CONTROL_MARKER")

# -- windows (functions: a window spec needs an active session) -------------------------------
# A partition's history is one broker's log: the same topic-partition in two log directories
# (two brokers, two clusters) is replayed apart. log_dir is the folder above the partition folder.
PARTITION_KEY = HISTORY_KEY
# Every (log_dir, topic, partition) history gets a small integer id, ``history``, and every file a
# ``file_id`` (``file_dictionary``): the exchange, the window sorts and the join back key on integers
# instead of comparing path strings row by row.
HISTORY = "history"
ORDER = ("base_offset", "file_position")


# The columns the replay reads (plus topic and file_position, which with the file id identify a row):
# the window sorts carry these only, and the other columns of ``batches`` are joined back by identity.
REPLAY_COLUMNS = (
    "topic", "partition", "file", "file_position", "magic", "crc_valid", "base_offset", "last_offset",
    "record_count", "is_transactional", "is_control", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "last_sequence", "coordinator_epoch",
)
IDENTITY = ("topic", HISTORY, "file_id", "file_position")  # topic first: the joined rows come out sorted for the write
# What classify adds to the batches columns, in the order batch_verdicts has them.
VERDICT_COLUMNS = ("verdict", "severity", "explained_by", "expected_sequence", "prev_base_offset", "idle_ms",
                   "offset_holes", "explanation", "txn_open", "offset_overlap", "state_last_sequence", "state_last_offset",
                   "expired_offset", "conflict_offset")
# Computed before the join back; severity and explanation are derived from these and the wide columns after it.
FACT_COLUMNS = tuple(c for c in VERDICT_COLUMNS if c not in ("severity", "explanation"))


def file_dictionary(batches: DataFrame) -> DataFrame:
    """One row per file of ``batches``: ``file``, the ``history`` id of its (log_dir, topic, partition),
    a ``file_id``, and the file's ``log_dir``, ``topic`` and ``partition``.

    Small (one row per segment file): the distinct (topic, partition, file) of ``batches``, which
    partial aggregation reduces to a few rows per scan task.
    """
    files = with_log_dir(batches.select("topic", "partition", "file").distinct())
    return files.select(
        "file",
        F.dense_rank().over(Window.orderBy(*PARTITION_KEY)).alias(HISTORY),
        F.row_number().over(Window.orderBy("file")).alias("file_id"),
        *PARTITION_KEY,
    )


def history_log_starts(dictionary: DataFrame, log_starts: DataFrame) -> DataFrame:
    """``(history, log_start_offset)``: each history's log start offset from the checkpoint of its own
    log dir (the checkpoint file sits in the log dir). An export without the checkpoint's ``file``
    gives each topic-partition the highest of its log start offsets, whatever the log dir."""
    histories = dictionary.select(HISTORY, *PARTITION_KEY).distinct()
    if "file" in log_starts.columns:
        starts = with_log_dir(log_starts, levels=1)
        key = list(PARTITION_KEY)
    else:
        starts, key = log_starts, ["topic", "partition"]
    starts = starts.groupBy(*key).agg(F.max("log_start_offset").alias("log_start_offset"))
    return histories.join(starts, key).select(HISTORY, "log_start_offset")


def by_partition():
    """The partition's valid batches in offset order (corrupt ones form their own group)."""
    return Window.partitionBy(HISTORY, "crc_valid").orderBy(*ORDER)


def by_producer():
    """A replayed producer's batches in offset order (``state_pid`` is null for the rest)."""
    return Window.partitionBy(HISTORY, "state_pid").orderBy(*ORDER)


def before():
    """The producer's rows before this one."""
    return by_producer().rowsBetween(Window.unboundedPreceding, -1)


def by_range():
    return Window.partitionBy(HISTORY, "state_pid", "producer_epoch", "base_sequence", "last_sequence").orderBy(*ORDER)


# -- named rules -----------------------------------------------------------------------------
def in_sequence(last: Column, nxt: Column) -> Column:
    """ProducerAppendInfo.inSequence: next == last + 1 (computed as a long), or 0 after INT_MAX."""
    return (nxt.cast("long") == last.cast("long") + 1) | ((nxt == 0) & (last == INT_MAX))


def ahead(last: Column, nxt: Column) -> Column:
    """``nxt`` lies beyond ``last + 1`` going forward mod 2^31: a gap, not a rewind."""
    d = seq_distance(last, nxt)
    return (d > 0) & (d < SEQ_SPACE // 2)


def seq_distance(last: Column, nxt: Column) -> Column:
    """Sequences from ``last + 1`` up to ``nxt``, mod 2^31 (in 64 bits: int32 arithmetic overflows at INT_MAX)."""
    return F.pmod(nxt.cast("long") - last.cast("long") - 1, F.lit(SEQ_SPACE))


def has_state() -> Column:
    """Batches that update producer state (hasProducerId, magic 2, not an emptied control batch)."""
    return (
        F.col("crc_valid")
        & (F.col("magic") == 2)
        & (F.col("producer_id") >= 0)
        & ~(F.col("is_control") & (F.col("record_count") == 0))
    )


def is_replayed() -> Column:
    """Batches whose sequences are validated: those with state, outside the internal topics (whose
    appends come from coordinators, not clients)."""
    return has_state() & ~F.col("topic").isin(*INTERNAL_TOPICS)


def _verdict_of_data() -> Column:
    first_seen = F.col("prev_epoch").isNull()
    base = F.col("base_sequence")
    return (
        F.when(F.col("dup_rank") > 1, "DUPLICATE")
        .when(first_seen & (base == 0), "OK")
        .when(first_seen, "FIRST_SEEN_NONZERO")
        .when(F.col("producer_epoch") > F.col("prev_epoch"), F.when(base == 0, "EPOCH_BUMP").otherwise("EPOCH_BUMP_NONZERO"))
        .when(F.col("producer_epoch") < F.col("prev_epoch"), "FENCED_ZOMBIE_WRITE")
        .when(in_sequence(F.col("seq_mark"), base), "OK")
        .when(ahead(F.col("seq_mark"), base), "SEQUENCE_GAP")
        .otherwise("SEQUENCE_REGRESSION")
    )


def _verdict_of_marker() -> Column:
    return (
        F.when(F.col("prev_epoch").isNotNull() & (F.col("producer_epoch") < F.col("prev_epoch")), "MARKER_EPOCH_REGRESSION")
        .when(F.col("coordinator_epoch") < F.col("prev_coordinator_epoch"), "COORDINATOR_EPOCH_REGRESSION")
        .otherwise("CONTROL_MARKER")
    )


def _forgotten_ok(config: AuditConfig) -> Column:
    """Before KIP-360 (2.5) a broker that had forgotten a producer refused its non-zero sequences
    (UnknownProducerId; OutOfOrderSequence in 0.11): what it took from a forgotten producer starts at 0."""
    if config.broker_profile.unknown_pid_nonzero_seq_error is None:
        return F.lit(True)
    return F.col("base_sequence") == 0


def _explanation(config: AuditConfig) -> Column:
    """``explained_by``: the first piece of evidence, from the row's columns and the configuration."""
    restarts = F.lit(False)
    for r in config.broker_restarts:
        if r.offset is not None:  # the restart lies between the producer's previous batch and this one
            hit = (F.col("prev_base_offset") < F.lit(r.offset)) & (F.col("base_offset") >= F.lit(r.offset))
        else:
            hit = (F.col("prev_max_timestamp") < F.lit(r.time_ms)) & (F.col("max_timestamp") >= F.lit(r.time_ms))
        if r.topic is not None:
            hit &= F.col("topic") == r.topic
        if r.partition is not None:
            hit &= F.col("partition") == r.partition
        restarts |= hit
    compacted = F.col("topic").isin(*config.compacted_topics()) if config.compacted_topics() else F.lit(False)
    missing = seq_distance(F.col("seq_mark"), F.col("base_sequence"))
    v = F.col("verdict")
    profile = config.broker_profile
    at_zero = F.col("base_sequence") == 0
    forgotten_ok = _forgotten_ok(config)
    # After an expiry point the broker's state is rebuilt from the batches since: a batch repeating or
    # rewinding sequences written before it (the original copy, or the batch holding the sequence
    # mark, lies before the expiry point) that this rebuilt state takes in sequence (the previous
    # batch's epoch and last sequence: a follower's) got in because of the expiration (§7.3,
    # duplicates after state loss). One the broker would still have refused is not explained.
    base = F.col("base_sequence")
    same_epoch = F.col("producer_epoch") == F.col("prev_epoch")
    taken = (same_epoch & in_sequence(F.col("state_last_seq"), base)) | (
        (F.col("producer_epoch") > F.col("prev_epoch")) & at_zero)
    after_expiry = (v.isin("DUPLICATE", "SEQUENCE_GAP", "SEQUENCE_REGRESSION") & taken
                    & (F.col("conflict_offset") < F.col("expired_offset")))
    partial = (v == "FIRST_SEEN_NONZERO") & (
        (F.col("log_start_offset") > 0) | (F.col("partition_first_offset") > 0) | compacted)
    below_start = F.col("log_start_offset") > 0
    if profile.evicts_below_log_start:
        # Up to 2.3 the broker forgot a producer once the log start passed its last batch: the client
        # then restarted at sequence 0 (same producer id and epoch, replay rules §2.8, §3.2).
        partial |= at_zero & below_start & (F.col("prev_base_offset") < F.col("log_start_offset"))
    if profile.unknown_pid_nonzero_seq_error is not None:
        # ... and the batches after such a restart, in sequence with it, repeat sequences that only
        # batches below the log start hold.
        partial |= (v.isin("SEQUENCE_REGRESSION", "DUPLICATE") & below_start
                    & in_sequence(F.col("state_last_seq"), F.col("base_sequence"))
                    & (F.col("mark_offset") < F.col("log_start_offset")))
    return (
        F.when(v.isin("OK", "EPOCH_BUMP", "NON_IDEMPOTENT", "CONTROL_MARKER", "CORRUPT", "INVALID_TXN_STATE"), None)
        .when(F.coalesce(restarts, F.lit(False)) & forgotten_ok, "state_loss")
        .when((F.col("idle_ms") >= config.expiration_ms) & ~F.col("txn_open") & forgotten_ok, "producer_expiration")
        .when(F.coalesce(after_expiry, F.lit(False)), "producer_expiration")
        .when((v == "SEQUENCE_GAP") & compacted & (missing <= F.col("offset_holes")), "compaction")
        .when(partial, "partial_history")
    )


def classify(batches: DataFrame, config: AuditConfig, log_starts: DataFrame | None = None) -> DataFrame:
    """``batch_verdicts``: the batches columns plus verdict, severity, explained_by, expected_sequence,
    prev_base_offset, idle_ms, offset_holes and explanation; then txn_open (the producer had a
    transaction open before this batch), offset_overlap (offsets shared with earlier batches of the
    partition) and the producer state the batch leaves (state_last_sequence, state_last_offset), so
    that every explanation, integrity check and snapshot comparison reads from the row itself.

    One exchange of the ``REPLAY_COLUMNS`` (hash of the history id) and three sorts: the duplicate
    ranges, the partition order and the producer order. Every window partitions by a superset of the
    exchange key, so none shuffles again; the untracked and corrupt rows ride along in their own
    groups instead of being split off and unioned back (which would scan and shuffle twice). The
    narrow facts then shuffle once more, by (history, file_id), to meet the wide columns hashed the
    same way from the scan, and join on (topic, history, file_id, file_position).
    """
    BY_PARTITION, BY_PRODUCER, BEFORE = by_partition(), by_producer(), before()
    dictionary = file_dictionary(batches)
    files = F.broadcast(dictionary.select("file", HISTORY, "file_id"))  # one broadcast, for both joins
    rows = batches.select(*REPLAY_COLUMNS).join(files, "file").drop("file")
    rows = rows.withColumn("stateful", has_state()).withColumn("tracked", is_replayed())
    rows = rows.withColumn("state_pid", F.when(F.col("stateful"), F.col("producer_id"))).repartition(HISTORY)
    # 0. duplicates: an earlier data batch of the producer with the same epoch and sequence range
    #    and the original copy's base offset (the first of the range: same window, same sort)
    rows = rows.withColumn("dup_rank", F.when(~F.col("is_control"), F.row_number().over(by_range()))) \
        .withColumn("dup_original", F.when(~F.col("is_control"), F.first("base_offset").over(by_range())))
    # 1. per partition: the offsets before each batch that no batch carries (compaction evidence),
    #    up to a constant: base - the sum of the earlier batches' spans (the difference between two
    #    batches counts the holes between them); the offsets it shares with earlier batches (0 in a
    #    sound log); the history's first valid offset. Running frames, so the window streams.
    span = F.col("last_offset") - F.col("base_offset") + 1
    earlier = BY_PARTITION.rowsBetween(Window.unboundedPreceding, -1)
    rows = rows.select(
        "*",
        (F.col("base_offset") - F.coalesce(F.sum(span).over(earlier), F.lit(0))).alias("cum_holes"),
        F.first("base_offset").over(BY_PARTITION.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("partition_first_offset"),
        F.when(F.col("crc_valid"), F.greatest(F.coalesce(F.max("last_offset").over(earlier) - F.col("base_offset") + 1,
                                                         F.lit(0)), F.lit(0))).alias("offset_overlap"),
    )
    # 2. per producer: the state before each batch, in three window levels over the same sort
    data = ~F.col("is_control")
    rows = rows.select(
        "*",
        F.lag("producer_epoch").over(BY_PRODUCER).alias("prev_epoch"),
        F.lag("max_timestamp").over(BY_PRODUCER).alias("prev_max_timestamp"),
        F.lag("base_offset").over(BY_PRODUCER).alias("prev_base_offset"),
        (F.col("cum_holes") - F.lag("cum_holes").over(BY_PRODUCER)).alias("offset_holes"),
        F.max("coordinator_epoch").over(BEFORE).alias("prev_coordinator_epoch"),
        F.last(F.when(data & F.col("is_transactional"), F.col("base_offset")), True).over(BEFORE).alias("last_txn_data"),
        F.last(F.when(F.col("is_control"), F.col("base_offset")), True).over(BEFORE).alias("last_marker"),
        F.last(F.when(data, F.col("last_sequence")), True).over(BEFORE).alias("prev_data_seq"),
    )
    # the last sequence and offset a row leaves (a follower's state): its own (data), -1 (a marker
    # changing the epoch), or unchanged
    epoch_changed = F.col("prev_epoch").isNull() | (F.col("producer_epoch") != F.col("prev_epoch"))
    seq_after = F.when(data, F.col("last_sequence")).when(epoch_changed, F.lit(-1))
    offset_after = F.when(data, F.col("last_offset")).when(epoch_changed, F.lit(-1).cast("long"))
    # The sequence mark: the producer's highest sequence in its current epoch run. Sequences are read
    # on a line that wraps at INT_MAX: each data batch's last sequence steps from the previous one's
    # the shorter way round mod 2^31, and ``seq_wraps`` counts the crossings of INT_MAX (back across
    # it too, for a rewind), so last_sequence + seq_wraps * 2^31 orders the batches of a run.
    running = BY_PRODUCER.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    step = F.pmod(F.col("last_sequence").cast("long") - F.col("prev_data_seq"), F.lit(SEQ_SPACE))
    step = F.when(step > SEQ_SPACE // 2, step - SEQ_SPACE).otherwise(step)
    # (an exact multiple of 2^31: -1, 0 or 1)
    crossing = F.when(data, ((F.col("prev_data_seq") + step - F.col("last_sequence")) / SEQ_SPACE).cast("int"))
    # An expiry point: a batch the producer sent at least producer.id.expiration.ms after its previous
    # one, with no transaction open (a producer with one never expires) and, before 2.5, at sequence 0
    # (a forgotten producer's other sequences were refused): there the broker had forgotten it, and
    # its state since is rebuilt from this batch on. ``expired_offset``: the latest one so far.
    idle = F.col("max_timestamp") - F.col("prev_max_timestamp")
    no_txn = F.col("last_txn_data").isNull() | (F.col("last_marker").isNotNull()
                                                & (F.col("last_txn_data") <= F.col("last_marker")))
    expiry = (F.col("tracked") & (idle >= config.expiration_ms) & no_txn & _forgotten_ok(config))
    rows = rows.select(
        "*",
        F.last(F.when(expiry, F.col("base_offset")), True).over(running).alias("expired_offset"),
        F.last(seq_after, True).over(BEFORE).alias("state_last_seq"),
        F.last(offset_after, True).over(BEFORE).alias("state_last_off"),
        F.sum(epoch_changed.cast("int")).over(running).alias("epoch_run"),
        F.coalesce(F.sum(crossing).over(running), F.lit(0)).alias("seq_wraps"),
    )
    # (and where the mark lies: the last offset of the batch holding it, the latest on a tie)
    mark = F.struct(F.col("epoch_run").alias("run"),
                    (F.col("last_sequence") + F.col("seq_wraps") * SEQ_SPACE).alias("seq"),
                    F.col("last_offset").alias("offset"))
    rows = rows.withColumn("mark", F.max(F.when(data, mark)).over(BEFORE))
    in_run = F.col("mark.run") == F.col("epoch_run")
    rows = rows.withColumn("seq_mark", F.when(in_run, F.pmod(F.col("mark.seq"), F.lit(SEQ_SPACE)).cast("int"))
                           .otherwise(F.lit(-1))) \
        .withColumn("mark_offset", F.when(in_run, F.col("mark.offset"))) \
        .drop("mark")
    rows = rows.withColumn(
        "txn_open",
        F.col("tracked") & F.col("last_txn_data").isNotNull()
        & (F.col("last_marker").isNull() | (F.col("last_txn_data") > F.col("last_marker"))),
    ).withColumn("idle_ms", F.col("max_timestamp") - F.col("prev_max_timestamp"))
    rows = rows.withColumn("state_last_sequence", F.when(F.col("stateful"), F.coalesce(seq_after, F.col("state_last_seq")))) \
        .withColumn("state_last_offset", F.when(F.col("stateful"), F.coalesce(offset_after, F.col("state_last_off"))))
    replayed = F.when(data, _verdict_of_data()).otherwise(_verdict_of_marker())
    replayed = F.when(replayed.isin(*OK_VERDICTS) & data & F.col("txn_open") & ~F.col("is_transactional"),
                      "INVALID_TXN_STATE").otherwise(replayed)
    untracked = (
        F.when(F.col("is_control") & (F.col("magic") == 2), "CONTROL_MARKER")
        .when((F.col("producer_id") < 0) | (F.col("magic") < 2), "NON_IDEMPOTENT")
        .otherwise("OK")
    )
    rows = rows.withColumn(
        "verdict", F.when(~F.col("crc_valid"), "CORRUPT").when(F.col("tracked"), replayed).otherwise(untracked)
    )
    # facts of the replay exist for replayed rows only
    for name in ("prev_base_offset", "idle_ms", "offset_holes", "prev_max_timestamp", "state_last_seq", "seq_mark",
                 "mark_offset", "expired_offset"):
        rows = rows.withColumn(name, F.when(F.col("tracked"), F.col(name)))
    rows = rows.withColumn("partition_first_offset", F.when(F.col("crc_valid"), F.col("partition_first_offset")))
    rows = rows.withColumn(
        "expected_sequence",
        F.when(~F.col("tracked") | ~data, None)
        .when(epoch_changed, F.lit(0))
        .otherwise(F.pmod(F.col("seq_mark").cast("long") + 1, F.lit(SEQ_SPACE)).cast("int")),
    )
    if log_starts is not None:
        rows = rows.join(F.broadcast(history_log_starts(dictionary, log_starts)), HISTORY, "left")
    else:
        rows = rows.withColumn("log_start_offset", F.lit(None).cast("long"))
    for (topic, partition), offset in config.log_start_offsets.items():
        rows = rows.withColumn(
            "log_start_offset",
            F.when((F.col("topic") == topic) & (F.col("partition") == partition), F.lit(offset)).otherwise(F.col("log_start_offset")),
        )
    # the earlier batch an anomaly conflicts with: the original of a copy, the batch holding the
    # sequence mark a gap or a rewind is judged against, the previous batch an epoch is judged against
    v = F.col("verdict")
    rows = rows.withColumn(
        "conflict_offset",
        F.when(v == "DUPLICATE", F.col("dup_original"))
        .when(v.isin("SEQUENCE_GAP", "SEQUENCE_REGRESSION"), F.col("mark_offset"))
        .when(v.isin("EPOCH_BUMP_NONZERO", "FENCED_ZOMBIE_WRITE"), F.col("prev_base_offset")))
    rows = rows.withColumn("explained_by", _explanation(config))
    facts_extra = ()
    if not config.broker_profile.transactions_v2:
        # A marker above the epoch of the open transaction's data: a TV2 commit or abort (4.0+), or a
        # TV1 fencing abort. Its sentence, written after the join from control_type, tells them apart.
        facts_extra = ("marker_bumps_txn",)
        rows = rows.withColumn("marker_bumps_txn", F.col("is_control") & F.col("txn_open")
                               & (F.col("producer_epoch") > F.col("prev_epoch")))
    # The wide columns join back by identity, in many small tasks: both sides hash-partitioned by
    # (history, file_id), which Spark accepts as co-partitioning for the longer join key. Only the
    # narrow facts are shuffled a second time; the sort of the wide rows, the explanations and the
    # write spread evenly over the cores in tasks far smaller than a partition's history, and each
    # output file is sorted by (topic, history, file): row-group statistics let forensic reads skip
    # the other partitions.
    facts = rows.select(*IDENTITY, *FACT_COLUMNS, *facts_extra).repartition(HISTORY, "file_id")
    batches.sparkSession.conf.set("spark.sql.requireAllClusterKeysForCoPartition", "false")
    wide = batches.join(files, "file").repartition(HISTORY, "file_id")
    joined = wide.join(facts, list(IDENTITY))
    joined = joined.withColumn(
        "severity",
        F.when(F.col("verdict").isin(*OK_VERDICTS), "ok")
        .when(F.col("verdict").isin(*INFO_VERDICTS), "info")
        .when(F.col("explained_by").isNotNull(), "explained")
        .otherwise("violation"),
    ).withColumn("explanation", _explanation_text(config))
    return joined.select(*[c for c in batches.columns if c != "log_dir"], *VERDICT_COLUMNS)


def _explanation_text(config: AuditConfig) -> Column:
    """A sentence per verdict, from the row's own columns.

    The ``ok`` verdicts (nearly every row of a sound log) get a fixed sentence: their epoch and
    sequences are columns of the same row, and a constant costs nothing to build and is stored once
    per Parquet page by dictionary encoding. Every other verdict names its epoch and sequences.
    Under a profile before transactions V2 (4.0), a COMMIT marker above its transaction's epoch
    says that only a TV2 coordinator writes one (no broker rule breaks: the verdict stays).
    """
    seen = F.concat_ws("", F.lit("epoch "), F.col("producer_epoch").cast("string"), F.lit(", sequence "),
                       F.col("base_sequence").cast("string"), F.lit(".."), F.col("last_sequence").cast("string"))
    # F.concat is null when a part is: a missing fact drops its clause
    expected = F.concat(F.lit("expected sequence "), F.col("expected_sequence").cast("string"))
    idle = F.concat(F.lit("idle "), F.col("idle_ms").cast("string"), F.lit(" ms since the producer's previous batch"))
    v = F.col("verdict")
    tv2_commit = F.lit(None).cast("string")
    if not config.broker_profile.transactions_v2:
        tv2_commit = F.when(F.col("marker_bumps_txn") & (F.col("control_type") == "COMMIT"), F.lit(
            f"above its transaction's epoch: a transactions V2 commit (Kafka 4.0+), which a coordinator of "
            f"profile {config.profile} never writes (it commits at the data's epoch): check the profile"))
    broken = (  # only these can carry an explained_by
        F.when(v == "DUPLICATE", F.concat(F.lit("the same epoch and sequence range as an earlier batch: "), seen))
        .otherwise(F.concat_ws("; ", F.concat(v, F.lit(": "), seen), expected, idle))
    )
    return (
        F.when(v == "OK", F.lit("in sequence for its producer and epoch"))
        .when(v == "EPOCH_BUMP", F.lit("a higher epoch starting at sequence 0"))
        .when(v == "NON_IDEMPOTENT", F.lit("no producer id or a legacy message: not tracked by the broker"))
        .when(v == "CORRUPT", F.lit("CRC mismatch: the batch is not replayed"))
        .when(v == "CONTROL_MARKER", F.concat_ws(" ", F.coalesce(F.col("control_type"), F.lit("control")), F.lit("marker at epoch"),
                                                 F.col("producer_epoch").cast("string"), tv2_commit))
        .otherwise(F.concat(broken, F.coalesce(F.concat(F.lit(" — explained by "), F.col("explained_by")), F.lit(""))))
    )
