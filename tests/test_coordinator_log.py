"""The coordinator's log, ``__transaction_state``: its records decoded byte for byte into
``transactional_ids`` rows, and a transactional id's life read from them (``producer
--transactional-id``, ``producer --producer-id``)."""

from __future__ import annotations

import json
import struct

import pyarrow.parquet as pq
import pytest

from analytics.contract import RECORD_DECODE
from analytics.kafka.coordinator import decode_change, encode_change
from analytics.kafka.errors import KafkaFormatError
from analytics.kafka.logdir import stream_segment
from analytics.kafka.model import TransactionalIdChange
from analytics.kafka.writer import RecordSpec, build_batch, segment_file_name, write_file
from tests.commands import assert_own_lines
from tests.outs import table_dir


def _key(tid: str) -> bytes:
    return struct.pack(">hh", 0, len(tid)) + tid.encode()


def _records(path) -> list[dict]:
    stream = stream_segment(path, topic="__transaction_state", partition=0, records=True)
    rows = []
    try:
        while True:
            rows += next(stream).records.to_pylist()
    except StopIteration:
        return rows


@pytest.mark.corpus
def test_every_corpus_record_decodes_and_encodes_back_to_its_bytes(corpus_dir):
    files = sorted(corpus_dir.rglob("__transaction_state-*/*.log"))
    assert len(files) == 3
    seen = 0
    for f in files:
        for r in _records(f):
            change = decode_change(r["key"], r["value"], partition=0, file=str(f), offset=r["offset"],
                                   timestamp=r["timestamp"])
            assert encode_change(change, change.value_version) == (r["key"], r["value"])
            seen += 1
    assert seen == 44


def test_a_flexible_value_with_tagged_fields_decodes():
    # TransactionLogValue v1 written by hand: compact arrays and strings, tagged fields 0, 1 and 2
    value = (struct.pack(">hqhib", 1, 7001, 3, 60000, 1)  # version, producer id, epoch, timeout, Ongoing
             + bytes([2])  # one topic (compact array: n + 1)
             + bytes([7]) + b"orders" + bytes([3]) + struct.pack(">ii", 2, 0) + bytes([0])  # topic, [2, 0], no tags
             + struct.pack(">qq", 1700000000500, 1700000000000)  # last update, start
             + bytes([3, 0, 8]) + struct.pack(">q", 6999) + bytes([1, 8]) + struct.pack(">q", -1)
             + bytes([2, 2]) + struct.pack(">h", 2))
    change = decode_change(_key("app-1"), value, partition=4, file="f", offset=10, timestamp=5)
    assert change == TransactionalIdChange(
        coordinator_partition=4, file="f", offset=10, timestamp=5, transactional_id="app-1", state="Ongoing",
        producer_id=7001, producer_epoch=3, previous_producer_id=6999, next_producer_id=-1, timeout_ms=60000,
        partitions=("orders-0", "orders-2"), update_timestamp=1700000000500, start_timestamp=1700000000000,
        client_transaction_version=2, value_version=1)
    assert decode_change(_key("app-1"), None, partition=4, file="f", offset=11, timestamp=6).state == "Tombstone"


@pytest.mark.parametrize("key, value, why", [
    (struct.pack(">hh", 1, 1) + b"x", None, "key version 1"),
    (None, b"", "without a key"),
    (_key("a"), struct.pack(">h", 2) + bytes(40), "value version 2"),
    (_key("a"), struct.pack(">hqhib", 0, 1, 0, 1000, 9), "transaction status 9"),
    (_key("a"), struct.pack(">hqhib", 0, 1, 0, 1000, 0) + struct.pack(">i", -1) + bytes(8), "ends inside a field"),
    (_key("a"), struct.pack(">hqhib", 0, 1, 0, 1000, 0) + struct.pack(">i", -1) + bytes(17), "1 bytes after"),
])
def test_a_record_that_is_not_the_coordinators_is_refused(key, value, why):
    with pytest.raises(KafkaFormatError, match=why) as caught:
        decode_change(key, value, partition=0, file="f", offset=0, timestamp=0)
    assert caught.value.kind == RECORD_DECODE


def _change(offset, state, pid, epoch, partitions=()):
    return TransactionalIdChange(0, "f", offset, 1000 + offset, "app", state, pid, epoch, -1, -1, 60000,
                                 tuple(partitions), 1000 + offset, 1000, 0, 0)


