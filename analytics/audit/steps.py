"""The steps of :func:`analytics.audit.rules.classify`, in the order it chains them, and the windows
they share. Each step is a ``DataFrame -> DataFrame`` function (a factory where it takes the
configuration or another frame) whose docstring says which facts it adds; the rules it evaluates
are the named predicates of :mod:`analytics.audit.predicates`.

The window steps reuse one exchange (of ``task``, the task replaying ``rid``, the offset range
of a history, :mod:`analytics.audit.ranges`) and two sorts: the partition order and the producer order, each
within a range; the duplicate ranges sort on their own key. Each select of window functions is one
window level, a pass over the sorted rows buffering each window group (a range's rows at most): the
producer sort has three (:func:`producer_state`, :func:`running_state`, :func:`sequence_mark`), each
reading facts the one before adds. A function added to a step joins its pass; a step of its own
would add one. The plain columns between them are computed after the last level, so the window rows
stay narrow. Where a history spans several ranges, the steps read what the earlier ranges carry
(``carry_*`` columns, :mod:`analytics.audit.carry`); a step finding none computes over the range
alone, which is then the whole history. A history in one range may get the columns of the window
steps (:func:`duplicate_ranges` to :func:`sequence_mark`) from one window function of segaudit's
instead (``java/ReplayWindow.java``, :func:`analytics.audit.rules._in_window_function`): a fact
added to a window step is added there too.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from analytics.audit.carry import mark_of
from analytics.audit.config import AuditConfig
from analytics.audit.predicates import (
    conflict_offset, epoch_changed, expected_sequence, expiry_point, explained_by, explanation_text,
    has_state, idle, is_data, is_replayed, marker_bumps_txn, offset_left, sequence_left, severity,
    transaction_open, verdict, wrap_crossing,
)
from analytics.audit.ranges import HISTORY, ORDER, RANGE, TASK, range_of
from analytics.contract.vocabulary import HISTORY_KEY, NAME_KEY, SEQ_SPACE, TOPIC_ID
from analytics.spark.columns import with_log_dir, with_topic_id

Step = Callable[[DataFrame], DataFrame]

# A partition's history is one broker's log of one incarnation of a topic: the same topic-partition in
# two log directories (two brokers, two clusters), or a topic deleted and created again under its name,
# is replayed apart. log_dir is the folder above the partition folder; topic_id the folder's topic id.
# Its id ``history`` and the ids of its offset ranges, ``rid``: :mod:`analytics.audit.ranges`.
PARTITION_KEY = HISTORY_KEY

# The columns the replay reads (plus topic and file_position, which with the file id identify a row):
# the window sorts carry these only, and the other columns of ``batches`` are joined back by identity.
REPLAY_COLUMNS = (
    "topic", "partition", "file", "file_position", "magic", "crc_valid", "base_offset", "last_offset",
    "record_count", "is_transactional", "is_control", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "last_sequence", "coordinator_epoch",
)
# topic first: the joined rows come out sorted for the write
IDENTITY = ("topic", HISTORY, "file_id", "file_position")
# A row of the replay, without its topic (the history has one).
ROW_KEY = (HISTORY, "file_id", "file_position")
# What classify adds to the batches columns, in the order batch_verdicts has them.
VERDICT_COLUMNS = ("verdict", "severity", "explained_by", "expected_sequence", "prev_base_offset", "idle_ms",
                   "offset_holes", "explanation", "txn_open", "offset_overlap", "state_last_sequence",
                   "state_last_offset", "expired_offset", "conflict_offset")
# Computed before the join back; severity and explanation are derived from these and the wide columns
# after it.
FACT_COLUMNS = tuple(c for c in VERDICT_COLUMNS if c not in ("severity", "explanation"))
# Facts only the sentences read, carried across the join back where a step added them (:func:`explanations`).
SENTENCE_FACTS = ("marker_bumps_txn",)
# Facts of the replay, which exist for replayed rows only.
REPLAY_FACTS = ("prev_base_offset", "idle_ms", "offset_holes", "prev_max_timestamp", "state_last_seq",
                "seq_mark", "mark_offset", "expired_offset")


# -- the log start offset of each history ------------------------------------------------------
def history_log_starts(dictionary: DataFrame, log_starts: DataFrame, unread: DataFrame | None = None) -> DataFrame:
    """``(history, log_start_offset, unread_files)`` of every history (:func:`log_starts_of`);
    ``unread``: ``(log_dir, topic, partition, unread_files)`` of the partitions with segment files the
    export could not read (None: there are none)."""
    histories = dictionary.select(HISTORY, *PARTITION_KEY).distinct()
    starts = log_starts_of(histories, log_starts).select(HISTORY, "log_start_offset")
    if unread is None:
        return starts.withColumn("unread_files", F.lit(0))
    flags = histories.join(unread, on=list(NAME_KEY)).select(HISTORY, "unread_files")
    return (starts.join(flags, on=HISTORY, how="full")
            .withColumn("unread_files", F.coalesce("unread_files", F.lit(0))))


def log_starts_of(keys: DataFrame, log_starts: DataFrame) -> DataFrame:
    """``keys`` (distinct rows holding the partition key) with each one's ``log_start_offset``, from
    the checkpoint of its own log dir (the checkpoint file sits in the log dir); keys without one are
    left out. An export without the checkpoint's ``file`` gives each topic-partition the highest of
    its log start offsets, whatever the log dir. The checkpoint names its partitions by name: rows
    that carry the topic id of the live folder the entry names (:func:`columns.with_live_topic_id`)
    go to that incarnation alone, else every incarnation of the name in the log dir takes the entry."""
    if "file" in log_starts.columns:
        starts = with_log_dir(log_starts, levels=1)
        key = [*NAME_KEY, *([TOPIC_ID] if TOPIC_ID in log_starts.columns else [])]
    else:
        starts, key = log_starts, ["topic", "partition"]
    starts = starts.groupBy(*key).agg(F.max("log_start_offset").alias("log_start_offset"))
    return keys.join(starts, on=key, how="inner")


# -- windows (functions: a window spec needs an active session) -----------------------------------
def by_partition() -> WindowSpec:
    """The range's valid batches in offset order (corrupt ones form their own group)."""
    return Window.partitionBy(TASK, RANGE, "crc_valid").orderBy(*ORDER)


