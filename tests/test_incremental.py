"""Incremental replay: a history replayed in parts, each part after the state the parts before it
left (``producer_state``, ``partition_state``), gets exactly the verdicts and the state of one
replay of the whole history."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import struct
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from analytics.audit.config import AuditConfig, Restart
from analytics.audit.increment import _look_back
from analytics.audit.rules import Prior, replay
from analytics.audit.state import merged
from analytics.audit.tables import per_file
from analytics.spark.columns import with_log_dir
from analytics.spark.session import single_plan_conf
from tests.conftest import REPO
from tests.test_audit_differential import _spark_schema, history
from tests.outs import table_dir

pytestmark = pytest.mark.spark


def _rows(df) -> dict:
    return {(r["file"], r["file_position"]): r.asDict(recursive=True) for r in df.collect()}


def _state(df, key) -> dict:
    return {tuple(r[k] for k in key): r.asDict(recursive=True) for r in df.collect()}


@given(st.lists(st.integers(0, 10**6), min_size=12, max_size=12).flatmap(
    lambda seeds: st.tuples(*[history(f"t{i}") for i in range(len(seeds))])), st.data())
@settings(max_examples=2, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate), suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
def test_a_history_replayed_in_parts_gets_the_verdicts_and_state_of_one_replay(spark, histories, data):
    rows = [r for h in histories for r in h]
    topics = sorted({r["topic"] for r in rows})
    config = AuditConfig(
        profile=data.draw(st.sampled_from(["4.x", "3.9", "2.4", "0.11"])),
        producer_id_expiration_ms=data.draw(st.sampled_from([2_000, None])),
        cleanup_policy={t: "compact" for t in data.draw(st.lists(st.sampled_from(topics), max_size=3))},
        broker_restarts=tuple(Restart(offset=data.draw(st.integers(1, 60)), topic=t) for t in data.draw(
            st.lists(st.sampled_from(topics), max_size=2))),
        range_batches=data.draw(st.sampled_from([250_000, 2])),
    )
    # each history cut at up to two random offsets: up to three parts, replayed one after the other
    cuts = {}
    for h in histories:
        offsets = sorted({r["base_offset"] for r in h})
        cuts[h[0]["topic"]] = sorted(data.draw(st.lists(st.sampled_from(offsets), max_size=2, unique=True)))

    def part(r) -> int:
        return sum(r["base_offset"] > c for c in cuts[r["topic"]])

    schema = _spark_schema()
    whole = replay(spark.createDataFrame(rows, schema=schema), config, held=[])
    want = _rows(whole.verdicts)
    got, prior, earlier, earlier_verdicts = {}, None, [], None
    for n in range(3):
        batches = [r for r in rows if part(r) == n]
        if not batches:
            continue
        new = spark.createDataFrame(batches, schema=schema)
        # the earlier verdicts are read back only where a new batch may repeat one (as an audit decides)
        look_back = prior is not None and _look_back(with_log_dir(new), per_file(earlier_verdicts))
        step = replay(new, config, held=[], prior=None if prior is None else Prior(
            *prior, spark.createDataFrame(earlier, schema=schema), look_back))
        verdicts = step.verdicts.localCheckpoint()
        earlier_verdicts = verdicts if earlier_verdicts is None else earlier_verdicts.unionByName(verdicts)
        got |= _rows(verdicts)
        producers, partitions = step.producer_state, step.partition_state
        if prior is not None:
            producers = merged(prior[0], producers, "producer_state")
            partitions = merged(prior[1], partitions, "partition_state")
        prior = (producers.localCheckpoint(), partitions.localCheckpoint())
        earlier += batches
    assert got.keys() == want.keys()
    assert [k for k in want if got[k] != want[k]] == []
    key = ("log_dir", "topic", "partition")
    for got_state, want_state, keys in ((prior[0], whole.producer_state, (*key, "producer_id")),
                                        (prior[1], whole.partition_state, key)):
        got_rows, want_rows = _state(got_state, keys), _state(want_state, keys)
        assert got_rows.keys() == want_rows.keys()
        assert [(k, got_rows[k], want_rows[k]) for k in want_rows if got_rows[k] != want_rows[k]] == []



def test_the_transactions_of_a_log_in_two_parts_are_those_of_the_whole_log(spark, audited):
    """``transactions_merged`` of the first part's transactions and the rest's verdicts gives the
    transactions of the whole log, at cuts that leave transactions open across the boundary."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from analytics.audit.config import load_config
    from analytics.audit.transactions import transactions, transactions_merged

    names = ("transactions", "transactions-v2", "fenced-zombie")
    verdicts = None
    for name in names:
        v = spark.read.parquet(str(table_dir(audited[name][1], "batch_verdicts")))
        verdicts = v if verdicts is None else verdicts.unionByName(v)
    config = load_config(audited["transactions"][0].truth_dir / "audit.toml")
    export_time = verdicts.agg(F.max("max_timestamp")).first()[0]  # the open transactions: some hanging
    w = Window.partitionBy("file").orderBy("base_offset")
    ranked = verdicts.withColumn("place", F.percent_rank().over(w)).localCheckpoint()
    whole = sorted(map(tuple, transactions(verdicts, config, export_time).collect()), key=repr)
    straddling = 0
    for cut in (0.3, 0.55, 0.8):
        first = ranked.where(F.col("place") <= cut).drop("place")
        rest = ranked.where(F.col("place") > cut).drop("place")
        before = transactions(first, config, export_time).localCheckpoint()
        straddling += before.where(F.col("end_offset").isNull()).join(
            rest.where("is_control").select("topic", "partition", "producer_id"),
            ["topic", "partition", "producer_id"], "left_semi").count()
        got = transactions_merged(before, rest, config, export_time).collect()
        assert sorted(map(tuple, got), key=repr) == whole
    assert straddling > 0  # some transaction open at a cut ends after it