# A life: producer 10 commits, is fenced inside its second transaction by a new instance (epoch 1),
# which commits at epoch 2; the id expires; it comes back as producer 11, whose transaction times out.
# One record is not the coordinator's.
LIFE = [
    _change(0, "Empty", 10, 0),
    _change(1, "Ongoing", 10, 0, ["t-0"]), _change(2, "PrepareCommit", 10, 0, ["t-0"]), _change(3, "CompleteCommit", 10, 0),
    _change(4, "Ongoing", 10, 0, ["t-0"]), _change(5, "PrepareAbort", 10, 1, ["t-0"]), _change(6, "CompleteAbort", 10, 1),
    _change(7, "Empty", 10, 2),
    _change(8, "Ongoing", 10, 2, ["t-0"]), _change(9, "PrepareCommit", 10, 2, ["t-0"]), _change(10, "CompleteCommit", 10, 2),
    TransactionalIdChange(0, "f", 11, 2000, "app", "Tombstone"),
    _change(12, "Empty", 11, 0),
    # producer 11's transaction outlives its timeout (60 s): the coordinator aborts it at a bumped epoch
    _change(13, "Ongoing", 11, 0, ["t-1"]),
    TransactionalIdChange(0, "f", 14, 70000, "app", "PrepareAbort", 11, 1, -1, -1, 60000, ("t-1",), 70000, 1000, 0, 0),
    _change(15, "CompleteAbort", 11, 1),
]


@pytest.fixture(scope="module")
def coordinator_log(spark, tmp_path_factory):
    """The LIFE above written as a __transaction_state segment in two log dirs (replicas), plus a
    record whose value is not the coordinator's, exported and audited."""
    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from analytics.export import export

    root = tmp_path_factory.mktemp("coordinator")
    entries = []
    for c in LIFE:
        key, value = encode_change(c)
        entries.append(build_batch(c.offset, [RecordSpec(key=key, value=value, timestamp=c.timestamp)]))
    entries.append(build_batch(len(LIFE), [RecordSpec(key=_key("app"), value=b"\x00\x07 not a value", timestamp=3000)]))
    for broker in ("broker-1", "broker-2"):
        folder = root / broker / "__transaction_state-0"
        folder.mkdir(parents=True)
        write_file(folder / segment_file_name(0), entries)
    out = str(root / "out")
    export(None, [str(root / "broker-1"), str(root / "broker-2")], out)
    audit(spark, out, load_config(None))
    return out


def test_the_export_writes_every_change_and_reports_the_bad_record(coordinator_log):
    rows = pq.read_table(str(table_dir(coordinator_log, "transactional_ids"))).to_pylist()
    assert len(rows) == 2 * len(LIFE)
    one = sorted((r for r in rows if "broker-1" in r["file"]), key=lambda r: r["offset"])
    assert [(r["offset"], r["state"], r["producer_id"], r["producer_epoch"], r["partitions"]) for r in one] == [
        (c.offset, c.state, c.producer_id, c.producer_epoch, None if c.state == "Tombstone" else list(c.partitions))
        for c in LIFE]
    errors = pq.read_table(str(table_dir(coordinator_log, "parse_errors"))).to_pylist()
    assert [(e["error_kind"], e["message"].split(":")[0]) for e in errors] == [(RECORD_DECODE, f"offset {len(LIFE)}")] * 2


def test_a_transactional_ids_life_names_its_producer_ids_fencing_and_expiration(coordinator_log, capsys):
    from analytics import cli
    from analytics.forensics import transactional_id_history

    h = transactional_id_history(coordinator_log, "app")
    assert h.replicas == 2 and h.changes_total == len(LIFE)  # each change once, not once per replica
    assert [(e["producer_id"], e["first_epoch"], e["last_epoch"], e["committed"], e["aborted"], e["fenced"],
             e["timed_out"], e["ended"]) for e in h.producer_ids] == [
        (10, 0, 2, 2, 1, 1, 0, "expired"), (11, 0, 1, 0, 1, 0, 1, None)]
    assert {c["offset"]: c["event"] for c in h.changes if c["event"]} == {
        0: "initialized", 5: "fenced", 7: "initialized", 11: "expired", 12: "new_producer_id", 14: "timed_out"}

    def producer(*args: str) -> tuple[int, str, str]:
        code = cli.main(["producer", coordinator_log, *args])
        out, err = capsys.readouterr()
        assert_own_lines(err)
        return code, out, err

    code, text, _ = producer("--transactional-id", "app")
    assert code == 0
    assert "producer ids [10, 11]" in text and "expired: the coordinator removed" in text
    code, text, _ = producer("--transactional-id", "app", "--format", "json")
    assert code == 0
    assert [e["producer_id"] for e in json.loads(text)["producer_ids"]] == [10, 11]
    code, _, err = producer("--transactional-id", "other")
    assert code == 2
    assert "transactional ids: app" in err
    # a producer id known only to the coordinator: who it was, and the producer id before it
    code, text, _ = producer("--producer-id", "11", "--format", "json")
    assert code == 0
    served = json.loads(text)["transactional_ids"]
    assert [(t["transactional_id"], t["before"], t["after"]) for t in served] == [("app", 10, None)]
    assert producer("--producer-id", "12")[0] == 2


def test_transactional_ids_are_a_view_for_sql(coordinator_log, spark):
    from analytics.forensics import run_sql

    rows = run_sql(spark, coordinator_log, "SELECT count(DISTINCT offset) AS n FROM transactional_ids "
                                           "WHERE state = 'CompleteCommit'").collect()
    assert rows[0]["n"] == 2
