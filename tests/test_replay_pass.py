"""segaudit's window function (``analytics/audit/java/ReplayWindow.java``, on Spark's public API)
against the window steps it stands in for: built and loaded into the session, and on the same rows
the same columns, of the same types, with the same values: random histories under random
configurations, and every generated scenario's export."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.audit.config import AuditConfig
from analytics.spark import javacode
from tests.test_audit_differential import MARK_CASES, _producer_rows, _spark_schema, history
from tests.outs import table_dir

pytestmark = pytest.mark.spark


def _replayed(batches, config: AuditConfig, function: bool):
    """What the replay computes before its row facts, every history in one range: by the window
    function or by the window steps (``rules._in_window_function``, ``rules._in_one_range``); and
    the producers' aggregates per history (the function's own, or Spark's of the windows' rows)."""
    from pyspark.sql import functions as F

    from analytics.audit import carry, ranges, rules, state, steps

    size = 10**9
    dictionary = ranges.file_dictionary(batches, size, state.per_file()).localCheckpoint()
    plan = ranges.range_plan(dictionary)
    files = F.broadcast(dictionary.select("file", ranges.HISTORY, "file_id", "rid0", "bounds"))
    rows = batches.transform(steps.replay_columns(files))
    if function:
        return rules._in_window_function(rows, plan, size, config)
    replayed = rules._in_one_range(rows, plan, size, config)
    return replayed, carry.producer_and_running_ranges(replayed, by=(ranges.HISTORY,))


def _assert_same(batches, config: AuditConfig):
    """The window function replays ``batches`` to the rows of the window steps and leaves the same
    producer aggregates; the window steps' rows, held."""
    (windows, aggregated), (function, left) = (_replayed(batches, config, flag) for flag in (False, True))
    windows = windows.cache()
    assert function.schema.simpleString() == windows.schema.simpleString()
    assert (windows.exceptAll(function).collect(), function.exceptAll(windows).collect()) == ([], [])
    assert left.schema == aggregated.schema
    assert (aggregated.exceptAll(left).collect(), left.exceptAll(aggregated).collect()) == ([], [])
    return windows


def test_the_window_function_is_built_and_loaded(spark):
    assert javacode.load(spark), javacode.why_not
    assert javacode.jar() is not None
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


def test_the_audit_of_an_export_replays_with_the_window_function_when_the_session_has_the_jar(spark, audited):
    from analytics.audit.config import load_config
    from analytics.audit.audit_plan import audit_plan

    generated, out = audited["clean"]
    assert audit_plan(spark, out, load_config(generated.truth_dir / "audit.toml")).window_function


def test_copies_are_found_across_the_growth_of_the_copies_table_and_each_range_starts_empty(spark):
    """Thousands of sequence ranges in one history (the function's table of copies grows several times
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
    """Every scenario's ``batch_verdicts`` (every column: the window function carries them through,
    the window steps join them back), ``producer_state`` and ``partition_state`` from the two
    replays."""
    from functools import reduce

    from analytics.audit.config import load_config
    from analytics.audit.rules import replay

    assert javacode.load(spark), javacode.why_not
    batches = reduce(lambda a, b: a.unionByName(b),
                     [spark.read.parquet(str(table_dir(audited[name][1], "batches"))) for name in audited])
    starts = reduce(lambda a, b: a.unionByName(b),
                    [spark.read.parquet(str(table_dir(audited[name][1], "log_start_offsets"))) for name in audited])
    config = load_config(audited["idle-expiration"][0].truth_dir / "audit.toml")
    function, windows = (replay(batches, config, starts, [], window_function=flag) for flag in (True, False))
    for table in ("verdicts", "producer_state", "partition_state"):
        a, b = getattr(function, table), getattr(windows, table)
        assert a.schema == b.schema, table
        assert (a.exceptAll(b).count(), b.exceptAll(a).count()) == (0, 0), table
    assert function.verdicts.count() == batches.count()
    assert function.verdicts.where("severity = 'violation'").count() > 0  # the scenarios' faults are in it


def test_an_audit_whose_window_function_fails_replays_with_the_window_steps(spark, audited, tmp_path, monkeypatch):
    """segaudit's Java failing while the audit runs (here: the function handed its inputs in another
    order than it reads them, so a task's cast fails inside it, as a Spark it does not expect would
    fail it): the run it began is dropped, one line says so, and the audit runs again on Spark's
    window steps with the verdicts of a healthy audit."""
    from analytics.audit import rules
    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from analytics.publish import published
    from tests.outs import copy_out

    class Swapped:  # segaudit's own class, its first two inputs (a boolean, a long) handed swapped
        def __init__(self, java):
            self.java, self.function, self.added, self.left = java, java.function, java.added, java.left
            inputs = list(java.INPUT)
            self.INPUT = [inputs[1], inputs[0], *inputs[2:]]

    generated, source = audited["idle-expiration"]
    config = load_config(generated.truth_dir / "audit.toml")
    expected = json.loads(published(source).read_text("summary.json"))
    out = copy_out(source, tmp_path / "out")
    runs_before = set(os.listdir(Path(out, "_runs")))
    monkeypatch.setattr(rules, "_replay_window", lambda session: Swapped(session._jvm.segaudit.ReplayWindow))
    said: list[str] = []
    done = audit(spark, out, config, progress=said.append)
    [line] = [s for s in said if "Java" in s or "window function" in s]
    assert line.startswith("segaudit's window function failed on this Spark (ClassCastException: ")
    assert line.endswith("replaying with Spark's window steps")
    assert done.verdicts == expected["verdicts"] and done.severities == expected["severities"]
    assert done.severities["explained"] > 0  # the scenario's expiries explained as well
    assert sorted(set(os.listdir(Path(out, "_runs"))) - runs_before) == [done.run_id]  # the failed run left nothing


def test_failures_of_segaudit_java_are_told_from_other_failures():
    executor = ("An error occurred while calling o1.parquet.\n: org.apache.spark.SparkException: Job aborted due to "
                "stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0: "
                "java.lang.ClassCastException: class X cannot be cast to class Y\n"
                "\tat segaudit.ReplayWindow$State.step(ReplayWindow.java:301)\n"
                "\tat org.apache.spark.rdd.RDD.iterator(RDD.scala:1)\n"
                "Caused by: java.lang.ClassCastException: class X cannot be cast to class Y\n"
                "\tat segaudit.ReplayWindow$State.step(ReplayWindow.java:301)\n")
    assert javacode.failure(RuntimeError(executor)) == "ClassCastException: class X cannot be cast to class Y"
    assert javacode.failure(RuntimeError("java.io.IOException: No space left on device\n\tat org.apache.hadoop.fs."
                                         "RawLocalFileSystem.write(RawLocalFileSystem.java:1)")) is None
    assert javacode.failure(KeyboardInterrupt()) is None
