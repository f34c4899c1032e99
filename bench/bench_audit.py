"""Audit time against the pure-Python reference replay and DuckDB, on the same exported Parquet.

    .venv/bin/python bench/bench_audit.py [--batches N ...] [--work DIR] [--driver-memory 8g]
                                          [--python-max N] [--skip-default-memory] [--conf KEY=VALUE ...]

For each size, a ``clean`` log dir of about N batches is written by the generator and exported
once (both cached in ``--work``, so repeated runs time the audit only). Cases, each on the
export's ``batches`` table:

- ``segaudit audit``: the whole audit (every table and summary.json), Spark ``local[*]``, run
  twice in one application: the first run also pays for the JIT and the Python workers;
- ``Spark classify``: ``analytics.audit.rules.classify`` alone, writing ``batch_verdicts``, the
  same output as the two cases below, with the ranges the audit's plan sizes
  (``audit.audit_plan.range_decision``: one pass over each history): the audit's file dictionary, replay
  and one write with nothing else (no state tables, tap, counts or derived tables), twice (the
  steady run counts), printed beside the lean replay too, the floor of what the audit must do;
- ``DuckDB``: the same classification in SQL (``bench/classify_duckdb.sql``), threads = cores;
- with ``--window``, ``segaudit audit`` again on Spark's window steps instead of segaudit's window
  function (what every Spark Connect session runs), first and steady, beside the lean replay;
- ``lean window replay`` (``bench/lean_replay.py``, issue 46): one sort in producer order, one
  duplicate sort, lags, a running high-water mark and the verdict, every ``batches`` column carried
  through and written as Parquet partitioned by topic, in the same session after the audit, twice
  (the steady run counts); printed beside the steady ``segaudit audit`` in seconds and µs per batch,
  and with two sizes or more the marginal µs per batch between them (which cancels start-up), with
  the audit's ratio to it;
- ``pure Python``: the reference replay (``analytics.audit.reference``), one topic-partition at
  a time, including reading the rows with pyarrow (skipped above ``--python-max`` batches);
- ``default memory``: ``segaudit audit`` in a fresh driver at Spark's default driver memory
  (1 GiB, set explicitly: a local session's own default is a share of the machine) and ``spark.driver.maxResultSize=8m``, twice: in local mode (the driver is the executor,
  so 1 GiB also holds every sort buffer) and against a standalone cluster started by the script
  (executors with ``--executor-memory``; the driver only plans and receives counts). The cluster
  run completes only if nothing large is collected to the driver. Its peak is the resident memory
  of the driver's process tree.

With ``--partitions N``, each size is also audited as N partitions (``bench_audit_histories.split_copy``:
every partition of the export cut at offset boundaries, each piece a partition of its own: the
shape of a real cluster's many short histories), the steady ``segaudit audit`` and ``Spark classify``
beside the steady lean replay of the same copy; with two sizes or more, also their marginal cost
between the cut copies (``--partitions 6``: the ``clean`` logs' 3 partitions cut in 2, so that the
histories spread evenly over 2 cores, as a log of 4 partitions does).

The verdict counts of DuckDB and of the reference are checked against Spark's. ``--conf`` sets
Spark options of the in-process session (e.g. ``spark.sql.requireAllClusterKeysForCoPartition=true``,
Spark's default, to time the join back of a session not built by ``get_spark``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_export import tree_rss_kib

from lean_replay import LABEL as LEAN, lean_case, print_side_by_side

from analytics.audit.config import AuditConfig
from analytics.audit.steps import REPLAY_COLUMNS
from analytics.contract.vocabulary import CHECK_REPLAY, topics_exempt
from analytics.spark.standalone import standalone_cluster


def prepare(work: Path, batches: int, records: bool = False) -> tuple[Path, int]:
    """A cached export of a ``clean`` log dir with about ``batches`` batches (60 per scale unit);
    ``records``: exported with its records too (an export of its own)."""
    scale = math.ceil(batches / 60)
    logdir, out = work / f"clean-x{scale}", work / f"clean-x{scale}{'.records' if records else ''}.out"
    if not (logdir.parent / f"{logdir.name}.truth" / "scenario.json").exists():
        shutil.rmtree(logdir, ignore_errors=True)
        print(f"generating {logdir} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "analytics", "generate", str(logdir), "--scenario", "clean",
                        "--scale", str(scale)], check=True, stdout=subprocess.DEVNULL)
    if not (out / "_export.json").exists():
        print(f"exporting {out} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "analytics", "export", str(logdir), "--out", str(out),
                        *(["--records"] if records else [])], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    truth = json.loads((logdir.parent / f"{logdir.name}.truth" / "scenario.json").read_text())
    return out, sum(truth["verdicts"].values())


def spark_cases(spark, out: Path, config: AuditConfig, window: bool = False) -> tuple[dict[str, float], Counter]:
    from analytics.audit.job import audit
    from analytics.audit.audit_plan import audit_plan

    times = {}
    for label in ("segaudit audit (first)", "segaudit audit (steady)"):
        result = audit(spark, str(out), config)
        times[label] = result.seconds
    if window:  # the same audit on Spark's window steps: what every Spark Connect session runs
        for label in (f"{WINDOW} (first)", f"{WINDOW} (steady)"):
            times[label] = audit(spark, str(out), config,
                                 plan=replace(audit_plan(spark, str(out), config), window_function=False)).seconds
    classified, counts = classify_case(spark, out, config)
    return times | classified, counts


WINDOW = "audit, window steps"


def table(out: Path, name: str) -> str:
    """The folder of a published table of ``out``: the run folder its latest commit names."""
    from analytics.publish import published

    return published(str(out)).path(name)


def classify_case(spark, out: Path, config: AuditConfig) -> tuple[dict[str, float], Counter]:
    """``classify`` of ``out``'s batches written as ``batch_verdicts`` (twice: first and steady), with
    the ranges the audit's plan sizes; the verdict counts."""
    from analytics.audit.audit_plan import range_decision
    from analytics.audit.rules import classify
    from analytics.spark.memory import task_memory

    times = {}
    target = out.parent / f"{out.name}.spark-verdicts"
    if config.range_batches is None:  # as the audit's plan sizes them (classify alone would cut at the default)
        config = replace(config, range_batches=range_decision(task_memory(spark))[0])
    for label in ("Spark classify (first)", "Spark classify"):
        shutil.rmtree(target, ignore_errors=True)
        t0 = time.perf_counter()
        batches = spark.read.parquet(table(out, "batches"))
        classify(batches, config, spark.read.parquet(table(out, "log_start_offsets"))).write.partitionBy(
            "topic").parquet(str(target))
        times[label] = time.perf_counter() - t0
    counts = Counter({r["verdict"]: r["count"] for r in spark.read.parquet(str(target)).groupBy("verdict").count().collect()})
    shutil.rmtree(target, ignore_errors=True)
    return times, counts


