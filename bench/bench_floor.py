"""The audit's replay against the lean window replay (``bench/lean_replay.py``), part by part, in
one Spark session on one export: where the audit's cost beyond its engine's floor sits.

    .venv/bin/python bench/bench_floor.py OUT [--runs 2] [--driver-memory 8g]

OUT is an export that an audit has already run on (its ``batch_verdicts`` is rewritten below). Each
case runs ``--runs`` times; the last (steady) run is printed. Cases:

- ``lean``: the lean replay to a ``noop`` sink (scan, exchange, its two sorts and windows), then
  written as Parquet partitioned by topic;
- ``replay``: the audit's replay (:mod:`analytics.audit.rules`, one range per history) to a
  ``noop`` sink, cumulatively: the narrow scan and its one exchange; + the duplicate window; + the
  partition window; + each of the three producer levels; + the row facts; + the join back of the
  wide columns with severity and sentence (no hold: each case recomputes what comes before it);
- ``wide``: the same replay with every ``batches`` column carried through the windows instead of
  joined back;
- ``write``: the writes alone, from a copy held in memory: the lean replay's output and the
  audit's ``batch_verdicts`` (38 columns), each written as Parquet partitioned by topic;
- ``core``: the lean replay's window core on the narrow rows, Spark's windows against the same
  facts computed in one pass over rows sorted in producer order: in Python over Arrow batches
  (``mapInArrow``, pandas) and in Java (``bench/jvm/LeanReplay.java``, a ``mapPartitions`` over
  Rows, compiled with the JDK's ``javac`` against PySpark's jars; skipped without ``javac``); each
  to a ``noop`` sink after the same exchange, beside the exchange alone and the exchange and sort.
"""

from __future__ import annotations

import argparse
import glob
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

NARROW = ["topic", "partition", "file", "file_position", "magic", "crc_valid", "base_offset", "last_offset",
          "record_count", "is_transactional", "is_control", "max_timestamp", "producer_id", "producer_epoch",
          "base_sequence", "last_sequence", "coordinator_epoch"]
PRODUCER = ["topic", "partition", "producer_id"]


def replay_cases(spark, batches, config) -> dict:
    """The audit's replay cut after each step (name -> DataFrame), narrow with the join back, and
    wide (every batches column through the windows)."""
    from pyspark.sql import functions as F

    from analytics.audit import ranges, rules, state, steps
    from analytics.audit.ranges import HISTORY, RANGE, TASK

    dictionary = ranges.file_dictionary(batches, config.range_batches, state.per_file()).localCheckpoint()
    plan = ranges.range_plan(dictionary)
    files = F.broadcast(dictionary.select("file", HISTORY, "file_id", "rid0", "bounds"))
    tasks = rules._tasks(spark, plan, config.range_batches)

    def exchanged(rows):
        return rows.withColumn(TASK, ranges.task_of(plan, tasks)).repartition(tasks, TASK)

    def windows(rows):
        return (rows.transform(steps.duplicate_ranges(RANGE)).transform(steps.partition_facts)
                .transform(steps.producer_state).transform(steps.running_state(config)).transform(steps.sequence_mark))

    def facts(rows):
        return (rows.transform(steps.marks).transform(steps.replay_facts).transform(steps.verdicts)
                .transform(steps.log_start_offsets(config, None)).transform(steps.conflicts)
                .transform(steps.explanations(config)))

    narrow = batches.transform(steps.replay_columns(files)).transform(exchanged)
    cases = {"replay: narrow scan and exchange": narrow}
    cases["replay: + duplicate window"] = dup = narrow.transform(steps.duplicate_ranges(RANGE))
    cases["replay: + partition window"] = part = dup.transform(steps.partition_facts)
    cases["replay: + producer level 1"] = one = part.transform(steps.producer_state)
    cases["replay: + producer level 2"] = two = one.transform(steps.running_state(config))
    cases["replay: + producer level 3"] = three = two.transform(steps.sequence_mark)
    cases["replay: + row facts"] = fact = three.transform(facts)
    cases["replay: + join back, sentences"] = fact.transform(
        steps.join_back(batches, files.drop("rid0", "bounds"))).transform(steps.severity_and_text(config))
    wide = batches.join(files, on="file").withColumn(RANGE, ranges.range_of()).drop("rid0", "bounds") \
        .withColumn("stateful", steps.has_state()).withColumn("tracked", steps.is_replayed()) \
        .withColumn("state_pid", F.when(F.col("stateful"), F.col("producer_id")))
    cases["wide: windows carry every column"] = (
        wide.transform(exchanged).transform(windows).transform(facts).transform(steps.severity_and_text(config))
        .select(*[c for c in batches.columns if c != "log_dir"], *steps.VERDICT_COLUMNS))
    return cases


