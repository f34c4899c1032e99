"""Differential: random producer histories give identical verdicts from the Spark job and the
pure-Python reference replay (``analytics.replay.reference``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics import schema
from analytics.audit.config import AuditConfig, Restart
from analytics.audit.rules import classify
from analytics.replay.reference import replay

pytestmark = pytest.mark.spark
INT_MAX = 2**31 - 1
COMPARED = ("verdict", "severity", "explained_by", "expected_sequence", "prev_base_offset", "idle_ms", "offset_holes",
            "state_last_sequence", "state_last_offset")


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
    state = {p: {"epoch": draw(st.integers(0, 2)), "seq": draw(st.sampled_from([0, 0, 5, INT_MAX - 2])), "last": None}
             for p in pids}
    offset = draw(st.sampled_from([0, 0, 50]))
    ts = 10_000
    rows = []
    for _ in range(draw(st.integers(1, 30))):
        pid = draw(st.sampled_from(pids))
        s = state[pid]
        action = draw(st.sampled_from(["next"] * 6 + ["gap", "dup", "rewind", "bump", "bump_nonzero", "zombie",
                                                      "commit", "abort_bump", "txn", "plain", "corrupt", "idle",
                                                      "hole", "old_coordinator"]))
        ts += draw(st.integers(1, 50))
        n = draw(st.integers(1, 4))
        if action == "idle":
            ts += 5_000
            action = draw(st.sampled_from(["next", "gap", "zombie", "dup"]))
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
                s["epoch"], s["seq"] = epoch, 0
            n = 1
        else:
            epoch, seq = s["epoch"], s["seq"]
            if action == "gap":
                seq = (seq + draw(st.integers(1, 5))) % (INT_MAX + 1)
            elif action == "dup" and s["last"]:
                seq, n = s["last"]
            elif action == "rewind":
                seq = max(0, seq - draw(st.integers(1, 3)))
            elif action == "bump":
                epoch, seq = epoch + 1, 0
            elif action == "bump_nonzero":
                epoch += 1
            elif action == "zombie":
                epoch = max(0, epoch - 1)
            rows.append(_row(topic, offset, n, pid=pid, epoch=epoch, seq=seq, ts=ts, txn=action == "txn",
                             crc=action != "corrupt"))
            if action != "corrupt":
                s["epoch"], s["seq"], s["last"] = epoch, (seq + n) % (INT_MAX + 1), (seq, n)
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
        producer_id_expiration_ms=2_000,
        cleanup_policy={t: "compact" for t in data.draw(st.lists(st.sampled_from(topics), max_size=5))},
        broker_restarts=tuple(Restart(offset=data.draw(st.integers(1, 60)), topic=t) for t in data.draw(
            st.lists(st.sampled_from(topics), max_size=4))),
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
