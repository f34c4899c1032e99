"""``segaudit audit OUT --incremental``: continue the audit already in OUT with only what is new.

A history (a log dir's topic-partition) continues from the previous audit's state
(:mod:`analytics.audit.state`) when the batches up to the ``end_offset`` it audited are exactly the
ones it audited (their count and fingerprints match), its log start offset is the same, and the
configuration is the same: only its batches after ``end_offset`` are replayed, after that state,
and its earlier verdicts are kept. Any other history (retention deleted or the cleaner rewrote a
segment, a follower truncated its tail, it is new) is replayed whole. Either way a verdict is the one
a full audit of the export gives: the replay of a batch reads only the batches before it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.audit.predicates import has_state, is_data
from analytics.audit.rules import Prior
from analytics.audit.state import FILE_PRINT, fingerprint, fingerprint_sum
from analytics.audit.steps import log_starts_of
from analytics.contract.vocabulary import HISTORY_KEY
from analytics.reuse import parquet_files, parts, rows_of
from analytics.spark.columns import with_log_dir, with_topic_id

KEY = list(HISTORY_KEY)


@dataclass(frozen=True)
class Previous:
    """The previous audit's tables under OUT, its run id and its ``summary.json``; ``producer_files``
    is None for an audit that did not write it. ``histories`` and ``producers``: the rows of its
    ``partition_state`` and ``producer_state`` (from their files' footers), when known."""
    run_id: str
    verdicts: DataFrame
    producer_state: DataFrame
    partition_state: DataFrame
    summary: dict
    producer_files: DataFrame | None = None
    file_state: DataFrame | None = None
    histories: int | None = None
    producers: int | None = None


@dataclass(frozen=True)
class Increment:
    """``batches``: what to replay (the new batches of continued histories, every batch of the
    others); ``prior``: the continued histories' state and earlier verdicts; ``continued``: their keys
    and the end offset audited (one row each, small), ``continuing`` of them; ``every``: whether every
    history of the previous audit continues."""
    batches: DataFrame
    prior: Prior
    continued: DataFrame
    file_state: DataFrame | None = None
    continuing: int = 0
    every: bool = False


@dataclass(frozen=True)
class Since:
    """The ``batches`` rows of the segment files read into Parquet since the previous audit (new, or
    read again: ``files`` of them hold batches), and the files ``unchanged`` since (one column, ``file``): audited,
    and still there as the same export run read them (a segment that grew since: up to the read the
    audit saw; the rows of its later reads are among ``rows``). A file audited but gone is neither.
    ``batches``: how many ``rows`` there are (their files' footers)."""
    rows: DataFrame
    unchanged: DataFrame
    files: int
    batches: int = 0


def read_since(spark, batches_dir: str, schema, segment_files: dict, export_run_id: str,
               file_state: DataFrame | None, ids: DataFrame | None = None) -> Since | None:
    """:class:`Since` from the export's manifest (``segment_files``: each file's ``read_by``, the
    export run that read it) and the previous audit's ``file_state`` (the run each audited file was
    read by): a file read by the same run is unchanged. Its Parquet files are found by name under
    ``batches_dir`` (one per segment file and topic). None without a ``file_state`` or a manifest
    that names the runs (then every batch is scanned)."""
    if file_state is None or not segment_files or not all("read_by" in e for e in segment_files.values()):
        return None
    audited = {r["file"]: r["read_by"] for r in file_state.select("file", "read_by").collect()}
    names, same = set(), []
    for file, entry in sorted(segment_files.items()):
        reads = parts(entry, export_run_id)
        runs = [p["read_by"] for p in reads]
        if audited.get(file) in runs:  # audited as read up to that run: a grown file's later reads are new
            same.append(file)
            reads = reads[len(runs) - runs[::-1].index(audited[file]):]
        names |= {f"part-{p['name']}.parquet" for p in reads}
    found = [p for p in parquet_files(batches_dir) if os.path.basename(p) in names]
    rows = (spark.read.schema(schema).option("basePath", batches_dir).parquet(*found) if found
            else spark.createDataFrame([], schema))
    return Since(with_topic_id(rows, ids), spark.createDataFrame([(f,) for f in same], "file string"), len(found),
                 rows_of(found))


def increment(batches: DataFrame, log_starts: DataFrame, previous: Previous,
              since: Since | None = None) -> Increment:
    """Which histories of ``batches`` continue from ``previous``, and what is left to replay.

    ``since``: the files read into Parquet since the previous audit and their rows (:func:`read_since`):
    then only these rows are scanned, the unchanged files' fingerprints are the ones the previous
    ``file_state`` holds, and a continued history's unchanged files are not read at all."""
    keyed = batches if "log_dir" in batches.columns else with_log_dir(batches)
    done = previous.partition_state.select(*KEY, "batches", "end_offset", "fingerprint_a", "fingerprint_b",
                                           "log_start_offset")
    ends = F.broadcast(done.select(*KEY, F.col("end_offset").alias("done_end")))
    fresh = None if since is None else with_log_dir(since.rows)
    scanned = keyed if fresh is None else fresh
    prefix = (scanned.join(ends, on=KEY).where(F.col("base_offset") <= F.col("done_end"))
              .groupBy(*KEY).agg(*fingerprint()))
    if fresh is not None:  # the unchanged files' fingerprints, as the previous audit took them
        unchanged = previous.file_state.join(F.broadcast(since.unchanged), on="file", how="left_semi")
        prefix = unchanged.select(*KEY, *FILE_PRINT).unionByName(prefix).groupBy(*KEY).agg(*fingerprint_sum())
    now = log_starts_of(done.select(*KEY), log_starts)
    same = [F.col(f"d.{c}") == F.col(f"p.{c}") for c in ("batches", "end_offset", "fingerprint_a", "fingerprint_b")]
    continued = (
        done.alias("d").join(prefix.alias("p"), on=KEY).join(now.alias("n"), on=KEY, how="left")
        .where(same[0] & same[1] & same[2] & same[3]
               & F.col("d.log_start_offset").eqNullSafe(F.col("n.log_start_offset")))
        .select(*KEY, F.col("d.end_offset").alias("done_end"))
    ).localCheckpoint()
    if fresh is None:
        pending = (keyed.join(F.broadcast(continued), on=KEY, how="left")
                   .where(F.col("done_end").isNull() | (F.col("base_offset") > F.col("done_end"))))
        new = keyed.join(F.broadcast(continued), on=KEY).where(F.col("base_offset") > F.col("done_end"))
    else:
        # continued: their rows read since, after the audited end; never audited: all their rows,
        # which are all read since. Materialized once (the new rows: few), for the look-back and the
        # replay's several reads. Audited but not continued: every row, from the whole table.
        left = (fresh.join(F.broadcast(continued), on=KEY, how="left")
                .join(F.broadcast(done.select(*KEY, F.lit(True).alias("audited"))), on=KEY, how="left")
                .where((F.col("done_end").isNotNull() & (F.col("base_offset") > F.col("done_end")))
                       | F.col("audited").isNull())).localCheckpoint()
        new = left.where(F.col("done_end").isNotNull())
        pending = left.select(*keyed.columns)
    continuing = continued.count()
    histories = previous.histories if previous.histories is not None else previous.partition_state.count()
    if fresh is not None:
        if continuing < histories:
            again = done.select(*KEY).join(F.broadcast(continued.select(*KEY)), on=KEY, how="left_anti")
            pending = pending.unionByName(keyed.join(F.broadcast(again), on=KEY, how="left_semi"))
    pending = pending.select(*batches.columns)
    keys = F.broadcast(continued.select(*KEY))
    earlier = with_log_dir(previous.verdicts).join(keys, on=KEY, how="left_semi").drop("log_dir")
    # the carry tables have a row per history or producer of the previous state at most
    bound = None if previous.producers is None else previous.producers + histories
    prior = Prior(previous.producer_state.join(keys, on=KEY, how="left_semi"),
                  previous.partition_state.join(keys, on=KEY, how="left_semi"), earlier,
                  _look_back(new, previous.producer_files), bound)
    files = (None if previous.file_state is None
             else previous.file_state.join(keys, on=KEY, how="left_semi").select(*KEY, "file", *FILE_PRINT))
    return Increment(pending, prior, continued, files, continuing, continuing == histories)


def _look_back(new: DataFrame, producer_files: DataFrame | None) -> bool:
    """Whether the duplicate check must read the earlier verdicts: some ``new`` batch (of a continued
    history) that updates producer state has a producer, epoch and base sequence within the base
    sequences of that producer's earlier batches of the epoch (``producer_files``' bounds). A copy
    repeats an earlier batch's sequences, so without such a batch there is none to find back there,
    and the earlier verdicts are not read. Without the bounds (an audit that did not write them), always."""
    if producer_files is None or "min_base_sequence" not in producer_files.columns:
        return True
    producer = [*KEY, "producer_id", "producer_epoch"]
    bounds = with_log_dir(with_topic_id(producer_files)).groupBy(*producer).agg(
        F.min("min_base_sequence").alias("low"), F.max("max_base_sequence").alias("high"))
    inside = (with_topic_id(new, None).where(has_state() & is_data()).join(bounds, on=producer)
              .where(F.col("base_sequence").between(F.col("low"), F.col("high"))))
    return not inside.isEmpty()