# -- the audit command's --incremental: the tables of a full audit --------------------------------
COMPARED_TABLES = ("batches", "records", "segments", "parse_errors", "batch_verdicts", "record_duplicates", "anomalies", "producer_sessions", "transactions", "snapshot_checks",
                   "producer_state", "partition_state", "producer_files", "file_state")
# Columns that differ by design: which export run read a file into Parquet
UNCOMPARED = {"file_state": ("read_by",)}
# What summary.json says of the tables (the counts an incremental audit adds to the previous audit's)
COMPARED_SUMMARY = ("verdicts", "severities", "transactions", "record_duplicates", "snapshot_checks",
                    "replicated_partitions", "replica_divergence", "export_time_source")


# The settings of an incremental audit of few new batches (``analytics.tuning.FEW_BATCHES``)
TUNED = (*single_plan_conf(1), "spark.sql.inMemoryColumnarStorage.compressed")  # and analytics.audit.audit_plan.HELD_CONF


def _table_rows(spark, out: str, name: str) -> list:
    df = spark.read.parquet(str(table_dir(out, name))).drop(*UNCOMPARED.get(name, ()))
    return sorted((tuple(r) for r in df.select(*sorted(df.columns)).collect()), key=repr)


def _segments(partition: Path) -> list[Path]:
    return sorted(partition.glob("*.log"))


