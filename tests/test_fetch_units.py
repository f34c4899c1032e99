"""The parts of the export over the protocol that need no broker: which bytes of a Fetch response
belong to a range, the stream decoding, the byte rate, the plan, and the client configuration."""

from __future__ import annotations

import pytest

from analytics.cluster.config import ClientConfig, bootstrap_of, load, parse_properties, settings
from analytics.cluster.fetch import Throttle
from analytics.cluster.capture import Capture, PartitionRange, split
from analytics.errors import InputError, UsageError
from analytics.kafka.fetched import frame_fetched
from analytics.kafka.reader import SegmentScanner, StreamScanner
from analytics.kafka.writer import RecordSpec, build_batch, build_legacy_message


def _log(*counts: int, first: int = 0) -> tuple[bytes, list[tuple[int, int, int]]]:
    """Batches of ``counts`` records from offset ``first``, and each one's (position, base, last)."""
    out, where, offset = b"", [], first
    for n in counts:
        batch = build_batch(offset, [RecordSpec(b"k", b"v" * 10, 1000 + i) for i in range(n)], producer_id=7,
                            producer_epoch=0, base_sequence=offset - first)
        where.append((len(out), offset, offset + n - 1))
        out += batch
        offset += n
    return out, where


def test_a_range_keeps_the_entries_whose_base_offset_it_holds():
    log, where = _log(3, 3, 3, 3)  # offsets 0-2, 3-5, 6-8, 9-11
    # a fetch at 4 returns the batch holding 4 first: it began at 3, in the earlier range
    f = frame_fetched(log[where[1][0]:], fetch_offset=4, start=4, end=9, first=False)
    kept = log[where[1][0]:][f.keep_from:f.keep_to]
    assert kept == log[where[2][0]:where[3][0]]  # only 6-8: 9-11 begins at the range's end
    assert f.done and f.next_offset == 9
    # the partition's first range keeps the batch holding its start (a log start inside a batch)
    f = frame_fetched(log[where[1][0]:], fetch_offset=4, start=4, end=9, first=True)
    assert log[where[1][0]:][f.keep_from:f.keep_to] == log[where[1][0]:where[3][0]]


def test_a_partial_last_entry_is_fetched_again_and_a_lone_large_one_asks_for_more_bytes():
    log, where = _log(2, 2, 2)
    cut = log[:where[2][0] + 30]  # the third batch cut by the response's byte limit
    f = frame_fetched(cut, fetch_offset=0, start=0, end=100, first=True)
    assert (f.keep_from, f.keep_to, f.next_offset, f.done, f.need) == (0, where[2][0], 4, False, 0)
    f = frame_fetched(log[:20], fetch_offset=0, start=0, end=100, first=True)
    assert f.keep_to == f.keep_from and f.next_offset == 0 and f.need == where[1][0]


def test_bytes_that_do_not_frame_stop_the_range_where_they_begin():
    log, where = _log(2, 2)
    bad = bytearray(log)
    bad[where[1][0] + 16] = 7  # the second batch's magic
    f = frame_fetched(bytes(bad), fetch_offset=0, start=0, end=100, first=True)
    assert f.stop[0] == "unknown_magic" and f.keep_to == where[1][0] and f.next_offset == 2


def test_legacy_entries_are_placed_by_their_offset():
    log = b"".join(build_legacy_message(o, b"k", b"v") for o in range(5))
    f = frame_fetched(log, fetch_offset=0, start=2, end=4, first=False)
    scanned = StreamScanner(topic="t", partition=0, file="f").feed(log[f.keep_from:f.keep_to])
    assert scanned.batches.column("base_offset").to_pylist() == [2, 3] and f.done


def test_a_fed_stream_decodes_as_the_same_bytes_in_a_file_would(tmp_path):
    log, _ = _log(1, 4, 2, 5)
    stream = StreamScanner(topic="t", partition=0, file="kafka://c/t-0/00000000000000000000", records=True)
    half = len(log) // 2
    cut = next(p for p, _, _ in reversed(_log(1, 4, 2, 5)[1]) if p <= half)
    chunks = [stream.feed(log[:cut]), stream.feed(log[cut:])]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(log)
    from analytics.kafka.fs import LocalFile

    whole = list(SegmentScanner(LocalFile(str(path)), topic="t", partition=0, file=stream.file, records=True))
    cols = ("base_offset", "last_offset", "file_position", "crc", "crc_valid", "base_sequence")
    assert [c.batches.select(cols).to_pylist() for c in chunks] != []
    assert sum((c.batches.select(cols).to_pylist() for c in chunks), []) == whole[0].batches.select(cols).to_pylist()
    assert sum(c.records.num_rows for c in chunks) == 12
    info = stream.info
    assert (info.size_bytes, info.valid_bytes, info.batch_count, info.first_offset, info.last_offset) == (
        len(log), len(log), 4, 0, 11)


