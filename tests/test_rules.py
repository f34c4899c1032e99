"""Each rule of ``analytics.audit.predicates`` alone, on a tiny hand-built frame holding only the
columns it reads: a table of cases per rule, edge cases included (the sequence wrap at INT_MAX, a gap
or a rewind across it, an epoch bump at 0 or not, idle exactly at the expiration, an open
transaction). Then ``rules.classify``'s contract with the caller's session."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from analytics.audit import predicates
from analytics.audit.config import AuditConfig, Restart
from analytics.contract import schemas
from analytics.contract.vocabulary import (
    COMPACTION, CONTROL_MARKER, COORDINATOR_EPOCH_REGRESSION, CORRUPT, DUPLICATE, EPOCH_BUMP,
    EPOCH_BUMP_NONZERO, FENCED_ZOMBIE_WRITE, FIRST_SEEN_NONZERO, INT_MAX, INVALID_TXN_STATE,
    MARKER_EPOCH_REGRESSION, NON_IDEMPOTENT, OK, PARTIAL_HISTORY, PRODUCER_EXPIRATION, SEQUENCE_GAP,
    SEQUENCE_REGRESSION, SEQUENCE_REUSE, SEV_EXPLAINED, SEV_INFO, SEV_OK, SEV_VIOLATION, STATE_LOSS, UNREAD_FILE,
    VERDICT_MEANING,
)

pytestmark = pytest.mark.spark

HALF = 2**30  # half the sequence space: how far ahead a sequence may lie and still be a gap


def values(spark, column, schema: str, rows: list[tuple]) -> list:
    """``column`` on each row of a frame with the DDL ``schema``, in the rows' order."""
    return [r[0] for r in spark.createDataFrame(rows, schema).select(column.alias("value")).collect()]


def holds(spark, predicate, schema: str, rows: list[tuple]) -> list[bool]:
    """Where ``predicate`` holds: null (a fact the row lacks) counts as false, as ``F.when`` reads it."""
    return [v is True for v in values(spark, predicate, schema, rows)]


def cases(table: list[tuple]) -> tuple[list[tuple], list]:
    """(inputs..., expected) rows -> the input rows and the expected values."""
    return [row[:-1] for row in table], [row[-1] for row in table]


SEQUENCES = "last int, nxt int"


def _pair(rule):
    return rule(F.col("last"), F.col("nxt"))


def test_in_sequence_wraps_to_zero_after_int_max(spark):
    rows, want = cases([
        (4, 5, True), (4, 4, False), (4, 6, False), (4, 3, False),
        (INT_MAX - 1, INT_MAX, True), (INT_MAX, 0, True), (INT_MAX, 1, False), (0, INT_MAX, False),
        (-1, 0, True),  # a run restarted by a marker: the mark is -1
    ])
    assert holds(spark, _pair(predicates.in_sequence), SEQUENCES, rows) == want


def test_seq_distance_counts_the_missing_sequences_mod_2_31(spark):
    rows, want = cases([(4, 5, 0), (4, 8, 3), (INT_MAX, 0, 0), (INT_MAX, 3, 3), (INT_MAX - 1, 1, 2),
                        (4, 4, 2**31 - 1)])  # a repeat of the mark lies a whole turn minus one ahead
    assert values(spark, _pair(predicates.seq_distance), SEQUENCES, rows) == want


def test_ahead_tells_a_gap_from_a_rewind_across_the_wrap(spark):
    rows, want = cases([
        (4, 7, True), (4, 5, False), (4, 4, False), (4, 2, False),
        (INT_MAX, 2, True), (INT_MAX - 1, 0, True),  # gaps across the wrap
        (1, INT_MAX - 1, False), (0, INT_MAX, False),  # rewinds back across it
        (0, HALF, True), (0, HALF + 1, False),  # at most half the space ahead is a gap
    ])
    assert holds(spark, _pair(predicates.ahead), SEQUENCES, rows) == want


def test_wrap_crossing_counts_steps_across_int_max_both_ways(spark):
    rows, want = cases([
        (False, 5, 9, 0), (False, INT_MAX, INT_MAX, 0),
        (False, INT_MAX - 1, 1, 1), (False, 1, INT_MAX - 1, -1),  # forward across the wrap, and back
        (False, None, 3, None),  # the producer's first data batch
        (True, 5, -1, None),  # markers carry no sequence
    ])
    schema = "is_control boolean, prev_data_seq int, last_sequence int"
    assert values(spark, predicates.wrap_crossing(), schema, rows) == want