@pytest.fixture(scope="module")
def nights(spark, tmp_path_factory):
    """The sample's log dir on three nights: the first without each partition's last segment (one
    partition's cut inside it instead, at a batch boundary); the second whole (new segments and a
    grown one: every partition continues); on the third, retention has deleted clean-0's first
    segment. OUT is exported and audited on the first night, then incrementally on the next two;
    each night's tables are compared with the night exported and audited whole. Returns
    ``{night: (tables of OUT, tables of the full run, OUT's export manifest, OUT's summary)}`` and
    the count of files night 2 changed."""
    from analytics.audit import job
    from analytics.audit import audit_plan
    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from analytics.export import export
    from analytics.spark.session import settings as settings_of

    root = tmp_path_factory.mktemp("nights")
    logs = root / "logs"  # one log dir, as it was on each night
    shutil.copytree(REPO / "data" / "mixed", logs)
    kept = {}
    for partition in sorted(p for p in logs.iterdir() if p.is_dir()):
        segments = _segments(partition)
        if partition.name == "idle-expiration-0":  # the active segment grows by all but its first batch
            kept[segments[-1]] = data = segments[-1].read_bytes()
            segments[-1].write_bytes(data[:12 + struct.unpack(">i", data[8:12])[0]])
        elif len(segments) > 1:
            kept[segments[-1]] = segments[-1].read_bytes()
            segments[-1].unlink()
    # the transactions are judged at the log's newest timestamp (no export time configured)
    config = dataclasses.replace(load_config(REPO / "data" / "mixed.truth" / "audit.toml"), export_time_ms=None)
    out = str(root / "out")
    export(spark, [str(logs)], out, records=True)
    audit(spark, out, config)
    seen, rests, conf = {}, {}, {}
    for night in (2, 3):
        if night == 2:
            for path, data in kept.items():
                path.write_bytes(data)
        else:
            _segments(logs / "clean-0")[0].unlink()
        full = str(root / f"full-{night}")
        export(spark, [str(logs)], out, records=True, incremental=True)
        before, entered = {key: spark.conf.get(key, None) for key in TUNED}, []
        published = Path(out, "_audit.json").read_text()

        @contextmanager
        def watched(session, values):
            """The settings the audit ran queries with, and whether it had published when it left them."""
            with settings_of(session, values):
                yield
            entered.append((values, Path(out, "_audit.json").read_text() != published))

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(job, "settings", watched)  # the replay and the tables
            patch.setattr(audit_plan, "settings", watched)  # the plan's survey of the new batches
            audit(spark, out, config, incremental=True)
        conf[night] = entered, before, {key: spark.conf.get(key, None) for key in TUNED}
        export(None, [str(logs)], full, records=True)
        audit(spark, full, config)
        seen[night] = ({t: _table_rows(spark, out, t) for t in COMPARED_TABLES},
                       {t: _table_rows(spark, full, t) for t in COMPARED_TABLES},
                       json.loads(Path(out, "_export.json").read_text()),
                       json.loads(Path(out, "summary.json").read_text()),
                       json.loads(Path(full, "summary.json").read_text()))
        rests[night] = _rests(out, full, seen[night][2])
    return seen, len(kept), rests, conf


def _rests(out: str, full: str, manifest: dict) -> dict:
    """Per file with several reads in OUT's export: its reads, the positions of the batches in the
    Parquet files of the reads after the first, and of all its batches in the full export."""
    import pyarrow.dataset as ds

    def positions(folder, path, names=None):
        files = [str(f) for f in table_dir(folder, "batches").rglob("part-*.parquet") if names is None or f.name in names]
        table = ds.dataset(files, format="parquet").to_table(columns=["file", "file_position"]) if files else None
        return sorted(p for f, p in zip(*(table.column(c).to_pylist() for c in ("file", "file_position")))
                      if f == path) if table is not None else []

    return {path: (entry["parts"], positions(out, path, {f"part-{p['name']}.parquet" for p in entry["parts"][1:]}),
                   positions(full, path))
            for path, entry in manifest["segment_files"].items() if "parts" in entry}


@pytest.mark.parametrize("night", [2, 3])
@pytest.mark.parametrize("table", COMPARED_TABLES)
def test_an_incremental_audit_writes_the_tables_of_a_full_one(nights, table, night):
    got, want, _, _, _ = nights[0][night]
    assert got[table] == want[table]


@pytest.mark.parametrize("night", [2, 3])
def test_an_incremental_audit_of_few_new_batches_plans_each_query_once_and_puts_the_settings_back(spark, nights, night):
    """Night 2 (every history continues) ran every query planned once, as wide as the cores, to its
    last table, and its tables are a full audit's (above); night 3 (retention: a history replayed
    whole) only until the replay: its plan's survey of the new batches. Both left the session as it was."""
    from analytics.audit.audit_plan import HELD_CONF

    entered, before, after = nights[3][night]
    planned = [(values, left) for values, left in entered if values != HELD_CONF]
    assert len(planned) == (2 if night == 2 else 1)  # the survey; then (night 2) the replay to the last table
    single = single_plan_conf(spark.sparkContext.defaultParallelism)
    assert all({k: v for k, v in values.items() if k not in HELD_CONF} == single for values, _ in planned)
    assert planned[-1][1] == (night == 2)
    assert sum(HELD_CONF.items() <= values.items() for values, _ in entered) == 1  # the replay holds its rows so
    assert after == before


