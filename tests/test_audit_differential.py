"""Differential: random producer histories give identical verdicts from the Spark job and the
pure-Python reference replay (``analytics.audit.reference``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.contract import schemas as schema
from analytics.audit.config import AuditConfig, Restart
from analytics.audit.rules import classify
from analytics.audit.reference import replay
from tests.outs import table_dir

pytestmark = pytest.mark.spark
INT_MAX = 2**31 - 1
COMPARED = ("verdict", "severity", "explained_by", "expected_sequence", "prev_base_offset", "idle_ms", "offset_holes",
            "state_last_sequence", "state_last_offset", "expired_offset", "conflict_offset")


def _row(topic, offset, n, *, pid=-1, epoch=-1, seq=-1, ts=0, txn=False, control=None, ce=None, crc=True, count=None):
    last_seq = -1 if seq < 0 else (seq + n - 1) % (INT_MAX + 1)
    return {
        "topic": topic, "partition": 0, "file": f"/logs/{topic}-0/00000000000000000000.log", "file_position": offset * 100,
        "batch_size": 100, "magic": 2, "crc_valid": crc, "base_offset": offset, "last_offset": offset + n - 1,
        "record_count": n if count is None else count, "partition_leader_epoch": 0, "compression": "none",
        "timestamp_type": "CreateTime", "is_transactional": txn or control is not None, "is_control": control is not None,
        "base_timestamp": ts, "max_timestamp": ts, "producer_id": pid, "producer_epoch": epoch, "base_sequence": seq,
        "last_sequence": last_seq, "control_type": control, "coordinator_epoch": ce, "attributes": 0,
        "delete_horizon_ms": None, "crc": 0,
    }


@st.composite
def history(draw, topic: str) -> list[dict]:
    pids = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True))
    state = {p: {"epoch": draw(st.integers(0, 2)), "seq": draw(st.sampled_from([0, 0, 5, INT_MAX - 2])), "sent": []}
             for p in pids}
    offset = draw(st.sampled_from([0, 0, 50]))
    ts = 10_000
    rows = []
    for _ in range(draw(st.integers(1, 30))):
        pid = draw(st.sampled_from(pids))
        s = state[pid]
        action = draw(st.sampled_from(["next"] * 6 + ["gap", "dup", "dup_old", "rewind", "reset", "bump", "bump_nonzero",
                                                      "zombie", "commit", "abort_bump", "txn", "plain", "corrupt", "idle",
                                                      "hole", "old_coordinator"]))
        ts += draw(st.integers(1, 50))
        n = draw(st.integers(1, 4))
        if action == "idle":
            ts += 5_000
            action = draw(st.sampled_from(["next", "gap", "zombie", "dup", "reset"]))
        if action == "hole":
            offset += draw(st.integers(1, 6))
            action = "gap"
        if action == "plain":
            rows.append(_row(topic, offset, n, ts=ts))
        elif action in ("commit", "abort_bump", "old_coordinator"):
            epoch = s["epoch"] + (1 if action == "abort_bump" else 0)
            ce = 0 if action == "old_coordinator" else 3
            rows.append(_row(topic, offset, 1, pid=pid, epoch=epoch, ts=ts, control="ABORT" if action == "abort_bump" else "COMMIT", ce=ce))
            if epoch != s["epoch"]:
                s["epoch"], s["seq"], s["sent"] = epoch, 0, []
            n = 1
        else:
            epoch, seq = s["epoch"], s["seq"]
            if action == "gap":
                seq = (seq + draw(st.integers(1, 5))) % (INT_MAX + 1)
            elif action in ("dup", "dup_old") and s["sent"]:  # the latest batch, or any earlier one of the epoch
                seq, n = s["sent"][-1] if action == "dup" else draw(st.sampled_from(s["sent"]))
            elif action == "rewind":
                seq = max(0, seq - draw(st.integers(1, 3)))
            elif action == "reset":  # the client restarts its sequences at 0 in the same epoch
                seq = 0
            elif action == "bump":
                epoch, seq = epoch + 1, 0
            elif action == "bump_nonzero":
                epoch += 1
            elif action == "zombie":
                epoch = max(0, epoch - 1)
            rows.append(_row(topic, offset, n, pid=pid, epoch=epoch, seq=seq, ts=ts, txn=action == "txn",
                             crc=action != "corrupt"))
            if action != "corrupt":
                if epoch != s["epoch"]:
                    s["sent"] = []
                s["sent"].append((seq, n))
                # after a stale copy or a rewind the client goes on from its own next sequence, or (the
                # broker having answered as if it were new) from the end of that batch
                resume = action in ("dup", "dup_old", "rewind") and draw(st.booleans())
                s["epoch"], s["seq"] = epoch, s["seq"] if resume else (seq + n) % (INT_MAX + 1)
        offset += n
    return rows


@given(st.lists(st.integers(0, 10**6), min_size=20, max_size=20).flatmap(
    lambda seeds: st.tuples(*[history(f"t{i}") for i in range(len(seeds))])), st.data())
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
def test_spark_and_the_reference_replay_agree(spark, histories, data):
    rows = [r for h in histories for r in h]
    topics = sorted({r["topic"] for r in rows})
    config = AuditConfig(
        profile=data.draw(st.sampled_from(["4.x", "3.9", "2.7", "2.5", "2.4", "2.1", "0.11"])),
        producer_id_expiration_ms=data.draw(st.sampled_from([2_000, 2_000, None])),
        cleanup_policy={t: "compact" for t in data.draw(st.lists(st.sampled_from(topics), max_size=5))},
        log_start_offsets={(t, 0): data.draw(st.integers(1, 80)) for t in data.draw(st.lists(st.sampled_from(topics),
                                                                                              max_size=8))},
        broker_restarts=tuple(Restart(offset=data.draw(st.integers(1, 60)), topic=t) for t in data.draw(
            st.lists(st.sampled_from(topics), max_size=4))),
        # histories replayed whole, or cut into ranges of a few batches each
        range_batches=data.draw(st.sampled_from([250_000, 250_000, 1, 2, 5])),
    )
    df = spark.createDataFrame(rows, schema=_spark_schema())
    got = {(r["file"], r["file_position"]): {c: r[c] for c in COMPARED}
           for r in (row.asDict() for row in classify(df, config).collect())}
    want = replay(rows, config)
    assert got.keys() == want.keys()
    diffs = [(k, got[k], want[k]) for k in want if any(got[k][c] != want[k].get(c) for c in COMPARED)]
    assert diffs == []


def _spark_schema():
    from analytics.spark.source import spark_schema

    return spark_schema(schema.BATCHES)


def _producer_rows(topic: str, batches: list[tuple], pid: int = 1) -> list[dict]:
    """Consecutive rows of one producer: (epoch, first sequence, records) or (epoch, "ABORT"/"COMMIT")."""
    rows, offset = [], 0
    for i, (epoch, seq, *n) in enumerate(batches):
        if isinstance(seq, str):
            rows.append(_row(topic, offset, 1, pid=pid, epoch=epoch, ts=1000 + i, control=seq, ce=1))
            offset += 1
        else:
            rows.append(_row(topic, offset, n[0], pid=pid, epoch=epoch, seq=seq, ts=1000 + i))
            offset += n[0]
    return rows


# Histories whose verdicts (and expected sequence, and the follower state each batch leaves) are
# fixed: after a copy of an older batch or a rewind, the producer goes on from its highest sequence,
# and that is in sequence, not a gap (issue 15). Each: topic -> (batches, [(verdict, expected, state)]).
MARK_CASES = {
    "dup-of-an-older-batch": (
        [(0, 0, 3), (0, 3, 2), (0, 5, 3), (0, 3, 2), (0, 8, 2), (0, 10, 1), (0, 13, 1)],
        [("OK", 0, 2), ("OK", 3, 4), ("OK", 5, 7), ("DUPLICATE", 8, 4), ("OK", 8, 9), ("OK", 10, 10),
         ("SEQUENCE_GAP", 11, 13)],
    ),
    "rewind-then-on": (
        [(0, 0, 3), (0, 3, 3), (0, 2, 3), (0, 6, 2), (0, 0, 2), (0, 8, 1)],
        [("OK", 0, 2), ("OK", 3, 5), ("SEQUENCE_REGRESSION", 6, 4), ("OK", 6, 7), ("SEQUENCE_REGRESSION", 8, 1), ("OK", 8, 8)],
    ),
    "across-the-wrap": (  # the mark steps over INT_MAX, and a rewind back across it does not lower it
        [(4, INT_MAX - 5, 3), (4, INT_MAX - 2, 3), (4, 0, 3), (4, INT_MAX - 2, 3), (4, 3, 2), (4, INT_MAX - 1, 3),
         (4, 5, 1), (4, 9, 1)],
        [("FIRST_SEEN_NONZERO", 0, INT_MAX - 3), ("OK", INT_MAX - 2, INT_MAX), ("OK", 0, 2), ("DUPLICATE", 3, INT_MAX),
         ("OK", 3, 4), ("SEQUENCE_REGRESSION", 5, 0), ("OK", 5, 5), ("SEQUENCE_GAP", 6, 9)],
    ),
    "epoch-runs": (  # a marker changing the epoch restarts the mark, and so does a zombie's epoch
        [(1, 0, 5), (1, 5, 2), (1, 0, 5), (2, "ABORT"), (2, 0, 1), (2, 1, 2), (1, 7, 1), (2, 3, 1), (2, 4, 1)],
        [("OK", 0, 4), ("OK", 5, 6), ("DUPLICATE", 7, 4), ("CONTROL_MARKER", None, -1), ("OK", 0, 0), ("OK", 1, 2),
         ("FENCED_ZOMBIE_WRITE", 0, 7), ("EPOCH_BUMP_NONZERO", 0, 3), ("OK", 4, 4)],
    ),
}


@pytest.mark.parametrize("range_batches", [250_000, 2])
def test_a_copy_or_a_rewind_does_not_lower_the_sequence_mark(spark, range_batches):
    rows = [r for topic, (batches, _) in MARK_CASES.items() for r in _producer_rows(topic, batches)]
    config = AuditConfig(range_batches=range_batches)
    got_spark = {(r["topic"], r["base_offset"]): r.asDict() for r in classify(spark.createDataFrame(rows, schema=_spark_schema()), config).collect()}
    got_reference = {(b["topic"], b["base_offset"]): v for b in rows for k, v in replay(rows, config).items()
                     if k == (b["file"], b["file_position"])}
    for topic, (_, want) in MARK_CASES.items():
        offsets = sorted(o for t, o in got_spark if t == topic)
        for name, got in (("spark", got_spark), ("reference", got_reference)):
            seen = [(got[(topic, o)]["verdict"], got[(topic, o)]["expected_sequence"], got[(topic, o)]["state_last_sequence"])
                    for o in offsets]
            assert seen == want, (name, topic)


def _timed_rows(topic: str, batches: list[tuple], pid: int = 1) -> list[dict]:
    """Consecutive rows of one producer: (epoch, first sequence, records, idle ms before it)."""
    rows, offset, ts = [], 0, 1000
    for epoch, seq, n, idle in batches:
        ts += idle
        rows.append(_row(topic, offset, n, pid=pid, epoch=epoch, seq=seq, ts=ts))
        offset += n
    return rows


# Histories with an expiration (idle >= 3000 ms) followed by batches repeating or rewinding sequences
# written before it: the broker, having rebuilt the producer's state from the batches it took since,
# took them in sequence (the three cases found on a real 4.4 broker), and breaks it would still have
# refused. topic -> (batches, [(verdict, explained_by, expired_offset, conflict_offset)]).
EXPIRY_CASES = {
    "rewind-then-repeats": (  # 0..7 in batches of 2; after the idle a rewind to 2..3, then 4..5 and 6..7 again
        [(0, 0, 2, 1), (0, 2, 2, 1), (0, 4, 2, 1), (0, 6, 2, 1), (0, 2, 2, 4000), (0, 4, 2, 1), (0, 6, 2, 1), (0, 8, 2, 1)],
        [("OK", None, None, None), ("OK", None, None, None), ("OK", None, None, None), ("OK", None, None, None),
         ("DUPLICATE", "producer_expiration", 8, 2), ("DUPLICATE", "producer_expiration", 8, 4),
         ("DUPLICATE", "producer_expiration", 8, 6), ("OK", None, 8, None)],
    ),
    "zombie-then-repeats": (  # epoch 3, sequences 0 and 1; after the idle epoch 1; then 3:0 and 3:1 again
        [(3, 0, 1, 1), (3, 1, 1, 1), (1, 0, 1, 4000), (3, 0, 1, 1), (3, 1, 1, 1), (3, 2, 1, 1)],
        [("OK", None, None, None), ("OK", None, None, None), ("FENCED_ZOMBIE_WRITE", "producer_expiration", 2, 1),
         ("DUPLICATE", "producer_expiration", 2, 0), ("DUPLICATE", "producer_expiration", 2, 1), ("OK", None, 2, None)],
    ),
    "jump-then-wrap": (  # 0 and 1; after the idle INT_MAX - 1; then INT_MAX..1, rewriting 0 and 1
        [(0, 0, 1, 1), (0, 1, 1, 1), (0, INT_MAX - 1, 1, 4000), (0, INT_MAX, 3, 1), (0, 2, 1, 1)],
        [("OK", None, None, None), ("OK", None, None, None), ("SEQUENCE_REGRESSION", "producer_expiration", 2, 1),
         ("SEQUENCE_REGRESSION", "producer_expiration", 2, 1), ("OK", None, 2, None)],
    ),
    "refused-after-expiry": (  # what the rebuilt state would still refuse stays unexplained
        [(0, 0, 2, 1), (0, 2, 2, 1), (0, 4, 2, 1), (0, 2, 2, 4000), (0, 0, 2, 1), (0, 6, 2, 1), (0, 4, 2, 1)],
        [("OK", None, None, None), ("OK", None, None, None), ("OK", None, None, None),
         ("DUPLICATE", "producer_expiration", 6, 2), ("DUPLICATE", None, 6, 0), ("OK", None, 6, None),
         ("DUPLICATE", None, 6, 4)],
    ),
    "repeat-of-a-batch-after-expiry": (  # the original is after the expiry point: the broker knew it
        [(0, 0, 2, 1), (0, 5, 2, 4000), (0, 7, 2, 1), (0, 5, 2, 1), (0, 9, 1, 1)],
        [("OK", None, None, None), ("SEQUENCE_GAP", "producer_expiration", 2, 1), ("OK", None, 2, None),
         ("DUPLICATE", None, 2, 2), ("OK", None, 2, None)],
    ),
}


@pytest.mark.parametrize("range_batches", [250_000, 1])
def test_repeats_after_an_expiration_are_explained_when_the_broker_took_them_in_sequence(spark, range_batches):
    cases = EXPIRY_CASES
    rows = [r for topic, (batches, _) in cases.items() for r in _timed_rows(topic, batches)]
    config = AuditConfig(producer_id_expiration_ms=3000, range_batches=range_batches)
    got_spark = {(r["topic"], r["base_offset"]): r.asDict()
                 for r in classify(spark.createDataFrame(rows, schema=_spark_schema()), config).collect()}
    reference = replay(rows, config)
    got_reference = {(b["topic"], b["base_offset"]): reference[(b["file"], b["file_position"])] for b in rows}
    for topic, (_, want) in cases.items():
        offsets = sorted(o for t, o in got_spark if t == topic)
        for name, got in (("spark", got_spark), ("reference", got_reference)):
            seen = [tuple(got[(topic, o)][c] for c in ("verdict", "explained_by", "expired_offset", "conflict_offset"))
                    for o in offsets]
            assert seen == want, (name, topic)


def test_no_expiry_point_while_a_transaction_is_open(spark):
    """The same repeats, sent by a producer with a transaction open before the idle: no expiration."""
    rows = _timed_rows("txn", [(0, 0, 2, 1), (0, 2, 2, 1), (0, 4, 2, 4000), (0, 2, 2, 1), (0, 4, 2, 1)])
    rows[0] |= {"is_transactional": True}
    config = AuditConfig(producer_id_expiration_ms=3000)
    got = {r["base_offset"]: r for r in classify(spark.createDataFrame(rows, schema=_spark_schema()), config).collect()}
    reference = replay(rows, config)
    for b in rows:
        ref = reference[(b["file"], b["file_position"])]
        assert ref["expired_offset"] is None and got[b["base_offset"]]["expired_offset"] is None
        if ref["verdict"] not in ("OK", "INVALID_TXN_STATE"):
            assert ref["explained_by"] is None and got[b["base_offset"]]["explained_by"] is None, ref


@pytest.mark.parametrize("profile", ["2.4", "0.11"])
def test_before_kip360_the_expiry_point_is_a_restart_at_zero(spark, profile):
    """Before 2.5 a forgotten producer got in only at sequence 0: a rewind to 2 after the idle was
    not taken from a forgotten producer, so it is no expiry point and the repeats after it stay
    unexplained; a restart at 0 is one."""
    rows = _timed_rows("at-two", [(0, 0, 2, 1), (0, 2, 2, 1), (0, 4, 2, 1), (0, 2, 2, 4000), (0, 4, 2, 1)]) \
        + _timed_rows("at-zero", [(0, 0, 2, 1), (0, 2, 2, 1), (0, 4, 2, 1), (0, 0, 2, 4000), (0, 2, 2, 1)], pid=2)
    config = AuditConfig(profile=profile, producer_id_expiration_ms=3000)
    got = {(r["topic"], r["base_offset"]): r["explained_by"]
           for r in classify(spark.createDataFrame(rows, schema=_spark_schema()), config).collect()}
    reference = replay(rows, config)
    for b in rows:
        assert got[(b["topic"], b["base_offset"])] == reference[(b["file"], b["file_position"])]["explained_by"]
    assert got[("at-two", 6)] is None and got[("at-two", 8)] is None
    assert got[("at-zero", 6)] == "producer_expiration" and got[("at-zero", 8)] == "producer_expiration"


GENERATED_CONF = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


def test_interpreted_evaluation_gives_the_tables_generated_code_gives(spark, tmp_path):
    """A small local session evaluates without generated code (``session.INTERPRETED_CONF``): the
    bundled sample, every anomaly in it, audited either way gives the same tables, row for row. (The
    test session itself evaluates interpreted: ``conftest.spark``.)"""
    import shutil
    from pathlib import Path

    import pyarrow.dataset as ds

    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from analytics.export import export
    from analytics.spark.session import INTERPRETED_CONF, settings

    repo = Path(__file__).resolve().parent.parent
    generated, interpreted = tmp_path / "generated", tmp_path / "interpreted"
    export(None, [str(repo / "data" / "mixed")], str(generated), records=True)
    shutil.copytree(generated, interpreted)
    config = load_config(repo / "data" / "mixed.truth" / "audit.toml")
    with settings(spark, GENERATED_CONF):  # Spark's defaults: whole-stage code generation, generated expressions
        audit(spark, str(generated), config)
    with settings(spark, INTERPRETED_CONF):
        audit(spark, str(interpreted), config)

    def rows(out: Path, table: str) -> list[str]:
        t = ds.dataset(str(table_dir(out, table)), format="parquet", partitioning="hive", ignore_prefixes=[".", "_"]).to_table()
        return sorted(map(repr, t.select(sorted(t.column_names)).to_pylist()))

    tables = sorted(p.name for p in generated.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    assert {"batch_verdicts", "anomalies", "transactions", "producer_state"} <= set(tables)
    for table in tables:
        assert rows(interpreted, table) == rows(generated, table), table
    verdicts = ds.dataset(str(table_dir(generated, "batch_verdicts")), format="parquet", partitioning="hive").to_table(["verdict"])
    assert len(set(verdicts["verdict"].to_pylist())) >= 5  # the sample plants many kinds of anomaly


def test_compaction_explains_a_new_epoch_whose_first_batch_the_cleaner_removed(spark):
    """A transactional producer's first batch at a new epoch (sequence 0) whose keys were overwritten:
    the cleaner removes it, and the epoch's next batch is first seen at sequence 1 (found on a real
    4.4 and 3.9 broker, a compacted topic written by Kafka's Java transactional producer). Compaction
    explains it where the offset holes cover the epoch's missing sequences, on a compacted topic only."""
    def rows(topic):
        return [_row(topic, 0, 1, pid=1, epoch=0, seq=0, ts=1000), _row(topic, 1, 1, pid=1, epoch=0, seq=1, ts=1001),
                _row(topic, 3, 2, pid=1, epoch=1, seq=1, ts=1003),  # epoch 1's sequence 0 at offset 2: gone
                _row(topic, 6, 1, pid=1, epoch=2, seq=3, ts=1004)]  # 0..2 missing, one hole (offset 5)
    batches = rows("compacted") + rows("deleted")
    for got in _both_replays(spark, batches, AuditConfig(cleanup_policy={"compacted": "compact"})):
        assert [got[("compacted", o)] for o in (3, 6)] == [("EPOCH_BUMP_NONZERO", "compaction"),
                                                           ("EPOCH_BUMP_NONZERO", None)]
        assert [got[("deleted", o)] for o in (3, 6)] == [("EPOCH_BUMP_NONZERO", None)] * 2


