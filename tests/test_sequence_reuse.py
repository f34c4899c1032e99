"""A producer reusing its sequence numbers with other records once the broker forgot it, told from a
batch appended twice (issue 63, item 5): hand-built histories replayed by every path (the windows
in one range, the Java pass, histories cut into ranges) and by the reference, then judged by
``no_duplicate_batch`` and ``sequence_reuse_justified``.

A batch appended twice has the same CRC (it covers the records, not the offsets or the leader
epoch); a reused range with other records has another. The broker takes either only from a producer
it had forgotten (replay rules §2.10, §7.4.5): within the expiration it answers a cached range as a
duplicate and refuses another (§2.5), so such a batch on disk stays a violation."""

from __future__ import annotations

import pytest

from analytics.audit.config import AuditConfig
from analytics.contract import (
    DUPLICATE, LOG_APPEND_TIME, OK, PRODUCER_EXPIRATION, SEQUENCE_REUSE, SEV_EXPLAINED, SEV_OK, SEV_VIOLATION,
)
from tests.test_audit_differential import _row, _spark_schema

pytestmark = pytest.mark.spark

IDLE = 4000  # past the expiration of CONFIG
CONFIG = AuditConfig(producer_id_expiration_ms=3000)

# (epoch, first sequence, records, idle ms before it, crc, changes to the row) per batch, and what
# each gets: (verdict, explained_by, severity)
REUSED = (DUPLICATE, SEQUENCE_REUSE, SEV_EXPLAINED)
EXPIRED_COPY = (DUPLICATE, PRODUCER_EXPIRATION, SEV_EXPLAINED)
COPY = (DUPLICATE, None, SEV_VIOLATION)
FINE = (OK, None, SEV_OK)
CASES = {
    # 0..5 in batches of 2; after the idle 0..5 again with other records, then 6..7
    "reuse-after-expiry": (
        [(0, 0, 2, 1, 11, {}), (0, 2, 2, 1, 12, {}), (0, 4, 2, 1, 13, {}),
         (0, 0, 2, IDLE, 21, {}), (0, 2, 2, 1, 22, {}), (0, 4, 2, 1, 23, {}), (0, 6, 2, 1, 24, {})],
        [FINE, FINE, FINE, REUSED, REUSED, REUSED, FINE]),
    # the same batches appended again after the idle: a retry after the broker forgot the producer
    "appended-twice-after-expiry": (
        [(0, 0, 2, 1, 11, {}), (0, 2, 2, 1, 12, {}), (0, 0, 2, IDLE, 11, {}), (0, 2, 2, 1, 12, {})],
        [FINE, FINE, EXPIRED_COPY, EXPIRED_COPY]),
    # other records under a used range while the broker still knew the producer: it would have
    # answered DUPLICATE (nothing written), so the log breaks its rules
    "reuse-within-expiry": (
        [(0, 0, 2, 1, 11, {}), (0, 2, 2, 1, 12, {}), (0, 0, 2, 1, 21, {}), (0, 2, 2, 1, 22, {})],
        [FINE, FINE, COPY, COPY]),
    "appended-twice-within-expiry": (
        [(0, 0, 2, 1, 11, {}), (0, 0, 2, 1, 11, {})],
        [FINE, COPY]),
    # a reuse, then the reused batch appended twice: the second copy repeats the reuse's records
    "reuse-then-appended-twice": (
        [(0, 0, 2, 1, 11, {}), (0, 0, 2, IDLE, 21, {}), (0, 0, 2, 1, 21, {})],
        [FINE, REUSED, COPY]),
    # a reuse, then after another idle the first batch's records again: a copy of the first, not of the reuse
    "reuse-then-the-first-again": (
        [(0, 0, 2, 1, 11, {}), (0, 0, 2, IDLE, 21, {}), (0, 0, 2, IDLE, 11, {})],
        [FINE, REUSED, EXPIRED_COPY]),
    # the CRC proves nothing where the broker rewrites a copy's bytes: the leader stamps a LogAppendTime
    # batch at each append, the cleaner empties a batch in part
    "log-append-time": (
        [(0, 0, 2, 1, 11, {"timestamp_type": LOG_APPEND_TIME}), (0, 0, 2, IDLE, 21, {"timestamp_type": LOG_APPEND_TIME})],
        [FINE, EXPIRED_COPY]),
    "cleaned-original": (
        [(0, 0, 2, 1, 11, {"record_count": 1}), (0, 0, 2, IDLE, 21, {})],
        [FINE, EXPIRED_COPY]),
    "unknown-crc": (
        [(0, 0, 2, 1, 11, {}), (0, 0, 2, IDLE, None, {})],
        [FINE, EXPIRED_COPY]),
}