def test_settings_are_put_back_as_they_were_set_or_unset(spark):
    from analytics.spark.session import settings

    keys = ("spark.sql.shuffle.partitions", "spark.sql.files.minPartitionNum")
    session = {key: spark.conf.get(key, None) for key in keys}  # the test session's, restored at the end
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    spark.conf.unset("spark.sql.files.minPartitionNum")
    before = spark.conf.get("spark.sql.shuffle.partitions"), spark.conf.get("spark.sql.files.minPartitionNum", None)
    try:
        with settings(spark, single_plan_conf(3)):
            assert spark.conf.get("spark.sql.shuffle.partitions") == spark.conf.get("spark.sql.files.minPartitionNum") == "3"
        assert (spark.conf.get("spark.sql.shuffle.partitions"), spark.conf.get("spark.sql.files.minPartitionNum", None)) \
            == before == ("7", None)
    finally:
        for key, value in session.items():
            spark.conf.set(key, value) if value is not None else spark.conf.unset(key)


@pytest.mark.parametrize("night", [2, 3])
def test_an_incremental_audit_sums_up_what_a_full_one_does(nights, night):
    """The counts of summary.json, and the export time the transactions were judged at: on night 2 the
    previous audit's counts plus the new batches', on night 3 counted again."""
    _, _, _, got, want = nights[0][night]
    assert {k: got[k] for k in COMPARED_SUMMARY} == {k: want[k] for k in COMPARED_SUMMARY}
    assert got["configuration"]["export_time_ms"] == want["configuration"]["export_time_ms"]
    assert got["verdicts"]["OK"] > 0 and got["export_time_source"] == "log"


def test_every_partition_continued_after_appends_and_all_but_the_retained_one_after_retention(nights):
    seen, *_ = nights
    histories = len(seen[2][1]["partition_state"])
    assert seen[2][3]["incremental"]["continued_histories"] == histories
    # clean-0, whose first segment retention deleted, is replayed whole
    assert seen[3][3]["incremental"]["continued_histories"] == histories - 1


def test_the_incremental_audit_scanned_only_the_segment_files_read_since(nights):
    """Night 2 scans the new and grown segments only; night 3, after retention alone, none (clean-0
    is read whole, as a history that does not continue)."""
    seen, grown_or_new, *_ = nights
    assert seen[2][3]["incremental"]["files_read"] == grown_or_new
    assert seen[3][3]["incremental"]["files_read"] == 0


def test_the_incremental_export_read_only_the_new_and_grown_segments(nights):
    seen, grown_or_new, *_ = nights
    manifest = seen[2][2]
    assert manifest["incremental"]["files_read"] == grown_or_new
    assert manifest["incremental"]["files_kept"] == manifest["files"] - grown_or_new
    assert seen[3][2]["incremental"]["files_read"] == 0  # retention only removed a file


def test_a_grown_segment_is_read_from_where_the_previous_read_ended(nights):
    """The active segment that grew on night 2 (idle-expiration-0's: one batch on night 1) is read
    only after the bytes night 1 read: its manifest entry lists both reads, and the Parquet files of
    the second hold exactly the batches after the first read's size, at their positions in the whole
    file. On night 3 (unchanged) both reads are kept."""
    seen, _, rests, _ = nights
    assert seen[2][2]["incremental"]["files_grown"] == 1
    (path, (reads, rest, whole)), = rests[2].items()
    assert "idle-expiration-0" in path
    head, later = reads
    assert head["read_by"] == seen[2][2]["incremental"]["continued_export"]
    assert later["read_by"] == seen[2][2]["run_id"] and later["size"] == seen[2][2]["segment_files"][path]["size"]
    assert len(whole) > 2 and rest == [p for p in whole if p >= head["size"]] == whole[1:]
    assert seen[3][2]["incremental"]["files_grown"] == 0 and rests[3][path][:2] == (reads, rest)


def test_every_segment_read_is_fingerprinted_by_its_task_as_the_driver_would(nights):
    """``segment_files`` holds, for every segment, the size and edge CRC its task took while reading it
    (the ``segments`` row's ``edge_crc``; a kept file's as its earlier task took them), equal to a
    fingerprint taken apart from the files as they are on the last night."""
    from analytics import reuse

    seen, *_ = nights
    for night in (2, 3):
        prints = seen[night][2]["segment_files"]
        # segments rows, columns sorted by name: base_offset, batch_count, edge_crc, file, ..., size_bytes (7), ...
        rows = {row[3]: (row[7], row[2]) for row in seen[night][0]["segments"] if row[3].endswith(".log")}
        assert rows and {path: (e["size"], e["crc"]) for path, e in prints.items()} == rows
    for path, entry in seen[3][2]["segment_files"].items():
        assert (entry["size"], entry["crc"]) == reuse.fingerprint(path)
