"""The broker model against a real Apache Kafka broker, one batch at a time.

A raw producer (``tests/raw_producer.py``: kafka-python's protocol classes, our own batch bytes)
sends hypothesis-generated histories to one broker per version (the module's fixture): in-order
batches, retries of recent batches (inside the 5-batch dedup window) and of older ones, gaps,
rewinds, higher epochs at sequence 0 and elsewhere, lower epochs, sequences that wrap at INT_MAX,
and idle periods past ``producer.id.expiration.ms`` followed by whatever comes next (a gap, a replay
of an old batch, a zombie epoch...). Each history has its own partition and its own producer id
(InitProducerId), so histories are independent. The broker's answer to every batch (its base
offset, the original batch's offset for a duplicate, or the error code) is the ground truth:
``ProducerStateManager`` with the version's profile, told the time, must predict each one exactly.

After the histories, the broker stops cleanly and its log dir is exported (with records) and audited with
``producer_id_expiration_ms`` set to the broker's. The log must hold exactly the batches the
broker appended, and each one's verdict must fit why the broker took it (``expected_verdicts``
is the mapping, stated in its docstring). Batches the broker took in sequence after it had taken
a rewind or a replay from an expired producer repeat sequences written before the expiration:
the audit gives them their verdict (DUPLICATE, SEQUENCE_REGRESSION) explained by
``producer_expiration``, the expiry point (``expired_offset``) lying after the batch they conflict
with (``conflict_offset``); ``test_the_audit_explains_repeats_after_an_expiration`` checks them.

Time: a batch carries the wall clock when it is sent (a retry "as is" keeps its first timestamp),
and the broker keeps its maxTimestamp as the producer's time (its own clock on a LogAppendTime
topic) to compare with the same wall clock. A producer whose last appended batch is younger than
``EXPIRATION_MS - ALIVE_MARGIN_MS`` has certainly not expired; one older than
``EXPIRATION_MS + CHECK_INTERVAL_MS + EXPIRED_MARGIN_MS`` (and appended at least
``CHECK_INTERVAL_MS + EXPIRED_MARGIN_MS`` ago) certainly has. A send in between is refused
as inconclusive rather than guessed. Several histories share one idle period: each example of
the hypothesis test is a group of histories, run up to their idle point, then one sleep, then the
rest of the idle ones.

Set ``SEGAUDIT_PROBE_STATS=FILE`` to append the numbers of each version's run as a JSON line.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from analytics.kafka.layout import INT_MAX
from analytics.kafka.util import (
    decrement_sequence,
    in_sequence,
    increment_sequence,
    last_sequence,
    sequence_ahead,
)
from analytics.replay.broker import PROFILES, ProducerStateManager, Result
from tests.kafka_cluster import VERSIONS, KafkaCluster, require_jars
from tests.raw_producer import Answer, RawProducer, idempotent_batch, now_ms
from tests.outs import table_dir

pytestmark = pytest.mark.broker

EXPIRATION_MS = 3000
CHECK_INTERVAL_MS = 200
ALIVE_MARGIN_MS = 600  # a producer younger than EXPIRATION_MS - this is certainly alive
EXPIRED_MARGIN_MS = 1500  # slack for the broker's check thread on a busy machine
BROKER_CONFIG = {
    "producer.id.expiration.ms": str(EXPIRATION_MS),
    "producer.id.expiration.check.interval.ms": str(CHECK_INTERVAL_MS),
}
# The model's profile per broker version. For idempotent data batches 2.7, 4.0, 4.1 and kip1228
# decide alike; they differ on markers and TV2-verified transactions. 3.9 is in the 2.7 range
# (2.7-4.0); 4.4's ProducerAppendInfo has KAFKA-19999's marker retry, so KIP-1228's profile.
PROFILE_OF = {"4.4.0": "kip1228", "3.9.2": "2.7"}
MAX_EPOCH = 32767
PARTITIONS_PER_TOPIC = 16

# The broker's error codes, as the model names them (a 3.x/4.x broker answers a duplicate with no
# error and the original offset; DUPLICATE_SEQUENCE_NUMBER is what older brokers answered).
ERRORS = {
    45: Result.OUT_OF_ORDER_SEQUENCE,
    47: Result.INVALID_PRODUCER_EPOCH,
    48: Result.INVALID_TXN_STATE,
    59: Result.UNKNOWN_PRODUCER_ID,
    90: Result.PRODUCER_FENCED,
}
DUPLICATE_SEQUENCE_NUMBER = 46


# --- histories as data ---------------------------------------------------------------------------
# Each op is read against the client's cursor (its epoch and next sequence, moved only by batches
# the broker appended) and the batches the broker appended so far.


@dataclass(frozen=True)
class Next:
    """The next batch: the client's epoch, from its next sequence."""

    count: int = 1


