"""The leader's producer-state rules (analytics.replay.broker) against kafka-replay-rules.md.

The §6.5 scenarios S01-S37 run as data, each step with its expected answer. The §6.1/§6.2 rows
follow as tests with the state checks their upstream tests make, then every profile flag is
checked by behaviour on all ten profiles, the version names that resolve to them, the §2.3 origin table, and the snapshot round trip.

Offsets are assigned as a leader does: each appended data batch takes one offset per sequence,
each appended marker one; rejected and duplicate batches take none. Every rejected or duplicate
step is also checked to leave the state exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pytest

from analytics.kafka.layout import INT_MAX
from analytics.kafka.sidecars import read_snapshot, write_snapshot
from analytics.replay import broker, rules
from analytics.replay.broker import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    DEFAULT_PROFILE,
    PROFILES,
    CompletedTxn,
    OpenTxn,
    Origin,
    ProducerSnapshotEntry,
    ProducerStateManager,
    Result,
)

MAX = INT_MAX
EXPIRY = DEFAULT_PRODUCER_ID_EXPIRATION_MS
CLIENT, COORDINATOR, REPLICATION = Origin.CLIENT, Origin.COORDINATOR, Origin.REPLICATION
OK = Result.APPENDED
OOOS = Result.OUT_OF_ORDER_SEQUENCE
UPID = Result.UNKNOWN_PRODUCER_ID
IPE = Result.INVALID_PRODUCER_EPOCH
PF = Result.PRODUCER_FENCED
ITS = Result.INVALID_TXN_STATE
TCF = Result.TRANSACTION_COORDINATOR_FENCED


# --- Steps as data -----------------------------------------------------------------------------


class Dup(NamedTuple):
    """Expected DUPLICATE answer: the original batch's offsets."""

    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class Data:
    pid: int
    epoch: int
    first_seq: int
    last_seq: int
    txn: bool
    origin: Origin
    ts: int | None
    tv2: bool


@dataclass(frozen=True)
class Marker:
    pid: int
    epoch: int
    kind: str
    coordinator_epoch: int
    origin: Origin
    ts: int | None
    tv2: bool


@dataclass(frozen=True)
class Expire:
    now_ms: int


@dataclass(frozen=True)
class LoseState:
    pid: int


def D(pid, epoch, seqs, *, txn=False, origin=CLIENT, ts=None, tv2=False) -> Data:
    """``D(pid, epoch, [first..last])``; ``seqs`` is one sequence or a (first, last) pair."""
    first, last = seqs if isinstance(seqs, tuple) else (seqs, seqs)
    return Data(pid, epoch, first, last, txn, origin, ts, tv2)


def M(pid, epoch, kind, ce=0, *, origin=COORDINATOR, ts=None, tv2=False) -> Marker:
    return Marker(pid, epoch, kind, ce, origin, ts, tv2)


def _span(first_seq: int, last_seq: int) -> int:
    # Offsets a batch takes: its sequence span with the int32 wrap; one record without a sequence.
    return (last_seq - first_seq) % (MAX + 1) + 1 if first_seq >= 0 else 1


class Replay:
    """Feeds steps to one partition's ProducerStateManager, assigning offsets as a leader does."""

    def __init__(self, profile: str, *, start_offset: int = 0, **manager_options) -> None:
        self.manager = ProducerStateManager(PROFILES[profile], **manager_options)
        self.next_offset = start_offset
        self.clock = 0
        self.decisions: list[broker.Decision] = []

    def step(self, step):
        """Run one step; returns the outcome to compare with the scenario's expectation."""
        if isinstance(step, Expire):
            return self.manager.remove_expired(step.now_ms)
        if isinstance(step, LoseState):
            return self.manager.lose_state(step.pid)
        before = _state(self.manager)
        self.clock = step.ts if step.ts is not None else self.clock + 1
        if isinstance(step, Data):
            last_offset = self.next_offset + _span(step.first_seq, step.last_seq) - 1
            decision = self.manager.append_data(
                step.pid, step.epoch, step.first_seq, step.last_seq, self.next_offset, last_offset,
                self.clock, is_transactional=step.txn, origin=step.origin, verified_tv2=step.tv2,
            )
            written = last_offset + 1
        else:
            decision = self.manager.append_marker(
                step.pid, step.epoch, step.kind, step.coordinator_epoch, self.next_offset, self.clock,
                origin=step.origin, tv2=step.tv2,
            )
            written = self.next_offset + 1
        self.decisions.append(decision)
        if decision.result is Result.APPENDED:
            self.next_offset = written
        else:
            assert _state(self.manager) == before, f"{step} -> {decision.result} changed the state"
        if decision.result is Result.DUPLICATE:
            return Dup(*decision.duplicate_of)
        return decision.result

    def results(self, steps) -> list:
        return [self.step(step) for step in steps]


def _state(manager: ProducerStateManager) -> dict:
    # Everything the manager keeps, deques included (the snapshot only shows the last batch).
    return {row.producer_id: manager.entry(row.producer_id) for row in manager.snapshot()}


# --- §6.5 scenarios S01-S37 --------------------------------------------------------------------

_SIX_SINGLES_AND_A_TRIPLE = [(D(1, 0, s), OK) for s in range(6)] + [(D(1, 0, (6, 8)), OK)]