BATCH = "crc_valid boolean, magic int, producer_id long, is_control boolean, record_count int, topic string"


def test_has_state_and_is_replayed(spark):
    rows, want = cases([
        (True, 2, 7, False, 3, "t", (True, True)),
        (False, 2, 7, False, 3, "t", (False, False)),  # corrupt
        (True, 1, 7, False, 3, "t", (False, False)),  # legacy format
        (True, 2, -1, False, 3, "t", (False, False)),  # no producer id
        (True, 2, 7, True, 0, "t", (False, False)),  # an emptied control batch
        (True, 2, 7, True, 1, "t", (True, True)),  # a marker
        (True, 2, 7, False, 3, "__transaction_state", (True, False)),  # coordinators' appends: state only
        (True, 2, 7, False, 3, "__consumer_offsets", (True, False)),
    ])
    state = holds(spark, predicates.has_state(), BATCH, rows)
    got = zip(state, holds(spark, predicates.is_replayed(), BATCH, rows))
    assert list(got) == want


def test_an_epoch_run_starts_at_the_first_batch_and_at_any_other_epoch(spark):
    rows, want = cases([(None, 0, True), (0, 0, False), (0, 1, True), (2, 1, True)])
    schema = "prev_epoch int, producer_epoch int"
    assert holds(spark, predicates.epoch_changed(), schema, rows) == want
    assert holds(spark, predicates.first_seen(), schema, rows) == [True, False, False, False]


def test_a_transaction_is_open_from_its_data_until_the_next_marker(spark):
    rows, want = cases([(None, None, False), (5, None, True), (5, 3, True), (5, 7, False), (None, 7, False)])
    got = values(spark, predicates.transaction_open(), "last_txn_data long, last_marker long", rows)
    assert got == want  # never null: the expiry point negates it


def test_the_state_a_batch_leaves(spark):
    rows, want = cases([
        (False, 0, 0, 9, 120, (9, 120)),  # data: its own
        (True, 0, 0, -1, 121, (None, None)),  # a marker at the same epoch changes nothing
        (True, 0, 1, -1, 122, (-1, -1)),  # a marker bumping the epoch resets the sequence
        (True, None, 1, -1, 123, (-1, -1)),  # a producer's first batch, a marker
    ])
    schema = "is_control boolean, prev_epoch int, producer_epoch int, last_sequence int, last_offset long"
    sequences = values(spark, predicates.sequence_left(), schema, rows)
    got = zip(sequences, values(spark, predicates.offset_left(), schema, rows))
    assert list(got) == want


DATA_STATE = "dup_rank int, prev_epoch int, producer_epoch int, base_sequence int, seq_mark int"


def test_verdict_of_data(spark):
    rows, want = cases([
        (2, 0, 0, 5, 4, DUPLICATE),  # a copy, even where it would be in sequence
        (1, None, 0, 0, None, OK), (1, None, 0, 5, None, FIRST_SEEN_NONZERO),
        (1, 0, 1, 0, 9, EPOCH_BUMP), (1, 0, 1, 5, 9, EPOCH_BUMP_NONZERO),
        (1, 2, 1, 0, 9, FENCED_ZOMBIE_WRITE),
        (1, 0, 0, 5, 4, OK), (1, 0, 0, 0, INT_MAX, OK),
        (1, 0, 0, 0, -1, OK), (1, 0, 0, 3, -1, SEQUENCE_GAP),  # -1: a marker restarted the run
        (1, 0, 0, 7, 4, SEQUENCE_GAP), (1, 0, 0, 1, INT_MAX - 1, SEQUENCE_GAP),
        (1, 0, 0, 2, 4, SEQUENCE_REGRESSION), (1, 0, 0, 4, 4, SEQUENCE_REGRESSION),
        (1, 0, 0, INT_MAX - 1, 1, SEQUENCE_REGRESSION),  # a rewind back across the wrap
    ])
    assert values(spark, predicates.verdict_of_data(), DATA_STATE, rows) == want


