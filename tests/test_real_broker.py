"""A real Apache Kafka broker as the judge: logs that Kafka itself wrote under lost ACKs, expiration,
fencing, aborts, a killed producer, retention, DeleteRecords and compaction, audited with
``segaudit run`` (a copy taken while the broker runs, and the log dir after a clean shutdown), and
compared with what the clients and the broker reported.

One broker per version for the module (the newest 4.x release and 3.9.x); every scenario writes its
own topic (``broker_scenarios.py``). Set ``SEGAUDIT_REAL_BROKER_REPORT=FILE`` to write the tables of
``docs/real-broker.md`` from a run.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from analytics import pipeline
from tests import broker_scenarios as sc
from tests.commands import segaudit_here
from tests.fault_proxy import FaultProxy
from tests.outs import table_dir
from tests.kafka_cluster import VERSIONS, KafkaCluster, copy_log_dir, driven, driven_at_once, kafka_jars

pytestmark = [pytest.mark.broker, pytest.mark.spark]

LOST_ACKS = {  # topic: (client, idempotent)
    "lost-acks-kafka-python-idempotent": ("kafka-python", True),
    "lost-acks-kafka-python-plain": ("kafka-python", False),
    "lost-acks-confluent-idempotent": ("confluent", True),
    "lost-acks-confluent-plain": ("confluent", False),
}
# a plain producer's lost ACKs on a LogAppendTime topic: each retried copy gets the broker's new timestamp
APPENDED = "appended-lost-acks-kafka-python-plain"
TXN_STEPS = ["commit:2", "abort:2", "commit:1", "fence:2", "commit:1"]
# the killed producer's transaction: open in the live copy and in the export over the protocol right
# after it (the coordinator aborts it 20-30 s after it began)
HANG_TIMEOUT_MS = 20000


@dataclass
class BrokerRun:
    version: str
    facts: dict[str, sc.Facts]
    live: Path  # copied while the broker ran, the killed producer's transaction still open
    final: Path  # the broker's own log dir after a clean shutdown
    fetched: str  # OUT of the export over the protocol, right after the live copy
    config: Path
    dump_log: dict = field(default_factory=dict)  # "copy flags" -> (files, lines) compared with Kafka's tool


def _segaudit(args: list[str]) -> int:
    """``segaudit ARGS`` in this process, on the tests' Spark session: its exit code."""
    return segaudit_here(*args).returncode


def _config(path: Path) -> Path:
    path.write_text(
        f"producer_id_expiration_ms = {sc.PRODUCER_ID_EXPIRATION_MS}\n"
        f"transaction_max_timeout_ms = {sc.TRANSACTION_MAX_TIMEOUT_MS}\n"
        '[cleanup_policy]\n"compacted" = "compact"\n'
    )
    return path