SCENARIOS = [
    ("S01", "2.7", [(D(1, 0, 0), OK), (D(1, 0, 1), OK)]),
    ("S02", "2.7", [(D(1, 0, 0), OK), (D(1, 0, 1), OK), (D(1, 0, 5), OOOS)]),
    ("S03", "2.7", [(D(1, 0, (0, 2)), OK), (D(1, 0, (0, 2)), Dup(0, 2))]),
    ("S04", "2.7", _SIX_SINGLES_AND_A_TRIPLE + [(D(1, 0, 2), Dup(2, 2))]),
    ("S05", "2.7", _SIX_SINGLES_AND_A_TRIPLE + [(D(1, 0, 1), OOOS)]),
    ("S06", "2.7", [(D(1, 0, (0, 2)), OK), (D(1, 0, (3, 5)), OK), (D(1, 0, (4, 5)), OOOS)]),
    ("S07", "2.7", [(D(1, 0, 0), OK), (D(1, 1, 0), OK), (D(1, 0, 0), IPE)]),
    ("S08", "2.7", [(D(1, 0, 0), OK), (D(1, 0, 1), OK), (D(1, 1, 0), OK)]),
    ("S09", "2.7", [(D(1, 0, 0), OK), (D(1, 1, 2), OOOS)]),
    ("S10", "2.7", [(D(1, 1, 0), OK), (D(1, 0, 0), IPE)]),
    ("S11", "2.5", [(D(1, 1, 0), OK), (D(1, 0, 0), PF)]),
    ("S12", "2.7", [(D(23, 1, (3, 4)), OK)]),
    ("S13", "1.0", [(D(23, 1, 3), UPID)]),
    ("S14", "0.11", [(D(23, 1, 3), OOOS)]),
    ("S15", "4.1", [(D(23, 1, 3, txn=True, tv2=True), OOOS), (D(23, 1, 0, txn=True, tv2=True), OK)]),
    ("S16", "2.7", [(M(1, 2, "COMMIT"), OK), (D(1, 0, 0), IPE), (D(1, 2, 17), OOOS), (D(1, 2, 0), OK)]),
    ("S17", "2.1", [(M(1, 2, "COMMIT"), OK), (D(1, 0, 0), PF), (D(1, 2, 17), UPID), (D(1, 2, 0), OK)]),
    (
        "S18",
        "2.7",
        [
            (D(1, 0, 0, txn=True), OK),
            (D(1, 0, 1, txn=True), OK),
            (M(1, 1, "ABORT"), OK),
            (D(1, 1, 2, txn=True), OOOS),
            (D(1, 2, 2, txn=True), OOOS),
            (D(1, 1, 0, txn=True), OK),
        ],
    ),
    ("S19", "2.7", [(D(1, 0, (0, 4), txn=True), OK), (M(1, 0, "COMMIT"), OK), (D(1, 0, 5, txn=True), OK)]),
    ("S20", "2.7", [(D(1, 0, 0, txn=True), OK), (D(1, 0, 1), ITS)]),
    ("S21", "2.7", [(D(1, 5, 0, txn=True), OK), (M(1, 3, "COMMIT"), IPE)]),
    (
        "S22",
        "2.7",
        [
            (D(1, 5, 0, txn=True), OK),
            (M(1, 5, "COMMIT", 1), OK),
            (M(1, 5, "COMMIT", 1), OK),
            (M(1, 5, "COMMIT", 2), OK),
            (M(1, 5, "COMMIT", 1), TCF),
        ],
    ),
    ("S23", "2.7", [(D(1, 15, MAX, origin=REPLICATION), OK), (D(1, 15, 0), OK)]),
    ("S24", "2.7", [(D(1, 15, MAX, origin=REPLICATION), OK), (D(1, 15, 1), OOOS)]),
    ("S25", "2.7", [(D(1, 0, (MAX - 10, 9), origin=REPLICATION), OK), (D(1, 0, 10), OK)]),
    ("S26", "2.7", [(D(1, 0, 0), OK), (D(1, 0, 3), OOOS), (D(1, 0, 3, origin=REPLICATION), OK)]),
    ("S27", "2.7", [(D(1, 0, (0, 1), origin=REPLICATION), OK), (D(1, 0, (0, 1), origin=REPLICATION), OK)]),
    ("S28", "2.7", [(D(1, 3, 0, origin=REPLICATION), OK), (D(1, 2, 0, origin=REPLICATION), OK)]),
    ("S29", "2.7", [(D(1, 5, 0, ts=1), OK), (Expire(86_400_001), [1]), (D(1, 5, 1, ts=86_400_002), OK)]),
    ("S30", "2.7", [(D(1, 5, 0, ts=1), OK), (Expire(86_400_001), [1]), (D(1, 5, 40, ts=86_400_002), OK)]),
    (
        "S31",
        "2.7",
        [
            (D(1, 5, 0, txn=True, ts=1), OK),
            (Expire(1_000_000_000_000), []),
            (D(1, 5, 40, txn=True, ts=1_000_000_000_000), OOOS),
        ],
    ),
    ("S32", "2.7", [(D(1, 5, 0, ts=1), OK), (Expire(86_400_001), [1]), (D(1, 4, 9, ts=86_400_002), OK)]),
    ("S33", "2.7", [(D(1, 0, (0, 1)), OK), (LoseState(1), None), (D(1, 0, (0, 1)), OK)]),
    ("S34", "0.11", [(D(1, 0, 0), OK), (D(1, 0, 1), OK), (D(1, 0, 0), OOOS), (D(1, 0, 1), Dup(1, 1))]),
    (
        "S35",
        "2.7",
        [(D(7, 3, (0, 1), txn=True), OK), (M(7, 4, "COMMIT", tv2=True), OK), (D(7, 4, 0, txn=True), OK)],
    ),
    (
        "S36",
        "kip1228",
        [
            (D(7, 3, 0, txn=True), OK),
            (M(7, 3, "COMMIT", tv2=True), IPE),
            (M(7, 4, "COMMIT", tv2=True), OK),
            (M(7, 4, "COMMIT", tv2=True), OK),
        ],
    ),
    ("S37", "2.7", [(D(-1, -1, -1), OK)]),
]