def by_producer() -> WindowSpec:
    """A replayed producer's batches in the range, in offset order (``state_pid`` is null for the rest)."""
    return Window.partitionBy(TASK, RANGE, "state_pid").orderBy(*ORDER)


def before() -> WindowSpec:
    """The producer's rows before this one."""
    return by_producer().rowsBetween(Window.unboundedPreceding, -1)


def running() -> WindowSpec:
    """The producer's rows up to and including this one."""
    return by_producer().rowsBetween(Window.unboundedPreceding, Window.currentRow)


def by_range(key: str) -> WindowSpec:
    """A producer's data batches with the same epoch and sequence range, in offset order: in the
    whole history (``key``: ``history``), or in the range when that is the whole history (``rid``).
    In a range, the window partitions by ``task`` first, as the partition and producer windows do, so
    all three cluster on the one exchange of ``task`` (partitioned by ``rid`` first, each window
    would shuffle the rows again)."""
    keys = (TASK, RANGE) if key == RANGE else (key,)
    return (Window.partitionBy(*keys, "state_pid", "producer_epoch", "base_sequence", "last_sequence")
            .orderBy(*ORDER))


# -- the steps, in the order classify chains them -------------------------------------------------
def replay_columns(files: DataFrame, every_column: bool = False, cut: bool = True) -> Step:
    """The narrow rows the windows sort: ``REPLAY_COLUMNS`` with the ``history`` and ``file_id`` of
    their file (``files``: the broadcast dictionary) in place of its path, and their range ``rid``;
    ``stateful`` (the row updates producer state), ``tracked`` (its sequences are validated) and
    ``state_pid`` (the producer id of a stateful row, null for the rest). ``every_column``: every
    column of the batches instead, the file's path too, for a replay that carries them all through
    and joins nothing back (the Java pass: one sort of the wide rows, no window operator). ``cut``:
    some history is cut into ranges; else a row's range is its file's first (and only) one, and no
    row looks for the cuts inside its file (an array filter, evaluated without generated code)."""
    def step(batches: DataFrame) -> DataFrame:
        if every_column:  # carried through the replay: nothing joined back
            rows = batches.join(files, on="file", how="inner")
        else:
            rows = batches.select(*REPLAY_COLUMNS).join(files, on="file", how="inner").drop("file")
        return (rows.withColumn(RANGE, range_of() if cut else F.col("rid0")).drop("rid0", "bounds")
                .withColumn("stateful", has_state()).withColumn("tracked", is_replayed())
                .withColumn("state_pid", F.when(F.col("stateful"), F.col("producer_id"))))
    return step


