"""The audit on Spark against the generator's ground truth: every batch's verdict, severity and
explanation, every transaction's status, for every scenario."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest

from analytics.contract import log_dir_of
from analytics.contract import schemas as schema
from analytics.audit.config import load_config
from analytics.audit.job import audit, read_audit
from analytics.export import export
from analytics.generate import generate
from analytics.generate.scenarios import SCENARIO_NAMES
from tests.commands import assert_own_lines
from analytics.contract.vocabulary import TABLES
from tests.outs import table_dir

pytestmark = pytest.mark.spark
RECORD_SCENARIOS = ("plain-retries", "missed-dedup", "state-loss-retry", "transactions")  # as in conftest.audited


@pytest.fixture(scope="module")
def every_scenario(audited):
    """``audited`` with every scenario built, three at a time."""
    audited.prepare()
    return audited


@pytest.mark.parametrize("name", [n for n in SCENARIO_NAMES if n != "mixed"])
def test_verdicts_equal_the_ground_truth(every_scenario, name):
    g, target = every_scenario[name]
    truth = {(r["topic"], r["partition"], r["base_offset"]): (r["verdict"], r["severity"], r["explained_by"])
             for r in pq.read_table(g.truth_dir / "batches.parquet").to_pylist()}
    got = {(r["topic"], r["partition"], r["base_offset"]): (r["verdict"], r["severity"], r["explained_by"])
           for r in pq.read_table(str(table_dir(target, "batch_verdicts"))).to_pylist()}
    assert got == truth


@pytest.mark.parametrize("name", ["transactions", "transactions-v2", "fenced-zombie"])
def test_transactions_equal_the_ground_truth(audited, name):
    g, target = audited[name]
    cols = ("topic", "partition", "producer_id", "producer_epoch", "first_offset", "end_offset", "status", "coordinator_epoch")
    truth = sorted(tuple(r[c] for c in cols) for r in pq.read_table(g.truth_dir / "transactions.parquet").to_pylist())
    got = sorted(tuple(r[c] for c in cols) for r in pq.read_table(str(table_dir(target, "transactions"))).to_pylist())
    assert got == truth


def test_summary_and_anomalies(audited):
    _, target = audited["missed-dedup"]
    summary = read_audit(target)
    assert summary["verdicts"]["DUPLICATE"] == 1 and summary["severities"]["violation"] == 1
    anomalies = pq.read_table(str(table_dir(target, "anomalies"))).to_pylist()
    assert [a["verdict"] for a in anomalies if a["severity"] == "violation"] == ["DUPLICATE"]
    assert all(a["severity"] != "ok" for a in anomalies)


def test_a_table_spark_wrote_is_read_with_the_schema_spark_infers(spark, audited):
    """``read_parquet`` reads Spark's schema from a footer Spark wrote instead of running Spark's
    inference job: the same schema for every audit table; none for a partitioned table (its partition
    column is in folder names) or a table pyarrow wrote (the export of a small log, in-process)."""
    from analytics.spark.tables import read_parquet, written_schema

    _, target = audited["transactions"]
    read = {}
    for name in sorted(os.listdir(target)):
        path = str(table_dir(target, name)) if name in TABLES else os.path.join(target, name)
        if os.path.isdir(path) and not name.startswith((".", "_")):
            read[name] = written_schema(path)
            assert read_parquet(spark, path).schema == spark.read.parquet(path).schema, name
    assert read["batch_verdicts"] is None and read["batches"] is None
    assert {"anomalies", "producer_sessions", "producer_state", "transactions", "record_duplicates"} <= {
        name for name, written in read.items() if written is not None}
    assert written_schema(os.path.join(target, "no-such-table")) is None


def test_producer_sessions_count_batches_per_epoch(audited):
    _, target = audited["kip360-bump"]
    sessions = pq.read_table(str(table_dir(target, "producer_sessions"))).to_pylist()
    assert sorted((s["partition"], s["producer_epoch"]) for s in sessions) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert all(s["first_sequence"] == 0 for s in sessions)
    assert sum(s["epoch_bump"] for s in sessions) == 4


def test_the_explanation_names_the_evidence(audited):
    _, target = audited["idle-expiration"]
    [gap] = [r for r in pq.read_table(str(table_dir(target, "anomalies"))).to_pylist() if r["verdict"] == "SEQUENCE_GAP"]
    assert gap["idle_ms"] >= 86_400_000 and gap["explained_by"] == "producer_expiration"
    assert "explained by producer_expiration" in gap["explanation"] and str(gap["expected_sequence"]) in gap["explanation"]


@pytest.mark.parametrize("name", RECORD_SCENARIOS)
def test_record_duplicates_equal_the_ground_truth(audited, name):
    g, target = audited[name]
    cols = ("topic", "partition", "offset", "first_offset", "producer_id", "first_producer_id")
    truth = sorted(tuple(r[c] for c in cols) for r in pq.read_table(g.truth_dir / "record_duplicates.parquet").to_pylist())
    got = sorted(tuple(r[c] for c in cols) for r in pq.read_table(str(table_dir(target, "record_duplicates"))).to_pylist())
    assert got == truth
    assert read_audit(target)["record_duplicates"] == len(truth)
    if name != "transactions":
        assert truth  # each of the others repeats records on purpose


def test_json_dedup_keys_are_refused_with_a_reason(tmp_path):
    config = tmp_path / "audit.toml"
    config.write_text('dedup_key = "json:id"\n')
    with pytest.raises(ValueError, match="needs record values"):
        load_config(config)


def test_the_same_partition_in_two_log_dirs_is_replayed_apart(spark, tmp_path):
    a = generate(tmp_path / "a" / "logs", "clean", seed=1)
    b = generate(tmp_path / "b" / "logs", "clean", seed=1)  # same producer ids, same sequences
    out = str(tmp_path / "out")
    export(None, [str(a.log_dir), str(b.log_dir)], out)
    audit(spark, out, load_config(None))
    verdicts = pq.read_table(str(table_dir(out, "batch_verdicts"))).to_pylist()
    assert len(verdicts) == 2 * a.batches and {v["verdict"] for v in verdicts} == {"OK"}
    sessions = pq.read_table(str(table_dir(out, "producer_sessions"))).to_pylist()
    assert len({s["log_dir"] for s in sessions}) == 2


@pytest.mark.corpus
def test_the_corpus_has_no_violation_and_ksqldb_command_topics_bump_and_commit(corpus_audited):
    summary, out = corpus_audited
    assert summary.severities["violation"] == 0 and summary.severities["explained"] == 0
    rows = pq.read_table(str(table_dir(out, "batch_verdicts"))).to_pylist()
    ksql = [r for r in rows if r["topic"].startswith("_confluent-ksql-") and r["topic"].endswith("command_topic")]
    verdicts = {r["verdict"] for r in ksql}
    assert "EPOCH_BUMP" in verdicts and "CONTROL_MARKER" in verdicts and verdicts <= {"OK", "EPOCH_BUMP", "CONTROL_MARKER"}
    assert {r["control_type"] for r in ksql if r["verdict"] == "CONTROL_MARKER"} == {"COMMIT"}
    # ksqlDB's command topics are written in transactions: every commit the coordinator's log records
    # (its __transaction_state, in the same log dir) is a COMMIT marker of the same producer and epoch
    changes = pq.read_table(str(table_dir(out, "transactional_ids"))).to_pylist()
    assert len(changes) == 44 and {c["value_version"] for c in changes} == {0}
    for log_dir in {log_dir_of(c["file"]) for c in changes}:
        commits = sorted((c["offset"], c["producer_id"], c["producer_epoch"]) for c in changes
                         if log_dir_of(c["file"]) == log_dir and c["state"] == "CompleteCommit")
        markers = sorted((r["base_offset"], r["producer_id"], r["producer_epoch"]) for r in ksql
                         if log_dir_of(r["file"]) == log_dir and r["control_type"] == "COMMIT")
        assert commits and [c[1:] for c in commits] == [m[1:] for m in markers]
        partitions = {p for c in changes if log_dir_of(c["file"]) == log_dir and c["state"] == "Ongoing"
                      for p in c["partitions"]}
        assert partitions == {f"{r['topic']}-{r['partition']}" for r in ksql if log_dir_of(r["file"]) == log_dir}


def test_cli_audit_prints_verdicts_and_refuses_an_incomplete_export(audited, tmp_path, capsys):
    from analytics.cli import main

    g, target = audited["lost-batch"]
    assert main(["audit", target, "--config", str(g.truth_dir / "audit.toml")]) == 0
    out, err = capsys.readouterr()
    assert_own_lines(err)
    assert "SEQUENCE_GAP" in out and "violation" in out
    (tmp_path / "half").mkdir()
    assert main(["audit", str(tmp_path / "half")]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "no complete export" in err
    bad = tmp_path / "bad.toml"
    bad.write_text("no_such_key = 1\n")
    assert main(["audit", target, "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "unknown configuration keys: no_such_key" in err


@pytest.mark.parametrize("name", ["clean", "transactions", "sequence-wrap", "kip360-bump", "state-loss-retry"])
def test_snapshot_checks_match_the_simulated_brokers_snapshots(audited, name):
    _, target = audited[name]
    checks = pq.read_table(str(table_dir(target, "snapshot_checks"))).to_pylist()
    assert checks and {c["status"] for c in checks} == {"match"}
    assert read_audit(target)["snapshot_checks"]["match"] == len(checks)


def test_snapshot_checks_report_an_expired_producer(audited):
    _, target = audited["idle-expiration"]
    checks = pq.read_table(str(table_dir(target, "snapshot_checks"))).to_pylist()
    missing = {(c["producer_id"], c["status"]) for c in checks if c["status"] != "match"}
    assert missing == {(8001, "not_in_snapshot")}  # the broker expired it; the log still shows its batches


@pytest.mark.corpus
def test_corpus_snapshots_match_the_replay_except_the_ticks_partitions(corpus_audited):
    _, out = corpus_audited
    checks = pq.read_table(str(table_dir(out, "snapshot_checks"))).to_pylist()
    disagree = {c["topic"] for c in checks if c["status"] != "match"}
    assert disagree and all(t.startswith("ticks.") for t in disagree)
    assert sum(c["status"] == "match" for c in checks) > 12_000


def test_every_configuration_key_is_also_a_flag(audited, capsys):
    """The flags alone reproduce the generated configuration: the same verdicts as with the file."""
    from analytics.cli import main

    g, target = audited["state-loss-retry"]
    restart = load_config(g.truth_dir / "audit.toml").broker_restarts[0]
    empty = g.truth_dir.parent / "no-settings.toml"  # the defaults, not the previous audit's configuration
    empty.write_text("")
    assert main(["audit", target, "--config", str(empty),
                 "--restart", f"{restart.topic}:{restart.partition}@offset={restart.offset}",
                 "--cleanup-policy", "other=compact", "--log-start", "other:0=5", "--dedup-key", "key_value"]) == 0
    assert read_audit(target)["verdicts"]["DUPLICATE"] == 1
    explained = [r for r in pq.read_table(str(table_dir(target, "anomalies"))).to_pylist() if r["verdict"] == "DUPLICATE"]
    assert [r["explained_by"] for r in explained] == ["state_loss"]
    assert_own_lines(capsys.readouterr().err)
    assert main(["audit", target, "--restart", "when=5"]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "offset=N or time=MS" in err


def _empty_snapshot_case(spark, tmp_path):
    """One partition's verdicts and its two snapshot files as the export reads them (``read_sidecar``):
    at 20 one entry (producer 2), at 27 none, written by the project's writer. Producer 1's batches
    all lie below the log start 17, producer 2's from 18 to 24, producer 3's at 30 (after both)."""
    from analytics.kafka.sidecars import read_sidecar, write_snapshot
    from analytics.kafka.logdir import row_dict
    from analytics.spark.source import spark_schema

    part = tmp_path / "b1" / "t-0"
    part.mkdir(parents=True)
    (part / f"{20:020d}.snapshot").write_bytes(write_snapshot([(2, 0, 1, 19, 0, 0, -1, -1)]))
    (part / f"{27:020d}.snapshot").write_bytes(write_snapshot([]))
    rows = [row_dict(r, schema.PRODUCER_SNAPSHOTS) for name in (20, 27)
            for r in read_sidecar(part / f"{name:020d}.snapshot", topic="t", partition=0).rows]
    assert [r["producer_id"] for r in rows] == [2, None]  # the empty file: its marker row
    snapshots = spark.createDataFrame(rows, spark_schema(schema.PRODUCER_SNAPSHOTS))
    log = str(part / f"{0:020d}.log")
    batches = [(1, 0, 0), (1, 5, 1), (1, 10, 2), (2, 18, 0), (2, 19, 1), (2, 24, 2), (3, 30, 0)]
    v = spark.createDataFrame(
        [(log, "t", 0, pid, offset, i * 70, 0, seq, offset) for i, (pid, offset, seq) in enumerate(batches)],
        "file string, topic string, partition int, producer_id long, base_offset long, file_position long, "
        "producer_epoch short, state_last_sequence int, state_last_offset long").selectExpr(
        "*", "2 AS magic", "false AS is_control", "1 AS record_count", "0L AS max_timestamp", "base_offset AS last_offset",
        "state_last_sequence AS base_sequence", "state_last_sequence AS last_sequence", "'OK' AS verdict",
        "true AS crc_valid")
    log_starts = spark.createDataFrame(
        [("t", 0, 17, str(tmp_path / "b1" / "log-start-offset-checkpoint"))], spark_schema(schema.LOG_START_OFFSETS))
    return v, snapshots, log_starts


def test_an_empty_snapshot_lacks_the_producers_the_replay_holds_there(spark, tmp_path):
    """An empty .snapshot (every producer expired, or dropped) still has an offset: each producer the
    replay holds below it is ``not_in_snapshot``, except one whose last offset lies below the log start
    offset, which the broker drops (expected absent: no row)."""
    from analytics.audit.snapshots import snapshot_checks as _snapshot_checks
    from analytics.audit.tables import per_file as _per_file

    v, snapshots, log_starts = _empty_snapshot_case(spark, tmp_path)

    def checks(starts):
        return {(r["snapshot_offset"], r["producer_id"]): (r["status"], r["replayed_last_sequence"],
                                                          r["replayed_last_offset"], r["log_dir"])
                for r in _snapshot_checks(v, _per_file(v), snapshots, starts).collect()}

    log_dir = str(tmp_path / "b1")
    assert checks(log_starts) == {
        (20, 2): ("match", 1, 19, log_dir),
        (27, 2): ("not_in_snapshot", 2, 24, log_dir),
    }
    # without the log start, producer 1 is one the broker lost, at both offsets
    assert checks(None) == {
        (20, 1): ("not_in_snapshot", 2, 10, log_dir),
        (20, 2): ("match", 1, 19, log_dir),
        (27, 1): ("not_in_snapshot", 2, 10, log_dir),
        (27, 2): ("not_in_snapshot", 2, 24, log_dir),
    }
    # a producer the snapshot holds is compared even below the log start
    snap = str(tmp_path / "b1" / "t-0" / f"{27:020d}.snapshot")
    held = spark.createDataFrame([("t", 0, 27, 1, 0, 2, 10, 0, 0, -1, -1, snap)], snapshots.schema)
    got = {(r["snapshot_offset"], r["producer_id"]): r["status"]
           for r in _snapshot_checks(v, _per_file(v), snapshots.unionByName(held), log_starts).collect()}
    assert got == {(20, 2): "match", (27, 1): "match", (27, 2): "not_in_snapshot"}


def test_snapshot_checks_take_the_last_batch_below_each_of_many_snapshots(spark):
    """Dozens of snapshot offsets per partition (the binary search over them), some at a batch's own
    offset, some before the first and past the last batch, in two log dirs of the same partition (six
    segment files each; on one, few snapshots, so most files hold none and only their last state
    counts): every status and replayed state equals a brute-force search of the batches below the
    offset."""
    import random

    from analytics.audit.snapshots import snapshot_checks as _snapshot_checks
    from analytics.audit.tables import per_file as _per_file
    from analytics.spark.source import spark_schema

    rng = random.Random(11)
    v_schema = "file string, topic string, partition int, producer_id long, base_offset long, file_position long, " \
               "producer_epoch short, state_last_sequence int, state_last_offset long"
    rows, entries, want = [], [], {}
    for broker in ("/data/b1", "/data/b2"):
        offset, log = 3, []
        for position in range(300):
            if position % 50 == 0:  # six segment files: snapshots fall inside some, between others
                file = f"{broker}/t-0/{offset:020d}.log"
            pid = rng.choice((1, 2, 3))
            row = (file, "t", 0, pid, offset, position * 90, rng.choice((0, 1)), rng.randrange(50), offset)
            rows.append(row)
            log.append(row)
            offset += rng.choice((1, 1, 2, 7))
        many = 40 if broker.endswith("1") else 2  # on b2 most files hold no snapshot offset
        points = sorted(set(rng.sample(range(0, offset + 20), many)) | {log[0][4], log[150][4], log[-1][4]})
        snap = f"{broker}/t-0/{0:020d}.snapshot"
        for point in points:
            for pid in (1, 2, 3, 9):
                below = [r for r in log if r[3] == pid and r[4] < point]
                last = max(below, key=lambda r: (r[4], r[5])) if below else None
                state = (last[6], last[7], last[8]) if last else None
                choice = rng.choice(("same", "other", "absent"))
                if choice == "absent":
                    want[(broker, point, pid)] = ("not_in_snapshot", state) if last else None
                    continue
                epoch, seq, off = state if state else (0, 5, 5)
                if choice == "other":
                    seq += 1
                entries.append(("t", 0, point, pid, epoch, seq, off, 0, 0, 0, -1, snap))
                status = "not_in_log" if last is None else "match" if choice == "same" else "mismatch"
                want[(broker, point, pid)] = (status, state)
    snapshots = spark.createDataFrame(entries, spark_schema(schema.PRODUCER_SNAPSHOTS))
    v = spark.createDataFrame(rows, v_schema).selectExpr(  # the other columns the per-file aggregate reads
        "*", "2 AS magic", "false AS is_control", "1 AS record_count", "0L AS max_timestamp", "base_offset AS last_offset",
        "state_last_sequence AS base_sequence", "state_last_sequence AS last_sequence", "'OK' AS verdict",
        "true AS crc_valid")
    got = {(r["log_dir"], r["snapshot_offset"], r["producer_id"]):
           (r["status"], (r["replayed_epoch"], r["replayed_last_sequence"], r["replayed_last_offset"])
            if r["replayed_epoch"] is not None else None)
           for r in _snapshot_checks(v, _per_file(v), snapshots).collect()}
    known = {(e[-1].rsplit("/", 2)[0], e[2]) for e in entries}  # a snapshot is known by its entries
    assert got == {k: w for k, w in want.items() if w is not None and k[:2] in known}
    assert {s for s, _ in got.values()} == {"match", "mismatch", "not_in_log", "not_in_snapshot"}


def test_each_log_dir_explains_by_its_own_log_start_offset(spark):
    """The same partition on two brokers whose log starts differ (records deleted on one, both logs
    still beginning at offset 0): a producer first seen at sequence 7 is partial history only where
    the log start says earlier records are gone; on the other broker it is a violation."""
    from analytics.audit.rules import classify
    from analytics.spark.source import spark_schema

    base = {f: None for f in schema.BATCHES.names}
    rows = []
    for broker in ("/data/b1", "/data/b2"):
        for i, (pid, seq) in enumerate(((1, 0), (2, 7))):
            rows.append(base | dict(
                topic="t", partition=0, file=f"{broker}/t-0/{0:020d}.log", file_position=i * 80, batch_size=80,
                magic=2, crc_valid=True, base_offset=i, last_offset=i, record_count=1, is_transactional=False,
                is_control=False, base_timestamp=1000, max_timestamp=1000, producer_id=pid, producer_epoch=0,
                base_sequence=seq, last_sequence=seq))
    batches = spark.createDataFrame(rows, spark_schema(schema.BATCHES))
    starts = spark.createDataFrame(  # what the export writes from each log dir's log-start-offset-checkpoint
        [("t", 0, 1, "/data/b1/log-start-offset-checkpoint"), ("t", 0, 0, "/data/b2/log-start-offset-checkpoint")],
        "topic string, partition int, log_start_offset long, file string")
    got = {(r["file"].split("/")[2], r["producer_id"]): (r["verdict"], r["severity"], r["explained_by"])
           for r in classify(batches, load_config(None), starts).collect()}
    assert got == {
        ("b1", 1): ("OK", "ok", None), ("b1", 2): ("FIRST_SEEN_NONZERO", "explained", "partial_history"),
        ("b2", 1): ("OK", "ok", None), ("b2", 2): ("FIRST_SEEN_NONZERO", "violation", None),
    }
    # an export from before the checkpoint's file was kept: the highest start of the partition, for both
    legacy = {(r["file"].split("/")[2], r["producer_id"]): r["explained_by"]
              for r in classify(batches, load_config(None), starts.drop("file")).collect()}
    assert legacy[("b2", 2)] == "partial_history"


# --- the broker profile (replay rules §2.9) ---------------------------------------------------------
DAY = 86_400_000
PROFILE_NAMES = ("4.x", "kip1228", "4.0", "3.9", "3.4", "2.7", "2.5", "2.4", "2.1")


def _profile_log(spark):
    """One log whose explanations depend on the brokers' version: per topic one producer's batches
    as (epoch, first sequence or marker type, records, timestamp, transactional)."""
    from analytics.spark.source import spark_schema

    histories = {
        "expire-gap": [(0, 0, 1, 0, False), (0, 1, 1, 1000, False), (0, 5, 1, 1000 + 2 * DAY, False)],
        "expire-zombie": [(2, 0, 1, 0, False), (2, 1, 1, 10, False), (1, 0, 1, 10 + 8 * DAY, False)],
        "restart-dup": [(0, 0, 2, 0, False), (0, 2, 2, 10, False), (0, 2, 2, 20, False), (0, 4, 1, 30, False)],
        "evicted": [(0, 0, 2, 0, False), (0, 2, 1, 10, False), (0, 0, 1, 20, False), (0, 1, 2, 30, False),
                    (0, 3, 1, 40, False)],
        "tv2": [(3, 0, 1, 0, True), (3, 1, 1, 10, True), (4, "COMMIT", 1, 20, False), (4, 0, 1, 30, True),
                (4, "COMMIT", 1, 40, False), (4, 1, 1, 50, True), (5, "ABORT", 1, 60, False)],
    }
    base = {f: None for f in schema.BATCHES.names}
    rows = []
    for pid, (topic, batches) in enumerate(histories.items()):
        offset = 0
        for epoch, seq, n, ts, txn in batches:
            control = seq if isinstance(seq, str) else None
            first = -1 if control else seq
            rows.append(base | dict(
                topic=topic, partition=0, file=f"/logs/{topic}-0/{0:020d}.log", file_position=offset * 100, batch_size=100,
                magic=2, crc_valid=True, base_offset=offset, last_offset=offset + n - 1, record_count=n,
                is_transactional=txn or control is not None, is_control=control is not None, base_timestamp=ts,
                max_timestamp=ts, producer_id=pid, producer_epoch=epoch, base_sequence=first,
                last_sequence=-1 if control else first + n - 1, control_type=control, coordinator_epoch=1 if control else None))
            offset += n
    return spark.createDataFrame(rows, spark_schema(schema.BATCHES)), rows


def _under(spark, df, rows, profile):
    from analytics.audit.config import AuditConfig, Restart
    from analytics.audit.rules import classify
    from analytics.audit.reference import replay

    config = AuditConfig(profile=profile, log_start_offsets={("evicted", 0): 3},
                         broker_restarts=(Restart(offset=4, topic="restart-dup"),))
    got = {(r["topic"], r["base_offset"]): (r["verdict"], r["explained_by"], r["explanation"])
           for r in classify(df, config).collect()}
    reference = replay(rows, config)
    assert {(b["topic"], b["base_offset"]): reference[(b["file"], b["file_position"])]["explained_by"] for b in rows} \
        == {k: v[1] for k, v in got.items()}
    return got


def test_the_profile_decides_what_explains_a_break(spark):
    """The same log under each profile: the explanations follow the broker versions (replay rules §2.9)."""
    df, rows = _profile_log(spark)
    got = {p: _under(spark, df, rows, p) for p in PROFILE_NAMES}
    since = {p: {v: p in names for v, names in {
        "3.4": ("4.x", "kip1228", "4.0", "3.9", "3.4"), "2.5": ("4.x", "kip1228", "4.0", "3.9", "3.4", "2.7", "2.5"),
        "2.4": ("4.x", "kip1228", "4.0", "3.9", "3.4", "2.7", "2.5", "2.4"), "4.0": ("4.x", "kip1228", "4.0")}.items()}
        for p in PROFILE_NAMES}
    for p in PROFILE_NAMES:
        v = got[p]
        # a gap after 2 days idle: producer.id.expiration.ms defaults to 1 day since 3.4, before to 7 days
        # (transactional.id.expiration.ms); and before 2.5 a forgotten producer could not go on at sequence 5
        assert v[("expire-gap", 2)][:2] == ("SEQUENCE_GAP", "producer_expiration" if since[p]["3.4"] else None), p
        # a zombie at sequence 0 after 8 days: every version took it from a forgotten producer
        assert v[("expire-zombie", 2)][:2] == ("FENCED_ZOMBIE_WRITE", "producer_expiration"), p
        # the retry of a batch at sequence 2 after a restart lost the state: refused before KIP-360 (2.5)
        assert v[("restart-dup", 4)][:2] == ("DUPLICATE", "state_loss" if since[p]["2.5"] else None), p
        # the log start (3) passed the producer's batches: up to 2.3 the broker forgot it and the client
        # restarted at 0; before 2.5 the batches going on from that restart repeat only deleted sequences
        assert v[("evicted", 3)][:2] == ("SEQUENCE_REGRESSION", None if since[p]["2.4"] else "partial_history"), p
        assert v[("evicted", 4)][:2] == ("SEQUENCE_REGRESSION", None if since[p]["2.5"] else "partial_history"), p
        assert v[("evicted", 6)][:2] == ("OK", None), p
        # a COMMIT above its transaction's epoch is transactions V2 (4.0+): no rule breaks, but under an
        # older profile its sentence says so; a fencing ABORT at epoch + 1 is normal in every version
        commit = v[("tv2", 2)]
        assert commit[:2] == ("CONTROL_MARKER", None)
        assert ("transactions V2" in commit[2]) == (not since[p]["4.0"]), (p, commit)
        assert all("transactions V2" not in v[("tv2", o)][2] for o in (4, 6)) and v[("tv2", 3)][0] == "OK"
    # where the versions do not differ, neither does anything in the output (but the name the sentence gives)
    named = {p: {k: (v, e, x.replace(f"profile {p} ", "")) for k, (v, e, x) in got[p].items()} for p in PROFILE_NAMES}
    for same in (("4.x", "kip1228", "4.0"), ("3.9", "3.4"), ("2.7", "2.5")):
        assert all(named[p] == named[same[0]] for p in same), same
    assert got["2.7"] != got["3.9"] != got["4.x"] and got["2.4"] != got["2.5"] and got["2.1"] != got["2.4"]


def test_the_profile_is_recorded_and_an_unknown_one_refused(audited, capsys):
    from analytics.cli import main

    g, target = audited["stale-retry"]
    config = str(g.truth_dir / "audit.toml")
    assert main(["audit", target, "--config", config, "--profile", "3.9"]) == 0
    recorded = read_audit(target)["configuration"]
    assert recorded["profile"] == "3.9" and recorded["producer_id_expiration_ms"] == 86_400_000
    # the ranges were sized from this machine's memory, not given: recorded as unset, the size apart
    assert recorded["range_batches"] is None and read_audit(target)["range_batches_used"] >= 250_000
    assert_own_lines(capsys.readouterr().err)
    assert main(["audit", target, "--profile", "9.9"]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert err.count("\n") == 1 and "unknown profile '9.9'" in err and "2.7, 3.4, 4.0" in err and "4.x" in err
    bad = g.truth_dir.parent / "bad-profile.toml"
    bad.write_text('profile = "latest"\n')
    assert main(["audit", target, "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "unknown profile 'latest'" in err
    assert main(["audit", target]) == 0  # no --config: the previous audit's configuration again, said so
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert err.startswith("audit: the configuration of the previous audit in OUT is used again (profile 3.9, "), err
    assert read_audit(target)["configuration"]["profile"] == "3.9"
    empty = g.truth_dir.parent / "empty.toml"
    empty.write_text("")
    assert main(["audit", target, "--config", str(empty)]) == 0  # an empty file: the defaults
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert err.startswith(f"audit: {empty} changes the configuration of the previous audit in OUT: profile 3.9 -> 4.x"), err
    recorded = read_audit(target)["configuration"]
    assert recorded["profile"] == "4.x" and recorded["producer_id_expiration_ms"] == 86_400_000
    assert main(["audit", target, "--config", config]) == 0
    assert_own_lines(capsys.readouterr().err)
    assert read_audit(target)["configuration"]["profile"] == "2.7"
    assert main(["audit", target, "--config", config]) == 0  # the same file again: nothing changes, nothing said
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "changes the configuration" not in err, err


# --- histories cut into offset ranges (analytics.audit.ranges) ----------------------------------------
def test_every_scenario_cut_into_ranges_of_three_batches_gets_the_verdicts_of_the_whole_history(spark, every_scenario):
    """Every scenario's export replayed with histories cut every three batches (each range in its own
    group, with what the earlier ones carry) gives every verdict column the whole-history audit wrote.
    The scenarios are replayed together (their topics and log dirs differ), one run per profile."""
    from dataclasses import replace

    from analytics.audit import ranges
    from analytics.audit.config import Restart
    from analytics.audit.rules import classify
    from analytics.audit.steps import VERDICT_COLUMNS

    by_profile: dict[str, list] = {}
    for name, (g, out) in every_scenario.items():
        by_profile.setdefault(load_config(g.truth_dir / "audit.toml").profile, []).append((name, g, out))
    checked = 0
    for profile, scenarios in by_profile.items():
        configs = [load_config(g.truth_dir / "audit.toml") for _, g, _ in scenarios]
        config = replace(configs[0], range_batches=3,
                         cleanup_policy={k: v for c in configs for k, v in c.cleanup_policy.items()},
                         broker_restarts=tuple(r for c in configs for r in c.broker_restarts))
        assert all(isinstance(r, Restart) and r.topic is not None for r in config.broker_restarts)
        batches = starts = None
        for _, _, out in scenarios:
            b, s = spark.read.parquet(str(table_dir(out, "batches"))), spark.read.parquet(str(table_dir(out, "log_start_offsets")))
            batches, starts = (b, s) if batches is None else (batches.unionByName(b), starts.unionByName(s))
        assert ranges.range_plan(ranges.file_dictionary(batches, 3)).split
        want = {(r["file"], r["file_position"]): tuple(r[c] for c in VERDICT_COLUMNS)
                for _, _, out in scenarios for r in pq.read_table(str(table_dir(out, "batch_verdicts"))).to_pylist()}
        got = {(r["file"], r["file_position"]): tuple(r[c] for c in VERDICT_COLUMNS)
               for r in classify(batches, config, starts).collect()}
        assert got.keys() == want.keys()
        assert [k for k in want if got[k] != want[k]] == []
        checked += len(got)
    assert checked > 600
