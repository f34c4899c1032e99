"""The clients of the simulated broker: producers with their ids, epochs and sequences, on a shared clock.

A :class:`Context` is one generation run: the log directory, the seeded randomness, the scale,
the simulated time (epoch ms from :data:`T0`) and what the scenarios add to the audit
configuration. A :class:`Producer` builds batches of records and sends them as a Kafka client
does: its sequence advances only when the broker acknowledges, a retry resends the last batch
unchanged, and an epoch bump restarts the sequences at 0.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from analytics.contract import SEQ_SPACE
from analytics.generate.sim import SimLogDir, SimPartition
from analytics.kafka.writer import RecordSpec
from analytics.replay.decisions import Result

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@dataclass
class Context:
    log: SimLogDir
    rng: random.Random
    scale: int
    now: int = T0
    config: dict = field(default_factory=dict)  # contributions to the audit configuration

    def tick(self, low: int = 1, high: int = 40) -> int:
        self.now += self.rng.randint(low, high)
        return self.now

    def compacted(self, topic: str) -> None:
        self.config.setdefault("cleanup_policy", {})[topic] = "compact"


class Producer:
    """A client: keeps its producer id, epoch and next sequence per partition, and its last batch for retries."""

    def __init__(self, ctx: Context, producer_id: int, epoch: int = 0, *, transactional: bool = False,
                 compression: str = "none", records: tuple[int, int] = (1, 4)):
        self.ctx = ctx
        self.pid = producer_id
        self.epoch = epoch
        self.transactional = transactional
        self.compression = compression
        self.records = records
        self.next_seq: dict[SimPartition, int] = {}
        self.last: dict[SimPartition, tuple[int, list[RecordSpec]]] = {}
        self.counter = 0

    def batch(self, n: int | None = None) -> list[RecordSpec]:
        n = n or self.ctx.rng.randint(*self.records)
        now = self.ctx.tick()
        out = []
        for _ in range(n):
            self.counter += 1
            key = b"k-%d" % self.ctx.rng.randrange(1000)
            out.append(RecordSpec(key, b'{"p":%d,"e":%d,"n":%d}' % (self.pid, self.epoch, self.counter), now))
        return out

    def send(self, p: SimPartition, n: int | None = None, *, seq: int | None = None, explain: str | None = None,
             fault: str | None = None, compression: str | None = None) -> Result:
        """Send the next batch; the sequence advances when the broker acknowledges (written or deduplicated)."""
        base = self.next_seq.get(p, 0) if seq is None else seq
        records = self.batch(n)
        result = p.produce(self.pid, self.epoch, base, records, transactional=self.transactional,
                           compression=compression or self.compression, explain=explain, fault=fault)
        if result in (Result.APPENDED, Result.DUPLICATE):
            self.next_seq[p] = (base + len(records)) % SEQ_SPACE
            self.last[p] = (base, records)
        return result

    def retry(self, p: SimPartition, *, fault: str | None = None, explain: str | None = None) -> Result:
        """Resend the last batch with the same sequence and bytes (its acknowledgement was lost)."""
        base, records = self.last[p]
        return p.produce(self.pid, self.epoch, base, records, transactional=self.transactional,
                         compression=self.compression, fault=fault, explain=explain)

    def bump_epoch(self) -> None:
        self.epoch += 1
        self.next_seq.clear()

    def end_transaction(self, partitions: Iterable[SimPartition], kind: str = "COMMIT", *,
                        coordinator_epoch: int = 1, marker_epoch: int | None = None) -> None:
        """The coordinator writes a COMMIT or ABORT marker to each partition, at the producer's epoch
        unless ``marker_epoch`` says otherwise (a fencing abort carries the next one)."""
        for p in partitions:
            result = p.end_transaction(self.pid, self.epoch if marker_epoch is None else marker_epoch, kind,
                                       coordinator_epoch=coordinator_epoch, timestamp=self.ctx.tick())
            assert result == Result.APPENDED, result