@dataclass(frozen=True)
class Retry:
    """The ``back``-th newest appended batch again (1 = the last): same epoch, range and records;
    ``as_is`` keeps the timestamp it had when first sent (a client's retry), else it carries the
    time it is sent again (an application sending the same records again)."""

    back: int = 1
    as_is: bool = False


@dataclass(frozen=True)
class Gap:
    """``skip`` sequences are left out."""

    skip: int = 1
    count: int = 1


@dataclass(frozen=True)
class Jump:
    """To INT_MAX - ``below`` in the client's epoch: a big gap or rewind; what follows wraps."""

    below: int = 1
    count: int = 1


@dataclass(frozen=True)
class Rewind:
    """``back`` sequences before the next one (an exact earlier range or not)."""

    back: int = 1
    count: int = 1


@dataclass(frozen=True)
class Epoch:
    """The client's epoch + ``delta`` (a lower epoch when negative), from 0 or from its next sequence."""

    delta: int = 1
    zero: bool = True
    count: int = 1


@dataclass(frozen=True)
class History:
    epoch: int  # the client's first epoch (InitProducerId gives 0; the broker takes any)
    first_seq: int  # the client's first sequence
    before: tuple  # ops before the idle period
    after: tuple | None = None  # None: no idle period; else the ops once the producer has expired
    log_append_time: bool = False  # the topic's message.timestamp.type is LogAppendTime


counts = st.integers(1, 3)
next_ops = st.builds(Next, counts)
retry_ops = st.builds(Retry, st.integers(1, 9), st.booleans())
gap_ops = st.builds(Gap, st.integers(1, 4), counts)
rewind_ops = st.builds(Rewind, st.integers(1, 6), counts)
epoch_ops = st.builds(Epoch, st.sampled_from([-2, -1, 1, 2]), st.booleans(), counts)
jump_ops = st.builds(Jump, st.integers(0, 3), counts)
ops = st.one_of(next_ops, next_ops, next_ops, retry_ops, retry_ops, gap_ops, rewind_ops, epoch_ops, jump_ops)
# what comes first once the producer expired: the kinds the broker now takes whatever the state said
after_idle_first = st.one_of(retry_ops, retry_ops, gap_ops, rewind_ops, epoch_ops, jump_ops, next_ops)
histories = st.builds(
    History,
    epoch=st.sampled_from([0, 0, 3]),
    first_seq=st.sampled_from([0, 0, 0, 0, INT_MAX - 2]),
    before=st.lists(ops, min_size=2, max_size=12).map(tuple),
    after=st.none() | st.builds(lambda first, rest: (first, *rest), after_idle_first,
                                st.lists(ops, max_size=4)),
    log_append_time=st.sampled_from([False, False, False, True]),
)

