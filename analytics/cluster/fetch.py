"""One range of a partition fetched and decoded, on an executor: the loop of Fetch requests, what
each of the partition's errors means, and the byte rate.

Each response is framed (:func:`analytics.kafka.fetched.frame_fetched`) and its whole entries of
the range fed to a :class:`~analytics.kafka.reader.StreamScanner`, the same decoding as a segment's
(CRC checked, headers, records). Memory is one response (``fetch_bytes``, or one larger entry).

Trouble is data, not a crash:

- a leader change, a broker going away, a timeout, the whole cluster unreachable: the leader is
  asked again and the fetch retried, for ``retry_seconds``; past that the rest of the range is an
  ``offsets_lost`` error;
- ``OFFSET_OUT_OF_RANGE`` below the log start (retention or DeleteRecords ran during the export):
  the offsets up to the new log start are an ``offsets_lost`` error and the fetch goes on from there;
  above the log end (the log was truncated): the rest of the range is one;
- the topic deleted during the export (it is fetched by the id it had at the capture, so the broker
  answers ``UNKNOWN_TOPIC_ID`` rather than another topic's records under its name): the rest of the
  range is an ``offsets_lost`` error;
- bytes that do not frame end the range with the error the segment walk would give them;
- a denied ACL fails the task with one line (the driver reports it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

from analytics.cluster.client import DENIED, NONE, OFFSET_OUT_OF_RANGE, RETRIABLE, UNKNOWN_TOPIC_ID, Cluster
from analytics.cluster.capture import FetchRange
from analytics.contract.vocabulary import OFFSETS_LOST
from analytics.errors import InputError
from analytics.kafka.fetched import frame_fetched
from analytics.kafka.reader import Chunk, StreamScanner
from analytics.tuning import DEFAULT_FETCH_BYTES

EMPTY_ANSWERS = 5  # empty responses below the range's end in a row before the rest is called lost


@dataclass(frozen=True, slots=True)
class Limits:
    """How a task fetches: at most ``bytes_per_second`` (its share of the export's limit; None: no
    limit), ``fetch_bytes`` a response, retrying unreachable leaders for ``retry_seconds``."""

    bytes_per_second: float | None = None
    fetch_bytes: int = DEFAULT_FETCH_BYTES
    retry_seconds: float = 60.0


class Throttle:
    """Keeps the bytes taken at or below ``rate`` a second on average since the first take."""

    def __init__(self, rate: float | None, clock=time.monotonic, sleep=time.sleep):
        self.rate, self.clock, self.sleep = rate, clock, sleep
        self.started: float | None = None
        self.taken = 0

    def take(self, n: int) -> None:
        if not self.rate:
            return
        now = self.clock()
        if self.started is None:
            self.started = now
        self.taken += n
        ahead = self.taken / self.rate - (now - self.started)
        if ahead > 0:
            self.sleep(ahead)


def fetch_range(cluster: Cluster, r: FetchRange, scanner: StreamScanner, limits: Limits,
                throttle: Throttle) -> Iterator[Chunk]:
    """The chunks of ``r``'s entries, fed through ``scanner`` (whose ``errors`` and ``info`` then
    describe the range)."""
    offset, node = r.start, r.leader
    max_bytes = limits.fetch_bytes if not limits.bytes_per_second else max(
        64 * 1024, min(limits.fetch_bytes, int(limits.bytes_per_second)))
    retrying_since: float | None = None
    empty = 0
    deleted: tuple[int, int] | None = None  # (first offset lost, the log start after it): named at the next entry
    while offset < r.end:
        node, got, reason = _ask(cluster, r, node, offset, max_bytes)
        if reason is not None:
            retrying_since = retrying_since or time.monotonic()
            if time.monotonic() - retrying_since > limits.retry_seconds:
                _lose(scanner, r, offset, r.end, f"{reason}, retried for {limits.retry_seconds:g} s")
                return
            node = -1
            time.sleep(0.5)
            continue
        retrying_since = None
        if got.error_code in DENIED:
            raise InputError(f"cannot fetch {r.topic}-{r.partition}: {DENIED[got.error_code]}")
        if got.error_code == OFFSET_OUT_OF_RANGE:
            earliest = _restart_at(cluster, scanner, r, offset)
            if earliest is None:
                return
            deleted, offset = (offset, earliest), earliest
            continue
        if got.error_code == UNKNOWN_TOPIC_ID:
            _lose(scanner, r, offset, r.end, f"the topic was deleted during the export (its id {r.topic_id} is "
                  "gone: a topic of its name now is another one)")
            return
        if got.error_code != NONE:
            _lose(scanner, r, offset, r.end, f"the broker answered error {got.error_code}")
            return
        throttle.take(len(got.records))
        framed = frame_fetched(got.records, fetch_offset=offset, start=r.start, end=r.end, first=r.first)
        if deleted:  # up to the first entry after the deletion (it may begin below the new log start)
            lost_from, earliest = deleted
            upto = framed.first_offset if framed.first_offset is not None else min(earliest, r.end)
            _lose(scanner, r, lost_from, upto, f"deleted during the export (the log starts at {earliest} now)",
                  stops=False)
            deleted = None
        if framed.keep_to > framed.keep_from:
            chunk = scanner.feed(got.records[framed.keep_from:framed.keep_to])
            if chunk is not None:
                yield chunk
        if framed.stop:
            kind, message = framed.stop
            scanner.lost(kind, f"{message}; offsets {framed.next_offset}..{r.end - 1} not read",
                         len(got.records) - framed.keep_to)
            return
        if framed.done:
            return
        if framed.need:
            max_bytes = max(max_bytes, framed.need)
            continue
        if framed.next_offset == offset:  # nothing at or after the offset was returned
            empty += 1
            if got.high_watermark <= offset or empty >= EMPTY_ANSWERS:
                _lose(scanner, r, offset, r.end, f"the log ends at {got.high_watermark} now (it was truncated)")
                return
            continue
        empty = 0
        offset = framed.next_offset


def _ask(cluster: Cluster, r: FetchRange, node: int, offset: int, max_bytes: int):
    """One Fetch of ``r`` at ``offset`` from ``node`` (-1: the partition's leader, looked up first):
    the node asked, its answer, and why to ask again (None: the answer stands)."""
    from kafka.errors import KafkaError

    try:
        if node < 0:
            node = cluster.leader(r.topic, r.partition)
        if node < 0:
            return node, None, "the partition has no leader"
        got = cluster.fetch(node, r.topic, r.partition, offset, max_bytes, topic_id=r.topic_id)
        if got.error_code == UNKNOWN_TOPIC_ID and _same_topic(cluster, r):
            return node, got, "UNKNOWN_TOPIC_ID"  # a broker that has not learnt of the topic yet
        return node, got, RETRIABLE.get(got.error_code)
    except (KafkaError, OSError, InputError) as e:  # InputError: no broker answered the leader's lookup
        return node, None, type(e).__name__ if not isinstance(e, InputError) else str(e)


def _same_topic(cluster: Cluster, r: FetchRange) -> bool:
    """Whether the topic of ``r``'s name still has the id it had at the capture."""
    return any(p.topic_id == r.topic_id for p in cluster.partitions(re.escape(r.topic)) if p.topic == r.topic)


def _restart_at(cluster: Cluster, scanner: StreamScanner, r: FetchRange, offset: int) -> int | None:
    """After OFFSET_OUT_OF_RANGE at ``offset``: the log start to go on from, its offsets below lost
    (retention or DeleteRecords during the export); None when the rest of ``r`` is lost (said)."""
    key = (r.topic, r.partition)
    earliest = cluster.offsets([key], "earliest")[key]
    if earliest <= offset:  # past the end: the log was truncated below the captured end
        latest = cluster.offsets([key], "latest")[key]
        _lose(scanner, r, offset, r.end, f"the log ends at {latest} now (it was truncated)")
        return None
    if earliest >= r.end:
        _lose(scanner, r, offset, r.end, f"deleted during the export (the log starts at {earliest} now)")
        return None
    return earliest


def _lose(scanner: StreamScanner, r: FetchRange, first: int, end: int, why: str, stops: bool = True) -> None:
    scanner.lost(OFFSETS_LOST, f"offsets {first}..{end - 1} of {r.topic}-{r.partition} not fetched: {why}", 0,
                 stops=stops)