def _rows(topic: str, batches: list[tuple]) -> list[dict]:
    rows, offset, ts = [], 0, 1000
    for epoch, seq, n, idle, crc, changes in batches:
        ts += idle
        rows.append(_row(topic, offset, n, pid=1, epoch=epoch, seq=seq, ts=ts) | {"crc": crc} | changes)
        offset += n
    return rows


ROWS = [r for topic, (batches, _) in CASES.items() for r in _rows(topic, batches)]


def _verdicts(spark, how: str):
    from analytics.audit import rules

    batches = spark.createDataFrame(ROWS, schema=_spark_schema())
    if how == "cut":  # histories cut into ranges of 2 batches: the copies found over whole histories
        return rules.replay(batches, AuditConfig(producer_id_expiration_ms=3000, range_batches=2),
                            one_pass=False).verdicts
    return rules.replay(batches, CONFIG, one_pass=how == "one-pass").verdicts


@pytest.mark.parametrize("how", ["windows", "one-pass", "cut"])
def test_a_reuse_after_expiry_is_told_from_a_batch_appended_twice(spark, how):
    from analytics.audit.reference import replay

    got = {(r["topic"], r["base_offset"]): (r["verdict"], r["explained_by"], r["severity"])
           for r in _verdicts(spark, how).collect()}
    reference = replay(ROWS, CONFIG)
    by_reference = {(b["topic"], b["base_offset"]): tuple(reference[(b["file"], b["file_position"])][c]
                                                          for c in ("verdict", "explained_by", "severity"))
                    for b in ROWS}
    for topic, (_, want) in CASES.items():
        offsets = sorted(o for t, o in got if t == topic)
        assert [got[(topic, o)] for o in offsets] == want, topic
        assert [by_reference[(topic, o)] for o in offsets] == want, topic


def test_the_java_pass_and_the_windows_agree_on_the_copies_contents(spark):
    """Groups of many copies whose contents repeat, differ or are unknown, in the pass's table as it grows."""
    from tests.test_replay_pass import _assert_same

    rows = []
    for topic in ("a", "b"):
        for i in range(3000):  # 1000 ranges, each 3 times: contents alternating, or unknown
            crc = None if (i * 7) % 11 == 0 else (i // 1000 + i) % 2  # the 2nd copy differs, the 3rd not
            stamp = {"timestamp_type": LOG_APPEND_TIME} if i % 17 == 0 else {}
            rows.append(_row(topic, i, 1, pid=7, epoch=0, seq=i % 1000, ts=1000 + i * IDLE) | {"crc": crc} | stamp)
    replayed = _assert_same(spark.createDataFrame(rows, schema=_spark_schema()), CONFIG)
    differs = {r["dup_differs"] for r in replayed.where("dup_rank > 1").collect()}
    assert differs == {True, False}


def test_no_duplicate_batch_fails_for_copies_and_passes_reuses_which_their_check_justifies(spark):
    from pyspark.sql import functions as F

    from expectations.suites import suites

    verdicts = _verdicts(spark, "windows").cache()
    checks = {c.id: c for s in suites(CONFIG, has_records=False).values() for c in s}
    verdicts.createOrReplaceTempView("batch_verdicts")
    try:
        def offending(check: str, anomalies) -> set:
            anomalies.createOrReplaceTempView("forged_anomalies")
            query = checks[check].query.replace("{batch}", "forged_anomalies")
            return {(r["topic"], r["offset"]) for r in spark.sql(query).collect()}

        anomalies = verdicts.where(F.col("severity") != SEV_OK)
        copies = {(t, o) for t, (batches, want) in CASES.items() for o, w in zip(_offsets(batches), want)
                  if w[0] == DUPLICATE and w[1] != SEQUENCE_REUSE}
        reuses = {(t, o) for t, (batches, want) in CASES.items() for o, w in zip(_offsets(batches), want)
                  if w[1] == SEQUENCE_REUSE}
        assert offending("no_duplicate_batch", anomalies) == copies
        assert offending("sequence_reuse_justified", anomalies) == set()
        # a copy labelled a reuse: the check finds it, and an unexplained one fails no_duplicate_batch
        relabelled = anomalies.withColumn("explained_by", F.when(F.col("verdict") == DUPLICATE, F.lit(SEQUENCE_REUSE)))
        assert offending("sequence_reuse_justified", relabelled) == copies
        # a reuse without its expiry: the check finds it
        not_idle = anomalies.withColumn("idle_ms", F.lit(1)).withColumn("expired_offset", F.lit(None).cast("long"))
        assert offending("sequence_reuse_justified", not_idle) == reuses
    finally:
        spark.catalog.dropTempView("batch_verdicts")
        spark.catalog.dropTempView("forged_anomalies")


def _offsets(batches: list[tuple]) -> list[int]:
    offsets, offset = [], 0
    for _, _, n, *_ in batches:
        offsets.append(offset)
        offset += n
    return offsets