# Hand-picked groups so that every kind the brief asks for is probed whatever hypothesis draws.
LIVE_STATE = [
    # the window: six more batches, then retries of the 1st..5th newest (duplicates) and the 6th and 7th
    History(0, 0, (Next(2), *[Next()] * 6, Retry(1), Retry(3), Retry(5), Retry(6), Retry(7), Next())),
    # gaps, rewinds (a partial overlap and an exact earlier range), epochs up and down
    History(3, 0, (Next(3), Next(2), Gap(2), Rewind(2, 1), Rewind(5, 3), Epoch(2, False), Epoch(-1, True),
                   Epoch(1, True, 2), Next(), Retry(1), Retry(3), Epoch(-2, True), Next())),
    # a first batch at INT_MAX - 2 (accepted: the producer is unknown), then across the wrap
    History(0, INT_MAX - 2, (Next(2), Next(3), Next(), Jump(0), Retry(2), Next(2))),
    # a higher epoch must start at 0, even right after the wrap
    History(0, INT_MAX - 2, (Next(3), Epoch(1, False), Epoch(1, True), Next())),
    # LogAppendTime: the broker stamps the batches; retries as they were are still duplicates
    History(0, 0, (Next(), Next(2), Retry(1, True), Retry(2, True), Gap(1), Next()), log_append_time=True),
]
AFTER_IDLE = [
    # a replay of an old batch (beyond the window); then the client goes on from where it was
    History(0, 0, tuple(Next() for _ in range(8)), (Retry(7), Next(), Next())),
    # a replay of the last batch (the lost-ACK retry), then on
    History(0, 0, (Next(2), Next(2), Next(2)), (Retry(1), Next(), Next())),
    # a gap, then on
    History(0, 0, (Next(), Next(3)), (Gap(40), Next(), Retry(2))),
    # a rewind to an exact earlier range, and the client goes on from there: sequences written twice
    History(0, 0, (Next(2), Next(2), Next(2), Next(2)), (Rewind(6, 2), Next(2), Next(2), Next(1), Next(1))),
    # a zombie (lower) epoch, then the current epoch again from 0
    History(3, 0, (Next(), Next()), (Epoch(-2, False), Next(), Epoch(2, True), Next())),
    # a higher epoch at a non-zero sequence; a jump to INT_MAX and across the wrap
    History(0, 0, (Next(), Next()), (Epoch(1, False, 2), Next())),
    History(0, 0, (Next(), Next()), (Jump(1, 1), Next(3), Next())),
    # a client's retry, its original timestamp kept: the broker takes it, then drops the producer
    # again at its next check (the timestamp is past the expiration), and takes the next batch too
    History(0, 0, (Next(), Next(), Next()), (Retry(2, True), Next(), Next())),
    # the same on a LogAppendTime topic: the broker's own time, so the producer stays
    History(0, 0, (Next(), Next(), Next()), (Retry(2, True), Next(), Next()), log_append_time=True),
]


# --- the module's broker ---------------------------------------------------------------------------


@dataclass
class Step:
    op: str
    epoch: int
    base_seq: int
    count: int
    timestamp: int  # what the batch carried
    observed: tuple  # (Result, offset or None), from the broker's answer
    predicted: tuple  # the same, from the model
    reason: str  # the model's reason
    answer: Answer


@dataclass
class Appended:
    """A batch the broker appended, and why (the model's state when it came)."""

    offset: int
    count: int
    epoch: int
    base_seq: int
    last_seq: int
    timestamp: int  # its maxTimestamp on disk: what it carried, or the broker's time (LogAppendTime)
    sent_timestamp: int  # what it carried
    why: str  # first | expired | in_sequence | new_epoch
    after_expiration: bool  # its epoch has batches appended before an expiration of the producer


@dataclass
class Run:
    """One history on its own partition with its own producer id."""

    history: History
    topic: str
    partition: int
    pid: int
    init_epoch: int
    model: ProducerStateManager
    epoch: int
    next_seq: int
    steps: list[Step] = field(default_factory=list)
    appended: list[Appended] = field(default_factory=list)
    expirations: list[int] = field(default_factory=list)  # len(appended) when the model expired the pid
    log_end: int = 0
    state_since: int = 0  # wall clock of the last append: the broker's entry is at least this recent

    def describe(self) -> str:
        kind = "LogAppendTime" if self.history.log_append_time else "CreateTime"
        lines = [f"{self.topic}-{self.partition} ({kind}) pid {self.pid} "
                 f"(InitProducerId epoch {self.init_epoch}): {self.history}"]
        for s in self.steps:
            lines.append(f"  {s.op:<28} epoch {s.epoch} seq {s.base_seq}+{s.count} ts {s.timestamp}: "
                         f"broker {s.observed[0]} {s.observed[1]} ({s.answer.error_name}), "
                         f"model {s.predicted[0]} {s.predicted[1]} ({s.reason})")
        return "\n".join(lines)