def test_every_scenario_is_encoded_once():
    assert [scenario_id for scenario_id, _, _ in SCENARIOS] == [f"S{i:02d}" for i in range(1, 38)]


@pytest.mark.parametrize(("profile", "steps"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS])
def test_scenario(profile, steps):
    replay = Replay(profile)
    assert replay.results([step for step, _ in steps]) == [expected for _, expected in steps]


def test_scenario_offsets_follow_the_appended_batches():
    # S04: six singles (0-5), the triple (6-8); the duplicate is answered with offset 2 and takes none.
    replay = Replay("2.7")
    replay.results([step for step, _ in SCENARIOS[3][2]])
    assert replay.next_offset == 9
    assert [d.duplicate_of for d in replay.decisions] == [None] * 7 + [(2, 2)]


# --- §6.1 ProducerStateManagerTest ---------------------------------------------------------------


def test_row01_basic_id_mapping():
    replay = Replay("2.7")
    assert replay.results([D(1, 0, 0), D(1, 0, 1)]) == [OK, OK]
    # Upstream feeds the retry to ProducerAppendInfo alone (dedup is UnifiedLog's): out of sequence.
    entry = replay.manager.entry(1)
    assert rules.check_sequence(entry, 0, 1, CLIENT, DEFAULT_PROFILE, verified_tv2=False).result is OOOS
    # Through the whole leader path the same retry is the duplicate of offset 1.
    assert replay.results([D(1, 0, 1), D(1, 0, 5), D(1, 1, 0), D(1, 0, 0)]) == [Dup(1, 1), OOOS, OK, IPE]
    entry = replay.manager.entry(1)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq, len(entry.batch_metadata)) == (1, 0, 0, 1)


ALL_PROFILES = list(PROFILES)
# (profile, fenced error, marker-only seq 17) per §2.5 / §2.9.
MARKER_ONLY = [
    ("0.11", PF, OOOS),
    ("1.0", PF, OOOS),
    ("2.1", PF, UPID),
    ("2.4", PF, UPID),
    ("2.5", PF, OOOS),
    ("2.7", IPE, OOOS),
    ("3.4", IPE, OOOS),
    ("4.0", IPE, OOOS),
    ("4.1", IPE, OOOS),
    ("kip1228", IPE, OOOS),
]


