"""The Java pass (``analytics/audit/java/HistoryReplay.java``) against the window steps it stands in
for: built and loaded into the session, and on the same rows the same columns, of the same types,
with the same values: random histories under random configurations, and every generated scenario's
export."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from py4j.java_gateway import JavaObject

from analytics.audit.config import AuditConfig
from analytics.spark import javacode
from tests.test_audit_differential import MARK_CASES, _producer_rows, _spark_schema, history
from tests.outs import table_dir

pytestmark = pytest.mark.spark


# The replays held equal to the window steps: segaudit's Java pass over Spark's internal rows, and
# its window function on Spark's public API.
PATHS = ("pass", "function")


def _replayed(batches, config: AuditConfig, path: str):
    """What the replay computes before its row facts, every history in one range: by the Java pass,
    the window function or the windows (``rules._in_one_pass``, ``rules._in_window_function``,
    ``rules._in_one_range``); and the producers' aggregates per history (the pass's own, or Spark's
    of the rows)."""
    from pyspark.sql import functions as F

    from analytics.audit import carry, ranges, rules, state, steps

    size = 10**9
    dictionary = ranges.file_dictionary(batches, size, state.per_file()).localCheckpoint()
    plan = ranges.range_plan(dictionary)
    files = F.broadcast(dictionary.select("file", ranges.HISTORY, "file_id", "rid0", "bounds"))
    rows = batches.transform(steps.replay_columns(files))
    if path == "pass":
        return rules._in_one_pass(rows, plan, size, config)
    replayed = (rules._in_window_function(rows, plan, size, config) if path == "function"
                else rules._in_one_range(rows, plan, size, config))
    return replayed, carry.producer_and_running_ranges(replayed, by=(ranges.HISTORY,))


def _assert_same(batches, config: AuditConfig, paths=PATHS):
    """Each of ``paths`` replays ``batches`` to the rows of the windows and leaves the same producer
    aggregates; the windows' rows, held."""
    windows, aggregated = _replayed(batches, config, "windows")
    windows, aggregated = windows.cache(), aggregated.cache()
    for path in paths:
        replayed, left_by = _replayed(batches, config, path)
        assert replayed.schema.simpleString() == windows.schema.simpleString(), path
        left, right = windows.exceptAll(replayed).collect(), replayed.exceptAll(windows).collect()
        assert (path, left, right) == (path, [], [])
        assert left_by.schema == aggregated.schema, path
        left, right = aggregated.exceptAll(left_by).collect(), left_by.exceptAll(aggregated).collect()
        assert (path, left, right) == (path, [], [])
    return windows


def test_the_java_pass_is_built_and_loaded(spark):
    assert javacode.load(spark), javacode.why_not
    assert javacode.jar(build=False) is not None
    assert javacode.load(spark)  # once per session: the second call only looks


@given(st.tuples(*[history(f"t{i}") for i in range(12)]), st.data())
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow, HealthCheck.data_too_large])
def test_random_histories_get_the_facts_the_windows_give(spark, histories, data):
    assert javacode.load(spark), javacode.why_not
    rows = [r for h in histories for r in h]
    config = AuditConfig(profile=data.draw(st.sampled_from(["4.x", "2.4", "0.11"])),
                         producer_id_expiration_ms=data.draw(st.sampled_from([2_000, None])))
    assert _assert_same(spark.createDataFrame(rows, schema=_spark_schema()), config).count() == len(rows)


def test_every_scenario_gets_the_facts_the_windows_give(spark, audited):
    from functools import reduce

    from pyspark.sql import functions as F

    assert javacode.load(spark), javacode.why_not
    frames = [spark.read.parquet(str(table_dir(audited[name][1], "batches"))) for name in audited]
    # and a second copy of a log's segments beside the first, one byte further on: every offset twice
    clean = frames[list(audited).index("clean")]
    frames.append(clean.withColumn("file", F.concat("file", F.lit(".copy")))
                  .withColumn("file_position", F.col("file_position") + 1))
    # and producers whose sequences cross INT_MAX between batches, forward and back
    frames.append(spark.createDataFrame([r for topic, (b, _) in MARK_CASES.items() for r in _producer_rows(topic, b)],
                                        schema=_spark_schema()))
    batches = reduce(lambda a, b: a.unionByName(b), frames)
    # expiry points in every scenario whose producers pause (a second, not the broker's week)
    replayed = _assert_same(batches, AuditConfig(producer_id_expiration_ms=1_000))
    facts = replayed.agg(*(F.sum(c.cast("int")).alias(name) for name, c in {
        "rows": F.lit(True), "copies": F.col("dup_rank") > 1, "overlaps": F.col("offset_overlap") > 0,
        "expired": F.col("expired_offset").isNotNull(), "wraps": F.col("seq_wraps") != 0,
        "corrupt": ~F.col("crc_valid"), "marked": F.col("mark").isNotNull(),
        "coordinated": F.col("prev_coordinator_epoch").isNotNull(), "runs": F.col("epoch_run") > 1,
    }.items())).first().asDict()
    assert facts["rows"] == batches.count() > 500
    assert [name for name in facts if not facts[name]] == []  # the scenarios reach every kind of fact