def _drive(cluster: KafkaCluster, proxy: FaultProxy, root: Path, spark) -> tuple[dict[str, sc.Facts], Path, str]:
    facts: dict[str, sc.Facts] = {}
    # producers that go idle now and resume after producer.id.expiration.ms (the lost-ACK runs take longer)
    cluster.create_topic("retention", segment_ms=1000)
    cluster.create_topic("expiration")
    retention = sc.Facts("retention and DeleteRecords", "retention", "kafka-python, idempotent (two producers)")
    expiration = sc.Facts("expiration", "expiration", "kafka-python, idempotent")
    idle_retention, idle_expiration = sc.idempotent_producer(cluster), sc.idempotent_producer(cluster)
    sc.send_each(idle_retention, "retention", range(0, 10), retention)
    sc.send_each(idle_expiration, "expiration", range(0, 10), expiration)
    went_idle = time.monotonic()

    for seed, (topic, (client, idempotent)) in enumerate(LOST_ACKS.items()):
        drive = sc.lost_acks_kafka_python if client == "kafka-python" else sc.lost_acks_confluent
        facts[topic] = drive(cluster, proxy, topic, idempotent, seed=seed + 1)
    facts[APPENDED] = sc.lost_acks_kafka_python(cluster, proxy, APPENDED, False, seed=len(LOST_ACKS) + 1,
                                                message_timestamp_type="LogAppendTime")

    # compaction: every other batch rewrites one hot key (the cleaner leaves holes there), the others
    # carry keys of their own; segments rolled every 100 ms, the cleaner eager
    cluster.create_topic("compacted", cleanup_policy="compact", segment_ms=100, min_cleanable_dirty_ratio=0.01,
                         delete_retention_ms=100)
    compacted = sc.Facts("compaction", "compacted", "kafka-python, idempotent")
    producer = sc.idempotent_producer(cluster)
    for i in range(41):
        sc.send_each(producer, "compacted", range(i, i + 1), compacted, key="hot" if i % 2 == 0 else f"k{i}")
        time.sleep(0.03)
    # a second producer rewrites the hot key: the first one's last batch loses its record, and the
    # cleaner keeps it empty (the producer's state must survive); its second send rolls the segment
    successor = sc.idempotent_producer(cluster)
    rewritten = []
    for i in (41, 42):
        time.sleep(0.2)
        rewritten += sc.send_each(successor, "compacted", range(i, i + 1), compacted, key="hot")
    successor.close()
    producer.close()
    compacted.notes["cleaned_up_to"] = sc.wait_for_cleaning(cluster.node(1).log_dir, "compacted", beyond=rewritten[0])
    facts["compacted"] = sc.finish(cluster, compacted)

    # transactions with Kafka's own Java producer (transactions V2 with a 4.x broker)
    facts["txn"], _ = sc.java_transactions(cluster, "txn", "segaudit-txn", TXN_STEPS, timeout_ms=60000)
    # a transactional id that commits, goes idle past transactional.id.expiration.ms and comes back
    expire, _ = sc.java_transactions(cluster, "txn-expire", "segaudit-expire", ["commit:1"], timeout_ms=60000)

    # retention deletes the idle producer's segment; it resumes past its expiration
    time.sleep(max(0.0, sc.PRODUCER_ID_EXPIRATION_MS / 1000 + 1.5 - (time.monotonic() - went_idle)))
    filler = sc.idempotent_producer(cluster)
    sc.send_each(filler, "retention", range(100, 105), retention)  # rolls the idle producer's segment
    sc.set_topic_config(cluster, "retention", retention_ms=5000)
    retention.notes["log_start_after_retention"] = sc.wait_for_log_start(cluster, "retention", 0)
    sc.set_topic_config(cluster, "retention", retention_ms=-1)
    sc.send_each(filler, "retention", range(105, 110), retention)
    end = sc.offsets(cluster, "retention")[1]
    sc.delete_records(cluster, "retention", end - 3)  # the log start in the middle of the active segment
    retention.notes["log_start_after_delete_records"] = end - 3
    # the idle producer resumes above the new log start: DeleteRecords cannot take what it sends
    # (sent before it, on a busy machine its batches rolled into segments wholly below that start)
    sc.send_each(idle_retention, "retention", range(10, 15), retention)
    sc.send_each(filler, "retention", range(110, 112), retention)
    idle_retention.close()
    filler.close()
    facts["retention"] = sc.finish(cluster, retention)
    sc.send_each(idle_expiration, "expiration", range(10, 15), expiration)
    idle_expiration.close()
    facts["expiration"] = sc.finish(cluster, expiration)

    expire.notes["tombstone"] = sc.wait_for_tombstone(cluster.node(1).log_dir, "segaudit-expire")
    again, _ = sc.java_transactions(cluster, "txn-expire", "segaudit-expire", ["commit:1"], 60000, create=False)
    expire.scenario = "transactional.id expiration"
    expire.sent, expire.acknowledged = expire.sent + again.sent, expire.acknowledged + again.acknowledged
    facts["txn-expire"] = sc.finish(cluster, expire)

    # a producer killed inside a transaction: copied while it is open, then the coordinator aborts it
    hang, lines = sc.java_transactions(cluster, "txn-hang", "segaudit-hang", ["commit:1", "hang:2"], HANG_TIMEOUT_MS)
    hang.scenario = "killed inside a transaction"
    live = copy_log_dir(cluster.node(1).log_dir, root / "live")
    fetched = str(root / "fetched")  # the same log over the protocol, the transaction still open
    pipeline.export(spark, [f"kafka://{cluster.bootstrap}"], fetched, records=True)
    hang.notes["open_at_copy"] = lines[-1]["offsets"]
    hang.notes["marker_offset"] = sc.wait_for_end_offset(cluster, "txn-hang", hang.log_end + 1, timeout=60) - 1
    facts["txn-hang"] = sc.finish(cluster, hang)
    return facts, live, fetched


def _run(version: str, root: Path, spark) -> BrokerRun:
    cluster = KafkaCluster(version, root / "cluster", config=sc.BROKER_CONFIG)
    proxy = FaultProxy(upstream_port=cluster.node(1).port).start()
    cluster.node(1).advertised_port = proxy.port  # every client goes through the proxy
    try:
        cluster.start()
        facts, live, fetched = _drive(cluster, proxy, root, spark)
    finally:
        cluster.close()
        proxy.close()
    return BrokerRun(version, facts, live, cluster.node(1).log_dir, fetched, _config(root / "audit.toml"))


@pytest.fixture(scope="module")
def broker_runs(tmp_path_factory, spark) -> dict:
    """Every release's broker driven through the scenarios at once: each mostly waits (on expiration,
    retention, the cleaner, transaction timeouts), so together they take the time of one.
    version -> BrokerRun, or the reason its jars could not be resolved."""
    return driven_at_once({v: (partial(_run, v, tmp_path_factory.mktemp(f"kafka-{v}"), spark),
                               (partial(kafka_jars, v),)) for v in VERSIONS})


@pytest.fixture(scope="module", params=VERSIONS)
def broker_run(request, broker_runs) -> BrokerRun:
    return driven(broker_runs, request.param)


@pytest.fixture(scope="module")
def audits(broker_run, spark, tmp_path_factory):
    """``segaudit run`` over the live copy and over the log dir after shutdown: name -> (exit code, OUT)."""
    root = tmp_path_factory.mktemp(f"audit-{broker_run.version}")
    out = {}
    for name, log_dir in (("live", broker_run.live), ("final", broker_run.final)):
        target = str(root / name)
        code = _segaudit(["run", str(log_dir), "--out", target, "--config", str(broker_run.config), "--no-history"])
        out[name] = (code, target)
    fetched = broker_run.fetched
    assert _segaudit(["audit", fetched, "--config", str(broker_run.config), "--no-history"]) == 0
    out["fetched"] = (_segaudit(["validate", fetched]), fetched)
    return out


def _table(spark, out: str, name: str):
    return spark.read.parquet(str(table_dir(out, name)))


def _rows(spark, out: str, query: str) -> list:
    from analytics.forensics import run_sql

    return run_sql(spark, out, query).collect()