@pytest.mark.parametrize(("profile", "fenced", "seq17"), MARKER_ONLY)
def test_row02_marker_without_producer_state(profile, fenced, seq17):
    replay = Replay(profile)
    assert replay.results([M(1, 2, "COMMIT")]) == [OK]
    entry = replay.manager.entry(1)
    assert (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (2, -1, -1)
    assert replay.results([D(1, 0, 0), D(1, 2, 17), D(1, 2, 0)]) == [fenced, seq17, OK]
    assert replay.manager.entry(1).last_seq == 0


def test_row03_sequence_wrap_around():
    replay = Replay("2.7", start_offset=735)
    assert replay.results([D(1, 15, MAX, origin=REPLICATION), D(1, 15, 0)]) == [OK, OK]
    entry = replay.manager.entry(1)
    assert (entry.first_seq, entry.last_seq) == (MAX, 0)


def test_row04_batch_spanning_the_wrap():
    replay = Replay("2.7", start_offset=2000)
    assert replay.results([D(1, 15, (MAX - 10, 9), origin=REPLICATION)]) == [OK]
    entry = replay.manager.entry(1)
    assert (entry.first_seq, entry.last_seq) == (MAX - 10, 9)
    assert (entry.batch_metadata[0].first_offset, entry.last_data_offset) == (2000, 2020)


def test_row05_invalid_wrap_around():
    assert Replay("2.7").results([D(1, 15, MAX, origin=REPLICATION), D(1, 15, 1)]) == [OK, OOOS]


def test_row06_no_validation_on_first_entry_when_loading_the_log():
    replay = Replay("2.7")
    assert replay.results([D(1, 5, 16, origin=REPLICATION)]) == [OK]
    entry = replay.manager.entry(1)
    assert (entry.first_seq, entry.last_seq) == (16, 16)


def test_row07_control_record_bumps_the_epoch():
    replay = Replay("2.7")
    assert replay.results([D(1, 0, 0), M(1, 1, "ABORT")]) == [OK, OK]
    assert replay.decisions[-1].completed_txn is None  # no transaction was open
    entry = replay.manager.entry(1)
    assert (entry.producer_epoch, entry.last_seq, entry.current_txn_first_offset) == (1, -1, None)
    assert replay.results([D(1, 1, 0)]) == [OK]


def test_row08_out_of_sequence_after_an_epoch_bumping_abort():
    replay = Replay("2.7")
    assert replay.results([D(1, 0, 0, txn=True), D(1, 0, 1, txn=True), M(1, 1, "ABORT")]) == [OK, OK, OK]
    assert replay.decisions[-1].completed_txn == CompletedTxn(1, 0, 2, True)
    steps = [D(1, 1, 2, txn=True), D(1, 2, 2, txn=True), D(1, 1, 0, txn=True)]
    assert replay.results(steps) == [OOOS, OOOS, OK]


def test_row09_non_transactional_append_during_a_transaction():
    replay = Replay("2.7")
    # The sequence is checked before the transaction state (appendDataBatch order).
    assert replay.results([D(1, 0, 0, txn=True), D(1, 0, 5), D(1, 0, 1)]) == [OK, OOOS, ITS]
    assert replay.manager.entry(1).last_seq == 0


def test_row10_state_after_a_fencing_abort_marker():
    replay = Replay("2.7")
    assert replay.results([D(1, 0, 0, txn=True, ts=100), M(1, 1, "ABORT", ts=100)]) == [OK, OK]
    assert replay.decisions[-1].completed_txn == CompletedTxn(1, 0, 1, True)
    entry = replay.manager.entry(1)
    assert (entry.current_txn_first_offset, entry.last_data_offset, entry.is_empty) == (None, -1, True)
    assert replay.manager.remove_expired(100) == []
    assert replay.manager.entry(1) is not None


def test_row11_recover_from_snapshot_with_an_unfinished_transaction():
    replay = Replay("2.7")
    assert replay.results([D(1, 0, 0, txn=True), D(1, 0, 1, txn=True)]) == [OK, OK]
    reloaded = ProducerStateManager(DEFAULT_PROFILE)
    reloaded.load_snapshot(replay.manager.snapshot())
    entry = reloaded.entry(1)
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (1, 1, 1)
    assert len(entry.batch_metadata) == 1
    assert entry.current_txn_first_offset == 0
    assert reloaded.append_data(1, 0, 2, 2, 2, 2, 3, is_transactional=True).result is OK


# An unknown PID's first batch with seq != 0, per profile (§2.5, §2.9).
UNKNOWN_NONZERO = {
    "0.11": OOOS,
    "1.0": UPID,
    "2.1": UPID,
    "2.4": UPID,
    "2.5": OK,
    "2.7": OK,
    "3.4": OK,
    "4.0": OK,
    "4.1": OK,
    "kip1228": OK,
}


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_row12_producer_expired_on_reload(profile):
    replay = Replay(profile)
    assert replay.results([D(1, 0, 0, ts=0), D(1, 0, 1, ts=1)]) == [OK, OK]
    replay.manager.load_snapshot(replay.manager.snapshot(), now_ms=1 + EXPIRY)
    assert replay.manager.entry(1) is None
    assert replay.results([D(1, 0, 2)]) == [UNKNOWN_NONZERO[profile]]


def test_reload_keeps_producers_that_have_not_expired():
    replay = Replay("2.7")
    replay.results([D(1, 0, 0, ts=1)])
    replay.manager.load_snapshot(replay.manager.snapshot(), now_ms=EXPIRY)  # idle EXPIRY - 1 ms
    assert replay.manager.entry(1).last_seq == 0


@pytest.mark.parametrize("profile", ["0.11", "2.1", "2.7"])
def test_row13_replica_accepts_a_batch_without_producer_state(profile):
    replay = Replay(profile)
    replay.results([D(1, 0, 0), D(1, 0, 1)])
    replay.manager.lose_state(1)
    assert replay.results([D(1, 0, 2, origin=REPLICATION)]) == [OK]
    entry = replay.manager.entry(1)
    assert (entry.first_seq, entry.last_seq) == (2, 2)


def test_row14_replica_accepts_sequence_gaps():
    replay = Replay("2.7")
    assert replay.results([D(1, 0, 0), D(1, 0, 3)]) == [OK, OOOS]
    assert replay.manager.entry(1).last_seq == 0
    assert replay.results([D(1, 0, 3, origin=REPLICATION)]) == [OK]
    assert replay.manager.entry(1).last_seq == 3


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_row15_pid_expiration_timeout(profile):
    replay = Replay(profile)
    replay.results([D(1, 5, 0, ts=1000)])
    assert replay.manager.remove_expired(1000 + EXPIRY - 1) == []  # idle one ms short of the limit
    assert replay.manager.remove_expired(1000 + EXPIRY) == [1]
    assert replay.results([D(1, 5, 1)]) == [UNKNOWN_NONZERO[profile]]
    if UNKNOWN_NONZERO[profile] is OK:
        entry = replay.manager.entry(1)
        assert (entry.first_seq, entry.last_seq) == (1, 1)


def test_row16_producers_with_ongoing_transactions_do_not_expire():
    replay = Replay("2.7", start_offset=99)
    replay.results([D(1, 5, 0, txn=True, ts=1)])
    assert replay.manager.remove_expired(1 + 10 * EXPIRY) == []
    assert replay.manager.entry(1) is not None
    assert replay.manager.open_transactions() == [OpenTxn(1, 99)]


@pytest.mark.parametrize(("profile", "fenced"), [("2.5", PF), ("2.7", IPE)])
def test_row17_old_epoch_for_a_control_record(profile, fenced):
    replay = Replay(profile)
    assert replay.results([D(1, 5, 0, txn=True), M(1, 3, "COMMIT")]) == [OK, fenced]
    assert replay.manager.open_transactions() == [OpenTxn(1, 0)]


def test_row18_coordinator_fencing():
    replay = Replay("2.7")
    steps = [D(1, 5, 0, txn=True), M(1, 5, "COMMIT", 1), M(1, 5, "COMMIT", 1), M(1, 5, "COMMIT", 2)]
    assert replay.results(steps + [M(1, 5, "COMMIT", 1)]) == [OK, OK, OK, OK, TCF]
    # Only the first COMMIT closes a transaction; the others are markers of empty transactions.
    assert [d.completed_txn for d in replay.decisions[1:4]] == [CompletedTxn(1, 0, 1, False), None, None]
    assert replay.manager.entry(1).coordinator_epoch == 2


def test_row19_coordinator_fenced_after_reload():
    replay = Replay("2.7")
    replay.results([D(1, 0, 0, txn=True), M(1, 0, "COMMIT", 1)])
    reloaded = ProducerStateManager(DEFAULT_PROFILE)
    reloaded.load_snapshot(replay.manager.snapshot())
    for manager in (replay.manager, reloaded):
        assert manager.append_marker(1, 0, "COMMIT", 0, 2, 3).result is TCF


def test_row20_coordinator_appends_skip_sequences():
    # Transactional offset commits to __consumer_offsets carry no sequence.
    replay = Replay("2.7")
    assert replay.results([D(1, 0, -1, txn=True, origin=COORDINATOR)] * 2) == [OK, OK]
    with pytest.raises(ValueError, match="needs a sequence"):
        replay.step(D(1, 0, -1, txn=True))


def test_row21_empty_control_batch():
    manager = ProducerStateManager(DEFAULT_PROFILE)
    assert manager.append_marker(23423, 0, None, None, 15, 0).result is OK
    entry = manager.entry(23423)
    assert (entry.producer_epoch, entry.current_txn_first_offset) == (-1, None)
    assert manager.open_transactions() == []
    # No transaction was started, so a non-transactional batch is fine.
    assert manager.append_data(23423, 0, 0, 0, 16, 16, 1, is_transactional=False).result is OK


def test_empty_control_batch_leaves_an_open_transaction_alone():
    replay = Replay("2.7")
    replay.results([D(1, 0, 0, txn=True)])
    before = _state(replay.manager)
    assert replay.manager.append_marker(1, 0, None, None, 1, 2, origin=REPLICATION).result is OK
    assert _state(replay.manager) == before


def test_row24_skip_empty_transactions():
    replay = Replay("2.7", start_offset=16)
    steps = [
        D(1, 0, (0, 4), txn=True),  # 16-20
        M(1, 0, "COMMIT", 27),  # 21
        M(1, 0, "COMMIT", 27),  # 22
        M(1, 0, "ABORT", 27),  # 23
        D(1, 0, (5, 8), txn=True),  # 24-27
        M(1, 0, "ABORT", 27),  # 28
        M(1, 0, "ABORT", 27),  # 29
        D(1, 0, (9, 10), txn=True),  # 30-31
    ]
    assert replay.results(steps) == [OK] * len(steps)
    completed = [d.completed_txn for d in replay.decisions]
    commit, abort = CompletedTxn(1, 16, 21, False), CompletedTxn(1, 24, 28, True)
    assert completed == [None, commit, None, None, None, abort, None, None]
    assert replay.manager.open_transactions() == [OpenTxn(1, 30)]


# --- §6.2 UnifiedLogTest -------------------------------------------------------------------------


def test_row27_duplicate_appends():
    replay = Replay("2.7")
    assert replay.results([D(1, 0, s) for s in range(6)]) == [OK] * 6
    triple, overlap = D(1, 0, (6, 8)), D(1, 0, (7, 8))
    steps = [triple, triple, overlap, D(1, 0, 2), D(1, 0, 1), D(1, 0, 9), D(1, 0, 9)]
    assert replay.results(steps) == [OK, Dup(6, 8), OOOS, Dup(2, 2), OOOS, OK, Dup(9, 9)]
    assert replay.next_offset == 10  # log end offset: nothing but the appended batches was written


@pytest.mark.parametrize(("profile", "fenced"), [("2.5", PF), ("2.7", IPE)])
def test_row28_old_producer_epoch(profile, fenced):
    assert Replay(profile).results([D(1, 1, 0), D(1, 0, 0)]) == [OK, fenced]


@pytest.mark.parametrize(("profile", "fenced"), [("2.5", PF), ("2.7", IPE)])
def test_row33_end_txn_with_a_fenced_producer_epoch(profile, fenced):
    assert Replay(profile).results([M(1, 5, "ABORT", 1), M(1, 4, "ABORT", 1)]) == [OK, fenced]


# Profiles whose truncateHead evicts at a log-start-offset move (<= 2.3), and what a PID's next
# batch with seq != 0 gets once it is gone.
EVICTING = {"0.11": OOOS, "1.0": UPID, "2.1": UPID}


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_rows25_26_34_log_start_offset(profile):
    replay = Replay(profile)
    # pid 1 at 0-1, pid 2 at 2-3, pid 3 known only through a marker at 4.
    assert replay.results([D(1, 0, (0, 1)), D(2, 0, (0, 1)), M(3, 0, "ABORT")]) == [OK, OK, OK]
    evicts = profile in EVICTING
    # Segment deletion up to offset 2: pid 1's last data offset is below it; pid 3 has none.
    assert replay.manager.on_log_start_offset(2) == ([1, 3] if evicts else [])
    assert replay.results([D(2, 0, 2)]) == [OK]  # offset 5
    assert replay.manager.on_log_start_offset(5) == []  # a last data offset at the new start stays
    assert replay.manager.on_log_start_offset(6) == ([2] if evicts else [])
    assert replay.results([D(2, 0, 3)]) == [EVICTING.get(profile, OK)]
    assert [row.producer_id for row in replay.manager.snapshot()] == ([] if evicts else [1, 2, 3])


@pytest.mark.parametrize("profile", ["2.1", "2.7"])
def test_eviction_drops_the_open_transaction(profile):
    replay = Replay(profile)
    replay.results([D(1, 0, 0, txn=True)])
    replay.manager.on_log_start_offset(1)
    assert replay.manager.open_transactions() == ([] if profile in EVICTING else [OpenTxn(1, 0)])


# --- Profile flags, by behaviour on every profile ----------------------------------------------


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_dedup_cache_size(profile):
    replay = Replay(profile)
    replay.results([D(1, 0, s) for s in range(6)])  # seq s at offset s
    retries = [D(1, 0, 5), D(1, 0, 4), D(1, 0, 1), D(1, 0, 0)]
    if profile == "0.11":  # only the last batch was kept
        assert replay.results(retries) == [Dup(5, 5), OOOS, OOOS, OOOS]
        assert len(replay.manager.entry(1).batch_metadata) == 1
    else:  # the last five: seq 1-5
        assert replay.results(retries) == [Dup(5, 5), Dup(4, 4), Dup(1, 1), OOOS]
        assert len(replay.manager.entry(1).batch_metadata) == 5


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_marker_timestamp_and_expiration(profile):
    # KAFKA-9144 (2.4.1): before it, an entry's timestamp was its last cached batch's, so an
    # epoch-bumping marker left NO_TIMESTAMP and a same-epoch marker left the data batch's.
    sets_timestamp = profile not in {"0.11", "1.0", "2.1"}
    bumped = Replay(profile, producer_id_expiration_ms=1000)
    bumped.results([D(1, 0, 0, txn=True, ts=10_000), M(1, 1, "ABORT", ts=10_000)])
    assert bumped.manager.remove_expired(10_500) == ([] if sets_timestamp else [1])
    same_epoch = Replay(profile, producer_id_expiration_ms=1000)
    same_epoch.results([D(1, 0, 0, txn=True, ts=10_000), M(1, 0, "COMMIT", ts=20_000)])
    assert same_epoch.manager.entry(1).last_timestamp == (20_000 if sets_timestamp else 10_000)
    assert same_epoch.manager.remove_expired(20_500) == ([] if sets_timestamp else [1])


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_tv2_verified_first_append_without_state(profile):
    strict = profile in {"4.1", "kip1228"}
    expected = OOOS if strict else UNKNOWN_NONZERO[profile]
    assert Replay(profile).results([D(23, 1, 3, txn=True, tv2=True)]) == [expected]
    # KAFKA-18202 needs an entry without batches; a producer with cached batches just continues.
    assert Replay(profile).results([D(23, 1, (0, 2)), D(23, 1, 3, txn=True, tv2=True)]) == [OK, OK]


# A client batch with epoch -1 for a PID the broker does not know: the same epoch as the empty
# entry. Up to 2.4 the missing last sequence demands seq 0 (with the marker-only error); since
# KIP-360 "no current epoch" accepts any sequence.
EPOCH_MINUS_ONE = {
    "0.11": OOOS,
    "1.0": OOOS,
    "2.1": UPID,
    "2.4": UPID,
    "2.5": OK,
    "2.7": OK,
    "3.4": OK,
    "4.0": OK,
    "4.1": OK,
    "kip1228": OK,
}


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_unknown_producer_with_epoch_minus_one(profile):
    assert Replay(profile).results([D(1, -1, 5)]) == [EPOCH_MINUS_ONE[profile]]


# The profile a broker version (or a profile's own name) resolves to (§2.9, §6.5); 0.11.0.x had four parts.
VERSIONS = [
    ("0.11.0.2", "0.11"), ("1.1", "1.0"), ("2.0", "1.0"), ("2.0.1", "2.1"), ("2.3.1", "2.1"), ("2.4", "2.4"),
    ("2.6", "2.5"), ("2.8.2", "2.7"), ("3.3", "2.7"), ("3.4", "3.4"), ("3.9", "3.4"), ("3.9.2", "3.4"),
    ("4.0.1", "4.0"), ("4.1", "4.1"), ("4.4", "kip1228"), ("4.x", "kip1228"), ("kip1228", "kip1228"),
]


@pytest.mark.parametrize(("name", "profile"), VERSIONS)
def test_a_broker_version_resolves_to_its_profile(name, profile):
    assert broker.resolve_profile(name) is PROFILES[profile]


@pytest.mark.parametrize("name", ["0.10.2", "5.0", "4", "3.x", "latest", ""])
def test_an_unknown_profile_names_the_valid_ones_in_one_line(name):
    with pytest.raises(ValueError, match="unknown profile") as error:
        broker.resolve_profile(name)
    assert "\n" not in str(error.value) and all(p in str(error.value) for p in PROFILES)


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_expiration_default_and_transactions_v2_by_version(profile):
    # Before 3.4 (KIP-854) producers expired after transactional.id.expiration.ms (7 days); TV2 from 4.0.
    since_3_4 = broker.PROFILE_STARTS[profile] >= (3, 4, 0)
    assert PROFILES[profile].default_producer_id_expiration_ms == (EXPIRY if since_3_4 else 7 * EXPIRY)
    assert PROFILES[profile].transactions_v2 == (broker.PROFILE_STARTS[profile] >= (4, 0, 0))


def test_tv2_verification_is_for_transactional_batches():
    with pytest.raises(ValueError, match="transactional"):
        Replay("4.1").step(D(23, 1, 0, tv2=True))


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_strict_tv2_marker_epoch(profile):
    strict = profile == "kip1228"
    replay = Replay(profile)
    assert replay.results([D(7, 3, 0, txn=True), M(7, 3, "COMMIT", tv2=True)]) == [OK, IPE if strict else OK]
    # TV0 markers and followers keep the "not lower" rule in every profile.
    assert Replay(profile).results([D(7, 3, 0, txn=True), M(7, 3, "COMMIT")]) == [OK, OK]
    follower = Replay(profile)
    steps = [D(7, 3, 0, txn=True), M(7, 3, "COMMIT", tv2=True, origin=REPLICATION)]
    assert follower.results(steps) == [OK, OK]


def test_kip1228_retry_exception_needs_a_closed_transaction():
    replay = Replay("kip1228")
    steps = [D(7, 4, 0, txn=True), M(7, 4, "COMMIT", tv2=True), M(7, 5, "COMMIT", tv2=True)]
    # Same epoch with an open transaction is rejected; after the bump to 5 a resend at 5 is written.
    steps += [M(7, 5, "COMMIT", tv2=True), M(7, 4, "COMMIT", tv2=True)]
    assert replay.results(steps) == [OK, IPE, OK, OK, IPE]


# --- §2.3: which checks run for which origin ----------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "retry", "lower_epoch", "gap"),
    [(CLIENT, Dup(0, 0), IPE, OOOS), (COORDINATOR, OK, IPE, OK), (REPLICATION, OK, OK, OK)],
)
def test_data_checks_by_origin(origin, retry, lower_epoch, gap):
    assert Replay("2.7").results([D(1, 1, 0), D(1, 1, 0, origin=origin)]) == [OK, retry]
    assert Replay("2.7").results([D(1, 1, 0), D(1, 0, 1, origin=origin)]) == [OK, lower_epoch]
    assert Replay("2.7").results([D(1, 1, 0), D(1, 1, 5, origin=origin)]) == [OK, gap]
    # InvalidTxnState has no origin check.
    assert Replay("2.7").results([D(1, 1, 0, txn=True), D(1, 1, 1, origin=origin)]) == [OK, ITS]