@dataclass
class Probe:
    version: str
    cluster: KafkaCluster
    producer: RawProducer
    runs: list[Run] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    free: dict[bool, list[tuple[str, int]]] = field(default_factory=lambda: {False: [], True: []})

    def partition(self, log_append_time: bool) -> tuple[str, int]:
        free = self.free[log_append_time]
        if not free:
            topic = f"probe-{len(self.topics)}{'-lat' if log_append_time else ''}"
            configs = {"message_timestamp_type": "LogAppendTime"} if log_append_time else {}
            self.cluster.create_topic(topic, partitions=PARTITIONS_PER_TOPIC, **configs)
            # every leader has taken over (else a first produce may get NOT_LEADER_OR_FOLLOWER)
            ends = self.producer.log_end_offsets(topic, list(range(PARTITIONS_PER_TOPIC)))
            assert set(ends.values()) == {0}, ends
            self.topics.append(topic)
            free += [(topic, p) for p in range(PARTITIONS_PER_TOPIC)]
        return free.pop(0)


@pytest.fixture(scope="module", params=VERSIONS)
def probe(request, tmp_path_factory):
    version = request.param
    require_jars(version)
    root = tmp_path_factory.mktemp(f"probe-{version}")
    cluster = KafkaCluster(version, root, config=BROKER_CONFIG)
    cluster.start()
    producer = None
    try:
        producer = RawProducer(cluster.bootstrap)
        yield Probe(version, cluster, producer)
    finally:
        if producer is not None:
            producer.close()
        cluster.close()


# --- running a history -------------------------------------------------------------------------------


class Disagreement(AssertionError):
    pass


def observed_result(answer: Answer, log_end: int) -> tuple:
    if answer.error_code == 0 and answer.base_offset == log_end:
        return Result.APPENDED, answer.base_offset
    if answer.error_code in (0, DUPLICATE_SEQUENCE_NUMBER) and 0 <= answer.base_offset < log_end:
        return Result.DUPLICATE, answer.base_offset
    if answer.error_code in ERRORS:
        return ERRORS[answer.error_code], None
    raise AssertionError(f"unexpected answer {answer} ({answer.error_name}) at log end offset {log_end}")


def start(probe: Probe, history: History) -> Run:
    topic, partition = probe.partition(history.log_append_time)
    pid, init_epoch = probe.producer.init_producer_id()
    model = ProducerStateManager(PROFILES[PROFILE_OF[probe.version]], producer_id_expiration_ms=EXPIRATION_MS)
    run = Run(history, topic, partition, pid, init_epoch, model, history.epoch, history.first_seq)
    probe.runs.append(run)
    return run


def play(probe: Probe, run: Run, op) -> None:
    """Send the batch ``op`` stands for now, and check the model predicted the broker's answer."""
    epoch, seq = run.epoch, run.next_seq
    count = getattr(op, "count", 1)
    moves_cursor, timestamp = True, None
    if isinstance(op, Retry) and run.appended:
        original = run.appended[-min(op.back, len(run.appended))]
        epoch, seq, count, moves_cursor = original.epoch, original.base_seq, original.count, False
        timestamp = original.sent_timestamp if op.as_is else None
    elif isinstance(op, Gap):
        seq = increment_sequence(seq, op.skip)
    elif isinstance(op, Jump):
        seq = INT_MAX - op.below
    elif isinstance(op, Rewind):
        seq = decrement_sequence(seq, op.back)
    elif isinstance(op, Epoch):
        epoch = run.epoch + op.delta
        if epoch < 0:
            epoch = run.epoch - op.delta
        epoch = min(epoch, MAX_EPOCH)
        seq = 0 if op.zero else seq
    send(probe, run, repr(op), epoch, seq, count, moves_cursor, timestamp)