# -- the whole log dir -------------------------------------------------------------------------
@pytest.mark.parametrize("copy", ["live", "final"])
def test_no_violation_anywhere_and_only_the_plain_producers_duplicates_fail(broker_run, audits, spark, copy):
    import json

    code, out = audits[copy]
    violations = _rows(spark, out, "SELECT topic, base_offset, verdict, explanation FROM anomalies WHERE severity = 'violation'")
    assert violations == [], f"{broker_run.version} {copy}: {violations[:5]}"
    results = json.loads(Path(out, "validation", "results.json").read_text())
    failed = sorted(c["id"] for s in results["suites"].values() for c in s["checks"] if not c["success"])
    assert failed == ["no_duplicate_record"] and code == 1
    _only_the_plain_producers_copies_count(spark, out)


def _only_the_plain_producers_copies_count(spark, out: str, log_dir: bool = True) -> None:
    """The copies ``no_duplicate_record`` fails on, per topic: the plain lost-ACK producers' retries, and
    nothing else. ``txn-expire``'s client sends its first run's record again in its second run (the same
    key and value, both committed): a payload sent twice, not a retry, which the default dedup key
    (``delivery``: the producer's timestamp differs) leaves alone (the key+value key counts it:
    :func:`test_the_delivery_key_tells_a_retry_from_a_payload_sent_twice`). The controller's and the
    coordinators' repeats (``__cluster_metadata``'s NoOpRecords, ``__consumer_offsets``' identical
    commits) are not counted, nor listed (docs/internal-topics.md)."""
    from analytics.contract import DUP_DUPLICATE, topic_kind

    counted = {r["topic"]: r["n"] for r in _rows(
        spark, out, f"SELECT topic, count(*) AS n FROM record_duplicates WHERE kind = '{DUP_DUPLICATE}' GROUP BY topic")}
    plain = {t for t, (_, idempotent) in LOST_ACKS.items() if not idempotent} | {APPENDED}
    assert set(counted) == plain, counted
    listed = {r["topic"] for r in _rows(spark, out, "SELECT DISTINCT topic FROM record_duplicates")}
    assert all(topic_kind(t).record_duplicates for t in listed), listed
    # the internal topics were there to count (the metadata log only in a log dir: no Fetch reads it)
    exported = {r["topic"] for r in _rows(spark, out, "SELECT DISTINCT topic FROM records")}
    assert {"__transaction_state", *(["__cluster_metadata"] if log_dir else [])} <= exported, exported


# -- lost ACKs ---------------------------------------------------------------------------------
@pytest.mark.parametrize("topic", [*LOST_ACKS, APPENDED])
def test_lost_acks(broker_run, audits, spark, topic):
    facts = broker_run.facts[topic]
    _, out = audits["final"]
    records = _rows(spark, out, f"SELECT count(*) AS n FROM records WHERE topic = '{topic}'")[0]["n"]
    duplicates = _rows(spark, out, f"SELECT count(*) AS n FROM record_duplicates WHERE topic = '{topic}'")[0]["n"]
    assert facts.responses_dropped > 20  # the experiment really lost acknowledgements
    assert records == facts.log_end - facts.log_start  # every record the broker holds was exported
    if LOST_ACKS.get(topic, (None, False))[1]:  # idempotent: the broker dropped every retry it had appended
        assert records == facts.acknowledged == sc.LOST_ACK_RECORDS and duplicates == 0
    else:  # plain: one extra copy per lost response that the client retried
        assert duplicates == records - facts.acknowledged > 0
        assert facts.acknowledged == sc.LOST_ACK_RECORDS


def test_the_delivery_key_tells_a_retry_from_a_payload_sent_twice(broker_run, audits, spark):
    """Both dedup keys find every copy the plain producers' retries wrote (the log's records less those
    acknowledged, of both clients, on a CreateTime topic and on a LogAppendTime one, where each copy has
    the broker's timestamp of its own append); only ``key_value`` also takes ``txn-expire``'s record
    sent again by the client's second run, which a consumer receives twice as the application sent it."""
    from analytics.audit import tables
    from analytics.contract import DUP_DUPLICATE
    from analytics.publish import published

    _, out = audits["final"]
    view = published(out)
    records, batches = (spark.read.parquet(view.path(t)) for t in ("records", "batches"))
    plain = [t for t, (_, idempotent) in LOST_ACKS.items() if not idempotent] + [APPENDED]
    retried = {t: broker_run.facts[t].log_end - broker_run.facts[t].log_start - broker_run.facts[t].acknowledged
               for t in plain}
    assert all(n > 0 for n in retried.values()), retried
    # the broker stamped every copy anew: a key with the record's timestamp would miss them all
    copied = _rows(spark, out, "SELECT count(*) AS c, count(DISTINCT timestamp) AS d FROM records "
                               f"WHERE topic = '{APPENDED}' GROUP BY key HAVING count(*) > 1")
    assert copied and all(r["c"] == r["d"] for r in copied), copied
    for key, expected in (("delivery", retried), ("key_value", retried | {"txn-expire": 1})):
        copies = tables.record_duplicates(records, key, batches).where(f"kind = '{DUP_DUPLICATE}'")
        assert {r["topic"]: r["n"] for r in copies.groupBy("topic").count().withColumnRenamed("count", "n")
                .collect()} == expected, key


def test_idempotent_producers_alone_pass_every_check(broker_run, spark, tmp_path):
    folders = [str(broker_run.final / f"{t}-0") for t, (_, idempotent) in LOST_ACKS.items() if idempotent]
    code = _segaudit(["run", *folders, "--out", str(tmp_path / "out"), "--config", str(broker_run.config),
                      "--no-history"])
    assert code == 0


