"""What an export over the protocol reads, decided once on the driver: each partition's offsets
captured at the start (:func:`capture`), split into ranges, and the ranges into the groups that
become Spark tasks (:func:`split`).

The range of a partition is ``[log start, high watermark)`` as ListOffsets answers at the capture
(narrowed by ``--from-offset``, ``--from-time`` and ``--until-time``): data appended later is not
read, so a re-run over the same captured range gives the same rows. A partition longer than
``range_offsets`` offsets is cut into ranges of that many; every range belongs to one group, and
the groups of a broker are at most ``per_broker`` (each group's task fetches its ranges one after
the other from their leader), so no broker serves more than ``per_broker`` fetches of the export at
once, however many executors run.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from analytics.cluster.client import Cluster
from analytics.cluster.config import SCHEME
from analytics.tuning import DEFAULT_PER_BROKER, DEFAULT_RANGE_OFFSETS


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """A partition's captured offsets: ``[start, end)``, its log start then, and its leader."""

    topic: str
    partition: int
    start: int
    end: int
    log_start: int
    leader: int
    high_watermark: int  # the partition's end at the capture (``end`` is below it with --until-time)
    topic_id: str | None = None  # the Metadata API's, as partition.metadata writes it; None: not given


@dataclass(frozen=True, slots=True)
class Capture:
    cluster_id: str
    captured_at: int  # ms since the epoch
    partitions: list[PartitionRange]

    @property
    def log_dir(self) -> str:
        """What the tables' ``log_dir`` is for this cluster: ``kafka://<cluster id>``."""
        return f"{SCHEME}{self.cluster_id}"


@dataclass(frozen=True, slots=True)
class FetchRange:
    """One range of one partition, read by one task: ``[start, end)``, the whole entry holding
    ``start`` only when ``first`` (the partition's first range). Plain values: shipped to executors."""

    index: int
    group: int
    topic: str
    partition: int
    start: int
    end: int
    first: bool
    leader: int
    file: str  # kafka://<cluster id>/<topic>-<partition>/<start, 20 digits>: the rows' ``file``
    topic_id: str | None = None  # the topic's id at the capture: fetched by it (None: by name)

    def to_json(self) -> dict:
        return asdict(self)


def locator(log_dir: str, topic: str, partition: int, name: str) -> str:
    """A fetched file's name, laid out as a segment's path so that ``log_dir`` comes out of it alike.

    >>> locator("kafka://AbC", "orders", 3, f"{120:020d}")
    'kafka://AbC/orders-3/00000000000000000120'
    """
    return f"{log_dir}/{topic}-{partition}/{name}"


def capture(cluster: Cluster, topics: str = ".*", *, from_offset: int | None = None, from_time: int | None = None,
            until_time: int | None = None) -> Capture:
    """Each partition of the topics matching ``topics``: its offsets to export, captured now."""
    cluster_id = cluster.cluster_id()
    infos = cluster.partitions(topics)
    keys = [(p.topic, p.partition) for p in infos]
    captured_at = int(time.time() * 1000)
    earliest = cluster.offsets(keys, "earliest")
    latest = cluster.offsets(keys, "latest")
    starts = dict(earliest)
    if from_time is not None:
        starts = {k: max(o, earliest[k]) for k, o in cluster.offsets(keys, from_time).items()}
    if from_offset is not None:
        starts = {k: max(o, from_offset) for k, o in starts.items()}
    ends = latest if until_time is None else {k: min(o, latest[k]) for k, o in cluster.offsets(keys, until_time).items()}
    parts = [PartitionRange(p.topic, p.partition, starts[k], max(ends[k], starts[k]), earliest[k], p.leader, latest[k],
                            p.topic_id)
             for p, k in zip(infos, keys)]
    return Capture(cluster_id, captured_at, parts)


def split(captured: Capture, *, range_offsets: int = DEFAULT_RANGE_OFFSETS,
          per_broker: int = DEFAULT_PER_BROKER) -> list[FetchRange]:
    """The ranges of every partition with data, each given a group: the groups of a leader are at
    most ``per_broker``, the longest ranges placed first on the group with the fewest offsets.

    >>> c = Capture("c", 0, [PartitionRange("t", 0, 0, 5, 0, 1, 5), PartitionRange("t", 1, 0, 0, 0, 1, 0)])
    >>> [(r.start, r.end, r.first, r.group) for r in split(c, range_offsets=2, per_broker=2)]
    [(0, 2, True, 0), (2, 4, False, 1), (4, 5, False, 0)]
    """
    pieces = []
    for p in captured.partitions:
        for start in range(p.start, p.end, max(1, range_offsets)):
            pieces.append((p, start, min(start + range_offsets, p.end)))
    load: dict[int, list[int]] = {}  # leader -> offsets per group
    groups: dict[tuple[int, int], int] = {}  # (leader, slot) -> group number
    placed = {}
    for i in sorted(range(len(pieces)), key=lambda i: -(pieces[i][2] - pieces[i][1])):
        p, start, end = pieces[i]
        slots = load.setdefault(p.leader, [])
        if len(slots) < per_broker:
            slots.append(0)
            slot = len(slots) - 1
        else:
            slot = min(range(len(slots)), key=slots.__getitem__)
        slots[slot] += end - start
        placed[i] = groups.setdefault((p.leader, slot), len(groups))
    return [FetchRange(i, placed[i], p.topic, p.partition, start, end, start == p.start, p.leader,
                       locator(captured.log_dir, p.topic, p.partition, f"{start:020d}"), p.topic_id)
            for i, (p, start, end) in enumerate(pieces)]