def test_lost_offsets_are_one_error_without_bytes_and_framing_errors_hold_the_bytes_received():
    stream = StreamScanner(topic="t", partition=0, file="f")
    log, _ = _log(2)
    stream.feed(log)
    stream.lost("offsets_lost", "offsets 2..9 of t-0 not fetched: deleted", 0, stops=False)
    stream.lost("unknown_magic", "magic byte 7", 40)
    assert [(e.error_kind, e.file_position, e.bytes_affected) for e in stream.errors] == [
        ("offsets_lost", len(log), 0), ("unknown_magic", len(log), 40)]
    assert stream.info.size_bytes == len(log) + 40 and stream.info.valid_bytes == len(log)
    assert stream.info.status == "unknown_magic"


def test_the_throttle_keeps_the_average_rate():
    now, slept = [0.0], []

    def sleep(s):
        slept.append(s)
        now[0] += s

    t = Throttle(1000.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(10):
        t.take(500)
        now[0] += 0.1  # the fetch itself
    assert 5000 / now[0] <= 1000.0 * 1.0001 and 5000 / now[0] >= 900
    unlimited = Throttle(None, clock=lambda: 0.0, sleep=lambda s: pytest.fail("slept"))
    unlimited.take(10**9)


def test_a_broker_serves_at_most_its_share_of_fetches():
    parts = [PartitionRange("t", p, 0, 10 * (p + 1), 0, leader=p % 3, high_watermark=10 * (p + 1)) for p in range(9)]
    ranges = split(Capture("c", 0, parts), range_offsets=7, per_broker=2)
    by_leader: dict[int, set] = {}
    for r in ranges:
        by_leader.setdefault(r.leader, set()).add(r.group)
    assert all(len(groups) <= 2 for groups in by_leader.values()) and len(by_leader) == 3
    assert len({g for gs in by_leader.values() for g in gs}) == 6  # groups are never shared between leaders
    covered = {(r.partition, o) for r in ranges for o in range(r.start, r.end)}
    assert covered == {(p.partition, o) for p in parts for o in range(p.start, p.end)}
    assert all(r.first == (r.start == 0) for r in ranges)
    assert ranges[0].file == "kafka://c/t-0/00000000000000000000"


def test_client_properties_in_kafkas_names():
    props = parse_properties(
        "# a Java client's file\nbootstrap.servers=b:9092\nsecurity.protocol = SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n'
        '    username="audit" password="s3cr\\"et";\n'
        "ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\nssl.endpoint.identification.algorithm=\n"
        "acks=all\n")
    got = settings(props)
    assert got == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "audit",
                   "sasl_plain_password": 's3cr"et', "ssl_cafile": "/etc/ca.pem", "ssl_check_hostname": False}
    config = ClientConfig("b:9092", got)
    assert "s3cr" not in repr(config) and "s3cr" not in str(config) and "***" in repr(config)
    assert config.kwargs()["client_id"] == "segaudit"


@pytest.mark.parametrize("text, says", [
    ("security.protocol=SSL\nssl.truststore.location=/x.jks\n", "convert the store to PEM"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n", "GSSAPI is not supported"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", "username"),
    ("security.protocol=TLS\n", "security.protocol must be one of"),
])
def test_client_properties_segaudit_cannot_use_are_one_clear_error(tmp_path, text, says):
    path = tmp_path / "client.properties"
    path.write_text(text)
    with pytest.raises(InputError, match=says):
        load("kafka://b:9092", str(path))


def test_a_cluster_address_is_checked_before_anything_runs():
    assert bootstrap_of("kafka://b1:9092,[::1]:9093") == "b1:9092,[::1]:9093"
    for bad in ("kafka://", "kafka://b1", "kafka://b1:x", "kafka://b1:9092/topic"):
        with pytest.raises(UsageError, match="kafka://HOST:PORT"):
            bootstrap_of(bad)


def test_a_login_is_asked_directly_only_with_sasl_and_only_of_a_broker_that_answers():
    """``login.refusal``: no SASL configured, nothing to ask; no broker listening, no reason (the
    bootstrap's own failure stands). The refusals themselves come from a real broker
    (tests/test_live_cluster.py)."""
    import socket

    from analytics.cluster.login import refusal

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "u",
            "sasl_plain_password": "p"}
    assert refusal(ClientConfig(f"127.0.0.1:{port}")) is None
    assert refusal(ClientConfig(f"127.0.0.1:{port}", sasl), wait_s=2) is None