def duplicate_ranges(key: str) -> Step:
    """``dup_rank``: a data batch's rank among the producer's batches with its epoch and sequence
    range (above 1: a copy of an earlier one); ``dup_original``: the base offset of the first of
    them, the original (same window, same sort). Null for markers. ``key``: :func:`by_range`."""
    def step(rows: DataFrame) -> DataFrame:
        data, window = is_data(), by_range(key)
        return (rows.withColumn("dup_rank", F.when(data, F.row_number().over(window)))
                .withColumn("dup_original", F.when(data, F.first("base_offset").over(window))))
    return step


def copies(rows: DataFrame, earlier: DataFrame | None = None) -> DataFrame:
    """The copies among ``rows`` (:func:`replay_columns`), over whole histories: ``ROW_KEY``,
    ``dup_rank`` (above 1) and ``dup_original`` of each data batch with the epoch and sequence range
    of an earlier batch of its producer (:func:`duplicate_ranges`); few in any log. Their own
    exchange, of the seven columns the check reads: the other rows leave it with no copy.
    ``earlier``: the batches a previous audit replayed before ``rows`` (:func:`earlier_rows`),
    whose keys the check reads where ``rows`` have them."""
    key = ("state_pid", "producer_epoch", "base_sequence", "last_sequence", "base_offset", "is_control")
    candidates = rows.where(F.col("state_pid").isNotNull() & is_data()).select(*ROW_KEY, *key)
    if earlier is not None:
        ranged = [HISTORY, "state_pid", "producer_epoch", "base_sequence", "last_sequence"]
        before = earlier.where(F.col("state_pid").isNotNull() & is_data()).select(*ROW_KEY, *key) \
            .join(candidates.select(*ranged).distinct(), on=ranged, how="left_semi")
        candidates = candidates.withColumn("earlier", F.lit(False)).unionByName(
            before.withColumn("earlier", F.lit(True)))
    found = candidates.transform(duplicate_ranges(HISTORY)).where(F.col("dup_rank") > 1)
    if earlier is not None:
        found = found.where(~F.col("earlier"))
    return found.select(*ROW_KEY, "dup_rank", "dup_original")


def earlier_rows(verdicts: DataFrame, histories: DataFrame) -> DataFrame:
    """A previous audit's rows (``batch_verdicts``) of ``histories`` (``(history, log_dir, topic,
    partition)``) as :func:`copies` reads them: ``file_id`` -1, no file of the run has it."""
    rows = with_log_dir(with_topic_id(verdicts, None).select(*REPLAY_COLUMNS, TOPIC_ID)).join(
        F.broadcast(histories), on=list(HISTORY_KEY))
    return rows.select(HISTORY, F.lit(-1).cast("int").alias("file_id"), "file_position",
                       F.when(has_state(), F.col("producer_id")).alias("state_pid"),
                       "producer_epoch", "base_sequence", "last_sequence", "base_offset", "is_control")