def test_verdict_of_marker(spark):
    rows, want = cases([
        (None, 0, 1, None, CONTROL_MARKER), (1, 2, 3, 3, CONTROL_MARKER), (1, 1, 4, 3, CONTROL_MARKER),
        (2, 1, 5, 1, MARKER_EPOCH_REGRESSION), (1, 1, 0, 3, COORDINATOR_EPOCH_REGRESSION),
    ])
    schema = "prev_epoch int, producer_epoch int, coordinator_epoch int, prev_coordinator_epoch int"
    assert values(spark, predicates.verdict_of_marker(), schema, rows) == want


def test_verdict_of_untracked(spark):
    rows, want = cases([
        (True, 2, 5, CONTROL_MARKER),  # an emptied marker
        (False, 2, -1, NON_IDEMPOTENT), (False, 1, 7, NON_IDEMPOTENT), (False, 0, -1, NON_IDEMPOTENT),
        (True, 1, -1, NON_IDEMPOTENT),  # control batches exist from magic 2 on
        (False, 2, 7, OK),  # an internal topic's
    ])
    schema = "is_control boolean, magic int, producer_id long"
    assert values(spark, predicates.verdict_of_untracked(), schema, rows) == want


def test_outside_open_transaction(spark):
    rows, want = cases([(False, True, False, True), (False, True, True, False), (True, True, False, False),
                        (False, False, False, False)])
    schema = "is_control boolean, txn_open boolean, is_transactional boolean"
    assert holds(spark, predicates.outside_open_transaction(), schema, rows) == want


def test_verdict_corrupt_replayed_or_untracked(spark):
    schema = ("crc_valid boolean, tracked boolean, is_control boolean, is_transactional boolean, "
              "txn_open boolean, magic int, producer_id long, coordinator_epoch int, "
              "prev_coordinator_epoch int, " + DATA_STATE)
    data = (2, 7, None, None)  # magic, producer id, no coordinator epochs
    rows, want = cases([
        (False, False, False, False, False, *data, 1, 0, 0, 5, 4, CORRUPT),
        (True, True, False, False, False, *data, 1, 0, 0, 5, 4, OK),
        (True, True, False, False, True, *data, 1, 0, 0, 5, 4, INVALID_TXN_STATE),
        (True, True, False, False, True, *data, 1, 0, 1, 0, 4, INVALID_TXN_STATE),  # an epoch bump too
        (True, True, False, True, True, *data, 1, 0, 0, 5, 4, OK),  # the transaction's own data
        (True, True, False, False, True, *data, 1, 0, 0, 9, 4, SEQUENCE_GAP),  # a break stays itself
        (True, True, True, True, True, 2, 7, 1, 3, None, 0, 0, -1, 4, COORDINATOR_EPOCH_REGRESSION),
        (True, False, False, False, False, 1, -1, None, None, None, None, 0, 5, None, NON_IDEMPOTENT),
    ])
    assert values(spark, predicates.verdict(), schema, rows) == want


def test_expected_sequence(spark):
    rows, want = cases([
        (False, False, 0, 0, 4, None), (True, True, 0, 0, 4, None),  # untracked, a marker
        (True, False, None, 0, None, 0), (True, False, 0, 1, 9, 0),  # a new epoch run starts at 0
        (True, False, 0, 0, 4, 5), (True, False, 0, 0, INT_MAX, 0), (True, False, 0, 0, -1, 0),
    ])
    schema = "tracked boolean, is_control boolean, prev_epoch int, producer_epoch int, seq_mark int"
    assert values(spark, predicates.expected_sequence(), schema, rows) == want


def test_conflict_offset_names_the_batch_each_verdict_is_judged_against(spark):
    rows, want = cases([
        (DUPLICATE, 1, 2, 3, 1), (SEQUENCE_GAP, 1, 2, 3, 2), (SEQUENCE_REGRESSION, 1, 2, 3, 2),
        (EPOCH_BUMP_NONZERO, 1, 2, 3, 3), (FENCED_ZOMBIE_WRITE, 1, 2, 3, 3),
        (OK, 1, 2, 3, None), (FIRST_SEEN_NONZERO, 1, 2, 3, None),
    ])
    schema = "verdict string, dup_original long, mark_offset long, prev_base_offset long"
    assert values(spark, predicates.conflict_offset(), schema, rows) == want


