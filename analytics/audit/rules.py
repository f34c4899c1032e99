"""The replay as Spark window functions: every batch gets a verdict, a severity and, where its own
columns and the configuration prove it, an explanation.

:func:`classify` is a chain of named steps (:mod:`analytics.audit.steps`), each a ``DataFrame ->
DataFrame`` function whose docstring says which facts it adds. The broker's rules the steps
evaluate are named Column predicates (:mod:`analytics.audit.predicates`), each tested alone.

One shuffle of the replay's columns: rows are partitioned by their offset range (one per history,
a log dir's topic and partition, unless the history is longer than ``AuditConfig.range_batches``);
the partition and producer windows cluster on supersets of that key, so Spark reuses the exchange
and only sorts, on integers, and no task holds more than a range. A history in one range may instead be
replayed by one window function of segaudit's over its rows in offset order (``java/ReplayWindow.java``,
on Spark's public API), which adds the columns the window steps add, the same values
(``tests/test_replay_pass.py``). The rest of ``batches`` joins back co-partitioned. Native Column
expressions otherwise.

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

import json
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.audit import carry, ranges, state, steps
from analytics.audit.config import AuditConfig
from analytics.audit.predicates import expiry_candidate
from analytics.audit.ranges import HISTORY, RANGE, TASK
from analytics.contract.vocabulary import HISTORY_KEY
from analytics.audit.steps import VERDICT_COLUMNS
from analytics.spark import javacode
from analytics.spark.columns import with_topic_id
from analytics.spark.session import default_parallelism, small_queries

from analytics.tuning import BROADCAST_ROWS, DEFAULT_RANGE_BATCHES, HOLD_BATCHES, MIN_TASK_BATCHES

# The column :func:`_in_window_function` hands the replay the expiry point's row-local part in.
EXPIRY_CANDIDATE = "expiry_candidate"
# segaudit's replay as a window function (``java/ReplayWindow.java``), as the session knows it, and
# the column of its result at each row.
REPLAY_FUNCTION = "segaudit_replay"
_REPLAYED = "_replayed"
# The same replay's state at each range's end (``ReplayWindow.Left``), its column, and the column
# numbering a range's rows (the state is taken from its first).
LEFT_FUNCTION = "segaudit_replay_left"
_LEFT = "_left"
_FIRST = "_first"


@dataclass(frozen=True)
class Prior:
    """What a previous audit left for the histories whose new batches a run replays
    (:mod:`analytics.audit.state`): its ``producer_state`` and ``partition_state`` rows, and
    ``earlier``, its verdict rows of those histories, which the duplicate check reads when
    ``look_back`` (some new batch may repeat one of them); ``rows``, when known, at most how many rows
    the two state tables hold (their files' footers say): the carry tables taken from them have no
    more, so they are broadcast without a count."""
    producer_state: DataFrame
    partition_state: DataFrame
    earlier: DataFrame
    look_back: bool = True
    rows: int | None = None


@dataclass(frozen=True)
class Replay:
    """:func:`replay`'s tables: ``batch_verdicts`` and the state the replayed histories leave."""
    verdicts: DataFrame
    producer_state: DataFrame
    partition_state: DataFrame
    file_state: DataFrame


def classify(batches: DataFrame, config: AuditConfig, log_starts: DataFrame | None = None,
             held: list | None = None) -> DataFrame:
    """``batch_verdicts`` of ``batches``: :func:`replay`'s verdicts."""
    return replay(batches, config, log_starts, held).verdicts


def replay(batches: DataFrame, config: AuditConfig, log_starts: DataFrame | None = None,
           held: list | None = None, prior: Prior | None = None, unread: DataFrame | None = None,
           window_function: bool | None = None, reused: DataFrame | None = None) -> Replay:
    """``batch_verdicts``: the batches columns plus verdict, severity, explained_by, expected_sequence,
    prev_base_offset, idle_ms, offset_holes and explanation; then txn_open (the producer had a
    transaction open before this batch), offset_overlap (offsets shared with earlier batches of the
    partition) and the producer state the batch leaves (state_last_sequence, state_last_offset), so
    that every explanation, integrity check and snapshot comparison reads from the row itself.

    One exchange of the ``REPLAY_COLUMNS`` by range (:mod:`analytics.audit.ranges`) and two sorts
    within each range: the partition order and the producer order. When every history is one range
    (up to ``config.range_batches`` batches; unset, ``DEFAULT_RANGE_BATCHES``: the audit's plan sets
    it), the exchange is a hash of the task replaying the range, and the duplicate ranges partition by
    it too, so nothing else shuffles: :func:`_in_one_range`; or, with ``window_function`` (None:
    when the session has segaudit's Java, :mod:`analytics.spark.javacode`), the same exchange and one
    window operator whose function, on Spark's public API, replays each range in offset order:
    :func:`_in_window_function`. Longer
    histories are cut into ranges replayed side by side with the state the earlier ranges carry:
    :func:`_in_ranges`. The untracked and corrupt rows ride along in their own groups instead of
    being split off and unioned back (which would scan and shuffle twice). The narrow facts then
    shuffle once more, by (history, file_id), to meet the wide columns hashed the same way from the
    scan (:func:`analytics.audit.steps.join_back`).

    The state the histories leave (``Replay.producer_state`` and ``partition_state``,
    :mod:`analytics.audit.state`) is aggregated from the same replayed rows. With ``prior``, the
    batches are those after what a previous audit replayed of their histories, and its state is
    carried into them as a range before their first (the histories are then cut into ranges even
    when short): their verdicts are the ones a replay of the whole histories gives them.
    ``unread``: the segment files the export could not read, per partition (``unread_files``, the
    evidence of the ``unread_file`` explanation); None when it read every one. ``reused``: the batches
    whose records differ from every earlier batch with their epoch and sequence range (``file``,
    ``file_position``: :func:`analytics.audit.sequence_reuse.records_differ`, the evidence of the
    ``sequence_reuse`` explanation); None: none.

    The result reads frames replay persisted: they are added to ``held``, for the caller to
    ``unpersist`` once the result is written (without ``held``, cut histories stay cached for the
    session's life). With ``held``, the replayed rows are read once for both: held from
    ``HOLD_BATCHES`` batches on, checkpointed below.

    The session's settings are the caller's: classify reads none and changes none. Under
    ``spark.sql.requireAllClusterKeysForCoPartition=false`` (sessions of
    :func:`analytics.spark.session.get_spark`) the join back keeps the (history, file_id) hashing;
    under Spark's default the planner hashes both sides on the whole identity instead, with the same
    verdicts and as many shuffles, but every output file then spans every partition of its topic
    and the join back costs more (200k batches: classify about 15% slower).
    """
    batches = with_topic_id(batches, None)  # batches without their folders' ids: one incarnation per name
    size = config.range_batches or DEFAULT_RANGE_BATCHES  # unset: the audit's plan sizes it, classify alone does not
    # numbered files, the cut, and in the same pass the state each file leaves: small, held
    dictionary = ranges.file_dictionary(batches, size, state.per_file())
    plan = ranges.range_plan(dictionary)
    # one broadcast, for both joins
    files = F.broadcast(dictionary.select("file", HISTORY, "file_id", "rid0", "bounds"))
    # a row per history, broadcast to the replay and the state: taken now, each one job, so that the
    # verdicts' write does not wait for them stage by stage (with log starts: 2 s of a 1M-batch audit)
    with small_queries(batches.sparkSession):
        histories = dictionary.select(HISTORY, *HISTORY_KEY).distinct().localCheckpoint()
        starts = (None if log_starts is None
                  else steps.history_log_starts(dictionary, log_starts, unread).localCheckpoint())
    one_range = (prior is None and not plan.split) or plan.ranges == 0
    in_function = one_range and (
        javacode.load(batches.sparkSession) if window_function is None else window_function)
    rows = batches.transform(steps.replay_columns(files, every_column=in_function, cut=plan.split))
    producers = None  # the state the producers leave: aggregated from the replayed rows, unless the function gives it
    if in_function:
        replayed, producers = _in_window_function(rows, plan, size, config)
    elif one_range:
        replayed = _in_one_range(rows, plan, size, config)
    elif not plan.split:
        replayed = _after_prior(rows, config, _prior_ranges(prior, histories))
    else:
        replayed = _in_ranges(rows, plan, size, config, [] if held is None else held,
                              None if prior is None else _prior_ranges(prior, histories))
    if held is not None and producers is None:  # read twice: for the verdicts and for the state
        if plan.batches >= HOLD_BATCHES:
            replayed = replayed.persist()
            held.append(replayed)
        else:  # materialized now, in a few tasks: cheaper than holding the plan or replaying again
            replayed = replayed.localCheckpoint()
    facts = (
        replayed.transform(steps.marks)
        .transform(steps.replay_facts)
        .transform(steps.verdicts)
        .transform(steps.log_start_offsets(config, starts))
        .transform(steps.conflicts)
        .transform(steps.records_differ(None if reused is None else reused.join(
            files.select("file", HISTORY, "file_id"), on="file").drop("file")))
        .transform(steps.explanations(config))
    )
    if not in_function:
        facts = facts.transform(steps.join_back(batches, files.drop("rid0", "bounds")))
    verdicts = (
        facts.transform(steps.severity_and_text(config))
        .select(*[c for c in batches.columns if c != "log_dir"], *VERDICT_COLUMNS)
    )
    producers, partitions, files_state = state.left_by(
        replayed, histories, dictionary.select("file", HISTORY, *state.per_file()), starts, producers)
    return Replay(verdicts, producers, partitions, files_state)


def _prior_ranges(prior: Prior, histories: DataFrame) -> tuple:
    """The prior's state as ranges before the histories' first, and its earlier rows keyed by history."""
    spans, producers, running = state.prior_ranges(prior.producer_state, prior.partition_state, histories)
    return (spans, producers, running, steps.earlier_rows(prior.earlier, histories) if prior.look_back else None,
            prior.rows)


def _in_one_range(rows: DataFrame, plan: ranges.RangePlan, size: int, config: AuditConfig) -> DataFrame:
    """Every history in one range: one hash exchange of ``task`` (:func:`_tasks`), which every window
    reuses."""
    tasks = _tasks(rows.sparkSession, plan, size)
    return (
        rows.withColumn(TASK, ranges.task_of(plan, tasks)).repartition(tasks, TASK)
        .transform(steps.duplicate_ranges(RANGE))
        .transform(steps.partition_facts)
        .transform(steps.producer_state)
        .transform(steps.running_state(config))
        .transform(steps.sequence_mark)
    )


def _in_window_function(rows: DataFrame, plan: ranges.RangePlan, size: int,
                        config: AuditConfig) -> tuple[DataFrame, DataFrame]:
    """The facts of :func:`_in_one_range` from one window operator over the same exchange of ``task``:
    segaudit's replay as an aggregate function (``java/ReplayWindow.java``, an ``Aggregator`` on
    Spark's public API) evaluated over each range's rows in offset order, from the first to the
    current, its buffer the range's state and its result at each row the columns the window steps
    add. One sort of each task's rows, topic first, so that the write partitioned by topic sorts
    nothing; the wide rows ride through the operator. The expiry point's row-local part comes in as
    a column (:func:`~analytics.audit.predicates.expiry_candidate`).

    Then the state the producers leave (:func:`~analytics.audit.carry.producer_and_running_ranges`
    per history, its schema Spark's), from the same replay of the range's narrow columns alone,
    through its last row (``ReplayWindow.Left``): no aggregate of the replayed rows, whose structs
    Spark would sort every row for, and no wide row held for it."""
    from pyspark.sql import Window
    from pyspark.sql.types import StructType

    spark, tasks = rows.sparkSession, _tasks(rows.sparkSession, plan, size)
    if not javacode.load(spark):  # the caller asked for it where the session cannot have it
        raise RuntimeError(f"the window function needs segaudit's Java: {'; '.join(javacode.why_not)}")
    ranged = (rows.withColumn(TASK, ranges.task_of(plan, tasks)).repartition(tasks, TASK)
              .withColumn(EXPIRY_CANDIDATE, expiry_candidate(config)))
    jvm, java = spark._jvm, _replay_window(spark)
    inputs = list(java.INPUT)
    typed = jvm.org.apache.spark.sql.types.DataType.fromJson(StructType([ranged.schema[c] for c in inputs]).json())
    functions = spark._jsparkSession.udf()
    functions.register(REPLAY_FUNCTION, java.function(typed, config.expiration_ms))
    added = StructType.fromJson(json.loads(java.added().json()))
    by_range = Window.partitionBy("topic", TASK, RANGE).orderBy(*ranges.ORDER, "file_id")
    replayed = (
        ranged.withColumn(_REPLAYED, F.call_function(REPLAY_FUNCTION, *inputs).over(
            by_range.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
        .select(*[c for c in ranged.columns if c != EXPIRY_CANDIDATE],
                *[F.col(_REPLAYED)[f.name].alias(f.name) for f in added.fields])
    )
    state = carry.producer_and_running_ranges(replayed, by=(HISTORY,)).schema
    element = StructType([f for f in state.fields if f.name != HISTORY])
    functions.register(LEFT_FUNCTION, java.left(
        typed, config.expiration_ms, jvm.org.apache.spark.sql.types.DataType.fromJson(element.json())))
    producers = (
        ranged.select("topic", TASK, RANGE, HISTORY, *ranges.ORDER, "file_id", *inputs)
        .withColumn(_LEFT, F.call_function(LEFT_FUNCTION, *inputs).over(
            by_range.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing))["producers"])
        .withColumn(_FIRST, F.row_number().over(by_range))
        .where(F.col(_FIRST) == 1)
        .select(HISTORY, F.explode(_LEFT).alias(_LEFT))
        .select(HISTORY, *[F.col(_LEFT)[f.name].alias(f.name) for f in element.fields])
    )
    return replayed, producers


def _replay_window(spark):
    """The Java class of the window function (``java/ReplayWindow.java``)."""
    return spark._jvm.segaudit.ReplayWindow


def _after_prior(rows: DataFrame, config: AuditConfig, prior: tuple) -> DataFrame:
    """Every history in one range after what a previous audit left (``prior``: :func:`_prior_ranges`),
    an incremental audit's usual case: the windows of :func:`_in_one_range` over one exchange, with
    the prior's state joined in as the carry (:func:`~analytics.audit.carry.prior_carry`): no
    aggregate of the rows is taken for it. The copies are found within the range, unless a new batch
    may repeat one the previous audit replayed (``prior``'s earlier rows): then over those too
    (:func:`~analytics.audit.steps.copies`)."""
    spans, starting, running_before, earlier, bound = prior
    partition, producers, running = carry.prior_carry(spans, starting, running_before)
    copies = None if earlier is None else _small(steps.copies(rows, earlier).localCheckpoint())
    ranged = rows.withColumn(TASK, F.col(RANGE)).repartition(TASK)
    if copies is None:
        ranged = ranged.transform(steps.duplicate_ranges(RANGE))
    replayed = (
        ranged.join(_small(partition, bound), on=[HISTORY, "crc_valid"], how="left")
        .transform(steps.partition_facts)
        .join(_small(producers, bound), on=[HISTORY, carry.PRODUCER], how="left")
        .transform(steps.producer_state)
        .transform(steps.running_state(config))
        .transform(steps.sequence_mark)
        .join(_small(running, bound), on=[HISTORY, carry.PRODUCER], how="left")
        .transform(carry.carry_in)
    )
    return replayed if copies is None else replayed.join(copies, on=list(steps.ROW_KEY), how="left")


def _in_ranges(rows: DataFrame, plan: ranges.RangePlan, size: int, config: AuditConfig, held: list,
               prior: tuple | None = None) -> DataFrame:
    """Histories cut into ranges, each replayed in a task with what the earlier ranges carry
    (:mod:`analytics.audit.carry`). The copies first, over whole histories (an exchange of seven
    narrow columns, :func:`~analytics.audit.steps.copies`); then one exchange of ``task``
    (:func:`~analytics.audit.ranges.task_of`: contiguous ranges, about ``range_batches`` batches a
    task (``size``) but at least ``MIN_TASK_BATCHES``, at least a task per core while there are ranges, and no
    sampling pass) and per range the partition facts, held (``persist``, in memory or on local
    disk; a checkpoint would forget the partitioning) for the producer windows, which run twice
    over them: once for the small aggregate of what each range carries out
    (:func:`~analytics.audit.carry.running_carry`), once for the facts, cheaper than holding their
    45 columns. ``held`` gets the held frame, for the caller to release once the result is written.
    ``prior``: a previous audit's state as ranges before the first (:func:`_prior_ranges`)."""
    tasks = _tasks(rows.sparkSession, plan, size)
    spans, starting, running_before, earlier, _ = prior if prior is not None else (None,) * 5
    copies = _small(steps.copies(rows, earlier).localCheckpoint())
    partition_carry = carry.partition_carry(rows, spans).localCheckpoint()
    ranged = (
        rows.withColumn(TASK, ranges.task_of(plan, tasks)).repartition(tasks, TASK)
        .join(F.broadcast(partition_carry), on=[RANGE, "crc_valid"], how="left")
        .transform(steps.partition_facts)
        .persist()
    )
    held.append(ranged)
    producers = _small(carry.producer_carry(ranged, starting).localCheckpoint())
    running = (
        ranged.join(producers, on=[RANGE, carry.PRODUCER], how="left")
        .transform(steps.producer_state)
        .transform(steps.running_state(config))
        .transform(steps.sequence_mark)
    )
    carried = _small(carry.running_carry(running, running_before).localCheckpoint())
    return (running.join(carried, on=[RANGE, carry.PRODUCER], how="left").transform(carry.carry_in)
            .join(copies, on=list(steps.ROW_KEY), how="left"))


def _tasks(spark, plan: ranges.RangePlan, size: int) -> int:
    """The tasks the ranges are replayed in: about ``size`` batches a task but at least
    ``MIN_TASK_BATCHES``, at least one per core while there are ranges, never more than the ranges:
    a task per shuffle partition, none empty (adaptive execution does not coalesce the partitions of
    a held plan: with Spark's 200, 4 histories were replayed in 200 tasks, 196 of them empty)."""
    per_task = max(size, MIN_TASK_BATCHES)
    return max(1, min(plan.ranges, max(-(-plan.batches // per_task), default_parallelism(spark))))


def _small(table: DataFrame, bound: int | None = None) -> DataFrame:
    """A carry table, broadcast when it is small (one row per producer and range): the replayed rows
    then keep their range partitioning; a larger one is joined by shuffle. ``bound``: at most how many
    rows it has, when known (then it is not counted)."""
    small = bound <= BROADCAST_ROWS if bound is not None else table.count() <= BROADCAST_ROWS
    return F.broadcast(table) if small else table