def many_partitions(spark, out: Path, config: AuditConfig, partitions: int,
                    total: int) -> tuple[dict[str, float], tuple[float, float, float]]:
    """The audit, classify (:func:`classify_case`) and lean replay of ``out`` cut into about
    ``partitions`` partitions, and their steady seconds (audit, classify, lean)."""
    from bench_audit_histories import split_copy

    from analytics.audit.job import audit

    existing = spark.read.parquet(table(out, "batches")).select("topic", "partition").distinct().count()
    split = max(1, -(-partitions // existing))
    target = out.parent / f"{out.name}.split{split}"
    split_copy(spark, out, target, split)
    label = f"{existing * split:,} partitions"
    times = {}
    for run in ("first", "steady"):
        times[f"segaudit audit, {label} ({run})"] = audit(spark, str(target), config).seconds
        times[f"{LEAN}, {label} ({run})"] = lean_case(spark, target)[0]
    times |= {f"Spark classify, {label}" if k == "Spark classify" else f"{k}, {label}": v
              for k, v in classify_case(spark, target, config)[0].items()}
    lean = times[f"{LEAN}, {label} (steady)"]
    print_side_by_side([(total, times[f"segaudit audit, {label} (steady)"], lean)], f"segaudit audit, {label}")
    print_side_by_side([(total, times[f"Spark classify, {label}"], lean)], f"Spark classify, {label}")
    return times, (times[f"segaudit audit, {label} (steady)"], times[f"Spark classify, {label}"], lean)


def duckdb_case(out: Path, config: AuditConfig, threads: int) -> tuple[float, Counter]:
    import duckdb

    target = out.parent / f"{out.name}.duckdb-verdicts"
    shutil.rmtree(target, ignore_errors=True)
    quote = lambda names: ", ".join("'" + n.replace("'", "''") + "'" for n in names) or "NULL"
    sql = (ROOT / "bench" / "classify_duckdb.sql").read_text().format(
        batches=table(out, "batches"), log_starts=table(out, "log_start_offsets"), out=target,
        expiration_ms=config.expiration_ms, compacted=quote(config.compacted_topics()),
        internal=quote(sorted(topics_exempt(CHECK_REPLAY)[0])),  # the topics the replay skips (none by pattern)
    )
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute(f"SET temp_directory = '{out.parent / 'duckdb.tmp'}'")
    t0 = time.perf_counter()
    con.execute(sql)
    seconds = time.perf_counter() - t0
    counts = Counter(dict(con.sql(f"SELECT verdict, count(*) FROM read_parquet('{target}/**/*.parquet') GROUP BY ALL").fetchall()))
    shutil.rmtree(target, ignore_errors=True)
    return seconds, counts


def python_case(out: Path, config: AuditConfig) -> tuple[float, Counter]:
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from analytics.audit.reference import replay

    t0 = time.perf_counter()
    dataset = ds.dataset(table(out, "batches"), format="parquet", partitioning="hive")
    keys = dataset.to_table(columns=["topic", "partition"]).group_by(["topic", "partition"]).aggregate([]).to_pylist()
    counts: Counter = Counter()
    for key in keys:
        rows = dataset.to_table(columns=list(REPLAY_COLUMNS), filter=(pc.field("topic") == key["topic"])
                                & (pc.field("partition") == key["partition"])).to_pylist()
        counts.update(v["verdict"] for v in replay(rows, config).values())
        del rows
    return time.perf_counter() - t0, counts


def default_memory_case(out: Path, master: str | None = None, conf: dict[str, str] | None = None) -> tuple[float, float, int]:
    """``segaudit audit`` in a fresh driver at Spark's default memory (1 GiB) with
    ``spark.driver.maxResultSize=8m``; (seconds, peak RSS MiB of the driver's process tree, exit code).

    In local mode the driver is also the executor, so 1 GiB holds the windows' sort buffers too;
    on a standalone cluster (``master``) the executors hold the data and the driver only plans.
    """
    env = dict(os.environ)
    env.pop("SPARK_DRIVER_MEMORY", None)
    args = [sys.executable, "-m", "analytics", "audit", str(out), "--conf", "spark.driver.maxResultSize=8m"]
    if master:
        args += ["--master", master]
    else:  # a local session would otherwise get a share of the machine (analytics.spark.memory)
        args += ["--conf", "spark.driver.memory=1g"]
    for key, value in (conf or {}).items():
        args += ["--conf", f"{key}={value}"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    stop = threading.Event()

    def sample():
        nonlocal peak
        while not stop.wait(0.1):
            peak = max(peak, tree_rss_kib(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    stop.set()
    sampler.join()
    if proc.returncode:
        print(err[-3000:], file=sys.stderr)
    return time.perf_counter() - t0, peak / 1024, proc.returncode


def print_default_memory(total: int, label: str, result: tuple[float, float, int]) -> None:
    seconds, peak, code = result
    status = "completed" if code == 0 else f"FAILED (exit {code})"
    print(f"{total:>11,} {label:<30} {seconds:>8.1f} {total / seconds:>10,.0f}   {status}, driver peak RSS {peak:,.0f} MiB",
          flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--work", type=Path, default=Path("/tmp/segaudit-bench"))
    ap.add_argument("--driver-memory", default="8g", help="for the in-process Spark cases")
    ap.add_argument("--python-max", type=int, default=10_000_000, help="largest size the pure-Python replay runs on")
    ap.add_argument("--skip-default-memory", action="store_true")
    ap.add_argument("--executor-memory", default="8g", help="the standalone worker's executors, in the default-memory case")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark option of the in-process session")
    ap.add_argument("--partitions", type=int, default=None, help="also audit each size cut into about N partitions")
    ap.add_argument("--window", action="store_true", help="also audit on the window functions (no Java pass)")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1

    from analytics.spark.session import get_spark

    conf = dict(option.split("=", 1) for option in args.conf)
    spark = get_spark(conf={"spark.driver.memory": args.driver_memory, **conf})
    config = AuditConfig()
    print(f"{cores} cores; Spark local[*], driver memory {args.driver_memory}; DuckDB threads {cores}")
    print(f"{'batches':>11} {'case':<30} {'seconds':>8} {'batches/s':>10} {'vs Spark classify':>18}")
    side_by_side, replay_alone, cut_audit, cut_replay, windows = [], [], [], [], []
    for n in args.batches:
        out, total = prepare(args.work, n)
        times, spark_counts = spark_cases(spark, out, config, args.window)
        assert sum(spark_counts.values()) == total, (spark_counts, total)
        for label in (f"{LEAN} (first)", f"{LEAN} (steady)"):
            times[label], lean_counts = lean_case(spark, out)
        assert lean_counts == spark_counts, ("the lean replay and Spark disagree", lean_counts, spark_counts)
        side_by_side.append((total, times["segaudit audit (steady)"], times[f"{LEAN} (steady)"]))
        replay_alone.append((total, times["Spark classify"], times[f"{LEAN} (steady)"]))
        if args.window:
            windows.append((total, times[f"{WINDOW} (steady)"], times[f"{LEAN} (steady)"]))
        duck_seconds, duck_counts = duckdb_case(out, config, cores)
        assert duck_counts == spark_counts, ("DuckDB and Spark disagree", duck_counts, spark_counts)
        times["DuckDB"] = duck_seconds
        if n <= args.python_max:
            py_seconds, py_counts = python_case(out, config)
            assert py_counts == spark_counts, ("the reference and Spark disagree", py_counts, spark_counts)
            times["pure Python"] = py_seconds
        if args.partitions:
            cut, (audit_s, classify_s, lean_s) = many_partitions(spark, out, config, args.partitions, total)
            times |= cut
            cut_audit.append((total, audit_s, lean_s))
            cut_replay.append((total, classify_s, lean_s))
        base = times["Spark classify"]
        for label, seconds in times.items():
            print(f"{total:>11,} {label:<30} {seconds:>8.1f} {total / seconds:>10,.0f} {seconds / base:>17.2f}x", flush=True)
        if not args.skip_default_memory:
            print_default_memory(total, "local, 1 GiB in all", default_memory_case(out))
            with standalone_cluster(args.work / "cluster", cores=cores, memory=args.executor_memory) as master:
                print_default_memory(total, "cluster, 1 GiB driver", default_memory_case(
                    out, master, {"spark.executor.memory": args.executor_memory, "spark.cores.max": str(cores)}))
    print_side_by_side(side_by_side, "segaudit audit (steady)")
    print_side_by_side(replay_alone, "Spark classify (steady: the audit's replay and its write alone)")
    if windows:
        print_side_by_side(windows, "segaudit audit on Spark's window steps (steady)")
    if len(cut_audit) > 1:  # the marginal cost between the sizes, each cut into about --partitions partitions
        print_side_by_side(cut_audit, f"segaudit audit (steady), each size in about {args.partitions:,} partitions")
        print_side_by_side(cut_replay, f"Spark classify (steady), each size in about {args.partitions:,} partitions")


if __name__ == "__main__":
    main()