def test_before_kip360_a_forgotten_producer_got_in_at_sequence_zero_only(spark):
    def taken(profile: str) -> list[bool]:
        rule = predicates.taken_when_forgotten(AuditConfig(profile=profile))
        return holds(spark, rule, "base_sequence int", [(0,), (5,)])

    assert taken("4.x") == taken("2.5") == [True, True]
    assert taken("2.4") == taken("0.11") == [True, False]


def test_restart_between_the_previous_batch_and_this_one(spark):
    config = AuditConfig(broker_restarts=(Restart(offset=10, topic="t"), Restart(time_ms=5000, partition=1)))
    rows, want = cases([
        ("t", 0, 5, 10, 0, 1, True), ("t", 0, 5, 20, 0, 1, True),  # the restart at or below this batch
        ("t", 0, 10, 12, 0, 1, False),  # the previous batch was already at the restart's offset
        ("u", 0, 5, 10, 0, 1, False),  # another topic
        ("u", 1, 0, 1, 4999, 5000, True), ("u", 0, 0, 1, 4999, 5000, False),  # by time, on partition 1 only
        ("u", 1, 0, 1, 5000, 6000, False),
        ("t", 0, None, 10, None, 1, False),  # the producer's first batch
    ])
    schema = ("topic string, partition int, prev_base_offset long, base_offset long, "
              "prev_max_timestamp long, max_timestamp long")
    got = values(spark, predicates.restart_between(config), schema, rows)
    assert got == want  # false, not null, where the previous batch is missing
    assert holds(spark, predicates.restart_between(AuditConfig()), schema, rows) == [False] * len(rows)


EXPIRY = ("tracked boolean, max_timestamp long, prev_max_timestamp long, last_txn_data long, "
          "last_marker long, base_sequence int")


def test_an_expiry_point_is_idle_at_least_the_expiration_with_no_open_transaction(spark):
    rows, want = cases([
        (True, 2000, 1000, None, None, 3, True),  # idle exactly producer.id.expiration.ms
        (True, 1999, 1000, None, None, 3, False),
        (True, 9000, 1000, 4, None, 3, False),  # a transaction open: the producer never expires
        (True, 9000, 1000, 4, 6, 3, True),  # ... closed by a marker
        (True, 9000, None, None, None, 3, False),  # the producer's first batch
        (False, 9000, 1000, None, None, 3, False),  # not replayed
    ])
    rule = predicates.expiry_point(AuditConfig(producer_id_expiration_ms=1000))
    assert holds(spark, rule, EXPIRY, rows) == want
    before_kip360 = predicates.expiry_point(AuditConfig(profile="2.4", producer_id_expiration_ms=1000))
    at = [(True, 9000, 1000, None, None, 3), (True, 9000, 1000, None, None, 0)]  # only at sequence 0
    assert holds(spark, before_kip360, EXPIRY, at) == [False, True]


def test_the_state_rebuilt_after_an_expiry_takes_the_next_in_sequence_or_a_new_epoch_at_zero(spark):
    rows, want = cases([
        (0, 0, 3, 4, True), (0, 0, 3, 6, False), (0, 0, INT_MAX, 0, True), (0, 0, -1, 0, True),
        (0, 1, 3, 0, True), (0, 1, 3, 2, False), (1, 0, 3, 0, False),
    ])
    schema = "prev_epoch int, producer_epoch int, state_last_seq int, base_sequence int"
    assert holds(spark, predicates.rebuilt_state_takes(), schema, rows) == want


def test_after_expiry_a_repeat_of_what_came_before_the_expiry_point(spark):
    rows, want = cases([
        (DUPLICATE, 0, 0, 3, 4, 2, 8, True),
        (DUPLICATE, 0, 0, 3, 4, 9, 8, False),  # the original after the expiry point: the broker knew it
        (DUPLICATE, 0, 0, 3, 4, 8, 8, False),  # ... or at it: the rebuilt state starts with it
        (DUPLICATE, 0, 0, 3, 6, 2, 8, False),  # the rebuilt state would have refused it
        (SEQUENCE_GAP, 0, 0, 3, 4, 2, 8, True), (SEQUENCE_REGRESSION, 0, 0, 3, 4, 2, 8, True),
        (FENCED_ZOMBIE_WRITE, 0, 0, 3, 4, 2, 8, False),
        (DUPLICATE, 0, 0, 3, 4, 2, None, False),  # no expiry point
    ])
    schema = ("verdict string, prev_epoch int, producer_epoch int, state_last_seq int, base_sequence int, "
              "conflict_offset long, expired_offset long")
    assert values(spark, predicates.after_expiry(), schema, rows) == want  # false, not null