def test_the_audit_of_an_export_replays_in_one_pass_when_the_session_has_the_jar(spark, audited):
    from analytics.audit.config import load_config
    from analytics.audit.audit_plan import audit_plan

    generated, out = audited["clean"]
    assert audit_plan(spark, out, load_config(generated.truth_dir / "audit.toml")).one_pass


def test_copies_are_found_across_the_growth_of_the_pass_tables_and_each_range_starts_empty(spark):
    """Thousands of sequence ranges in one history (the pass's table of copies grows several times
    while it holds them), then copies of the first ones; and a second history with the same
    producer id and sequences, which is no copy of the first's."""
    from tests.test_audit_differential import _row

    rows = []
    for topic in ("a", "b"):
        offsets = range(10_000)
        rows += [_row(topic, o, 1, pid=7, epoch=0, seq=o, ts=1_000 + o) for o in offsets]
        rows += [_row(topic, 10_000 + i, 1, pid=7, epoch=0, seq=i * 997, ts=20_000 + i) for i in range(10)]
    replayed = _assert_same(spark.createDataFrame(rows, schema=_spark_schema()), AuditConfig())
    copies = sorted(r["dup_original"] for r in replayed.where("dup_rank > 1").collect())
    assert copies == sorted([i * 997 for i in range(10)] * 2)


def test_the_audit_tables_are_the_same_replayed_either_way(spark, audited):
    """Every scenario's ``batch_verdicts`` (every column: the one pass carries them through, the
    windows join them back) and ``producer_state`` (the one pass keeps it as it reads the rows for the
    verdicts, the windows hold their rows) from the two replays. The pass keeps the state of the
    tasks whose rows a job read through only (not of rows read in part: a ``limit``); without it the
    state replays (``_assert_same``, whose pass keeps nothing)."""
    from functools import reduce

    from analytics.audit.config import load_config
    from analytics.audit.rules import replay

    assert javacode.load(spark), javacode.why_not
    batches = reduce(lambda a, b: a.unionByName(b),
                     [spark.read.parquet(str(table_dir(audited[name][1], "batches"))) for name in audited])
    starts = reduce(lambda a, b: a.unionByName(b),
                    [spark.read.parquet(str(table_dir(audited[name][1], "log_start_offsets"))) for name in audited])
    config = load_config(audited["idle-expiration"][0].truth_dir / "audit.toml")
    held: list = []
    one_pass, windows = (replay(batches, config, starts, held if flag else [], one_pass=flag, window_function=False)
                         for flag in (True, False))
    function = replay(batches, config, starts, [], one_pass=False, window_function=True)
    assert len(one_pass.verdicts.limit(3).collect()) == 3  # a task's rows read in part: its state is not kept
    assert _kept_blocks(held) == 0
    one_pass.verdicts.write.format("noop").mode("overwrite").save()  # read through: the state is kept
    assert _kept_blocks(held) == _tasks(held) > 0
    for table in ("verdicts", "producer_state", "partition_state"):
        for replayed in (one_pass, function):
            a, b = getattr(replayed, table), getattr(windows, table)
            assert a.schema == b.schema, table
            assert (a.exceptAll(b).count(), b.exceptAll(a).count()) == (0, 0), table
    assert function.sorted_by_topic and not windows.sorted_by_topic
    assert one_pass.verdicts.count() == batches.count()
    assert one_pass.verdicts.where("severity = 'violation'").count() > 0  # the scenarios' faults are in it
    for frame in held:
        frame.unpersist()
    assert _kept_blocks(held) == 0
    _assert_tapped_per_file(spark, one_pass.verdicts, windows.verdicts)