# -- transactions ------------------------------------------------------------------------------
def test_commits_aborts_and_a_fenced_producer(broker_run, audits, spark):
    _, out = audits["final"]
    statuses = _rows(spark, out, "SELECT status, count(*) AS n FROM transactions WHERE topic = 'txn' GROUP BY status")
    # commit, abort, commit, the fenced transaction (aborted by the coordinator), the successor's commit
    assert {r["status"]: r["n"] for r in statuses} == {"COMMITTED": 3, "ABORTED": 2}
    aborted_index = _rows(spark, out, "SELECT count(*) AS n FROM batches WHERE topic = 'txn' AND control_type = 'ABORT'")
    assert aborted_index[0]["n"] == 2
    assert broker_run.facts["txn"].errors  # the zombie's send was refused ...
    zombie = _rows(spark, out, "SELECT count(*) AS n FROM records WHERE topic = 'txn' AND CAST(key AS STRING) LIKE '%zombie'")
    assert zombie[0]["n"] == 0  # ... and never reached the log
    verdicts = {r["verdict"] for r in _rows(spark, out, "SELECT DISTINCT verdict FROM batch_verdicts WHERE topic = 'txn'")}
    assert verdicts <= {"OK", "EPOCH_BUMP", "CONTROL_MARKER"}
    epochs = _rows(spark, out, "SELECT count(DISTINCT producer_epoch) AS n FROM batches WHERE topic = 'txn' AND NOT is_control")
    if broker_run.version.startswith("4."):  # transactions V2: every transaction at its own epoch
        assert epochs[0]["n"] == 5
    else:  # one epoch until the fencing, the successor's after it
        assert epochs[0]["n"] == 2


def _markers(spark, out: str, topic: str) -> list[tuple]:
    return [(r["control_type"], r["producer_id"], r["producer_epoch"]) for r in _rows(
        spark, out, f"SELECT control_type, producer_id, producer_epoch FROM batches WHERE topic = '{topic}' "
                    "AND is_control ORDER BY base_offset")]


def _producers(spark, out: str, topic: str) -> list[int]:
    """The producer ids of a topic's data batches, in offset order, each once."""
    rows = _rows(spark, out, f"SELECT producer_id FROM batches WHERE topic = '{topic}' AND NOT is_control "
                             "ORDER BY base_offset")
    return list(dict.fromkeys(r["producer_id"] for r in rows))


def test_the_coordinators_log_records_what_the_transactional_clients_did(broker_run, audits, spark):
    from analytics.forensics import transactional_id_history

    _, out = audits["final"]
    h = transactional_id_history(out, "segaudit-txn", limit=1000)
    # one producer id, the one that wrote the topic; commit, abort, commit, the fenced one, commit
    assert [e["producer_id"] for e in h.producer_ids] == _producers(spark, out, "txn")
    ends = [(c["state"], c["producer_id"], c["producer_epoch"]) for c in h.changes
            if c["state"] in ("CompleteCommit", "CompleteAbort")]
    # every transaction's end is the marker the coordinator wrote into the partition, same producer and epoch
    assert [(s.removeprefix("Complete").upper(), p, e) for s, p, e in ends] == _markers(spark, out, "txn")
    assert [s for s, _, _ in ends] == ["CompleteCommit", "CompleteAbort", "CompleteCommit", "CompleteAbort",
                                       "CompleteCommit"]
    # the fence: the fourth transaction, aborted by the coordinator when the successor initialised
    assert [c["event"] for c in h.changes if c["event"] in ("fenced", "timed_out")] == ["fenced"]
    fence = next(i for i, c in enumerate(h.changes) if c["event"] == "fenced")
    assert [c["state"] for c in h.changes[fence - 1:fence + 3]] == ["Ongoing", "PrepareAbort", "CompleteAbort", "Empty"]
    assert [c["state"] for c in h.changes[:fence]].count("Ongoing") == 4
    assert {p for c in h.changes if c["state"] == "Ongoing" for p in c["partitions"]} == {"txn-0"}

    # the killed producer: open when copied (Ongoing), then aborted by the coordinator at a bumped epoch
    live = transactional_id_history(audits["live"][1], "segaudit-hang", limit=1000)
    assert live.changes[-1]["state"] == "Ongoing" and live.changes[-1]["partitions"] == ["txn-hang-0"]
    hang = transactional_id_history(out, "segaudit-hang", limit=1000)
    after = hang.changes[len(live.changes) - 1:]
    assert [c["event"] for c in after[:2]] == [None, "timed_out"] and after[2]["state"] == "CompleteAbort"
    assert after[1]["producer_epoch"] > after[0]["producer_epoch"]


def test_a_transactional_id_that_expired_came_back_with_a_new_producer_id(broker_run, audits, spark):
    from analytics.forensics import transactional_id_history

    _, out = audits["final"]
    h = transactional_id_history(out, "segaudit-expire", limit=1000)
    first, second = _producers(spark, out, "txn-expire")  # the two runs of the client, one producer id each
    assert [(e["producer_id"], e["committed"]) for e in h.producer_ids] == [(first, 1), (second, 1)]
    assert h.producer_ids[0]["ended"] == "expired"  # (the second expires too when the broker runs on long enough)
    tombstone = next(c for c in h.changes if c["event"] == "expired")
    assert tombstone["offset"] == broker_run.facts["txn-expire"].notes["tombstone"]
    ran = segaudit_here("producer", out, "--producer-id", str(second), "--format", "json")
    assert ran.returncode == 0
    served = json.loads(ran.stdout)["transactional_ids"]
    assert [(t["transactional_id"], t["before"], t["after"]) for t in served] == [("segaudit-expire", first, None)]