def test_compaction_covers_a_gap_no_wider_than_the_offset_holes(spark):
    config = AuditConfig(cleanup_policy={"c": "compact", "d": "delete"})
    rows, want = cases([
        ("c", SEQUENCE_GAP, 4, 8, 3, True), ("c", SEQUENCE_GAP, 4, 8, 2, False),
        ("c", SEQUENCE_GAP, INT_MAX - 1, 2, 3, True),  # INT_MAX, 0 and 1 missing, across the wrap
        ("d", SEQUENCE_GAP, 4, 8, 10, False), ("c", SEQUENCE_REGRESSION, 4, 2, 10, False),
        # a new epoch seen first at sequence 1 (its mark -1): the batch at 0, the epoch's first, went
        # with compaction (a transaction's first batch whose keys were overwritten)
        ("c", EPOCH_BUMP_NONZERO, -1, 1, 4, True), ("c", EPOCH_BUMP_NONZERO, -1, 5, 4, False),
        ("d", EPOCH_BUMP_NONZERO, -1, 1, 4, False),
    ])
    schema = "topic string, verdict string, seq_mark int, base_sequence int, offset_holes long"
    assert holds(spark, predicates.compaction_covers(config), schema, rows) == want


PARTIAL = ("verdict string, topic string, log_start_offset long, partition_first_offset long, "
           "base_sequence int, prev_base_offset long, state_last_seq int, mark_offset long, prev_data_seq int")


def test_partial_history_where_earlier_batches_are_gone(spark):
    config = AuditConfig(cleanup_policy={"c": "compact"})
    rows, want = cases([
        (FIRST_SEEN_NONZERO, "t", 5, 0, 7, None, None, None, None, True),  # the log start moved
        (FIRST_SEEN_NONZERO, "t", 0, 100, 7, None, None, None, None, True),  # the export starts above 0
        (FIRST_SEEN_NONZERO, "c", None, 0, 7, None, None, None, None, True),  # compaction ran
        (FIRST_SEEN_NONZERO, "t", None, 0, 7, None, None, None, None, False),
        (SEQUENCE_REGRESSION, "t", 10, 0, 0, 3, 5, 4, 4, False),  # since 2.4 the broker kept the state
        # the producer's first data batch after a marker only (prev_data_seq null): its data went
        (SEQUENCE_GAP, "c", None, 0, 9, 9, -1, None, None, True),
        (EPOCH_BUMP_NONZERO, "c", None, 0, 5, 20, -1, None, None, True),
        (SEQUENCE_GAP, "t", None, 0, 9, 9, -1, None, None, False),  # nothing says history is partial
        (SEQUENCE_GAP, "c", None, 0, 9, 9, 4, None, 4, False),  # an earlier data batch is there
    ])
    assert holds(spark, predicates.partial_history(config), PARTIAL, rows) == want


@pytest.mark.parametrize("profile, restart, repeats",
                         [("4.x", False, False), ("2.4", False, True), ("2.1", True, True)])
def test_before_2_4_the_log_start_evicted_producers(spark, profile, restart, repeats):
    """Up to 2.3 a producer whose batches all fell below the log start was forgotten and restarted
    at 0; before 2.5 the batches going on from there repeat sequences below the log start."""
    rows = [
        (SEQUENCE_REGRESSION, "t", 10, 0, 0, 3, 5, 4, 5),  # the restart at 0, its previous batch below the start
        (SEQUENCE_REGRESSION, "t", 10, 0, 0, 12, 5, 4, 5),  # ... its previous batch above the start
        (DUPLICATE, "t", 10, 0, 2, 10, 1, 8, 1),  # going on from it, the mark below the start
        (DUPLICATE, "t", 10, 0, 2, 10, 1, 12, 1),  # ... the mark above the start
        (DUPLICATE, "t", 10, 0, 3, 10, 1, 8, 1),  # ... not in sequence
    ]
    got = holds(spark, predicates.partial_history(AuditConfig(profile=profile)), PARTIAL, rows)
    assert got == [restart, False, repeats, False, False]


