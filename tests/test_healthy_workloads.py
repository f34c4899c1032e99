"""A healthy cluster audits clean: one combined KRaft node per version driven through what real
clusters run (``healthy_workloads.py``: idempotent and transactional producers, consumer groups, share
groups on 4.x, Kafka Streams under exactly_once_v2 killed and restarted, a distributed Connect worker,
a cleaned compacted topic, retention and DeleteRecords), then its whole data dir audited as a user's
first run would (``segaudit run LOGDIR --out OUT``, no other flag): a copy taken while the node ran,
the node's own dir after a clean shutdown, and the live cluster over the protocol. No violation, every
check passing, exit 0; the export over the protocol equals the copy.

Set ``SEGAUDIT_HEALTHY_REPORT=FILE`` to write the table of docs/real-broker.md from a run.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import healthy_workloads as hw
from tests.commands import segaudit_here
from tests.kafka_cluster import UNAVAILABLE, VERSIONS, JarsUnavailable, KafkaCluster, copy_log_dir, require_jars
from tests.outs import table_dir

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]

COPIES = ("live", "final", "fetched")
COMPACTED = ("healthy-compacted", "healthy-txn-compacted")  # the workloads' compacted topics with holes


@dataclass
class Healthy:
    version: str
    workloads: dict[str, hw.Workload]
    outs: dict[str, tuple[int, str]]  # copy -> (exit code of segaudit run, OUT)
    seconds: dict[str, float]


def _segaudit(args: list[str]) -> int:
    """``segaudit ARGS`` in this process, on the tests' Spark session: its exit code."""
    return segaudit_here(*args).returncode


@pytest.fixture(scope="module", params=VERSIONS)
def healthy(request, tmp_path_factory, spark) -> Healthy:
    version = request.param
    require_jars(version)
    try:
        hw.framework_jars(version)
    except (JarsUnavailable, subprocess.TimeoutExpired) as e:
        pytest.skip(f"{UNAVAILABLE}: {e}")
    root = tmp_path_factory.mktemp(f"healthy-{version}")
    seconds, outs = {}, {}
    started = time.monotonic()
    cluster = KafkaCluster(version, root / "cluster", config=hw.NODE_CONFIG)
    try:
        cluster.start()
        workloads = hw.run_all(cluster, root / "clients")
        seconds["workloads"] = time.monotonic() - started
        live = copy_log_dir(cluster.node(1).log_dir, root / "live")
        mark = time.monotonic()  # the whole job over the protocol, right after the copy
        # no flag: over the protocol the export asks the cluster for its topics' configs (DescribeConfigs),
        # as a log dir's export reads them from __cluster_metadata
        outs["fetched"] = (_segaudit(["run", f"kafka://{cluster.bootstrap}", "--out", str(root / "out-fetched"),
                                      "--no-history"]), str(root / "out-fetched"))
        seconds["fetched"] = time.monotonic() - mark
    finally:
        cluster.close()
    for name, log_dir in (("live", live), ("final", cluster.node(1).log_dir)):
        mark = time.monotonic()
        outs[name] = (_segaudit(["run", str(log_dir), "--out", str(root / f"out-{name}"), "--no-history"]),
                      str(root / f"out-{name}"))
        seconds[name] = time.monotonic() - mark
    seconds["total"] = time.monotonic() - started
    run = Healthy(version, workloads, outs, seconds)
    if os.environ.get("SEGAUDIT_HEALTHY_REPORT"):
        _report(spark, run, Path(os.environ["SEGAUDIT_HEALTHY_REPORT"]))
    return run


def _rows(spark, out: str, query: str) -> list:
    from analytics.forensics import run_sql

    return run_sql(spark, out, query).collect()


def _failed(out: str) -> list[str]:
    results = json.loads(Path(out, "validation", "results.json").read_text())
    return sorted(c["id"] for s in results["suites"].values() for c in s["checks"] if not c["success"])