@pytest.mark.parametrize(
    ("origin", "lower_epoch", "lower_coordinator"), [(COORDINATOR, IPE, TCF), (REPLICATION, OK, OK)]
)
def test_marker_checks_by_origin(origin, lower_epoch, lower_coordinator):
    base = [D(1, 5, 0, txn=True), M(1, 5, "COMMIT", 3)]
    assert Replay("2.7").results(base + [M(1, 4, "ABORT", 3, origin=origin)]) == [OK, OK, lower_epoch]
    assert Replay("2.7").results(base + [M(1, 5, "ABORT", 2, origin=origin)]) == [OK, OK, lower_coordinator]


def test_clients_cannot_write_markers():
    with pytest.raises(ValueError, match="control batches"):
        Replay("2.7").step(M(1, 0, "COMMIT", origin=CLIENT))


def test_markers_must_be_commit_or_abort():
    with pytest.raises(ValueError, match="LEADER_CHANGE"):
        Replay("2.7").step(M(1, 0, "LEADER_CHANGE"))


def test_batch_sequences_must_span_its_offsets():
    manager = ProducerStateManager(DEFAULT_PROFILE)
    with pytest.raises(ValueError, match="do not span"):
        manager.append_data(1, 0, 0, 2, 10, 11, 0, is_transactional=False)


