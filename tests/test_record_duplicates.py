"""``record_duplicates`` counts what a read_committed consumer would see twice (docs/internal-topics.md):
a copy after an aborted one is reprocessing, an aborted copy is never delivered, a coordinator's or a
controller's repeats are not deliveries; a retried copy still counts. Tiny hand-built frames: the
records of a few partitions and the batches that say which transactions were aborted."""

from __future__ import annotations

import pytest

from analytics.audit import tables
from analytics.contract import DUP_ABORTED, DUP_AFTER_ABORT, DUP_DUPLICATE, schemas
from expectations.suites import suites

pytestmark = pytest.mark.spark

RECORDS = ("topic string, partition int, offset long, producer_id long, key binary, value_hash long, "
           "is_control boolean, file string")
BATCHES = ("topic string, partition int, file string, file_position long, base_offset long, last_offset long, "
           "record_count int, crc_valid boolean, magic int, is_transactional boolean, is_control boolean, "
           "max_timestamp long, producer_id long, producer_epoch int, control_type string, coordinator_epoch int")


def _file(topic: str) -> str:
    return f"/data/kafka/{topic}-0/00000000000000000000.log"


class Log:
    """A partition's log written batch by batch: each data batch one record per (key, value) given."""

    def __init__(self, topic: str):
        self.topic, self.offset = topic, 0
        self.records: list[tuple] = []
        self.batches: list[tuple] = []

    def data(self, pid: int, *payloads: tuple[bytes, int], txn: bool = False) -> Log:
        base = self.offset
        for key, value in payloads:
            self.records.append((self.topic, 0, self.offset, pid, key, value, False, _file(self.topic)))
            self.offset += 1
        self.batches.append((self.topic, 0, _file(self.topic), base * 100, base, self.offset - 1, len(payloads),
                             True, 2, txn, False, 1000 + base, pid, 0, None, None))
        return self

    def marker(self, pid: int, kind: str) -> Log:
        self.records.append((self.topic, 0, self.offset, pid, None, None, True, _file(self.topic)))
        self.batches.append((self.topic, 0, _file(self.topic), self.offset * 100, self.offset, self.offset, 1,
                             True, 2, True, True, 1000 + self.offset, pid, 0, kind, 1))
        self.offset += 1
        return self


def _logs() -> list[Log]:
    a, b, c, d, e, f = ((b"k-%s" % x.encode(), 1) for x in "abcdef")
    out = (Log("out")
           # an exactly-once app killed inside a transaction: the coordinator aborts it, its successor
           # reprocesses the same input and commits (offsets 0-1 aborted, 3-4 committed)
           .data(7, a, b, txn=True).marker(7, "ABORT").data(8, a, b, txn=True).marker(8, "COMMIT")
           # a plain producer's retry: the same record twice, both delivered
           .data(9, c).data(9, c)
           # committed, then the same record again in a transaction that was aborted
           .data(10, d, txn=True).marker(10, "COMMIT").data(10, d, txn=True).marker(10, "ABORT")
           # aborted, then delivered twice: the second delivery is a duplicate
           .data(11, e, txn=True).marker(11, "ABORT").data(12, e).data(12, e)
           # a transaction still open is not aborted: its repeat counts
           .data(13, f, txn=True).data(14, f))
    # the coordinators' and the controller's byte-identical records (producer id -1), a changelog's
    # unchanged put, and a repartition topic's repeat
    internal = [Log(t).data(-1, (b"g", 5)).data(-1, (b"g", 5)) for t in (
        "__consumer_offsets", "__cluster_metadata", "__transaction_state", "app-store-changelog", "connect-status")]
    repartition = Log("app-x-repartition").data(15, (b"h", 6)).data(15, (b"h", 6))
    return [out, *internal, repartition]


def _frames(spark):
    logs = _logs()
    records = spark.createDataFrame([r for log in logs for r in log.records], RECORDS)
    batches = spark.createDataFrame([b for log in logs for b in log.batches], BATCHES)
    return records, batches


def _rows(df) -> list[tuple]:
    return sorted((r["topic"], r["offset"], r["first_offset"], r["producer_id"], r["first_producer_id"], r["kind"])
                  for r in df.collect())


EXPECTED = [  # offsets: a 0-1, ABORT 2, a 3-4, COMMIT 5, c 6-7, d 8, COMMIT 9, d 10, ABORT 11, e 12, ABORT 13, e 14-15, f 16-17
    ("app-x-repartition", 1, 0, 15, 15, DUP_DUPLICATE),
    ("out", 3, 0, 8, 7, DUP_AFTER_ABORT),
    ("out", 4, 1, 8, 7, DUP_AFTER_ABORT),
    ("out", 7, 6, 9, 9, DUP_DUPLICATE),
    ("out", 10, 8, 10, 10, DUP_ABORTED),
    ("out", 14, 12, 12, 11, DUP_AFTER_ABORT),
    ("out", 15, 12, 12, 11, DUP_DUPLICATE),
    ("out", 17, 16, 14, 13, DUP_DUPLICATE),
]


