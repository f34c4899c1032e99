"""A sequence reuse is not a batch appended twice (``analytics.audit.sequence_reuse``).

Once the broker has forgotten a producer (idle past ``producer.id.expiration.ms``) it takes a batch
whose producer, epoch and sequence range an earlier batch of the partition holds. The log dirs here
are written byte for byte, one partition a case, each producer idle for two days after its first
three batches, then sending the first two ranges again:

- ``reuse``: other records (keys and values) under the reused ranges: nothing repeats for a consumer;
- ``resend``: the same keys and values, stamped with the time they are sent again (the CRC differs,
  which is why the CRC is no evidence): a consumer receives them twice;
- ``mixed``: the second record of each range other, the first the same: one repeats;
- ``soon``: other records under a reused range only a minute later, while the broker still knew the
  producer (it would have refused the batch): a rule break.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.kafka.sidecars import write_leader_epoch_checkpoint
from analytics.kafka.writer import RecordSpec, build_batch, segment_file_name, write_file
from tests.outs import table_dir

pytestmark = pytest.mark.spark

START = 1_700_000_000_000
DAY_MS = 86_400_000
SIZE = 2  # records a batch


def _batch(offset: int, pid: int, seq: int, at: int, values: list[str]) -> bytes:
    records = [RecordSpec(key=f"k{seq + i}".encode(), value=v.encode(), timestamp=at + i)
               for i, v in enumerate(values)]
    return build_batch(offset, records, producer_id=pid, producer_epoch=0, base_sequence=seq,
                       partition_leader_epoch=0)


def _partition(log_dir: Path, topic: str, pid: int, later: int, again) -> None:
    """Three batches in sequence, then, ``later`` ms on, the first two ranges again with the values
    ``again(seq, i)``."""
    batches = [_batch(seq, pid, seq, START + seq, [f"v{seq + i}" for i in range(SIZE)])
               for seq in range(0, 3 * SIZE, SIZE)]
    batches += [_batch(3 * SIZE + seq, pid, seq, START + later + seq, [again(seq, i) for i in range(SIZE)])
                for seq in range(0, 2 * SIZE, SIZE)]
    path = log_dir / f"{topic}-0"
    path.mkdir(parents=True)
    write_file(path / segment_file_name(0), batches)
    (path / "leader-epoch-checkpoint").write_bytes(write_leader_epoch_checkpoint([(0, 0)]))


def _log_dir(root: Path) -> Path:
    log_dir = root / "logs"
    _partition(log_dir, "reuse", 100, 2 * DAY_MS, lambda seq, i: f"other{seq + i}")
    _partition(log_dir, "resend", 200, 2 * DAY_MS, lambda seq, i: f"v{seq + i}")
    _partition(log_dir, "mixed", 300, 2 * DAY_MS,
               lambda seq, i: f"v{seq + i}" if i == 0 else f"other{seq + i}")
    _partition(log_dir, "soon", 400, 60_000, lambda seq, i: f"other{seq + i}")
    return log_dir


def _audited(spark, root: Path, records: bool):
    import pyarrow.parquet as pq

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export
    from expectations.validate import validate

    out = str(root / ("with-records" if records else "without-records"))
    export(None, [str(_log_dir(root))], out, records=records)
    audit(spark, out, AuditConfig(producer_id_expiration_ms=DAY_MS))
    rows = pq.read_table(str(table_dir(out, "batch_verdicts"))).to_pylist()
    repeats = {(r["topic"], r["base_sequence"]): r for r in rows if r["base_offset"] >= 3 * SIZE}
    return repeats, {c.id: c for c in validate(spark, out).checks}


@pytest.fixture(scope="module")
def with_records(spark, tmp_path_factory):
    return _audited(spark, tmp_path_factory.mktemp("reuse"), records=True)


def test_other_records_under_a_reused_range_after_expiry_are_a_sequence_reuse(with_records):
    repeats, _ = with_records
    for seq in (0, SIZE):  # the expiry point, and the range after it in sequence with the rebuilt state
        row = repeats[("reuse", seq)]
        assert (row["verdict"], row["explained_by"], row["severity"]) == ("DUPLICATE", "sequence_reuse", "info")


def test_the_same_records_sent_again_stay_duplicates_though_their_crc_differs(with_records):
    repeats, _ = with_records
    for topic in ("resend", "mixed"):
        for seq in (0, SIZE):
            row = repeats[(topic, seq)]
            assert (row["verdict"], row["explained_by"], row["severity"]) == (
                "DUPLICATE", "producer_expiration", "explained"), (topic, seq)


def test_a_reused_range_the_broker_would_have_refused_stays_a_violation(with_records):
    repeats, _ = with_records
    row = repeats[("soon", 0)]
    assert (row["verdict"], row["explained_by"], row["severity"]) == ("DUPLICATE", None, "violation")


def test_no_duplicate_batch_passes_a_reuse_and_its_check_holds_it(with_records):
    _, checks = with_records
    failed = {(r["topic"], r["base_sequence"]) for r in checks["no_duplicate_batch"].sample}
    assert failed == {(t, s) for t in ("resend", "mixed", "soon") for s in (0, SIZE)}
    assert checks["sequence_reuse_justified"].success
    assert checks["producer_expiration_justified"].success


def test_without_records_nothing_is_compared(spark, tmp_path):
    repeats, checks = _audited(spark, tmp_path, records=False)
    assert repeats[("reuse", 0)]["explained_by"] == "producer_expiration"
    assert "sequence_reuse_justified" not in checks
    assert not checks["no_duplicate_batch"].success


def test_explain_says_the_records_differ(with_records):
    from analytics.forensics.reasoning import evidence

    repeats, _ = with_records
    [said] = evidence(repeats[("reuse", 0)], {"producer_id_expiration_ms": DAY_MS})
    assert said.startswith("A sequence reuse, not a copy") and "at offset 0" in said


def test_the_reference_replay_takes_the_same_evidence(spark, with_records, tmp_path):
    """The pure-Python reference replay, given the batches whose records differ, explains each batch as
    the audit does."""
    import pyarrow.parquet as pq

    from analytics.audit.config import AuditConfig
    from analytics.audit.reference import replay
    from analytics.audit.sequence_reuse import records_differ
    from analytics.export import export

    out = str(tmp_path / "out")
    export(None, [str(_log_dir(tmp_path))], out, records=True)
    batches = pq.read_table(str(table_dir(out, "batches"))).to_pylist()
    differ = records_differ(spark.read.parquet(str(table_dir(out, "batches"))),
                            spark.read.parquet(str(table_dir(out, "records"))))
    reused = {(r["file"], r["file_position"]) for r in differ.collect()}
    # the two ranges of reuse and of soon: the records differ; the broker forgot the first producer only
    assert sorted(f.split("/")[-2] for f, _ in reused) == ["reuse-0", "reuse-0", "soon-0", "soon-0"]
    reference = replay(batches, AuditConfig(producer_id_expiration_ms=DAY_MS), reused=reused)
    repeats, _ = with_records
    for b in batches:
        if b["base_offset"] >= 3 * SIZE:
            want = repeats[(b["topic"], b["base_sequence"])]
            got = reference[(b["file"], b["file_position"])]
            assert (got["verdict"], got["explained_by"], got["severity"]) == (
                want["verdict"], want["explained_by"], want["severity"]), b["topic"]


def test_spark_s_window_steps_find_the_same_reuse(spark, with_records, tmp_path):
    """The same log replayed on Spark's window steps (what a Spark Connect session runs) explains each
    repeat as segaudit's window function does."""
    from dataclasses import replace

    import pyarrow.parquet as pq

    from analytics.audit.audit_plan import audit_plan
    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.export import export

    out = str(tmp_path / "out")
    export(None, [str(_log_dir(tmp_path))], out, records=True)
    config = AuditConfig(producer_id_expiration_ms=DAY_MS)
    plan = audit_plan(spark, out, config)
    assert plan.window_function  # so the module's audit replayed with segaudit's window function
    audit(spark, out, config, plan=replace(plan, window_function=False))
    rows = pq.read_table(str(table_dir(out, "batch_verdicts"))).to_pylist()
    repeats, _ = with_records
    assert {(r["topic"], r["base_sequence"]): (r["verdict"], r["explained_by"], r["severity"])
            for r in rows if r["base_offset"] >= 3 * SIZE} == {
        k: (r["verdict"], r["explained_by"], r["severity"]) for k, r in repeats.items()}
    assert repeats[("reuse", 0)]["explained_by"] == "sequence_reuse"
