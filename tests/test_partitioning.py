"""Keys that Spark's hash partitioning sends to chosen tasks (analytics.spark.partitioning)."""

from __future__ import annotations

import pytest

from analytics.spark.partitioning import hash_int, task_keys

pytestmark = pytest.mark.spark


def test_hash_int_is_sparks_hash_and_each_task_key_lands_in_its_task(spark):
    from pyspark.sql import functions as F

    values = [0, 1, -1, 42, 2**31 - 1, -(2**31), 123_456_789]
    got = {r["v"]: r["h"] for r in spark.createDataFrame([(v,) for v in values], "v int")
           .select("v", F.hash("v").alias("h")).collect()}
    assert got == {v: hash_int(v) for v in values}
    for n in (1, 7, 16, 41):
        keys = task_keys(n)
        placed = (spark.createDataFrame([(k,) for k in keys], "k int").repartition(n, "k")
                  .select("k", F.spark_partition_id().alias("task")).collect())
        assert sorted((r["task"], keys.index(r["k"])) for r in placed) == [(i, i) for i in range(n)]