def test_merge_semantics_of_the_batch_cache():
    replay = Replay("2.7")
    replay.results([D(1, 0, (0, 4), txn=True), M(1, 0, "COMMIT")])
    # A same-epoch marker keeps the cache, so a retry of the committed batch is still a duplicate.
    assert replay.manager.entry(1).last_seq == 4
    assert replay.results([D(1, 0, (0, 4), txn=True)]) == [Dup(0, 4)]
    replay.results([D(1, 1, 0)])
    # A new epoch clears it: the old batch is neither cached nor in the current epoch.
    assert [(b.first_seq, b.last_seq) for b in replay.manager.entry(1).batch_metadata] == [(0, 0)]


def test_lose_all_state():
    replay = Replay("2.7")
    replay.results([D(1, 0, (0, 1)), D(2, 0, 0)])
    replay.manager.lose_all_state()
    assert replay.manager.snapshot() == []
    # S33 for every producer: the retry is appended a second time.
    assert replay.results([D(1, 0, (0, 1)), D(2, 0, 0)]) == [OK, OK]


# --- Snapshots -----------------------------------------------------------------------------------


def _snapshot_fixture() -> Replay:
    replay = Replay("2.7")
    steps = [
        *(D(1, 3, s, ts=100 + s) for s in range(5)),  # pid 1: five cached batches, offsets 0-4
        D(2, 0, (0, 1), txn=True, ts=200),  # pid 2: open transaction at 5-6
        D(3, 0, 0, txn=True, ts=300),  # pid 3: committed at 7, marker at 8 with coordinator epoch 7
        M(3, 0, "COMMIT", 7, ts=301),
        M(4, 2, "ABORT", 1, ts=400),  # pid 4: only a marker, at 9
    ]
    assert replay.results(steps) == [OK] * len(steps)
    return replay