def test_each_copy_says_what_a_read_committed_consumer_makes_of_it(spark):
    records, batches = _frames(spark)
    got = tables.record_duplicates(records, "key_value", batches)
    assert _rows(got) == EXPECTED
    # the contract's columns, kind before the topic id; topic_deleted is the write's (columns.conform)
    assert [*got.columns, "topic_deleted"] == [f.name for f in schemas.RECORD_DUPLICATES]
    assert {r["log_dir"] for r in got.collect()} == {"/data/kafka"}


def test_without_the_batches_every_copy_counts(spark):
    records, _ = _frames(spark)
    got = _rows(tables.record_duplicates(records, "key_value"))
    assert got == [(*row[:5], DUP_DUPLICATE) for row in EXPECTED]


def test_no_duplicate_record_fails_on_the_copies_delivered_twice_only(spark):
    from analytics.audit.config import AuditConfig

    records, batches = _frames(spark)
    tables.record_duplicates(records, "key_value", batches).createOrReplaceTempView("record_duplicates")
    [check] = [c for c in suites(AuditConfig(), has_records=True)["zero_duplicates"] if c.id == "no_duplicate_record"]
    offending = spark.sql(check.query_for("anomalies")).collect()
    assert sorted((r["topic"], r["offset"]) for r in offending) == [
        (t, o) for t, o, *_, kind in EXPECTED if kind == DUP_DUPLICATE]


def test_aborted_ranges_run_from_the_first_data_batch_to_the_abort_marker(spark):
    _, batches = _frames(spark)
    got = sorted((r["producer_id"], r["txn_first"], r["txn_end"]) for r in tables.aborted_ranges(batches).collect())
    assert got == [(7, 0, 2), (10, 10, 11), (11, 12, 13)]


# -- the dedup key ---------------------------------------------------------------------------------------
STAMPED = ("topic string, partition int, offset long, timestamp long, producer_id long, key binary, value_hash long, "
           "headers array<struct<key:string,value:binary>>, is_control boolean, file string")


def _stamped(spark):
    """Records with timestamps and headers, a batch each: ``create`` is a CreateTime topic, ``appended``
    a LogAppendTime one (the broker stamped each append, a retry included)."""
    h1, h2 = [("trace", b"1")], [("trace", b"2")]
    rows = [  # topic, offset, timestamp, key, headers: value hash 1 throughout
        ("create", 0, 100, b"retried", None), ("create", 1, 100, b"retried", None),  # a retry: the same bytes
        ("create", 2, 200, b"sent-twice", None), ("create", 3, 300, b"sent-twice", None),  # one payload sent twice
        ("create", 4, 400, b"traced", h1), ("create", 5, 400, b"traced", h2),  # the same payload, other headers
        ("create", 6, 500, b"retried-traced", h1), ("create", 7, 500, b"retried-traced", h1),  # a retry, headers
        ("appended", 0, 500, b"restamped", None), ("appended", 1, 900, b"restamped", None),  # a retry, restamped
    ]
    records = spark.createDataFrame(
        [(t, 0, o, ts, 9, k, 1, h, False, _file(t)) for t, o, ts, k, h in rows], STAMPED)
    batches = spark.createDataFrame(
        [(t, 0, _file(t), o * 100, o, o, 1, True, 2, False, False, ts, 9, 0, None, None,
          "LogAppendTime" if t == "appended" else "CreateTime") for t, o, ts, k, h in rows],
        BATCHES + ", timestamp_type string")
    return records, batches


@pytest.mark.parametrize("dedup_key, expected", [
    # a retry repeats key, value, headers and the producer's timestamp; a LogAppendTime retry only the first three
    ("delivery", [("appended", 1, 0), ("create", 1, 0), ("create", 7, 6)]),
    # key and value alone also take a payload sent twice, and one sent with other headers, for copies
    ("key_value", [("appended", 1, 0), ("create", 1, 0), ("create", 3, 2), ("create", 5, 4), ("create", 7, 6)]),
])
def test_the_delivery_key_finds_retries_and_not_a_payload_sent_twice(spark, dedup_key, expected):
    records, batches = _stamped(spark)
    got = tables.record_duplicates(records, dedup_key, batches)
    assert sorted((r["topic"], r["offset"], r["first_offset"]) for r in got.collect()) == expected
    assert {r["kind"] for r in got.collect()} == {DUP_DUPLICATE}


def test_the_delivery_key_without_the_batches_counts_every_timestamp(spark):
    records, _ = _stamped(spark)  # no timestamp types known: the restamped retry looks like two sends
    got = tables.record_duplicates(records, "delivery")
    assert sorted((r["topic"], r["offset"]) for r in got.collect()) == [("create", 1), ("create", 7)]


def test_the_default_dedup_key_is_delivery():
    from analytics.audit.config import AuditConfig, config_from_mapping
    from analytics.contract import DEDUP_DELIVERY

    assert AuditConfig().dedup_key == config_from_mapping({}).dedup_key == DEDUP_DELIVERY
    assert config_from_mapping({"dedup_key": "key_value"}).dedup_key == "key_value"
    with pytest.raises(ValueError, match="delivery, key_value or header"):
        config_from_mapping({"dedup_key": "value"})