def partition_facts(rows: DataFrame) -> DataFrame:
    """Per partition, in offset order: ``cum_holes``, the offsets before each batch that no batch
    carries (compaction evidence) up to a constant: base - the sum of the earlier batches' spans
    (the difference between two batches counts the holes between them); ``partition_first_offset``,
    the history's first valid offset; ``offset_overlap``, the offsets a valid batch shares with
    earlier ones (0 in a sound log). Running frames, so the window streams; the earlier ranges'
    spans, highest last offset and first offset come from :func:`~analytics.audit.carry.partition_carry`."""
    carried = "carry_span" in rows.columns
    span = F.col("last_offset") - F.col("base_offset") + 1
    earlier = by_partition().rowsBetween(Window.unboundedPreceding, -1)
    spans = F.coalesce(F.sum(span).over(earlier), F.lit(0))
    top = F.max("last_offset").over(earlier)
    first = F.first("base_offset").over(by_partition().rowsBetween(Window.unboundedPreceding, Window.currentRow))
    if carried:  # null where nothing is carried (a history new since a previous audit)
        spans, top = spans + F.coalesce(F.col("carry_span"), F.lit(0)), F.greatest(top, F.col("carry_top"))
        first = F.coalesce(F.col("carry_first"), first)
    overlap = F.coalesce(top - F.col("base_offset") + 1, F.lit(0))
    rows = rows.select(
        "*",
        (F.col("base_offset") - spans).alias("cum_holes"),
        first.alias("partition_first_offset"),
        F.when(F.col("crc_valid"), F.greatest(overlap, F.lit(0))).alias("offset_overlap"),
    )
    return rows.drop("carry_span", "carry_top", "carry_first") if carried else rows


def producer_state(rows: DataFrame) -> DataFrame:
    """The producer's previous batch: ``prev_epoch``, ``prev_max_timestamp``, ``prev_base_offset``,
    ``offset_holes`` (the partition's holes between the two); and over all its earlier batches:
    ``prev_coordinator_epoch`` (the highest of its markers), ``last_txn_data`` and ``last_marker``
    (the base offsets of its latest transactional data batch and marker), ``prev_data_seq`` (the
    last sequence of its latest data batch)."""
    data, previous, earlier = is_data(), by_producer(), before()
    carried = "carry_last" in rows.columns

    def prev(name: str, carry: str) -> Column:  # a stateful row's columns are never null: lag is null at the first
        lag = F.lag(name).over(previous)
        return F.coalesce(lag, F.col("carry_last")[carry]) if carried else lag

    def last(value: Column, carry: str) -> Column:
        local = F.last(value, True).over(earlier)
        return F.coalesce(local, F.col(carry)) if carried else local

    coordinator = F.max("coordinator_epoch").over(earlier)
    rows = rows.select(
        "*",
        prev("producer_epoch", "epoch").alias("prev_epoch"),
        prev("max_timestamp", "max_timestamp").alias("prev_max_timestamp"),
        prev("base_offset", "base_offset").alias("prev_base_offset"),
        (F.col("cum_holes") - prev("cum_holes", "cum_holes")).alias("offset_holes"),
        (F.greatest(coordinator, F.col("carry_coordinator_epoch")) if carried else coordinator)
        .alias("prev_coordinator_epoch"),
        last(F.when(data & F.col("is_transactional"), F.col("base_offset")), "carry_txn_data").alias("last_txn_data"),
        last(F.when(F.col("is_control"), F.col("base_offset")), "carry_marker").alias("last_marker"),
        last(F.when(data, F.col("last_sequence")), "carry_data_seq").alias("prev_data_seq"),
    )
    if carried:
        rows = rows.drop("carry_last", "carry_coordinator_epoch", "carry_txn_data", "carry_marker", "carry_data_seq")
    return rows