# A gap on a compacted topic with every piece of evidence: a restart at offset 10 between the
# producer's previous batch and this one, 8 s idle (the expiration: 1 s), a repeat of what came
# before the latest expiry point, offset holes enough for the missing sequences, a moved log start.
EVIDENCE = {
    "verdict": ("string", SEQUENCE_GAP), "base_sequence": ("int", 8), "prev_base_offset": ("long", 5),
    "base_offset": ("long", 10), "tracked": ("boolean", True), "max_timestamp": ("long", 9000),
    "prev_max_timestamp": ("long", 1000), "last_txn_data": ("long", None), "last_marker": ("long", None),
    "prev_epoch": ("int", 0), "producer_epoch": ("int", 0), "state_last_seq": ("int", 7),
    "conflict_offset": ("long", 2), "expired_offset": ("long", 8), "topic": ("string", "c"),
    "seq_mark": ("int", 4), "offset_holes": ("long", 9), "log_start_offset": ("long", 5),
    "partition_first_offset": ("long", 0), "mark_offset": ("long", 4), "prev_data_seq": ("int", 7),
    "unread_files": ("int", 1), "records_differ": ("boolean", None),
}
NO_RESTART = {"prev_base_offset": 10, "base_offset": 12}
NOT_IDLE = {"max_timestamp": 1500}


def evidence(**changes) -> tuple:
    return tuple(changes.get(name, value) for name, (_, value) in EVIDENCE.items())


def test_explained_by_takes_the_first_evidence_in_order(spark):
    config = AuditConfig(producer_id_expiration_ms=1000, cleanup_policy={"c": "compact"},
                         broker_restarts=(Restart(offset=10),))
    no_expiry = {**NO_RESTART, **NOT_IDLE, "expired_offset": None}
    rows, want = cases([
        (*evidence(), STATE_LOSS),
        (*evidence(**NO_RESTART), PRODUCER_EXPIRATION),  # the batch is an expiry point
        (*evidence(**NO_RESTART, **NOT_IDLE), PRODUCER_EXPIRATION),  # the rebuilt state took it in sequence
        # a copy holding other records: a reuse once the broker had forgotten the producer, else a copy
        (*evidence(**NO_RESTART, verdict=DUPLICATE, records_differ=True), SEQUENCE_REUSE),
        (*evidence(**NO_RESTART, verdict=DUPLICATE, records_differ=False), PRODUCER_EXPIRATION),
        (*evidence(**NO_RESTART, verdict=SEQUENCE_GAP, records_differ=True), PRODUCER_EXPIRATION),
        (*evidence(**no_expiry, verdict=DUPLICATE, records_differ=True, topic="t", conflict_offset=9), None),
        (*evidence(verdict=DUPLICATE, records_differ=True), STATE_LOSS),  # a restart between: its evidence first
        (*evidence(**no_expiry), COMPACTION),
        (*evidence(**no_expiry, topic="t", unread_files=0), None),  # a gap is no partial history
        (*evidence(**no_expiry, topic="t"), UNREAD_FILE),  # the holes cover it, and a segment was not read
        (*evidence(**no_expiry, topic="t", offset_holes=2), None),  # 3 sequences missing: more than the holes
        (*evidence(**no_expiry, topic="t", verdict=FIRST_SEEN_NONZERO), PARTIAL_HISTORY),
        # never explained, whatever the evidence
        (*evidence(verdict=OK), None), (*evidence(verdict=EPOCH_BUMP), None),
        (*evidence(verdict=CORRUPT), None), (*evidence(verdict=INVALID_TXN_STATE), None),
    ])
    schema = ", ".join(f"{name} {kind}" for name, (kind, _) in EVIDENCE.items())
    assert values(spark, predicates.explained_by(config), schema, rows) == want


def test_severity(spark):
    rows, want = cases([
        (OK, None, SEV_OK), (EPOCH_BUMP, None, SEV_OK),
        (NON_IDEMPOTENT, None, SEV_INFO), (CONTROL_MARKER, None, SEV_INFO),
        (SEQUENCE_GAP, PRODUCER_EXPIRATION, SEV_EXPLAINED), (SEQUENCE_GAP, None, SEV_VIOLATION),
        (CORRUPT, None, SEV_VIOLATION), (INVALID_TXN_STATE, None, SEV_VIOLATION),
        (DUPLICATE, SEQUENCE_REUSE, SEV_INFO), (DUPLICATE, PRODUCER_EXPIRATION, SEV_EXPLAINED),
    ])
    assert values(spark, predicates.severity(), "verdict string, explained_by string", rows) == want