def certain_expiry(run: Run) -> int | None:
    """When the broker has certainly dropped the producer (its check ran past the expiration and
    past the append), or None when the model holds no state for it."""
    entry = run.model.entry(run.pid)
    if entry is None:
        return None
    return max(entry.last_timestamp + EXPIRATION_MS, run.state_since) + CHECK_INTERVAL_MS + EXPIRED_MARGIN_MS


def send(probe: Probe, run: Run, op: str, epoch: int, seq: int, count: int, moves_cursor: bool,
         timestamp: int | None) -> None:
    """One batch now: ``timestamp`` is what it carries (default: now). The broker keeps the
    batch's maxTimestamp as the producer's time: the carried one, or its own clock on a
    LogAppendTime topic (so the model is told now; the broker's is a few ms later)."""
    last = last_sequence(seq, count - 1)
    now = now_ms()
    timestamp = now if timestamp is None else timestamp
    kept = now if run.history.log_append_time else timestamp
    entry = run.model.entry(run.pid)
    alive = entry is None or now - entry.last_timestamp < EXPIRATION_MS - ALIVE_MARGIN_MS
    if not alive and now < certain_expiry(run):
        age = now - entry.last_timestamp
        raise AssertionError(f"inconclusive timing: the producer's time is {age} ms old, near the expiration "
                             f"of {EXPIRATION_MS} ms (a stalled run?)\n{run.describe()}")
    if run.model.remove_expired(now):
        run.expirations.append(len(run.appended))
    before = run.model.entry(run.pid)
    decision = run.model.append_data(run.pid, epoch, seq, last, run.log_end, run.log_end + count - 1, kept,
                                     is_transactional=False)
    answer = probe.producer.produce(run.topic, run.partition,
                                    idempotent_batch(run.pid, epoch, seq, count, timestamp))
    observed = observed_result(answer, run.log_end)
    predicted = (decision.result,
                 run.log_end if decision.result is Result.APPENDED
                 else decision.duplicate_of[0] if decision.result is Result.DUPLICATE else None)
    run.steps.append(Step(op, epoch, seq, count, timestamp, observed, predicted, decision.reason, answer))
    if observed != predicted:
        raise Disagreement(f"Kafka {probe.version} and the model ({PROFILE_OF[probe.version]}) disagree "
                           f"on the last step:\n{run.describe()}")
    if decision.result is Result.DUPLICATE:
        # the model's original is the whole batch the broker appended there, and the broker's answer
        # names that batch's timestamp (from its cache of the producer's last five)
        [original] = [a for a in run.appended if a.offset == observed[1]]
        original_offsets = (original.offset, original.offset + original.count - 1)
        assert decision.duplicate_of == original_offsets, run.describe()
        assert answer.log_append_time == original.timestamp, f"{answer}, {original}\n{run.describe()}"
    if decision.result is not Result.APPENDED:
        return
    if before is None:
        why = "expired" if run.appended else "first"
    else:
        why = "in_sequence" if epoch == before.producer_epoch else "new_epoch"
    last_expiration = run.expirations[-1] if run.expirations else 0
    after_expiration = any(a.epoch == epoch for a in run.appended[:last_expiration])
    on_disk = answer.log_append_time if run.history.log_append_time else timestamp
    assert (on_disk >= now) if run.history.log_append_time else (answer.log_append_time == -1), answer
    run.appended.append(
        Appended(run.log_end, count, epoch, seq, last, on_disk, timestamp, why, after_expiration))
    run.log_end += count
    run.state_since = now
    if moves_cursor:
        run.epoch, run.next_seq = epoch, increment_sequence(last, 1)
    if now - timestamp >= EXPIRATION_MS - ALIVE_MARGIN_MS:
        # It came with a timestamp already old (a retry as it was): on a CreateTime topic the broker
        # drops the producer at its next check. Wait until that is certain, on either kind of topic:
        # on a LogAppendTime topic the producer must still be there.
        time.sleep(max(now + CHECK_INTERVAL_MS + EXPIRED_MARGIN_MS - now_ms(), 0) / 1000)