def running_state(config: AuditConfig) -> Step:
    """Running over the producer's batches: ``expired_offset``, the base offset of its latest expiry
    point at or before the row (:func:`~analytics.audit.predicates.expiry_point`); ``state_last_seq``
    and ``state_last_off``, the last sequence and offset its earlier batches left (a follower's);
    ``epoch_run``, the count of its epoch runs so far; ``seq_wraps``, the crossings of INT_MAX so far
    (:func:`~analytics.audit.predicates.wrap_crossing`)."""
    def step(rows: DataFrame) -> DataFrame:
        return rows.select(
            "*",
            F.last(F.when(expiry_point(config), F.col("base_offset")), True).over(running())
            .alias("expired_offset"),
            F.last(sequence_left(), True).over(before()).alias("state_last_seq"),
            F.last(offset_left(), True).over(before()).alias("state_last_off"),
            F.sum(epoch_changed().cast("int")).over(running()).alias("epoch_run"),
            F.coalesce(F.sum(wrap_crossing()).over(running()), F.lit(0)).alias("seq_wraps"),
        )
    return step


def sequence_mark(rows: DataFrame) -> DataFrame:
    """``mark``: the max, over the producer's earlier data batches, of (epoch run,
    ``last_sequence + seq_wraps * 2^31``, last offset) (:func:`~analytics.audit.carry.mark_of`)."""
    mark = mark_of(F.col("epoch_run"), F.col("last_sequence") + F.col("seq_wraps") * SEQ_SPACE, F.col("last_offset"))
    return rows.withColumn("mark", F.max(F.when(is_data(), mark)).over(before()))


def marks(rows: DataFrame) -> DataFrame:
    """``seq_mark``: the producer's highest sequence in its current epoch run before the batch (-1
    when the run has no data batch yet): the ``mark``'s sequence mod 2^31 when its run is the
    batch's; ``mark_offset``: the last offset of the batch holding it (the latest on a tie)."""
    in_run = F.col("mark.run") == F.col("epoch_run")
    seq = F.pmod(F.col("mark.seq"), F.lit(SEQ_SPACE)).cast("int")
    return (rows.withColumn("seq_mark", F.when(in_run, seq).otherwise(F.lit(-1)))
            .withColumn("mark_offset", F.when(in_run, F.col("mark.offset")))
            .drop("mark"))


def replay_facts(rows: DataFrame) -> DataFrame:
    """``txn_open`` (a replayed batch's producer had a transaction open), ``idle_ms`` (since its
    previous batch), ``state_last_sequence`` and ``state_last_offset`` (the state a stateful batch
    leaves: its own, or its earlier batches' when it changes nothing); then the facts of the replay
    (``REPLAY_FACTS``) nulled on the rows it does not replay, and ``partition_first_offset`` on
    corrupt ones."""
    stateful, tracked = F.col("stateful"), F.col("tracked")
    rows = rows.withColumns({
        "txn_open": tracked & transaction_open(),
        "idle_ms": idle(),
        "state_last_sequence": F.when(stateful, F.coalesce(sequence_left(), F.col("state_last_seq"))),
        "state_last_offset": F.when(stateful, F.coalesce(offset_left(), F.col("state_last_off"))),
    })
    return rows.withColumns({name: F.when(tracked, F.col(name)) for name in REPLAY_FACTS}).withColumn(
        "partition_first_offset", F.when(F.col("crc_valid"), F.col("partition_first_offset")))


def verdicts(rows: DataFrame) -> DataFrame:
    """``verdict`` and ``expected_sequence`` (:func:`~analytics.audit.predicates.verdict`,
    :func:`~analytics.audit.predicates.expected_sequence`)."""
    return rows.withColumn("verdict", verdict()).withColumn("expected_sequence", expected_sequence())


