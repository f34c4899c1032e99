"""The scenario generator: real bytes that read back exactly as labelled, deterministic, with ground truth."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analytics.generate import generate, truth_dir_for
from analytics.generate.scenarios import SCENARIO_NAMES
from analytics.kafka import layout as L
from analytics.kafka.discovery import discover
from analytics.kafka.logdir import read_log_dirs
from analytics.kafka.sidecars import read_sidecar


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Every scenario generated once (seed 0), with what the reader makes of it."""
    root = tmp_path_factory.mktemp("scenarios")
    out = {}
    for name in SCENARIO_NAMES:
        result = generate(root / name, name, seed=0)
        truth = {t: pq.read_table(result.truth_dir / f"{t}.parquet").to_pylist()
                 for t in ("batches", "transactions", "record_duplicates", "parse_errors")}
        out[name] = (result, read_log_dirs([result.log_dir], records=True), truth)
    return out


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_the_reader_finds_exactly_the_labelled_batches_and_parse_errors(generated, name):
    result, tables, truth = generated[name]
    batches = tables.table("batches").to_pylist()

    def rel(file: str) -> str:
        return Path(file).relative_to(result.log_dir).as_posix()

    got = {(rel(b["file"]), b["file_position"], b["base_offset"], b["last_offset"], b["crc_valid"]) for b in batches}
    want = {(t["file"], t["file_position"], t["base_offset"], t["last_offset"], t["verdict"] != "CORRUPT")
            for t in truth["batches"]}
    assert got == want and len(batches) == len(truth["batches"])
    errors = {(rel(e.file), e.file_position, e.error_kind, e.bytes_affected) for e in tables.parse_errors}
    assert errors == {(e["file"], e["file_position"], e["error_kind"], e["bytes_affected"]) for e in truth["parse_errors"]}
    for seg in tables.segments:  # and every byte is accounted for
        lost = sum(e.bytes_affected for e in tables.parse_errors if e.file == seg.file)
        assert seg.valid_bytes + lost == seg.size_bytes


# Verdict counts per scenario at seed 0: what each scenario is built to show.
EXPECTED_VERDICTS = {
    "clean": {"OK": 60},
    "lost-acks": {"OK": 40},
    "plain-retries": {"NON_IDEMPOTENT": 33},
    "missed-dedup": {"OK": 30, "DUPLICATE": 1},
    "lost-batch": {"OK": 29, "SEQUENCE_GAP": 1},
    "restart-new-pid": {"OK": 30},
    "kip360-bump": {"OK": 44, "EPOCH_BUMP": 4},
    "fenced-zombie": {"OK": 8, "EPOCH_BUMP": 1, "CONTROL_MARKER": 3, "FENCED_ZOMBIE_WRITE": 1},
    "idle-expiration": {"OK": 40, "SEQUENCE_GAP": 1},
    "state-loss-retry": {"OK": 17, "DUPLICATE": 1},
    # after the stale copy (or overlap) the producer goes on from its highest sequence: OK, not a gap
    "stale-retry": {"OK": 30, "DUPLICATE": 1, "SEQUENCE_REGRESSION": 1},
    "transactions": {"OK": 42, "CONTROL_MARKER": 20},
    "transactions-v2": {"OK": 12, "CONTROL_MARKER": 6},
    "sequence-wrap": {"OK": 19, "FIRST_SEEN_NONZERO": 1},  # the first visible batch spans the wrap
    "corrupt-crc": {"OK": 20, "CORRUPT": 2},
    "torn-tails": {"OK": 30},
    "legacy-magic1": {"OK": 10, "NON_IDEMPOTENT": 20},
    "every-codec": {"OK": 50},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_VERDICTS))
def test_each_scenario_shows_what_it_is_built_to_show(generated, name):
    _, _, truth = generated[name]
    assert Counter(t["verdict"] for t in truth["batches"]) == EXPECTED_VERDICTS[name]


def _anomalies(truth) -> list[tuple]:
    return sorted((t["verdict"], t["severity"], t["explained_by"], t["fault"]) for t in truth["batches"]
                  if t["severity"] not in ("ok", "info"))