def test_marker_bumps_txn(spark):
    rows, want = cases([(True, True, 3, 4, True), (True, True, 4, 4, False), (True, False, 3, 4, False),
                        (False, True, 3, 4, False)])
    schema = "is_control boolean, txn_open boolean, prev_epoch int, producer_epoch int"
    assert holds(spark, predicates.marker_bumps_txn(), schema, rows) == want


TEXT = ("verdict string, producer_epoch int, base_sequence int, last_sequence int, expected_sequence int, "
        "idle_ms long, explained_by string, control_type string, marker_bumps_txn boolean")


def test_explanation_text(spark):
    rows, want = cases([
        (OK, 0, 5, 6, 5, 10, None, None, None, VERDICT_MEANING[OK]),
        (SEQUENCE_GAP, 0, 9, 9, 5, 10, None, None, None, "SEQUENCE_GAP: epoch 0, sequence 9..9; "
         "expected sequence 5; idle 10 ms since the producer's previous batch"),
        (SEQUENCE_GAP, 0, 9, 9, None, None, None, None, None, "SEQUENCE_GAP: epoch 0, sequence 9..9"),
        (DUPLICATE, 1, 3, 4, 5, 10, PRODUCER_EXPIRATION, None, None, "the same epoch and sequence range as "
         "an earlier batch: epoch 1, sequence 3..4 — explained by producer_expiration"),
        (CONTROL_MARKER, 4, -1, -1, None, None, None, "ABORT", True, "ABORT marker at epoch 4"),
    ])
    assert values(spark, predicates.explanation_text(AuditConfig()), TEXT, rows) == want
    tv1 = values(spark, predicates.explanation_text(AuditConfig(profile="3.9")), TEXT,
                 [(CONTROL_MARKER, 4, -1, -1, None, None, None, "COMMIT", True),
                  (CONTROL_MARKER, 4, -1, -1, None, None, None, "COMMIT", False)])
    assert "a transactions V2 commit" in tv1[0] and tv1[1] == "COMMIT marker at epoch 4"


# -- classify and the caller's session ---------------------------------------------------------------
CO_PARTITION = "spark.sql.requireAllClusterKeysForCoPartition"


def test_classify_leaves_the_session_alone_and_gives_the_same_verdicts_under_either_setting(spark):
    """The co-partitioning setting only decides how the join back is hashed: classify neither sets
    it nor needs it, and a session with Spark's default gets the same rows."""
    from analytics.audit.rules import classify
    from analytics.spark.source import spark_schema

    base = dict.fromkeys(schemas.BATCHES.names)
    rows = [base | dict(topic="t", partition=p, file=f"/logs/t-{p}/{0:020d}.log", file_position=i * 80,
                        batch_size=80, magic=2, crc_valid=True, base_offset=i, last_offset=i, record_count=1,
                        is_transactional=False, is_control=False, base_timestamp=i, max_timestamp=i,
                        producer_id=1, producer_epoch=0, base_sequence=seq, last_sequence=seq)
            for p in (0, 1) for i, seq in enumerate((0, 1, 1, 3, INT_MAX))]
    batches = spark.createDataFrame(rows, spark_schema(schemas.BATCHES))
    ours = spark.conf.get(CO_PARTITION)
    got = {}
    try:
        for setting in ("true", "false"):
            spark.conf.set(CO_PARTITION, setting)
            verdicts = classify(batches, AuditConfig()).collect()
            got[setting] = {(r["file"], r["file_position"]): r.asDict() for r in verdicts}
            assert spark.conf.get(CO_PARTITION) == setting
    finally:
        spark.conf.set(CO_PARTITION, ours)
    assert got["true"] == got["false"]
    assert [got["true"][(f"/logs/t-0/{0:020d}.log", i * 80)]["verdict"] for i in range(5)] == \
        [OK, OK, DUPLICATE, SEQUENCE_GAP, SEQUENCE_REGRESSION]