class _Cluster:
    """A partition's log served the way a broker answers a Fetch: from the batch holding the offset
    asked; ``answers`` first give their error codes (or raise), then the log; ``earliest``: its log
    start (below it, OFFSET_OUT_OF_RANGE)."""

    def __init__(self, log: bytes, where: list, answers=(), earliest: int = 0, topic_id: str | None = None):
        self.log, self.where, self.answers, self.earliest, self.asked = log, where, list(answers), earliest, []
        self.topic_id = topic_id  # the id the topic of the name has now

    def leader(self, topic, partition):
        return 1

    def partitions(self, pattern):
        from analytics.cluster.client import PartitionInfo

        return [PartitionInfo("t", 0, 1, False, self.topic_id)]

    def offsets(self, partitions, spec):
        return {partitions[0]: self.earliest if spec == "earliest" else self.where[-1][2] + 1}

    def fetch(self, node, topic, partition, offset, max_bytes, topic_id=None):
        self.ids = getattr(self, "ids", []) + [topic_id]
        from analytics.cluster.client import Fetched

        self.asked.append(offset)
        end = self.where[-1][2] + 1
        if self.answers:
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return Fetched(answer, b"", end, self.earliest)
        if offset < self.earliest:
            return Fetched(1, b"", end, self.earliest)
        at = next(p for p, base, last in self.where if last >= offset)
        return Fetched(0, self.log[at:at + max_bytes], end, self.earliest)


def _fetched(cluster, start: int, end: int, retry_seconds: float = 60.0, topic_id: str | None = None):
    from analytics.cluster.fetch import Limits, fetch_range
    from analytics.cluster.capture import FetchRange

    scanner = StreamScanner(topic="t", partition=0, file="f")
    r = FetchRange(index=0, group=0, topic="t", partition=0, start=start, end=end, first=True, leader=1, file="f",
                   topic_id=topic_id)
    chunks = list(fetch_range(cluster, r, scanner, Limits(retry_seconds=retry_seconds), Throttle(None)))
    bases = [b for c in chunks for b in c.batches.column("base_offset").to_pylist()]
    return bases, [(e.error_kind, e.message) for e in scanner.errors]


def test_a_range_is_fetched_through_retriable_answers_and_a_lost_connection():
    log, where = _log(2, 3, 1)
    bases, errors = _fetched(_Cluster(log, where, answers=[6, OSError("reset")]), 0, 6)
    assert errors == [] and bases == [0, 2, 5]


def test_offsets_deleted_during_the_export_are_lost_and_the_rest_fetched():
    log, where = _log(2, 3, 1)
    cluster = _Cluster(log, where, earliest=2)  # retention moved the log start past the first batch
    bases, errors = _fetched(cluster, 0, 6)
    assert cluster.asked[:2] == [0, 2] and bases == [2, 5]
    assert errors == [("offsets_lost", "offsets 0..1 of t-0 not fetched: deleted during the export "
                                        "(the log starts at 2 now)")]
    bases, errors = _fetched(_Cluster(log, where, earliest=6), 0, 6)  # all of it deleted
    assert bases == [] and [kind for kind, _ in errors] == ["offsets_lost"] and "0..5" in errors[0][1]


def test_a_topic_deleted_during_the_export_is_fetched_by_its_old_id_and_lost_saying_so():
    """Every Fetch names the id captured; UNKNOWN_TOPIC_ID while the name's topic still has that id (a
    broker that has not learnt of it yet) is retried, and once the name's topic has another id the
    rest of the range is lost, saying so, nothing of the new topic read."""
    log, where = _log(2, 3, 1)
    cluster = _Cluster(log, where, answers=[100], topic_id="OLD")
    bases, errors = _fetched(cluster, 0, 6, topic_id="OLD")
    assert bases == [0, 2, 5] and errors == [] and set(cluster.ids) == {"OLD"}  # the three batches

    cluster = _Cluster(log, where, answers=[100], topic_id="NEW")  # deleted and created again
    bases, errors = _fetched(cluster, 0, 6, topic_id="OLD")
    assert bases == [] and errors == [("offsets_lost", "offsets 0..5 of t-0 not fetched: the topic was deleted "
                                       "during the export (its id OLD is gone: a topic of its name now is another one)")]


def test_a_leader_that_stays_away_loses_the_range_after_the_retries():
    log, where = _log(2)
    bases, errors = _fetched(_Cluster(log, where, answers=[OSError("refused")] * 3), 0, 2, retry_seconds=0.2)
    assert bases == [] and errors == [("offsets_lost", "offsets 0..1 of t-0 not fetched: OSError, retried for 0.2 s")]