# -- the verdict ------------------------------------------------------------------------------------
@pytest.mark.parametrize("copy", COPIES)
def test_every_check_passes_and_nothing_is_a_violation(healthy, spark, copy):
    code, out = healthy.outs[copy]
    violations = _rows(spark, out, "SELECT topic, partition, base_offset, verdict, explanation FROM anomalies "
                                   "WHERE severity = 'violation'")
    assert violations == [], f"{healthy.version} {copy}: {violations[:5]}"
    assert _failed(out) == [] and code == 0
    # what is explained, is by the history the log lacks: no producer expired (the broker's default
    # day), no restart; compaction's holes only on the compacted topics
    explained = {(r["topic"], r["verdict"], r["explained_by"]) for r in _rows(
        spark, out, "SELECT DISTINCT topic, verdict, explained_by FROM batch_verdicts WHERE severity = 'explained'")}
    assert {e for _, _, e in explained} <= {"partial_history", "compaction"}, explained
    assert {t for t, _, e in explained if e == "compaction"} <= set(COMPACTED), explained
    assert ("healthy-compacted", "SEQUENCE_GAP", "compaction") in explained  # the cleaner's holes, read as such
    summary = json.loads(Path(out, "summary.json").read_text())
    assert summary["record_duplicates"] == 0
    # no flag named the compacted topics: the data dir's metadata log, or the cluster asked over the
    # protocol, did
    policy = summary["settings"]["cleanup_policy"]
    assert set(COMPACTED) <= set(policy["topics"]["cluster_metadata"]), policy
    assert all(policy["value"][t] == "compact" for t in COMPACTED), policy


def test_every_workload_reached_the_log(healthy, spark):
    """What the workloads wrote is there: each one's topics, the frameworks' own topics."""
    _, out = healthy.outs["final"]
    topics = {r["topic"] for r in _rows(spark, out, "SELECT DISTINCT topic FROM batches")}
    wanted = {t for w in healthy.workloads.values() for t in w.topics}
    assert wanted <= topics, wanted - topics
    assert ("__share_group_state" in topics) == healthy.version.startswith("4.")
    assert {"__cluster_metadata", "connect-configs", "connect-offsets", "connect-status"} <= topics
    assert all(w.acknowledged == w.sent > 0 for w in healthy.workloads.values())


def test_the_streams_crash_left_aborted_transactions_whose_reprocessed_copies_are_not_counted(healthy, spark):
    """The killed instance's open transactions were aborted when its successor fenced it; the records
    it processed again are ``after_abort`` copies (a read_committed consumer sees each once), never
    ``duplicate``; the changelog's repeats are not copies at all (a state store's log)."""
    _, out = healthy.outs["final"]
    streams = healthy.workloads["streams"]
    assert streams.notes["fed_at_kill"]  # the input was still arriving when it was killed
    aborted = _rows(spark, out, "SELECT count(*) AS n FROM transactions WHERE status = 'ABORTED' "
                                "AND topic LIKE 'healthy-streams-%'")[0]["n"]
    assert aborted > 0
    kinds = {(r["topic"], r["kind"]) for r in _rows(
        spark, out, "SELECT DISTINCT topic, kind FROM record_duplicates WHERE topic LIKE 'healthy-streams-%'")}
    assert kinds and {k for _, k in kinds} <= {"after_abort", "aborted"}, kinds
    assert not any(t.endswith("-changelog") for t, _ in kinds)


# -- the live cluster over the protocol ------------------------------------------------------------
def _in_both(spark, copy: str, fetched: str, table: str):
    """``table``'s rows of both exports for the batches both hold: in the range the export over the
    protocol captured, up to the copy's last batch (the copy was taken first)."""
    from pyspark.sql import functions as F

    manifest = json.loads(Path(fetched, "_export.json").read_text())
    ranges = spark.createDataFrame([(p["topic"], p["partition"], p["start"], p["end"])
                                    for p in manifest["cluster"]["partitions"]],
                                   "topic string, partition int, start long, end long")
    tail = spark.read.parquet(str(table_dir(copy, "batches"))).where("crc_valid").groupBy("topic", "partition").agg(
        F.max("last_offset").alias("copy_end"))
    bounds = ranges.join(tail, ["topic", "partition"])

    def held(out):
        rows = spark.read.parquet(str(table_dir(out, table))).join(bounds, ["topic", "partition"])
        return rows.where((F.col("last_offset") >= F.col("start")) & (F.col("base_offset") < F.col("end"))
                          & (F.col("base_offset") <= F.col("copy_end"))).drop("start", "end", "copy_end")
    return held(copy), held(fetched)