def log_start_offsets(config: AuditConfig, starts: DataFrame | None) -> Step:
    """``log_start_offset``: the history's (``starts``, from :func:`history_log_starts`, broadcast),
    or the configured one of its topic-partition, which wins; null when neither knows it. And
    ``unread_files``, the history's segment files the export could not read."""
    def step(rows: DataFrame) -> DataFrame:
        if starts is None:
            rows = rows.withColumns({"log_start_offset": F.lit(None).cast("long"), "unread_files": F.lit(0)})
        else:
            rows = rows.join(F.broadcast(starts), on=HISTORY, how="left")
        for (topic, partition), offset in config.log_start_offsets.items():
            configured = (F.col("topic") == topic) & (F.col("partition") == partition)
            rows = rows.withColumn("log_start_offset",
                                   F.when(configured, F.lit(offset)).otherwise(F.col("log_start_offset")))
        return rows
    return step


def records_differ(reused: DataFrame | None) -> Step:
    """``records_differ``: true where the batch's records differ from those of every earlier batch with
    its epoch and sequence range (``reused``: those batches by :data:`ROW_KEY`, few, broadcast;
    :mod:`analytics.audit.sequence_reuse`), null elsewhere and without ``reused``."""
    def step(rows: DataFrame) -> DataFrame:
        if reused is None:
            return rows.withColumn("records_differ", F.lit(None).cast("boolean"))
        return rows.join(F.broadcast(reused), on=list(ROW_KEY), how="left")
    return step


def conflicts(rows: DataFrame) -> DataFrame:
    """``conflict_offset`` (:func:`~analytics.audit.predicates.conflict_offset`)."""
    return rows.withColumn("conflict_offset", conflict_offset())


def explanations(config: AuditConfig) -> Step:
    """``explained_by`` (:func:`~analytics.audit.predicates.explained_by`); under a profile before
    transactions V2, ``marker_bumps_txn`` (:func:`~analytics.audit.predicates.marker_bumps_txn`) for
    the sentence of a COMMIT marker."""
    def step(rows: DataFrame) -> DataFrame:
        rows = rows.withColumn("explained_by", explained_by(config))
        if config.broker_profile.transactions_v2:
            return rows
        return rows.withColumn("marker_bumps_txn", marker_bumps_txn())
    return step


def join_back(batches: DataFrame, files: DataFrame) -> Step:
    """The wide columns of ``batches`` beside the narrow facts, joined on the identity (topic,
    history, file_id, file_position).

    In many small tasks: both sides hash-partitioned by (history, file_id), which Spark accepts as
    co-partitioning for the longer join key when ``spark.sql.requireAllClusterKeysForCoPartition``
    is false (``analytics.spark.session.CO_PARTITION_ON_KEY_PREFIX``; under Spark's default it
    hashes both on the whole key instead). Only the narrow facts are shuffled a second time; the
    sort of the wide rows, the sentences and the write spread evenly over the cores in tasks far
    smaller than a partition's history, and each output file is sorted by (topic, history, file):
    row-group statistics let forensic reads skip the other partitions.
    """
    def step(facts: DataFrame) -> DataFrame:
        carried = (*IDENTITY, *FACT_COLUMNS, *(c for c in SENTENCE_FACTS if c in facts.columns))
        narrow = facts.select(*carried).repartition(HISTORY, "file_id")
        wide = batches.join(files, on="file", how="inner").repartition(HISTORY, "file_id")
        return wide.join(narrow, on=list(IDENTITY), how="inner")
    return step


def severity_and_text(config: AuditConfig) -> Step:
    """``severity`` and ``explanation`` (:func:`~analytics.audit.predicates.severity`,
    :func:`~analytics.audit.predicates.explanation_text`)."""
    def step(rows: DataFrame) -> DataFrame:
        return rows.withColumn("severity", severity()).withColumn("explanation", explanation_text(config))
    return step