def test_reconcile_puts_the_plain_producers_copies_in_their_buckets_and_misses_nothing(broker_run, audits, spark,
                                                                                      tmp_path):
    """The lost-ACK producers' own record of what they sent (a timestamp per record, the record's
    CreateTime) against the log, per second: every sent record is there once (expected minus distinct
    is zero), and each retried copy is counted in the bucket of the record it copies."""
    from collections import Counter

    _, out = audits["final"]
    sent = Counter((topic, 0, stamp // 1000 * 1000) for topic in LOST_ACKS
                   for stamp in broker_run.facts[topic].notes["sent_timestamps"])
    expected = tmp_path / "expected.csv"
    expected.write_text("topic,partition,bucket_start,expected\n"
                        + "".join(f"{t},{p},{b},{n}\n" for (t, p, b), n in sorted(sent.items())))
    plain = [t for t, (_, idempotent) in LOST_ACKS.items() if not idempotent]
    assert _segaudit(["reconcile", out, "--expected", str(expected), "--bucket", "1s"]) == 1  # the plain ones' copies
    rows = [r.asDict() for r in _rows(spark, out, "SELECT * FROM reconciliation WHERE topic LIKE 'lost-acks-%'")]
    assert sum(r["expected"] for r in rows) == len(LOST_ACKS) * sc.LOST_ACK_RECORDS
    assert all(r["missing"] == 0 and r["surplus"] == 0 and r["expected"] == r["distinct"] for r in rows)
    copies = _rows(spark, out, "SELECT d.topic, floor(r.timestamp / 1000) * 1000 AS bucket, count(*) AS n "
                               "FROM record_duplicates d JOIN records r ON r.topic = d.topic AND r.offset = d.first_offset "
                               "WHERE d.topic LIKE 'lost-acks-%' GROUP BY d.topic, floor(r.timestamp / 1000)")
    by_bucket = {(c["topic"], c["bucket"]): c["n"] for c in copies}
    assert by_bucket and {t for t, _ in by_bucket} <= set(plain)
    assert {(r["topic"], int(r["bucket_start"].timestamp()) * 1000): r["duplicated"] for r in rows
            if r["duplicated"]} == by_bucket


def test_a_killed_producers_transaction_is_open_in_the_copy_and_aborted_after(broker_run, audits, spark):
    hang = broker_run.facts["txn-hang"]
    _, live = audits["live"]
    _, final = audits["final"]
    query = "SELECT status, first_offset, end_offset FROM transactions WHERE topic = 'txn-hang' ORDER BY first_offset"
    before = _rows(spark, live, query)
    assert [r["status"] for r in before] == ["COMMITTED", "OPEN"]
    assert before[1]["first_offset"] == hang.notes["open_at_copy"][0]
    after = _rows(spark, final, query)
    assert [r["status"] for r in after] == ["COMMITTED", "ABORTED"]
    assert after[1]["end_offset"] == hang.notes["marker_offset"]


# -- retention, DeleteRecords, expiration --------------------------------------------------------
def test_a_producer_idle_past_retention_resumes_without_a_violation(broker_run, audits, spark):
    _, out = audits["final"]
    rows = _rows(spark, out, "SELECT producer_id, base_offset, base_sequence, verdict, explained_by FROM batch_verdicts "
                             "WHERE topic = 'retention' AND severity != 'ok' ORDER BY base_offset")
    # The idle producer's first batches went with retention; when DeleteRecords removes a whole
    # segment below the new log start (3.9 rolls there, by timing), the other producer's first too.
    assert {(r["verdict"], r["explained_by"]) for r in rows} == {("FIRST_SEEN_NONZERO", "partial_history")}
    # each is its producer's first visible batch, past sequence 0; one of them the idle producer's,
    # which resumed at 10 above the log start DeleteRecords set
    firsts = {r["producer_id"]: (r["at"], r["seq"]) for r in _rows(
        spark, out, "SELECT producer_id, min(base_offset) AS at, min_by(base_sequence, base_offset) AS seq "
                    "FROM batches WHERE topic = 'retention' AND producer_id >= 0 GROUP BY producer_id")}
    assert all((r["base_offset"], r["base_sequence"]) == firsts[r["producer_id"]] and r["base_sequence"] > 0
               for r in rows)
    assert any(r["base_sequence"] == 10 for r in rows) and len({r["producer_id"] for r in rows}) == len(rows)
    start = _rows(spark, out, "SELECT max(log_start_offset) AS s FROM log_start_offsets WHERE topic = 'retention'")
    assert start[0]["s"] == broker_run.facts["retention"].log_start == broker_run.facts["retention"].notes[
        "log_start_after_delete_records"]


def test_a_producer_idle_past_expiration_resumes_in_sequence(broker_run, audits, spark):
    _, out = audits["final"]
    rows = _rows(spark, out, "SELECT verdict, idle_ms FROM batch_verdicts WHERE topic = 'expiration' ORDER BY base_offset")
    assert [r["verdict"] for r in rows] == ["OK"] * 15
    assert rows[10]["idle_ms"] >= sc.PRODUCER_ID_EXPIRATION_MS


# -- compaction ------------------------------------------------------------------------------
def test_compaction_holes_are_explained(broker_run, audits, spark):
    _, out = audits["final"]
    rows = _rows(spark, out, "SELECT verdict, explained_by, severity FROM batch_verdicts WHERE topic = 'compacted'")
    kinds = {(r["verdict"], r["explained_by"], r["severity"]) for r in rows}
    assert ("SEQUENCE_GAP", "compaction", "explained") in kinds
    assert kinds <= {("OK", None, "ok"), ("SEQUENCE_GAP", "compaction", "explained"),
                     ("FIRST_SEEN_NONZERO", "partial_history", "explained")}
    records = _rows(spark, out, "SELECT count(*) AS n FROM records WHERE topic = 'compacted'")[0]["n"]
    assert records < broker_run.facts["compacted"].acknowledged  # the cleaner removed superseded keys
    # the empty batch the cleaner kept for the first producer's state: no violation
    empty = _rows(spark, out, "SELECT verdict, severity FROM batch_verdicts WHERE topic = 'compacted' "
                              "AND record_count = 0 AND NOT is_control")
    assert empty and all(r["severity"] != "violation" for r in empty)


# -- snapshots ---------------------------------------------------------------------------------
def test_every_snapshot_the_broker_wrote_agrees_with_the_replay(broker_run, audits, spark):
    _, out = audits["final"]
    rows = _rows(spark, out, "SELECT c.topic, c.snapshot_offset, c.producer_id, c.status, c.expected_last_offset, "
                             "s.log_start_offset, e.file AS empty_file, b.last FROM snapshot_checks c "
                             "JOIN log_start_offsets s USING (topic, partition) LEFT JOIN (SELECT topic, partition, "
                             "snapshot_offset, file FROM producer_snapshots WHERE producer_id IS NULL) e "
                             "USING (topic, partition, snapshot_offset) LEFT JOIN (SELECT topic, partition, producer_id, "
                             "max(max_timestamp) AS last FROM batches GROUP BY topic, partition, producer_id) b "
                             "USING (topic, partition, producer_id) WHERE c.status != 'match'")
    # the other answers: an entry for batches that DeleteRecords or retention removed since; and at an
    # empty snapshot (the broker's at shutdown, every producer expired: its marker row), each producer
    # the replay holds there, idle past producer.id.expiration.ms when the broker wrote the file
    lost = [r for r in rows if r["status"] == "not_in_log"]
    assert all(r["expected_last_offset"] < r["log_start_offset"] for r in lost), rows
    absent = [r for r in rows if r["status"] == "not_in_snapshot"]
    assert all(r["empty_file"] and Path(r["empty_file"]).stat().st_mtime * 1000 - r["last"] >= sc.PRODUCER_ID_EXPIRATION_MS
               for r in absent), absent
    assert len(lost) + len(absent) == len(rows) and "retention" in {r["topic"] for r in absent}, rows
    # every entry of every snapshot file got an answer (producers expired by then are in no snapshot;
    # an empty file is one marker row with no producer)
    entries = _rows(spark, out, "SELECT count(*) AS n FROM producer_snapshots WHERE producer_id IS NOT NULL")[0]["n"]
    answered = _rows(spark, out, "SELECT count(*) AS n FROM snapshot_checks WHERE status != 'not_in_snapshot'")[0]["n"]
    matched = _rows(spark, out, "SELECT count(*) AS n FROM snapshot_checks WHERE status = 'match'")[0]["n"]
    assert answered == entries and matched >= 2


# -- Kafka's own DumpLogSegments over what the broker wrote -----------------------------------------
@pytest.mark.parametrize("copy", ["live", "final"])
def test_kafka_dump_log_agrees_line_for_line_on_the_brokers_files(broker_run, copy):
    from tests.dumplog_oracle import DATA, DEEP, DUMPED_SUFFIXES, compare_with_kafka

    root = broker_run.live if copy == "live" else broker_run.final
    files = sorted(p for p in root.glob("*-*/*") if p.suffix in DUMPED_SUFFIXES)
    assert {p.suffix for p in files} >= {".log", ".snapshot", ".txnindex"}
    for flags in (DEEP, DATA):
        compared, lines, differences = compare_with_kafka(broker_run.version, files, flags)
        assert differences == [] and compared == len(files) and lines > 1000
        broker_run.dump_log[f"{copy} {' '.join(flags)}"] = (compared, lines)


# -- the tables of docs/real-broker.md ----------------------------------------------------------
def _per_topic(spark, out: str, query: str) -> dict:
    """topic -> the rows of a query grouped by topic (its first column)."""
    found: dict = {}
    for r in _rows(spark, out, query):
        found.setdefault(r[0], []).append(r)
    return found


def test_report_tables(broker_run, audits, spark):
    """Per scenario: what the clients did, what the broker wrote, what the audit said (both copies).
    Written to ``SEGAUDIT_REAL_BROKER_REPORT`` (appended, one section per version) when it is set."""
    lines = [f"### Kafka {broker_run.version}", ""]
    for copy in ("live", "final"):
        code, out = audits[copy]
        wrote = _per_topic(spark, out, "SELECT topic, count(*) AS b, coalesce(sum(CASE WHEN is_control THEN 0 "
                                       "ELSE record_count END), 0) AS r, count_if(is_control) AS m FROM batches GROUP BY topic")
        starts = _per_topic(spark, out, "SELECT topic, max(log_start_offset) AS s FROM log_start_offsets GROUP BY topic")
        verdicts = _per_topic(spark, out, "SELECT topic, verdict, explained_by, count(*) AS n FROM batch_verdicts "
                                          "GROUP BY topic, verdict, explained_by ORDER BY topic, verdict")
        dups = _per_topic(spark, out, "SELECT topic, count(*) AS n FROM record_duplicates GROUP BY topic")
        txns = _per_topic(spark, out, "SELECT topic, status, count(*) AS n FROM transactions GROUP BY topic, status "
                                      "ORDER BY topic, status")
        where = "the copy taken while the broker ran" if copy == "live" else "the log dir after a clean shutdown"
        lines += [f"`segaudit run` over {where}: exit {code}.", "",
                  "| topic | scenario | client | sent | acked | client errors | responses dropped | batches | records | "
                  "markers | log start | verdicts | record duplicates | transactions |",
                  "|---|---|---|--:|--:|---|--:|--:|--:|--:|--:|---|--:|---|"]
        for topic, f in broker_run.facts.items():
            (w,) = wrote[topic]
            start = starts.get(topic, [{"s": 0}])[0]["s"] or 0
            said = ", ".join(f"{r['verdict']}{'/' + r['explained_by'] if r['explained_by'] else ''} {r['n']}"
                             for r in verdicts[topic])
            errors = ", ".join(f"{k} {v}" for k, v in f.errors.items()) or "none"
            statuses = ", ".join(f"{r['status']} {r['n']}" for r in txns.get(topic, [])) or "-"
            copies = dups.get(topic, [{"n": 0}])[0]["n"]
            lines.append(f"| {topic} | {f.scenario} | {f.client} | {f.sent} | {f.acknowledged} | {errors} | "
                         f"{f.responses_dropped} | {w['b']} | {w['r']} | {w['m']} | {start} | {said} | {copies} | {statuses} |")
        lines.append("")
    for run, (files, count) in broker_run.dump_log.items():
        lines.append(f"- Kafka's DumpLogSegments against `segaudit dump-log`, {run}: {files} files, {count:,} lines, "
                     "0 differences")
    lines.append("")
    target = os.environ.get("SEGAUDIT_REAL_BROKER_REPORT")
    if target:
        with open(target, "a") as fh:
            fh.write("\n".join(lines) + "\n")
    assert sum(1 for line in lines if line.startswith("| ") and not line.startswith("| topic")) == 2 * len(broker_run.facts)


# -- the broker profile --------------------------------------------------------------------------
def test_each_profile_reads_the_log_as_its_broker_would(broker_run, audits, spark, tmp_path):
    """The same log under the 3.9 and the default (4.x) profiles: the same verdicts; a transactions V2
    commit (a COMMIT above its transaction's epoch, which only a 4.x coordinator writes) is named as
    such only under a profile before 4.0, and only a 4.x broker's log holds one."""
    import shutil

    _, final = audits["final"]
    out = str(tmp_path / "out")
    shutil.copytree(final, out, symlinks=True)
    assert _segaudit(["audit", out, "--config", str(broker_run.config), "--profile", "3.9", "--no-history"]) == 0
    query = "SELECT topic, base_offset, verdict, explained_by, explanation FROM batch_verdicts"
    seen = {name: {(r["topic"], r["base_offset"]): (r["verdict"], r["explained_by"], r["explanation"] or "")
                   for r in _rows(spark, o, query)} for name, o in (("3.9", out), ("4.x", final))}
    assert {k: v[:2] for k, v in seen["3.9"].items()} == {k: v[:2] for k, v in seen["4.x"].items()}
    flagged = {k for k, v in seen["3.9"].items() if "transactions V2 commit" in v[2]}
    assert not any("transactions V2 commit" in v[2] for v in seen["4.x"].values())
    if broker_run.version.startswith("4."):
        # every commit marker: txn's 3, txn-hang's 1, txn-expire's 2 (one per producer id)
        assert {t for t, _ in flagged} == {"txn", "txn-hang", "txn-expire"} and len(flagged) == 6
    else:
        assert flagged == set()


# -- the same log over the protocol (segaudit export kafka://...) ---------------------------------
def _captured(spark, out: str):
    """The export's captured range per partition, as a DataFrame (topic, partition, start, end)."""
    manifest = json.loads(Path(out, "_export.json").read_text())
    ranges = [(p["topic"], p["partition"], p["start"], p["end"]) for p in manifest["cluster"]["partitions"]]
    return spark.createDataFrame(ranges, "topic string, partition int, start long, end long")


def _in_both(spark, copy: str, fetched: str, table: str):
    """``table``'s rows of both exports for the batches both could hold: in the range the export over the
    protocol captured (the batch holding its start included), up to the copy's last batch (the copy was
    taken first: the log may have grown since)."""
    from pyspark.sql import functions as F

    ranges = _captured(spark, fetched)
    tail = _table(spark, copy, "batches").where("crc_valid").groupBy("topic", "partition").agg(
        F.max("last_offset").alias("copy_end"))
    bounds = ranges.join(tail, ["topic", "partition"])

    def held(out):
        rows = _table(spark, out, table).join(bounds, ["topic", "partition"])
        return rows.where((F.col("last_offset") >= F.col("start")) & (F.col("base_offset") < F.col("end"))
                          & (F.col("base_offset") <= F.col("copy_end"))).drop("start", "end", "copy_end")
    return held(copy), held(fetched)


def test_the_export_over_the_protocol_holds_the_log_dirs_batches_byte_for_byte(broker_run, audits, spark):
    """Every header column and the CRC of every batch fetched equals the batch in the log dir copied
    just before; only ``file`` and ``file_position`` say where it came from."""
    copy, fetched = _in_both(spark, audits["live"][1], audits["fetched"][1], "batches")
    columns = [c for c in copy.columns if c not in ("file", "file_position")]
    copy, fetched = copy.select(*columns), fetched.select(*columns)
    topics = {r["topic"] for r in fetched.select("topic").distinct().collect()}
    assert set(broker_run.facts) <= topics and "__transaction_state" in topics
    assert fetched.count() == copy.count() > 1000
    assert copy.exceptAll(fetched).count() == 0 and fetched.exceptAll(copy).count() == 0
    files = {r["file"] for r in _rows(spark, audits["fetched"][1], "SELECT DISTINCT file FROM batches")}
    cluster = json.loads(Path(audits["fetched"][1], "_export.json").read_text())["cluster"]["cluster_id"]
    assert all(f.startswith(f"kafka://{cluster}/") for f in files)
    # the coordinator's log came over the protocol too
    assert _rows(spark, audits["fetched"][1], "SELECT count(*) AS n FROM transactional_ids")[0]["n"] > 10


def test_the_export_over_the_protocol_accounts_for_every_byte_and_passes_the_same_checks(broker_run, audits, spark):
    code, out = audits["fetched"]
    results = json.loads(Path(out, "validation", "results.json").read_text())
    failed = sorted(c["id"] for s in results["suites"].values() for c in s["checks"] if not c["success"])
    assert failed == ["no_duplicate_record"] and code == 1  # the plain producers' copies, as in the log dir
    _only_the_plain_producers_copies_count(spark, out, log_dir=False)
    errors = _rows(spark, out, "SELECT count(*) AS n FROM parse_errors")[0]["n"]
    fetched = _rows(spark, out, "SELECT sum(size_bytes) AS s, sum(valid_bytes) AS v FROM segments")[0]
    assert errors == 0 and fetched["s"] == fetched["v"] > 0


def test_verdicts_over_the_protocol_equal_the_log_dirs(broker_run, audits, spark):
    """Where both exports hold a partition's whole history (the copy may also hold batches below the log
    start, which retention had not yet removed from disk), every batch gets the same verdict."""
    copy, fetched = _in_both(spark, audits["live"][1], audits["fetched"][1], "batch_verdicts")
    below = {(r["topic"], r["partition"]) for r in _rows(
        spark, audits["live"][1], "SELECT DISTINCT b.topic, b.partition FROM batches b JOIN log_start_offsets s "
                                  "USING (topic, partition) WHERE b.last_offset < s.log_start_offset")}
    columns = ["topic", "partition", "base_offset", "verdict", "explained_by", "severity", "expected_sequence"]
    same = [tuple(r) for r in copy.select(*columns).collect() if (r["topic"], r["partition"]) not in below]
    over = [tuple(r) for r in fetched.select(*columns).collect() if (r["topic"], r["partition"]) not in below]
    assert sorted(over) == sorted(same) and len(same) > 1000
    assert {t for t, *_ in same} >= set(broker_run.facts) - {"retention"}


def test_describe_producers_agrees_with_the_replay(broker_run, audits, spark):
    """The broker's producer state in memory (DescribeProducers at the captured end) against the replay:
    every entry of a producer whose batches were fetched matches it, and the producers the replay knows
    but the broker does not are those idle past producer.id.expiration.ms: the broker expired them."""
    _, out = audits["fetched"]
    captured_at = json.loads(Path(out, "_export.json").read_text())["cluster"]["captured_at_ms"]
    live = _rows(spark, out, "SELECT c.topic, c.producer_id, c.status, p.last FROM snapshot_checks c LEFT JOIN "
                             "(SELECT topic, partition, producer_id, max(max_timestamp) AS last FROM batches "
                             "GROUP BY topic, partition, producer_id) p USING (topic, partition, producer_id) "
                             "WHERE c.snapshot_offset IN (SELECT snapshot_offset FROM producer_snapshots)")
    statuses = {r["status"] for r in live}
    assert "mismatch" not in statuses and statuses <= {"match", "not_in_snapshot", "not_in_log"}
    assert "txn-hang" in {r["topic"] for r in live if r["status"] == "match"}  # the killed producer, just active
    assert all(captured_at - r["last"] >= sc.PRODUCER_ID_EXPIRATION_MS for r in live if r["status"] == "not_in_snapshot")
    entries = _rows(spark, out, "SELECT count(*) AS n FROM producer_snapshots")[0]["n"]
    assert entries == sum(1 for r in live if r["status"] != "not_in_snapshot") > 0


def test_a_killed_producers_open_transaction_is_seen_in_the_log_and_by_its_coordinator(broker_run, audits, spark):
    _, out = audits["fetched"]
    log = _rows(spark, out, "SELECT status, producer_id, producer_epoch, first_offset, coordinator_view FROM transactions "
                            "WHERE topic = 'txn-hang' ORDER BY first_offset")
    assert [(r["status"], r["coordinator_view"]) for r in log] == [("COMMITTED", None), ("OPEN", "open")]
    assert log[1]["first_offset"] == broker_run.facts["txn-hang"].notes["open_at_copy"][0]
    [held] = _rows(spark, out, "SELECT * FROM coordinator_transactions WHERE transactional_id = 'segaudit-hang'")
    assert (held["state"], list(held["partitions"]), held["producer_id"], held["producer_epoch"]) == (
        "Ongoing", ["txn-hang-0"], log[1]["producer_id"], log[1]["producer_epoch"])
    assert held["timeout_ms"] == HANG_TIMEOUT_MS and held["start_timestamp"] > 0