def test_snapshot_holds_the_eight_snapshot_fields():
    assert ProducerSnapshotEntry._fields == (
        "producer_id",
        "producer_epoch",
        "last_sequence",
        "last_offset",
        "offset_delta",
        "timestamp",
        "coordinator_epoch",
        "current_txn_first_offset",
    )
    assert _snapshot_fixture().manager.snapshot() == [
        (1, 3, 4, 4, 0, 104, -1, -1),
        (2, 0, 1, 6, 1, 200, -1, 5),
        (3, 0, 0, 7, 0, 301, 7, -1),
        (4, 2, -1, -1, 0, 400, 1, -1),
    ]


def test_snapshot_is_sorted_by_producer_id():
    replay = Replay("2.7")
    replay.results([D(9, 0, 0), D(2, 0, 0), M(5, 0, "ABORT")])
    assert [row.producer_id for row in replay.manager.snapshot()] == [2, 5, 9]


def test_snapshot_round_trip_keeps_state_but_caches_only_the_last_batch():
    original = _snapshot_fixture().manager
    # Through the on-disk format, as a restarted broker reads it.
    data = write_snapshot(original.snapshot())
    rows = read_snapshot(data, topic="t", partition=0, file="f", snapshot_offset=10).rows
    reloaded = ProducerStateManager(DEFAULT_PROFILE)
    reloaded.load_snapshot(rows)
    assert reloaded.snapshot() == original.snapshot()
    assert reloaded.open_transactions() == original.open_transactions() == [OpenTxn(2, 5)]
    assert len(original.entry(1).batch_metadata) == 5
    assert len(reloaded.entry(1).batch_metadata) == 1
    # The newest batch is still a duplicate; an older retry in the 5-cache is not any more (§2.5).
    assert original.append_data(1, 3, 4, 4, 10, 10, 500, is_transactional=False).duplicate_of == (4, 4)
    assert reloaded.append_data(1, 3, 4, 4, 10, 10, 500, is_transactional=False).duplicate_of == (4, 4)
    assert original.append_data(1, 3, 2, 2, 10, 10, 500, is_transactional=False).result is Result.DUPLICATE
    assert reloaded.append_data(1, 3, 2, 2, 10, 10, 500, is_transactional=False).result is OOOS
    # Epoch, coordinator epoch and the marker-only entry survive; the latter without a batch.
    assert reloaded.entry(4).is_empty
    assert reloaded.append_data(1, 2, 0, 0, 10, 10, 500, is_transactional=False).result is IPE
    assert reloaded.append_marker(3, 0, "COMMIT", 6, 10, 500).result is TCF
    assert reloaded.append_data(4, 2, 5, 5, 10, 10, 500, is_transactional=False).result is OOOS
    assert reloaded.append_data(2, 0, 2, 2, 10, 10, 500, is_transactional=True).result is OK


# --- Reasons -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "fragment"),
    [
        ([D(1, 0, 3)], "unknown producer id"),
        ([D(1, 0, 0), D(1, 0, 1)], "seq 1 follows 0"),
        ([D(1, 0, 0), D(1, 1, 0)], "new epoch 1"),
        ([D(1, 0, 0), D(1, 0, 5)], "does not follow last seq 0"),
        ([D(1, 0, 0), D(1, 0, 0)], "appended at offsets 0..0"),
        ([D(1, 0, 0, origin=REPLICATION)], "REPLICATION append"),
        ([D(1, 1, 0), D(1, 0, 0)], "epoch 0 < last seen epoch 1"),
        ([D(1, 0, 0, txn=True), M(1, 0, "ABORT")], "ABORT closes"),
        ([M(1, 0, "ABORT")], "empty transaction"),
    ],
)
def test_reason_names_the_rule(steps, fragment):
    replay = Replay("2.7")
    replay.results(steps)
    assert fragment in replay.decisions[-1].reason
