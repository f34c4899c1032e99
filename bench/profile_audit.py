"""Where an audit's time goes: its passes in wall seconds and task seconds, from Spark's event log.

    .venv/bin/python bench/profile_audit.py OUT [--runs 2] [--range-batches N] [--driver-memory 8g] [--stages S]

Audits the export OUT ``--runs`` times in one Spark application (the first also pays for the JIT
and the Python workers; the last is profiled), then reads the application's event log and prints
each job of the last run: when it started and ended after the run began, its task seconds and
tasks, the records its stages read (input and shuffle) and spilled bytes, and the Python line that
submitted it (PySpark's call site). A pass of the audit is a job or a few consecutive jobs of one
call site; jobs of concurrent writes overlap. ``--stages S``: each stage of the jobs with at
least S task seconds too, with its longest tasks (seconds and records read): where tasks are unequal.
Last, the run's wall seconds with no job running (the driver alone: planning, commits, Python) and
with jobs running, which is where a small audit's fixed cost shows.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def events_of(folder: Path) -> list[dict]:
    """Every event of the application logged under ``folder`` (Spark 4: a folder of rolled files)."""
    events = []
    for name in sorted(glob.glob(str(folder / "*" / "events_*"))):
        with open(name) as f:
            events.extend(json.loads(line) for line in f)
    return events


def jobs_after(events: list[dict], since_ms: int) -> list[dict]:
    """The jobs started at or after ``since_ms``, each with its call site (the description of its SQL
    execution: the Python line that submitted it), times and task metrics."""
    jobs, stage_job, executions = {}, {}, {}
    for e in events:
        kind = e["Event"]
        if kind.endswith("SparkListenerSQLExecutionStart"):
            executions[str(e["executionId"])] = e["description"].replace(str(ROOT) + "/", "")
        elif kind == "SparkListenerJobStart" and e["Submission Time"] >= since_ms:
            props = e.get("Properties") or {}
            site = executions.get(props.get("spark.sql.execution.id"), props.get("callSite.short", "?"))
            jobs[e["Job ID"]] = {"job": e["Job ID"], "start": e["Submission Time"], "end": None, "site": site, "tasks": 0, "task_ms": 0,
                                 "read": 0, "spilled": 0}
            for stage in e["Stage IDs"]:
                stage_job[stage] = e["Job ID"]
        elif kind == "SparkListenerJobEnd" and e["Job ID"] in jobs:
            jobs[e["Job ID"]]["end"] = e["Completion Time"]
        elif kind == "SparkListenerTaskEnd" and stage_job.get(e["Stage ID"]) in jobs and e.get("Task Metrics"):
            m, job = e["Task Metrics"], jobs[stage_job[e["Stage ID"]]]
            job["tasks"] += 1
            job["task_ms"] += m["Executor Run Time"]
            job["read"] += m["Input Metrics"]["Records Read"] + m["Shuffle Read Metrics"]["Total Records Read"]
            job["spilled"] += m["Disk Bytes Spilled"]
            info = e["Task Info"]
            stage = job.setdefault("stages", {}).setdefault(e["Stage ID"], {
                "stage": e["Stage ID"], "first": info["Launch Time"], "last": info["Finish Time"], "tasks": []})
            stage["first"], stage["last"] = min(stage["first"], info["Launch Time"]), max(stage["last"], info["Finish Time"])
            stage["tasks"].append((m["Executor Run Time"], m["Input Metrics"]["Records Read"]
                                   + m["Shuffle Read Metrics"]["Total Records Read"],
                                   m["Shuffle Write Metrics"]["Shuffle Records Written"]))
    return sorted(jobs.values(), key=lambda j: j["start"])


def print_stages(job: dict, started_ms: int) -> None:
    """The job's stages: when their tasks ran, their task seconds, each task's seconds and records read."""
    for stage in sorted(job.get("stages", {}).values(), key=lambda s: s["first"]):
        tasks = sorted(stage["tasks"], reverse=True)
        shown = ", ".join(f"{ms / 1000:.1f} s/{read:,}" for ms, read, _ in tasks[:6])
        print(f"{'':>8} stage {stage['stage']}: {(stage['first'] - started_ms) / 1000:.1f}-"
              f"{(stage['last'] - started_ms) / 1000:.1f} s, {sum(t[0] for t in tasks) / 1000:.1f} task s, "
              f"{len(tasks)} tasks, shuffle written {sum(t[2] for t in tasks):,}; longest: {shown}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--range-batches", type=int, default=None)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--min-task-seconds", type=float, default=0.3, help="jobs with less task time are summed apart")
    ap.add_argument("--stages", type=float, default=None, metavar="S",
                    help="also each stage of the jobs with at least S task seconds")
    args = ap.parse_args(argv)

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.spark.session import get_spark

    events = Path(tempfile.mkdtemp(prefix="audit-events-"))
    spark = get_spark(conf={"spark.driver.memory": args.driver_memory, "spark.eventLog.enabled": "true",
                            "spark.eventLog.dir": str(events), "spark.eventLog.compress": "false"})
    config = AuditConfig() if args.range_batches is None else AuditConfig(range_batches=args.range_batches)
    for run in range(args.runs):
        started_ms = int(time.time() * 1000)
        result = audit(spark, str(args.out), config)
        ended_ms = int(time.time() * 1000)
        print(f"run {run + 1}: {result.seconds:.1f} s", flush=True)
    spark.stop()
    jobs = jobs_after(events_of(events), started_ms)
    print(f"\n{'start s':>8} {'end s':>7} {'task s':>7} {'tasks':>6} {'records read':>13} {'spilled MB':>10}  call site")
    small = defaultdict(list)
    for j in jobs:
        if j["task_ms"] / 1000 < args.min_task_seconds:
            small[j["site"]].append(j)
            continue
        print(f"{(j['start'] - started_ms) / 1000:>8.1f} {((j['end'] or j['start']) - started_ms) / 1000:>7.1f} "
              f"{j['task_ms'] / 1000:>7.1f} {j['tasks']:>6} {j['read']:>13,} {j['spilled'] / 2**20:>10.0f}  {j['site']}")
        if args.stages is not None and j["task_ms"] / 1000 >= args.stages:
            print_stages(j, started_ms)
    print(f"\n{sum(len(v) for v in small.values())} smaller jobs, "
          f"{sum(j['task_ms'] for v in small.values() for j in v) / 1000:.1f} task s in all; by call site:")
    for site, few in sorted(small.items(), key=lambda kv: -busy_ms(kv[1], started_ms, ended_ms)):
        print(f"{len(few):>8} jobs {busy_ms(few, started_ms, ended_ms) / 1000:>6.2f} s wall  {site}")
    total = sum(j["task_ms"] for j in jobs) / 1000
    print(f"task seconds of the run: {total:.1f}")
    busy = busy_ms(jobs, started_ms, ended_ms)
    print(f"wall {(ended_ms - started_ms) / 1000:.1f} s: jobs running {busy / 1000:.1f} s, "
          f"no job running {(ended_ms - started_ms - busy) / 1000:.1f} s")


def busy_ms(jobs: list[dict], start: int, end: int) -> int:
    """The milliseconds of [start, end] in which some job ran."""
    spans = sorted((max(j["start"], start), min(j["end"] or j["start"], end)) for j in jobs)
    busy, reach = 0, start
    for a, b in spans:
        a = max(a, reach)
        if b > a:
            busy, reach = busy + b - a, b
    return busy


if __name__ == "__main__":
    main()