def test_faults_are_violations_and_legitimate_breaks_are_explained(generated):
    assert _anomalies(generated["missed-dedup"][2]) == [("DUPLICATE", "violation", None, "missed_dedup")]
    assert _anomalies(generated["lost-batch"][2]) == [("SEQUENCE_GAP", "violation", None, "lost_batch")]
    assert _anomalies(generated["idle-expiration"][2]) == [("SEQUENCE_GAP", "explained", "producer_expiration", None)]
    assert _anomalies(generated["state-loss-retry"][2]) == [("DUPLICATE", "explained", "state_loss", None)]
    assert _anomalies(generated["stale-retry"][2]) == [("DUPLICATE", "explained", "state_loss", None),
                                                        ("SEQUENCE_REGRESSION", "explained", "state_loss", None)]
    assert _anomalies(generated["fenced-zombie"][2]) == [("FENCED_ZOMBIE_WRITE", "explained", "producer_expiration", None)]
    assert _anomalies(generated["sequence-wrap"][2]) == [("FIRST_SEEN_NONZERO", "explained", "partial_history", None)]
    assert _anomalies(generated["corrupt-crc"][2]) == [("CORRUPT", "violation", None, "corrupt")] * 2
    assert {a[:3] for a in _anomalies(generated["retention-head"][2])} == {("FIRST_SEEN_NONZERO", "explained", "partial_history")}
    compacted = {a[:3] for a in _anomalies(generated["compacted"][2])}
    # a gap between two surviving batches is the cleaner's; a producer first seen mid-sequence lost its head
    assert compacted == {("SEQUENCE_GAP", "explained", "compaction"), ("FIRST_SEEN_NONZERO", "explained", "partial_history")}


def test_after_a_stale_copy_the_producer_goes_on_from_its_highest_sequence(generated):
    """The batch after the copy of an older batch (or an overlapping range) continues the sequence the
    producer had reached, not the copy's: no sequence is missing, so it is in sequence."""
    _, tables, truth = generated["stale-retry"]
    labels = {(t["partition"], t["base_offset"]): t["verdict"] for t in truth["batches"]}
    for partition in (0, 1):
        rows = [b for b in tables.table("batches").to_pylist() if b["partition"] == partition]
        [i] = [i for i, b in enumerate(rows) if labels[(partition, b["base_offset"])] != "OK"]
        stale, after = rows[i], rows[i + 1]
        assert stale["base_sequence"] <= rows[i - 1]["last_sequence"]  # a copy or overlap of written sequences
        assert after["base_sequence"] == max(b["last_sequence"] for b in rows[:i]) + 1 > stale["last_sequence"] + 1
        assert labels[(partition, after["base_offset"])] == "OK"


def test_a_sequence_gap_explained_by_expiration_really_idled_past_it(generated):
    _, tables, truth = generated["idle-expiration"]
    [gap] = [t for t in truth["batches"] if t["verdict"] == "SEQUENCE_GAP"]
    rows = [b for b in tables.table("batches").to_pylist() if b["producer_id"] == gap["producer_id"]]
    i = [b["base_offset"] for b in rows].index(gap["base_offset"])
    assert rows[i]["max_timestamp"] - rows[i - 1]["max_timestamp"] >= 86_400_000
    assert rows[i]["base_sequence"] > rows[i - 1]["last_sequence"] + 1


def test_transactions_have_every_status(generated):
    _, tables, truth = generated["transactions"]
    assert Counter(t["status"] for t in truth["transactions"]) == {"COMMITTED": 10, "ABORTED": 10, "HANGING": 1, "OPEN": 1}
    # the .txnindex lists exactly the aborted transactions, each ending at its ABORT marker
    aborted = {(t["partition"], t["producer_id"], t["first_offset"], t["end_offset"]) for t in truth["transactions"] if t["status"] == "ABORTED"}
    indexed = {(a.partition, a.producer_id, a.first_offset, a.last_offset) for a in tables.aborted_transactions}
    assert indexed == aborted
    markers = {(b["partition"], b["base_offset"]) for b in tables.table("batches").to_pylist() if b["control_type"] == "ABORT"}
    assert {(p, last) for p, _, _, last in aborted} == markers


def test_record_duplicates_are_the_retried_records(generated):
    _, tables, truth = generated["plain-retries"]
    dups = truth["record_duplicates"]
    assert len(dups) == 3  # three retries of single-record batches
    records = {r["offset"]: (r["key"], r["value"]) for r in tables.table("records").to_pylist()}
    assert all(records[d["offset"]] == records[d["first_offset"]] and d["first_offset"] < d["offset"] for d in dups)
    assert len(generated["missed-dedup"][2]["record_duplicates"]) >= 1
    assert generated["clean"][2]["record_duplicates"] == []


def test_snapshots_hold_each_producers_last_batch(generated):
    result, tables, _ = generated["clean"]
    batches = tables.table("batches").to_pylist()
    for log_dir in discover(result.log_dir):
        for part in log_dir.partitions:
            rows = [b for b in batches if b["partition"] == part.partition]
            end = rows[-1]["last_offset"] + 1
            last_snapshot = part.snapshots[-1]
            assert last_snapshot.base_offset == end  # written at shutdown, at the log end offset
            entries = read_sidecar(last_snapshot.path, topic=part.topic, partition=part.partition).rows
            for e in entries:
                last = [b for b in rows if b["producer_id"] == e.producer_id][-1]
                assert (e.last_offset, e.last_sequence, e.producer_epoch) == (last["last_offset"], last["last_sequence"], last["producer_epoch"])
            assert len(part.segments) > 1 and len(part.snapshots) == len(part.segments)  # one per roll + shutdown