def run_group(probe: Probe, group: list[History]) -> None:
    """Each history up to its idle point, one sleep until every idle producer has certainly
    expired, then the rest of the idle histories."""
    runs = []
    for history in group:
        run = start(probe, history)
        for op in history.before or (Next(),):
            play(probe, run, op)
        runs.append(run)
    idle = [run for run in runs if run.history.after is not None]
    wake = max((certain_expiry(run) or 0 for run in idle), default=0)
    time.sleep(max(wake - now_ms(), 0) / 1000)
    for run in idle:
        for op in run.history.after:
            play(probe, run, op)
    for run in runs:  # the log holds what the broker said it appended, nothing else
        [end] = probe.producer.log_end_offsets(run.topic, [run.partition]).values()
        assert end == run.log_end, f"log end offset {end}, appended up to {run.log_end}\n{run.describe()}"


@settings(max_examples=10, derandomize=True, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(group=st.lists(histories, min_size=1, max_size=4))
@example(group=LIVE_STATE)
@example(group=AFTER_IDLE)
def test_the_model_predicts_every_answer_of_the_broker(probe, group):
    run_group(probe, group)


# --- the audit of what the broker wrote ----------------------------------------------------------------


def expected_verdicts(run: Run, index: int) -> tuple[set[str], str | None]:
    """The verdicts the audit may give the ``index``-th appended batch of ``run``, and its
    ``explained_by``, from why the broker appended it (the model's state at the time):

    - first batch of the producer id (the partition holds only this history, from offset 0):
      at sequence 0 ``OK``; elsewhere ``FIRST_SEEN_NONZERO``, unexplained: the broker takes any
      sequence from a producer it does not know (KIP-360), and nothing in the log tells a start
      at INT_MAX - 2 from lost earlier batches (§7.3 UNKNOWN_PID_NONZERO).
    - the producer had expired (the broker had no state, it had some before): whatever the log
      shows against the producer's previous batch — a repeated (epoch, range) ``DUPLICATE``; a
      higher epoch ``EPOCH_BUMP`` at 0, else ``EPOCH_BUMP_NONZERO``; a lower epoch
      ``FENCED_ZOMBIE_WRITE``; the same epoch ``OK``/``SEQUENCE_GAP``/``SEQUENCE_REGRESSION``
      against the previous batch's last sequence or the epoch's highest so far (both readings are
      allowed). Every verdict but OK and EPOCH_BUMP is ``explained_by = producer_expiration``
      when the batch's own timestamp shows the idle time (its maxTimestamp at least
      ``producer.id.expiration.ms`` past its predecessor's): always for a batch sent with the time
      it was sent, and on a LogAppendTime topic, where the broker stamps it. A replay that kept its
      original timestamp on a CreateTime topic cannot show it (§7.4 item 7: the log has the
      producer's clock, not the arrival time), and stays unexplained.
    - the producer had state and the batch is in sequence in its epoch, or a higher epoch at 0,
      and no batch of that epoch was written before an expiration of the producer: ``OK`` or
      ``EPOCH_BUMP``, nothing else.
    - the same, but its epoch was written before an expiration (the producer went back after
      expiring, and the broker's state now follows the new incarnation): an exact earlier range is
      ``DUPLICATE``; else ``OK``, ``EPOCH_BUMP`` or ``SEQUENCE_REGRESSION``; an anomaly is
      ``explained_by = producer_expiration``, as §7.3 says of a duplicate after state loss: the
      expiration lies between the original and the repeat. Once past the epoch's highest sequence
      written so far, ``OK`` again.
    """
    batch = run.appended[index]
    earlier = run.appended[:index]
    exact = any(a.epoch == batch.epoch and (a.base_seq, a.last_seq) == (batch.base_seq, batch.last_seq)
                for a in earlier)
    if batch.why == "first":
        return ({"OK"}, None) if batch.base_seq == 0 else ({"FIRST_SEEN_NONZERO"}, None)
    if batch.why == "expired":
        prev = earlier[-1]
        if exact:
            verdicts = {"DUPLICATE"}
        elif batch.epoch > prev.epoch:
            verdicts = {"EPOCH_BUMP" if batch.base_seq == 0 else "EPOCH_BUMP_NONZERO"}
        elif batch.epoch < prev.epoch:
            verdicts = {"FENCED_ZOMBIE_WRITE"}
        else:
            verdicts = {_same_epoch(prev.last_seq, batch.base_seq),
                        _same_epoch(_highest(earlier, batch.epoch), batch.base_seq)}
        shows_idle = batch.timestamp - prev.timestamp >= EXPIRATION_MS
        return verdicts, "producer_expiration" if shows_idle else None
    if not batch.after_expiration:
        return {"OK" if batch.why == "in_sequence" else "EPOCH_BUMP"}, None
    if exact:
        return {"DUPLICATE"}, "producer_expiration"
    if batch.why == "in_sequence" and in_sequence(_highest(earlier, batch.epoch), batch.base_seq):
        return {"OK"}, None  # past every sequence written before: plainly in sequence again
    return {"OK", "EPOCH_BUMP", "SEQUENCE_REGRESSION"}, "producer_expiration"


def _same_epoch(last: int, base: int) -> str:
    if in_sequence(last, base):
        return "OK"
    return "SEQUENCE_GAP" if sequence_ahead(last, base) else "SEQUENCE_REGRESSION"


def _highest(batches: list[Appended], epoch: int) -> int:
    """The epoch's highest last sequence so far, going forward mod 2^31 from its first batch."""
    highest = None
    for a in batches:
        if a.epoch != epoch:
            continue
        if highest is None or sequence_ahead(highest, a.last_seq) or in_sequence(highest, a.last_seq):
            highest = a.last_seq
    return highest


def _reason(batch: Appended) -> str:
    return batch.why + ("+after_expiration" if batch.after_expiration else "")


def stats(probe: Probe) -> dict:
    answers = Counter(str(s.observed[0]) for run in probe.runs for s in run.steps)
    errors = Counter(s.answer.error_name for run in probe.runs for s in run.steps)
    steps = [s for run in probe.runs for s in run.steps]
    return {
        "version": probe.version,
        "profile": PROFILE_OF[probe.version],
        "histories": len(probe.runs),
        "histories_with_idle": sum(run.history.after is not None for run in probe.runs),
        "histories_log_append_time": sum(run.history.log_append_time for run in probe.runs),
        "histories_at_another_epoch_than_init_producer_id": sum(
            run.history.epoch != run.init_epoch for run in probe.runs),
        "batches_sent": len(steps),
        "answers": dict(sorted(answers.items())),
        "error_codes": dict(sorted(errors.items())),
        "model_agreed": sum(s.observed == s.predicted for s in steps),
        "appended": sum(len(run.appended) for run in probe.runs),
        "appended_by_reason": dict(sorted(Counter(_reason(a) for run in probe.runs
                                                  for a in run.appended).items())),
    }


@dataclass
class Audited:
    rows: dict  # (topic, partition, base offset) -> batch_verdicts row
    checked: list  # (run, index of the appended batch, row)
    wrong: list  # messages: batches missing, different on disk, or on disk but never appended


@pytest.fixture(scope="module")
def audited(probe, spark, tmp_path_factory) -> Audited:
    """The broker stopped cleanly, its log dir exported and audited with its expiration setting."""
    from pyspark.sql import functions as F

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export

    if not probe.runs:
        pytest.skip("the histories run in test_the_model_predicts_every_answer_of_the_broker")
    numbers = stats(probe)
    print(json.dumps(numbers))
    if os.environ.get("SEGAUDIT_PROBE_STATS"):
        with open(os.environ["SEGAUDIT_PROBE_STATS"], "a") as f:
            f.write(json.dumps(numbers) + "\n")
    probe.producer.close()
    probe.cluster.close()  # a clean shutdown: everything flushed, snapshots written
    [log_dir] = probe.cluster.log_dirs
    out = tmp_path_factory.mktemp(f"probe-audit-{probe.version}") / "out"
    # with records: a repeat after an expiration is told from a sequence reuse by them (every repeat here
    # carries the records it carried first, restamped or not, so none may be called a reuse)
    export(None, [str(log_dir)], str(out), records=True)
    config = AuditConfig(profile=PROFILE_OF[probe.version], producer_id_expiration_ms=EXPIRATION_MS)
    audit(spark, str(out), config)
    verdicts = spark.read.parquet(str(table_dir(out, "batch_verdicts")))
    found = verdicts.where(F.col("topic").isin(*probe.topics)).collect()
    rows = {(r["topic"], r["partition"], r["base_offset"]): r for r in found}
    checked, wrong = [], []
    for run in probe.runs:
        for i, batch in enumerate(run.appended):
            key = (run.topic, run.partition, batch.offset)
            row = rows.get(key)
            if row is None:
                wrong.append(f"{key}: appended by the broker, not in the export")
                continue
            seen = (row["last_offset"], row["producer_id"], row["producer_epoch"], row["base_sequence"],
                    row["last_sequence"], row["max_timestamp"], row["timestamp_type"])
            want = (batch.offset + batch.count - 1, run.pid, batch.epoch, batch.base_seq, batch.last_seq,
                    batch.timestamp, "LogAppendTime" if run.history.log_append_time else "CreateTime")
            if seen != want:
                wrong.append(f"{key}: on disk {seen}, appended {want}")
                continue
            checked.append((run, i, row))
    appended = {(run.topic, run.partition, a.offset) for run in probe.runs for a in run.appended}
    wrong += [f"{key}: on disk, never acknowledged as appended" for key in sorted(set(rows) - appended)]
    by_reason = Counter(f"{_reason(run.appended[i])}: {row['verdict']}/{row['explained_by']}"
                        for run, i, row in checked)
    print(json.dumps({"version": probe.version, "audit": dict(sorted(by_reason.items()))}))
    return Audited(rows, checked, wrong)


def _repeats_after_expiration(run: Run, index: int, row) -> bool:
    """An anomaly in sequence for the broker whose sequences its epoch wrote before the producer
    expired (the last class of ``expected_verdicts``)."""
    batch = run.appended[index]
    return batch.why in ("in_sequence", "new_epoch") and batch.after_expiration and row["verdict"] not in (
        "OK", "EPOCH_BUMP")


def _mismatch(run: Run, index: int, row, *, explanation: bool = True) -> str | None:
    verdicts, explained = expected_verdicts(run, index)
    anomaly = row["verdict"] not in ("OK", "EPOCH_BUMP")
    want = explained if anomaly else None
    if row["verdict"] in verdicts and (row["explained_by"] == want or not explanation):
        return None
    batch = run.appended[index]
    return (f"{(run.topic, run.partition, batch.offset)} ({batch.why}"
            f"{', its epoch written before an expiration' if batch.after_expiration else ''}): audit "
            f"{row['verdict']}/{row['explained_by']}/{row['severity']} (idle {row['idle_ms']} ms), "
            f"expected one of {sorted(verdicts)} with explained_by {want}\n{run.describe()}")


@pytest.mark.spark
def test_the_log_holds_exactly_the_appended_batches(audited):
    assert audited.checked
    assert not audited.wrong, "\n".join(audited.wrong)


@pytest.mark.spark
def test_the_audit_fits_why_the_broker_took_each_batch(audited):
    """Every appended batch against ``expected_verdicts``; for the repeats after an expiration
    only the verdict here (their explanation: the next test)."""
    wrong = [m for run, i, row in audited.checked
             if (m := _mismatch(run, i, row, explanation=not _repeats_after_expiration(run, i, row)))]
    assert not wrong, "\n".join(wrong)


@pytest.mark.spark
def test_the_audit_explains_repeats_after_an_expiration(audited):
    """A batch the broker took in sequence after an expiration, repeating or rewinding sequences
    written before it, is explained by ``producer_expiration`` although it follows its previous
    batch closely: the audit finds the expiry point between the original and the repeat."""
    repeats = [(run, i, row) for run, i, row in audited.checked if _repeats_after_expiration(run, i, row)]
    if not repeats:
        pytest.skip("no history repeated sequences after an expiration")
    wrong = [m for run, i, row in repeats if (m := _mismatch(run, i, row))]
    assert not wrong, "\n".join(wrong)
