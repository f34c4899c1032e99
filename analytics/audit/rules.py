"""The replay as Spark window functions: every batch gets a verdict, a severity and, where its own
columns and the configuration prove it, an explanation.

:func:`classify` is a chain of named steps (:mod:`analytics.audit.steps`), each a ``DataFrame ->
DataFrame`` function whose docstring says which facts it adds. The broker's rules the steps
evaluate are named Column predicates (:mod:`analytics.audit.predicates`), each tested alone.

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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.audit import steps
from analytics.audit.config import AuditConfig
from analytics.audit.steps import HISTORY, VERDICT_COLUMNS


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
    same way from the scan (:func:`analytics.audit.steps.join_back`).

    The session's settings are the caller's: classify reads none and changes none. Under
    ``spark.sql.requireAllClusterKeysForCoPartition=false`` (sessions of
    :func:`analytics.spark.session.get_spark`) the join back keeps the (history, file_id) hashing;
    under Spark's default the planner hashes both sides on the whole identity instead, with the same
    verdicts and as many shuffles, but every output file then spans every partition of its topic
    and the join back costs more (200k batches: classify about 15% slower).
    """
    dictionary = steps.file_dictionary(batches)
    files = F.broadcast(dictionary.select("file", HISTORY, "file_id"))  # one broadcast, for both joins
    starts = None if log_starts is None else steps.history_log_starts(dictionary, log_starts)
    facts = (
        batches.transform(steps.replay_columns(files))
        .transform(steps.duplicate_ranges)
        .transform(steps.partition_facts)
        .transform(steps.producer_state)
        .transform(steps.running_state(config))
        .transform(steps.sequence_mark)
        .transform(steps.replay_facts)
        .transform(steps.verdicts)
        .transform(steps.log_start_offsets(config, starts))
        .transform(steps.conflicts)
        .transform(steps.explanations(config))
    )
    return (
        facts.transform(steps.join_back(batches, files))
        .transform(steps.severity_and_text(config))
        .select(*[c for c in batches.columns if c != "log_dir"], *VERDICT_COLUMNS)
    )