def _both_replays(spark, batches: list[dict], config: AuditConfig) -> tuple[dict, dict]:
    """(topic, base_offset) -> (verdict, explained_by) of ``batches``, by Spark's classify and by the
    reference replay."""
    got_spark = {(r["topic"], r["base_offset"]): (r["verdict"], r["explained_by"])
                 for r in classify(spark.createDataFrame(batches, schema=_spark_schema()), config).collect()}
    reference = replay(batches, config)
    got_reference = {(b["topic"], b["base_offset"]): (reference[(b["file"], b["file_position"])]["verdict"],
                                                      reference[(b["file"], b["file_position"])]["explained_by"])
                     for b in batches}
    return got_spark, got_reference


def test_a_producers_first_data_batch_after_markers_only_is_partial_history_where_history_is_partial(spark):
    """Transactions on a compacted topic: the cleaner removed a producer's data batches and kept a COMMIT
    marker (its transaction's records overwritten), so the producer is first seen by a marker and its
    first visible data batch goes on at sequence 9 (found on a real 3.9 broker: transactions V1, one
    epoch) or at a new epoch past 0 (4.x, transactions V2). Its earlier data is gone: partial history on
    a compacted topic, unexplained where nothing says history is partial."""
    def rows(topic):
        return [_row(topic, 0, 2, pid=2, epoch=0, seq=0, ts=1000),  # another producer from offset 0
                _row(topic, 9, 1, pid=1, epoch=0, control="COMMIT", ce=0, ts=1001),
                _row(topic, 13, 1, pid=1, epoch=0, seq=9, txn=True, ts=1002),  # sequences 0..8 gone
                _row(topic, 20, 1, pid=3, epoch=3, control="COMMIT", ce=0, ts=1003),
                _row(topic, 21, 1, pid=3, epoch=4, seq=5, txn=True, ts=1004)]  # a new epoch, its 0..4 gone
    batches = rows("compacted") + rows("deleted")
    for got in _both_replays(spark, batches, AuditConfig(cleanup_policy={"compacted": "compact"})):
        assert [got[("compacted", o)] for o in (13, 21)] == [("SEQUENCE_GAP", "partial_history"),
                                                             ("EPOCH_BUMP_NONZERO", "partial_history")], got
        assert [got[("deleted", o)] for o in (13, 21)] == [("SEQUENCE_GAP", None), ("EPOCH_BUMP_NONZERO", None)], got
