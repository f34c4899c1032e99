"""Named scenarios: producers (idempotent, transactional, plain) against the simulated broker.

Each scenario writes its own topic, so ``mixed`` is simply all of them in one log directory.
Time is simulated (epoch ms from :data:`analytics.generate.producers.T0`), randomness comes from
the seed, and ``scale`` multiplies the bulk of each scenario, so the same seed always gives the
same bytes. A batch that breaks a rule legitimately says why (``explain``, an explanation of the
contract); one that only a broken broker writes names its ``fault``.
"""

from __future__ import annotations

from collections.abc import Callable

from analytics.contract import INT_MAX, PRODUCER_EXPIRATION, STATE_LOSS
from analytics.generate.batches import CORRUPT_FAULT
from analytics.generate.producers import Context, Producer
from analytics.generate.sim import SimPartition
from analytics.kafka.writer import RecordSpec
from analytics.replay.decisions import Result

APPENDED, DUPLICATE = Result.APPENDED, Result.DUPLICATE

DAY_MS = 86_400_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


# -- the scenarios -----------------------------------------------------------------------------

def clean(ctx: Context) -> None:
    """Three idempotent producers over three partitions, every codec, segments rolling: all in order."""
    # Segments grow with the scale (1 KiB at scale 1, so that even the small log rolls; at most 64 MiB).
    segment_bytes = min(1024 * ctx.scale, 64 * 1024 * 1024)
    parts = [ctx.log.partition("clean", i, segment_bytes=segment_bytes) for i in range(3)]
    producers = [Producer(ctx, 1000 + i, compression=CODECS[i % 5]) for i in range(3)]
    for i in range(60 * ctx.scale):
        producers[i % 3].send(parts[(i // 3) % 3])


def lost_acks(ctx: Context) -> None:
    """Acknowledgements lost: the producer retries, the broker finds the retry in its 5-batch cache."""
    p = ctx.log.partition("lost-acks", 0)
    prod = Producer(ctx, 2000)
    for i in range(40 * ctx.scale):
        prod.send(p)
        if i % 7 == 3:
            assert prod.retry(p) == DUPLICATE  # nothing is written: the log stays clean


def plain_retries(ctx: Context) -> None:
    """A non-idempotent producer (enable.idempotence=false) whose retries duplicated records."""
    p = ctx.log.partition("plain-retries", 0)
    for i in range(30 * ctx.scale):
        now = ctx.tick()
        records = [RecordSpec(b"k-%d" % i, b'{"plain":%d}' % i, now)]
        p.produce_plain(records)
        if i % 10 == 4:
            p.produce_plain(records)  # the retry is written again: a duplicate record, legal for this producer


def missed_dedup(ctx: Context) -> None:
    """A broker bug: a retry of the last batch is written although it was in the cache."""
    p = ctx.log.partition("missed-dedup", 0)
    prod = Producer(ctx, 3000)
    for i in range(30 * ctx.scale):
        prod.send(p)
        if i == 17:
            assert prod.retry(p, fault="missed_dedup") == APPENDED


def lost_batch(ctx: Context) -> None:
    """A batch never reached the log, and the broker accepted the next one (it should have refused)."""
    p = ctx.log.partition("lost-batch", 0)
    prod = Producer(ctx, 4000)
    for i in range(30 * ctx.scale):
        if i == 12:
            prod.batch()  # built and sent, lost in flight
            prod.next_seq[p] += 3
            assert prod.send(p, fault="lost_batch") == APPENDED
        else:
            prod.send(p)


def restart_new_pid(ctx: Context) -> None:
    """An idempotent producer restarts and gets a new producer id: it starts again at sequence 0."""
    p = ctx.log.partition("restart-new-pid", 0)
    for pid in (5000, 5001, 5002):
        prod = Producer(ctx, pid)
        for _ in range(10 * ctx.scale):
            prod.send(p)
        ctx.tick(1000, 5000)


def kip360_bump(ctx: Context) -> None:
    """KIP-360: after an error an idempotent producer bumps its epoch and restarts its sequences at 0."""
    parts = [ctx.log.partition("kip360-bump", i) for i in range(2)]
    prod = Producer(ctx, 6000)
    for round_ in range(3):
        for _ in range(8 * ctx.scale):
            for p in parts:
                prod.send(p)
        prod.bump_epoch()


def fenced_zombie(ctx: Context) -> None:
    """A transactional instance is fenced by a new one; its later writes are refused, until the broker
    has expired the producer id and a zombie write at the old epoch gets in (S32)."""
    p = ctx.log.partition("fenced-zombie", 0)
    old = Producer(ctx, 7000, epoch=3, transactional=True)
    for _ in range(3):
        old.send(p)
    # a new instance with the same transactional.id: the coordinator aborts the open transaction at epoch 4
    old.end_transaction([p], "ABORT", marker_epoch=4)
    new = Producer(ctx, 7000, epoch=5, transactional=True)
    for _ in range(2 * ctx.scale):
        for _ in range(3):
            new.send(p)
        new.end_transaction([p])
    assert old.send(p) in (Result.INVALID_PRODUCER_EPOCH, Result.PRODUCER_FENCED)  # fenced: nothing written
    ctx.now += 2 * DAY_MS
    p.expire(ctx.now)
    assert old.send(p, explain=PRODUCER_EXPIRATION) == APPENDED  # after expiry any epoch is accepted
    ctx.config.setdefault("producer_id_expiration_ms", DAY_MS)


def idle_expiration(ctx: Context) -> None:
    """A producer idle past producer.id.expiration.ms comes back with a sequence jump (S30)."""
    p = ctx.log.partition("idle-expiration", 0)
    prod = Producer(ctx, 8000)
    steady = Producer(ctx, 8001)
    for _ in range(15 * ctx.scale):
        prod.send(p)
        steady.send(p)
    ctx.now += DAY_MS + 3_600_000
    p.expire(ctx.now)
    prod.next_seq[p] += 40  # in-flight batches lost while the broker forgot the producer
    assert prod.send(p, explain=PRODUCER_EXPIRATION) == APPENDED
    for _ in range(10 * ctx.scale):
        prod.send(p)
    ctx.config.setdefault("producer_id_expiration_ms", DAY_MS)


def state_loss_retry(ctx: Context) -> None:
    """Duplicates despite idempotence: the broker restarts without a usable snapshot, forgets the
    producer, and the retry of a batch whose acknowledgement was lost is written again (S33)."""
    p = ctx.log.partition("state-loss-retry", 0)
    prod = Producer(ctx, 8500)
    for _ in range(12 * ctx.scale):
        prod.send(p)
    restart_ms = ctx.tick(100, 200)
    restart_offset = p.next_offset  # "Loading producer state till offset ..." in the broker's log
    p.restart(with_snapshot=False)  # unclean shutdown, no snapshot: producer state is gone
    p.leader_change()
    assert prod.retry(p, explain=STATE_LOSS) == APPENDED
    for _ in range(5 * ctx.scale):
        prod.send(p)
    ctx.config.setdefault("broker_restarts", []).append(
        {"topic": "state-loss-retry", "partition": 0, "offset": restart_offset, "time_ms": restart_ms})


def stale_retry(ctx: Context) -> None:
    """A duplicate must not make a gap. A broker in a crash loop (unclean restarts, no snapshot)
    forgets the producer twice. After the first restart an old request still in flight is written
    again: on partition 0 a copy of an older batch (not the latest), on partition 1 a range that
    overlaps two written batches without repeating either. After the second restart the producer
    goes on from its real next sequence: in sequence with its highest sequence, nothing missing."""
    parts = [ctx.log.partition("stale-retry", i) for i in range(2)]
    prod = Producer(ctx, 8600)
    sent: dict[SimPartition, list[tuple[int, list[RecordSpec]]]] = {p: [] for p in parts}
    for _ in range(10 * ctx.scale):
        for p in parts:
            assert prod.send(p) == APPENDED
            sent[p].append(prod.last[p])

    def restart(p: SimPartition) -> None:
        ctx.config.setdefault("broker_restarts", []).append(
            {"topic": p.topic, "partition": p.partition, "offset": p.next_offset, "time_ms": ctx.tick(100, 200)})
        p.restart(with_snapshot=False)
        p.leader_change()

    for p in parts:
        restart(p)
        base, records = sent[p][-3]  # two batches older than the latest
        if p.partition == 1:  # the stale request also holds the next batch's first record
            records = [*records, sent[p][-2][1][0]]
        assert p.produce(prod.pid, prod.epoch, base, records, explain=STATE_LOSS) == APPENDED
        restart(p)
        for _ in range(5 * ctx.scale):
            assert prod.send(p) == APPENDED


def retention_head(ctx: Context) -> None:
    """Retention deleted the head segments: producers first seen mid-sequence, log start above 0."""
    p = ctx.log.partition("retention-head", 0, segment_bytes=4096, keep_segments=True)
    producers = [Producer(ctx, 9000 + i, records=(2, 6)) for i in range(3)]
    for i in range(90 * ctx.scale):
        producers[i % 3].send(p)
    p.delete_head_segments(max(1, len(p.segments) // 2))


def compacted(ctx: Context) -> None:
    """A compacted topic: the cleaner removed whole batches (offset holes) and left empty headers."""
    p = ctx.log.partition("compacted", 0, segment_bytes=4096, compacted=True, keep_segments=True)
    producers = [Producer(ctx, 9500 + i, records=(1, 3)) for i in range(2)]
    keys = [b"user-%d" % i for i in range(12)]
    for i in range(80 * ctx.scale):
        prod = producers[i % 2]
        base = prod.next_seq.get(p, 0)
        now = ctx.tick()
        n = ctx.rng.randint(1, 3)
        records = [RecordSpec(ctx.rng.choice(keys), b'{"v":%d,"i":%d}' % (i, k), now) for k in range(n)]
        assert p.produce(prod.pid, prod.epoch, base, records) == APPENDED
        prod.next_seq[p] = base + n
    p.compact()
    ctx.compacted("compacted")


def transactions(ctx: Context) -> None:
    """Committed, aborted, open and hanging transactions across two partitions."""
    parts = [ctx.log.partition("transactions", i) for i in range(2)]
    committer = Producer(ctx, 10_000, epoch=1, transactional=True)
    aborter = Producer(ctx, 10_001, epoch=2, transactional=True)
    for _ in range(5 * ctx.scale):
        for p in parts:
            committer.send(p)
        committer.end_transaction(parts)
        for p in parts:
            aborter.send(p)
        aborter.end_transaction(parts, "ABORT")
    hanging = Producer(ctx, 10_002, transactional=True)
    hanging.send(parts[0])  # its coordinator never writes a marker
    ctx.now += 30 * 60 * 1000  # 30 minutes later, other producers still write
    steady = Producer(ctx, 10_003)
    for _ in range(10 * ctx.scale):
        for p in parts:
            steady.send(p)
    recent = Producer(ctx, 10_004, transactional=True)
    recent.send(parts[1])  # open at the end of the export, but young: OPEN, not HANGING


def transactions_v2(ctx: Context) -> None:
    """Transactions V2 (KIP-890): every commit bumps the epoch; the next transaction starts at 0."""
    p = ctx.log.partition("transactions-v2", 0)
    prod = Producer(ctx, 11_000, epoch=7, transactional=True)
    for _ in range(6 * ctx.scale):
        for _ in range(2):
            prod.send(p)
        kind = "ABORT" if ctx.rng.random() < 0.25 else "COMMIT"
        result = p.end_transaction(prod.pid, prod.epoch + 1, kind, coordinator_epoch=3, timestamp=ctx.tick(), tv2=True)
        assert result == APPENDED
        prod.bump_epoch()


def sequence_wrap(ctx: Context) -> None:
    """A long-lived producer's sequence wraps from INT_MAX to 0; its history before the log start is gone."""
    start = 3_000_000_000
    pid = 12_000
    p = ctx.log.partition("sequence-wrap", 0)
    p.start_at(start, producers=[(pid, 4, INT_MAX - 3, start - 1, ctx.now)])
    prod = Producer(ctx, pid, epoch=4, records=(3, 7))
    prod.next_seq[p] = INT_MAX - 2
    prod.send(p, 5)  # INT_MAX-2 .. 1: one batch across the wrap
    for _ in range(20 * ctx.scale - 1):
        prod.send(p)


def corrupt_crc(ctx: Context) -> None:
    """Bytes changed on disk: a producer's last batch and a plain producer's batch fail their CRC."""
    p = ctx.log.partition("corrupt-crc", 0)
    prod = Producer(ctx, 13_000)
    for i in range(20 * ctx.scale):
        prod.send(p)
        if i == 7:
            now = ctx.tick()
            p.produce_plain([RecordSpec(b"plain", b"corrupted later", now)], fault=CORRUPT_FAULT)
    prod.send(p, fault=CORRUPT_FAULT)  # the producer's last batch: nothing after it depends on it


def torn_tails(ctx: Context) -> None:
    """Unclean shutdowns: a torn last batch, and a preallocated segment's zero-filled tail."""
    torn = ctx.log.partition("torn-tails", 0)
    zeros = ctx.log.partition("torn-tails", 1)
    prod = Producer(ctx, 14_000)
    for _ in range(15 * ctx.scale):
        prod.send(torn)
        prod.send(zeros)
    torn.torn_tail(0.6)
    zeros.zero_filled_tail(8192)


def legacy_magic1(ctx: Context) -> None:
    """A topic written before the 0.11 message format: magic-1 messages, then v2 after the upgrade."""
    p = ctx.log.partition("legacy-magic1", 0)
    for i in range(10 * ctx.scale):
        now = ctx.tick()
        records = [RecordSpec(b"old-%d" % (i * 3 + k), b'{"legacy":%d}' % (i * 3 + k), now) for k in range(3)]
        p.produce_legacy(records, compression="gzip" if i % 2 else "none")
    p.roll()
    prod = Producer(ctx, 15_000)
    for _ in range(10 * ctx.scale):
        prod.send(p)


def every_codec(ctx: Context) -> None:
    """Idempotent batches in each codec Kafka has, in one partition."""
    p = ctx.log.partition("every-codec", 0)
    producers = [Producer(ctx, 16_000 + i, compression=c, records=(2, 20)) for i, c in enumerate(CODECS)]
    for i in range(10 * ctx.scale):
        for prod in producers:
            prod.send(p)


SCENARIOS: dict[str, Callable[[Context], None]] = {
    "clean": clean,
    "lost-acks": lost_acks,
    "plain-retries": plain_retries,
    "missed-dedup": missed_dedup,
    "lost-batch": lost_batch,
    "restart-new-pid": restart_new_pid,
    "kip360-bump": kip360_bump,
    "fenced-zombie": fenced_zombie,
    "idle-expiration": idle_expiration,
    "state-loss-retry": state_loss_retry,
    "stale-retry": stale_retry,
    "retention-head": retention_head,
    "compacted": compacted,
    "transactions": transactions,
    "transactions-v2": transactions_v2,
    "sequence-wrap": sequence_wrap,
    "corrupt-crc": corrupt_crc,
    "torn-tails": torn_tails,
    "legacy-magic1": legacy_magic1,
    "every-codec": every_codec,
}
SCENARIO_NAMES = (*SCENARIOS, "mixed")
# The broker profile a scenario needs (transactions V2 markers bump the epoch: 4.0+).
PROFILE_OF = {"transactions-v2": "4.0", "mixed": "4.0"}
