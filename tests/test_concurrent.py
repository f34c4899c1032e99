"""Independent Spark actions at once (``analytics.spark.concurrent``) and small tables held in
memory (``analytics.spark.tables``)."""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.spark


def test_actions_run_at_once_and_return_by_name(spark):
    from analytics.spark.concurrent import concurrently

    both_started = threading.Barrier(2, timeout=60)

    def count(n):
        def action():
            both_started.wait()  # each waits for the other: they run side by side, or this times out
            return spark.range(n).count()
        return action

    assert concurrently(spark, {"a": count(10), "b": count(20)}) == {"a": 10, "b": 20}
    assert concurrently(spark, {}) == {}


def test_a_failure_interrupts_the_others_and_returns_when_all_ended(spark):
    from analytics.spark.concurrent import concurrently

    running = threading.Event()
    ended = []

    def endless():
        try:
            running.set()
            # far more rows than a test could count: only an interruption ends this job
            return spark.range(10**15).selectExpr("sum(id * id)").first()
        finally:
            ended.append("endless")

    def failing():
        running.wait(60)
        raise ValueError("a check could not run")

    with pytest.raises(ValueError, match="a check could not run"):
        concurrently(spark, {"endless": endless, "failing": failing})
    assert ended == ["endless"]  # the interrupted job's action had ended before the failure was raised
    assert spark.range(3).count() == 3  # the session is fine afterwards


def test_small_tables_are_held_as_one_partition(spark, tmp_path):
    from analytics.spark.tables import SMALL_TABLE_BYTES, read_table

    path = str(tmp_path / "t")
    spark.range(1000).repartition(5).write.parquet(path)
    small = read_table(spark, path, 10_000)
    assert small.rdd.getNumPartitions() == 1
    assert sorted(r.id for r in small.collect()) == list(range(1000))
    assert read_table(spark, path, 10_000) is small  # held once: the next stage queries the same frame
    large = read_table(spark, path, SMALL_TABLE_BYTES + 1)
    assert large.rdd.getNumPartitions() > 1
    assert large.count() == 1000