def _agreement(spark, healthy: Healthy) -> dict:
    """The export over the protocol against the copy: batches compared header and CRC, and verdicts."""
    live, fetched = healthy.outs["live"][1], healthy.outs["fetched"][1]
    copy, over = _in_both(spark, live, fetched, "batches")
    columns = [c for c in copy.columns if c not in ("file", "file_position")]
    copy, over = copy.select(*columns), over.select(*columns)
    # verdicts where both hold a partition's whole history: the copy may also hold batches below the
    # log start (DeleteRecords inside a segment, retention not yet applied; a running broker's
    # log-start-offset-checkpoint lags), which Fetch never returns
    starts = {(p["topic"], p["partition"]): p["start"]
              for p in json.loads(Path(fetched, "_export.json").read_text())["cluster"]["partitions"]}
    below = [(r["topic"], r["partition"]) for r in _rows(
        spark, live, "SELECT topic, partition, min(base_offset) AS first FROM batches GROUP BY topic, partition")
        if r["first"] < starts.get((r["topic"], r["partition"]), 0)]
    verdict_columns = ["topic", "partition", "base_offset", "verdict", "explained_by", "severity"]
    vc, vo = (v.select(*verdict_columns) for v in _in_both(spark, live, fetched, "batch_verdicts"))
    if below:
        whole = spark.createDataFrame(below, "topic string, partition int")
        vc, vo = vc.join(whole, ["topic", "partition"], "left_anti"), vo.join(whole, ["topic", "partition"], "left_anti")
    return {"batches": over.count(), "copy_batches": copy.count(),
            "differing": copy.exceptAll(over).count() + over.exceptAll(copy).count(),
            "verdicts": vc.count(), "verdicts_differing": vc.exceptAll(vo).count() + vo.exceptAll(vc).count(),
            "partitions_below_log_start": sorted(f"{t}-{p}" for t, p in below)}


def test_the_export_over_the_protocol_equals_the_copy(healthy, spark):
    agreement = _agreement(spark, healthy)
    assert agreement["batches"] == agreement["copy_batches"] > 300, agreement
    assert agreement["differing"] == 0 and agreement["verdicts_differing"] == 0, agreement
    assert agreement["verdicts"] > 300 and "healthy-retention-0" in agreement["partitions_below_log_start"]
    fetched = {r["topic"] for r in _rows(spark, healthy.outs["fetched"][1], "SELECT DISTINCT topic FROM batches")}
    assert {t for w in healthy.workloads.values() for t in w.topics} <= fetched


# -- the table of docs/real-broker.md ----------------------------------------------------------------
INTERNAL = ("__cluster_metadata", "__consumer_offsets", "__transaction_state", "__share_group_state")


def _report(spark, healthy: Healthy, path: Path) -> None:
    """One row per workload (its own topics; the coordinators' and the controller's apart), per copy."""
    groups = {w.name: [t for t in w.topics if not t.startswith("__")] for w in healthy.workloads.values()}
    groups["coordinators and controller"] = list(INTERNAL)
    agreement = _agreement(spark, healthy)
    lines = []
    for name, topics in groups.items():
        names = ", ".join(f"'{t}'" for t in topics)
        for copy in ("live", "final"):
            code, out = healthy.outs[copy]
            rows = _rows(spark, out, f"SELECT verdict, count(*) AS n FROM batch_verdicts WHERE topic IN ({names}) "
                                     "GROUP BY verdict ORDER BY n DESC")
            counts = ", ".join(f"{r['verdict']} {r['n']}" for r in rows)
            batches = sum(r["n"] for r in rows)
            failed = ", ".join(_failed(out)) or "none"
            lines.append(f"| {name} | {healthy.version} | {copy} | {batches} | {counts} | {failed} | {code} |")
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n")
        f.write(f"<!-- {healthy.version}: over the protocol: exit {healthy.outs['fetched'][0]}, failed "
                f"{_failed(healthy.outs['fetched'][1]) or 'none'}, {json.dumps(agreement)}; seconds "
                f"{json.dumps({k: round(v, 1) for k, v in healthy.seconds.items()})} -->\n")