def test_retention_moves_the_log_start_and_drops_old_snapshots(generated):
    result, tables, _ = generated["retention-head"]
    [lso] = [c.offset for c in tables.checkpoints if c.checkpoint == "log-start-offset"]
    [part] = discover(result.log_dir)[0].partitions
    assert lso > 0 and part.segments[0].base_offset == lso
    assert all(s.base_offset >= lso for s in part.snapshots)
    assert min(b["base_offset"] for b in tables.table("batches").to_pylist()) == lso


def test_compaction_leaves_offset_holes_and_empty_headers(generated):
    _, tables, _ = generated["compacted"]
    batches = tables.table("batches").to_pylist()
    holes = sum(b["base_offset"] - a["last_offset"] - 1 for a, b in zip(batches, batches[1:]))
    assert holes > 0
    assert any(b["record_count"] < b["last_offset"] - b["base_offset"] + 1 for b in batches)
    assert [c.checkpoint for c in tables.checkpoints if c.topic == "compacted"].count("cleaner-offset") == 1


def test_torn_and_zero_filled_tails(generated):
    _, tables, _ = generated["torn-tails"]
    assert sorted((e.partition, e.error_kind) for e in tables.parse_errors) == [(0, "truncated"), (1, "zero_filled")]


def test_legacy_segment_then_v2(generated):
    _, tables, _ = generated["legacy-magic1"]
    batches = tables.table("batches").to_pylist()
    assert {b["magic"] for b in batches} == {1, 2}
    assert {b["compression"] for b in batches if b["magic"] == 1} == {"none", "gzip"}


def test_every_codec_is_written(generated):
    _, tables, _ = generated["every-codec"]
    assert set(tables.table("batches").column("compression").to_pylist()) == set(L.CODEC_NAMES)


def test_sequence_wrap_crosses_int_max(generated):
    _, tables, _ = generated["sequence-wrap"]
    batches = tables.table("batches").to_pylist()
    assert (batches[0]["base_sequence"], batches[0]["last_sequence"]) == (L.INT_MAX - 2, 1)  # spans the wrap
    assert batches[0]["base_offset"] == 3_000_000_000
    assert all(b["base_sequence"] == a["last_sequence"] + 1 for a, b in zip(batches, batches[1:]))


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    def files(root: Path) -> dict:
        return {p.relative_to(root.parent): p.read_bytes() for d in (root, truth_dir_for(root)) for p in sorted(d.rglob("*")) if p.is_file()}

    a = generate(tmp_path / "a" / "logs", "mixed", seed=3)
    b = generate(tmp_path / "b" / "logs", "mixed", seed=3)
    c = generate(tmp_path / "c" / "logs", "mixed", seed=4)
    fa, fb, fc = files(a.log_dir), files(b.log_dir), files(c.log_dir)
    assert fa.keys() == fb.keys() and all(fa[k] == fb[k] for k in fa)
    assert any(fa[k] != fc.get(k) for k in fa)


def test_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("keep me")
    with pytest.raises(FileExistsError):
        generate(tmp_path / "x", "clean")
    assert (tmp_path / "x" / "file").read_text() == "keep me"


def test_scale_multiplies_the_bulk(tmp_path):
    result = generate(tmp_path / "big", "clean", scale=5)
    assert result.batches == 300 and result.verdicts == {"OK": 300}


def test_audit_config_beside_the_log_parses_and_names_the_evidence(generated):
    import tomllib

    result = generated["mixed"][0]
    config = tomllib.loads((result.truth_dir / "audit.toml").read_text())
    assert config["producer_id_expiration_ms"] == 86_400_000 and config["profile"] == "4.0"
    assert config["cleanup_policy"] == {"compacted": "compact"}
    restarts = config["broker_restarts"]
    assert [(r["topic"], r["partition"]) for r in restarts] == [
        ("state-loss-retry", 0), ("stale-retry", 0), ("stale-retry", 0), ("stale-retry", 1), ("stale-retry", 1)]
    assert all(r["time_ms"] > 0 and r["offset"] > 0 for r in restarts)
    assert config["export_time_ms"] >= max(r["time_ms"] for r in restarts)
    # every scenario's configuration names the simulated brokers' expiration, whatever the profile's default
    assert tomllib.loads((generated["lost-batch"][0].truth_dir / "audit.toml").read_text())["producer_id_expiration_ms"] \
        == 86_400_000


@pytest.mark.parametrize("name", ["clean", "transactions", "kip360-bump", "every-codec"])
def test_every_snapshot_holds_only_what_lies_below_its_offset(generated, name):
    """A snapshot at offset S is the state up to but excluding S: the roll happens before the append."""
    result, tables, _ = generated[name]
    assert tables.producer_snapshots
    for e in tables.producer_snapshots:
        assert e.producer_id is None or e.last_offset < e.snapshot_offset, e  # None: an empty file's marker
