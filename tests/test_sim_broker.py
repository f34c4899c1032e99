"""The simulated broker passes scenarios S01–S37 (§6.5), and writes exactly what it accepted.

The steps are the data of ``test_broker_rules``; here they go through :class:`SimPartition`,
which encodes accepted batches as real bytes, and the reader must find exactly those.
"""

from __future__ import annotations

import pytest

from analytics.generate.sim import SimLogDir
from analytics.generate.truth import TruthWriter
from analytics.kafka.logdir import read_log_dirs
from analytics.kafka.writer import RecordSpec
from analytics.replay.broker import Origin, Result
from tests.test_broker_rules import SCENARIOS, Dup, Expire, LoseState, Marker, _span


def _run(profile: str, steps, root):
    # Not strict: some scenarios end in anomalies a real broker accepts with no cause we know (S12).
    log = SimLogDir(root, profile=profile, truth=TruthWriter(None, strict=False))
    p = log.partition("s", 0)
    written = []
    clock = 0
    explain = None  # after an expiry or a lost state, anomalies are legitimate
    for step, expected in steps:
        clock += 1
        if isinstance(step, Expire):
            p.expire(step.now_ms)
            explain = "producer_expiration"
            continue
        if isinstance(step, LoseState):
            p.state.lose_state(step.pid)
            explain = "state_loss"
            continue
        ts = step.ts if step.ts is not None else clock
        if isinstance(step, Marker):
            result = p.end_transaction(step.pid, step.epoch, step.kind, coordinator_epoch=step.coordinator_epoch,
                                       timestamp=ts, tv2=step.tv2, explain=explain)
            shape = (step.pid, step.epoch, -1, -1, step.kind)
        elif step.pid < 0:
            p.produce_plain([RecordSpec(b"k", b"v", ts)])
            result = Result.APPENDED
            shape = (-1, -1, -1, -1, None)
        else:
            n = _span(step.first_seq, step.last_seq)
            records = [RecordSpec(b"k%d" % i, b"v%d" % clock, ts) for i in range(n)]
            fault = "replication" if step.origin == Origin.REPLICATION else None
            result = p.produce(step.pid, step.epoch, step.first_seq, records, transactional=step.txn,
                               verified_tv2=step.tv2, fault=fault, explain=explain)
            shape = (step.pid, step.epoch, step.first_seq, step.last_seq, None)
        want = Result.DUPLICATE if isinstance(expected, Dup) else expected
        assert result == want, (step, result, want)
        if result == Result.APPENDED:
            written.append(shape)
    log.write()
    return written


@pytest.mark.parametrize(("sid", "profile", "steps"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_simulated_broker_writes_exactly_what_it_accepts(tmp_path, sid, profile, steps):
    written = _run(profile, steps, tmp_path / sid)
    batches = read_log_dirs([tmp_path / sid]).table("batches").to_pylist()
    assert [(b["producer_id"], b["producer_epoch"], b["base_sequence"], b["last_sequence"], b["control_type"])
            for b in batches] == written
    assert all(b["crc_valid"] for b in batches)
    offsets = [(b["base_offset"], b["last_offset"]) for b in batches]
    assert all(nxt[0] == prev[1] + 1 for prev, nxt in zip(offsets, offsets[1:]))  # contiguous, as a leader assigns