def _assert_tapped_per_file(spark, verdicts, others) -> None:
    """The per-file rows the tap of ``verdicts`` (sorted by topic) takes as a write reads them, kept
    as blocks, equal :func:`~analytics.audit.tables.per_file` of the same verdicts (``others``, the
    windows'), and so do those aggregated again once the blocks are dropped; the rows pass unchanged,
    and the counts the tap gives are those of every row: per verdict, per severity, the newest."""
    from pyspark.sql import functions as F

    from analytics.audit.tables import per_file
    from analytics.audit.tap import per_file_tapped
    from analytics.spark.columns import conform

    conformed, tapped = conform(verdicts, "batch_verdicts"), []
    rows = per_file_tapped(spark, conformed, tapped)
    [taken] = tapped
    files, tap = taken.files, taken.kept
    assert rows.schema == conformed.schema
    assert rows.count() == conformed.count()  # read through: every task's groups kept
    assert tap.keptBlocks() == tap.tasks() > 0
    expected = per_file(conform(others, "batch_verdicts"))
    assert files.schema.simpleString() == expected.schema.simpleString()  # nullability aside: conformed at the write
    assert (files.exceptAll(expected).count(), expected.exceptAll(files).count()) == (0, 0)
    assert files.where("last_state is not null and batches > 1").count() > 0
    spark_counts = {f"{c}:{r[c]}": r["n"] for c in ("verdict", "severity")
                    for r in conformed.groupBy(c).agg(F.count("*").alias("n")).collect()}
    counts = taken.counts()
    assert counts["newest"] == conformed.agg(F.max("max_timestamp")).first()[0]
    assert {k: n for k, n in counts.items() if k != "newest" and n} == spark_counts
    assert {"severity:explained", "severity:violation", "severity:ok"} <= set(spark_counts)  # each kind there
    tap.unpersist()
    assert tap.keptBlocks() == 0
    # the blocks gone, each task's groups are aggregated again from its rows: the same rows
    assert (files.exceptAll(expected).count(), expected.exceptAll(files).count()) == (0, 0)
    tap.unpersist()


def _kept_blocks(held: list) -> int:
    """The blocks of producer state that the Java replays in ``held`` keep in Spark's block manager."""
    return sum(frame.keptBlocks() for frame in held if isinstance(frame, JavaObject))


def _tasks(held: list) -> int:
    """The tasks of the Java replays in ``held`` (a block each when kept)."""
    return sum(frame.tasks() for frame in held if isinstance(frame, JavaObject))


def test_an_audit_whose_java_pass_fails_replays_with_the_window_function(spark, audited, tmp_path, monkeypatch):
    """The Java pass failing on a Spark whose internals it reads (here: a column it sorts by that the
    rows do not have, refused in segaudit's Java as Spark 4.3 refuses the plan it builds): the run it
    began is dropped, one line says so, and the audit runs again on segaudit's window function (Spark's public API) with the
    verdicts of a healthy audit."""
    from analytics.audit import rules
    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from analytics.publish import published
    from tests.outs import copy_out

    class Failing:  # segaudit's own class, asked for a plan it cannot build
        def __init__(self, java):
            self.java = java

        def replay(self, rows, expiry, expiration_ms, order, keep):
            return self.java.replay(rows, expiry, expiration_ms, [*order, "no_such_column"], keep)

    generated, source = audited["idle-expiration"]
    config = load_config(generated.truth_dir / "audit.toml")
    expected = json.loads(published(source).read_text("summary.json"))
    out = copy_out(source, tmp_path / "out")
    runs_before = set(os.listdir(Path(out, "_runs")))
    monkeypatch.setattr(rules, "_history_replay", lambda session: Failing(session._jvm.segaudit.HistoryReplay))
    planned = []
    monkeypatch.setattr(rules, "_in_window_function", lambda *a, _real=rules._in_window_function: planned.append(1)
                        or _real(*a))
    said: list[str] = []
    done = audit(spark, out, config, progress=said.append)
    [line] = [s for s in said if "Java" in s]
    assert line.startswith("segaudit's Java replay failed on this Spark (SparkIllegalArgumentException: [FIELD_NOT_FOUND]")
    assert line.endswith("replaying with segaudit's window function")
    assert planned  # the rerun replayed with the window function, not the window steps
    assert done.verdicts == expected["verdicts"] and done.severities == expected["severities"]
    assert done.severities["explained"] > 0  # the scenario's expiries explained as well
    assert sorted(set(os.listdir(Path(out, "_runs"))) - runs_before) == [done.run_id]  # the failed run left nothing


def test_failures_of_segaudit_java_are_told_from_other_failures():
    executor = ("An error occurred while calling o1.parquet.\n: org.apache.spark.SparkException: Job aborted due to "
                "stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0: "
                "java.lang.ClassCastException: class X cannot be cast to class Y\n"
                "\tat segaudit.HistoryReplay$Pass.next(HistoryReplay.java:301)\n"
                "\tat org.apache.spark.rdd.RDD.iterator(RDD.scala:1)\n"
                "Caused by: java.lang.ClassCastException: class X cannot be cast to class Y\n"
                "\tat segaudit.HistoryReplay$Pass.next(HistoryReplay.java:301)\n")
    assert javacode.failure(RuntimeError(executor)) == "ClassCastException: class X cannot be cast to class Y"
    assert javacode.failure(RuntimeError("java.io.IOException: No space left on device\n\tat org.apache.hadoop.fs."
                                         "RawLocalFileSystem.write(RawLocalFileSystem.java:1)")) is None
    assert javacode.failure(KeyboardInterrupt()) is None