def lean_core_spark(rows):
    """The lean replay's facts over ``rows`` with Spark's windows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy(*PRODUCER).orderBy("base_offset", "file_position")
    same = Window.partitionBy(*PRODUCER, "producer_epoch", "base_sequence", "last_sequence").orderBy(
        "base_offset", "file_position")
    return (rows.withColumn("dup_rank", F.row_number().over(same))
            .withColumn("prev_epoch", F.lag("producer_epoch").over(order))
            .withColumn("prev_last_sequence", F.lag("last_sequence").over(order))
            .withColumn("idle_ms", F.col("max_timestamp") - F.lag("max_timestamp").over(order))
            .withColumn("high_water", F.max("last_sequence").over(order.rowsBetween(Window.unboundedPreceding, -1))))


def lean_core_arrow(rows):
    """The same facts computed in Python: each task's rows sorted in producer order, handed to pandas
    over Arrow (``mapInArrow``) and back."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import IntegerType, LongType, ShortType, StructField, StructType

    schema = StructType(list(rows.schema.fields) + [
        StructField("dup_rank", IntegerType()), StructField("prev_epoch", ShortType()),
        StructField("prev_last_sequence", IntegerType()), StructField("idle_ms", LongType()),
        StructField("high_water", IntegerType())])
    target = to_arrow_schema(schema)

    def replay(batches):
        import pyarrow as pa

        table = pa.Table.from_batches(list(batches))
        if table.num_rows == 0:
            return
        frame = table.to_pandas()
        by_producer = frame.groupby(PRODUCER, sort=False)
        previous = by_producer[["producer_epoch", "last_sequence", "max_timestamp"]].shift(1)
        same = frame.groupby(PRODUCER + ["producer_epoch", "base_sequence", "last_sequence"], sort=False)
        frame["dup_rank"] = (same.cumcount() + 1).astype("int32")
        frame["prev_epoch"] = previous["producer_epoch"].astype("Int16")
        frame["prev_last_sequence"] = previous["last_sequence"].astype("Int32")
        frame["idle_ms"] = (frame["max_timestamp"] - previous["max_timestamp"]).astype("Int64")
        frame["high_water"] = by_producer["last_sequence"].cummax().groupby(
            [frame[k] for k in PRODUCER], sort=False).shift(1).astype("Int32")
        yield from pa.Table.from_pandas(frame, schema=target, preserve_index=False).to_batches(max_chunksize=100_000)

    return rows.sortWithinPartitions(*PRODUCER, "base_offset", "file_position").mapInArrow(replay, schema)


def compiled_jar(scratch: Path) -> Path | None:
    """``bench/jvm/LeanReplay.java`` compiled against PySpark's jars into a jar in ``scratch``; None
    without a JDK's ``javac``."""
    import pyspark

    javac, jar = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar is None:
        print("no javac on PATH: the Java core case is skipped (install a JDK, e.g. openjdk-17-jdk-headless)")
        return None
    classpath = ":".join(glob.glob(str(Path(pyspark.__file__).parent / "jars" / "*.jar")))
    subprocess.run([javac, "-cp", classpath, "-d", str(scratch / "classes"), str(ROOT / "bench" / "jvm" / "LeanReplay.java")],
                   check=True)
    target = scratch / "lean-replay.jar"
    subprocess.run([jar, "cf", str(target), "-C", str(scratch / "classes"), "."], check=True)
    return target


def lean_core_java(spark, rows):
    """The same facts in Java, over the rows sorted in producer order (:func:`compiled_jar`)."""
    from pyspark.sql import DataFrame

    ordered = rows.sortWithinPartitions(*PRODUCER, "base_offset", "file_position")
    return DataFrame(spark._jvm.LeanReplay.apply(ordered._jdf), spark)


def timed(runs: int, action) -> float:
    """Seconds of the last of ``runs`` calls of ``action``."""
    seconds = 0.0
    for _ in range(runs):
        started = time.perf_counter()
        action()
        seconds = time.perf_counter() - started
    return seconds


def main(argv: list[str] | None = None) -> None:
    from analytics.audit.config import AuditConfig
    from analytics.spark.session import get_spark
    from lean_replay import lean_verdicts

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--driver-memory", default="8g")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="segaudit-floor-"))
    java = compiled_jar(scratch)
    spark = get_spark(conf={"spark.driver.memory": args.driver_memory,
                            "spark.sql.inMemoryColumnarStorage.compressed": "false",
                            **({"spark.jars": str(java)} if java else {})})
    batches = spark.read.parquet(str(args.out / "batches"))
    total = batches.count()
    config = AuditConfig(range_batches=total + 1)  # one range per history, as the audit's plan sizes it here

    def noop(frame):
        return lambda: frame.write.format("noop").mode("overwrite").save()

    def parquet(frame):
        return lambda: frame.write.mode("overwrite").partitionBy("topic").parquet(str(scratch / "written"))

    rows: list[tuple[str, float]] = []
    lean = lean_verdicts(batches)
    rows.append(("lean: to noop", timed(args.runs, noop(lean))))
    rows.append(("lean: written", timed(args.runs, parquet(lean))))
    for label, frame in replay_cases(spark, batches, config).items():
        rows.append((label, timed(args.runs, noop(frame))))
    for label, frame in (("write: the lean replay's output, held", lean),
                         ("write: batch_verdicts (38 columns), held",
                          spark.read.parquet(str(args.out / "batch_verdicts")))):
        held = frame.persist()
        held.write.format("noop").mode("overwrite").save()
        rows.append((label, timed(args.runs, parquet(held))))
        held.unpersist()
    narrow = batches.select(*NARROW).repartition(spark.sparkContext.defaultParallelism, "topic", "partition")
    rows.append(("core: the exchange alone", timed(args.runs, noop(narrow))))
    rows.append(("core: the exchange and the sort", timed(args.runs, noop(
        narrow.sortWithinPartitions(*PRODUCER, "base_offset", "file_position")))))
    rows.append(("core: + Spark windows", timed(args.runs, noop(lean_core_spark(narrow)))))
    rows.append(("core: + pandas over Arrow", timed(args.runs, noop(lean_core_arrow(narrow)))))
    if java is not None:
        same = lean_core_java(spark, narrow).exceptAll(lean_core_spark(narrow)).count() == 0
        assert same, "the Java pass and Spark's windows disagree"
        rows.append(("core: + Java mapPartitions", timed(args.runs, noop(lean_core_java(spark, narrow)))))
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"{total:,} batches, {spark.sparkContext.defaultParallelism} cores, driver {args.driver_memory}, "
          f"steady run of {args.runs}")
    print(f"{'case':<46} {'seconds':>8} {'µs/batch':>9}")
    for label, seconds in rows:
        print(f"{label:<46} {seconds:>8.1f} {seconds / total * 1e6:>9.2f}")


if __name__ == "__main__":
    main()
