"""The export job on a real local Spark: tables equal the pure reader's, bad input is rows, runs are atomic."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from analytics.contract import EXPORT, MANIFESTS
from analytics.export import export
from analytics.publish import published, read_manifest

MANIFEST = MANIFESTS[EXPORT]
from analytics.generate import generate
from analytics.kafka.dumplog import dump_segment
from analytics.contract import READ_SCHEMAS as TABLE_SCHEMAS
from analytics.kafka.logdir import read_log_dirs
from tests.commands import assert_own_lines
from tests.conftest import REPO
from tests.outs import table_dir

pytestmark = pytest.mark.spark
SAMPLE = REPO / "data" / "mixed"
COMPARED = ("batches", "segments", "parse_errors", "producer_snapshots", "aborted_transactions", "leader_epochs",
            "checkpoints", "partition_metadata")


def _rows(out: str, table: str) -> list[tuple]:
    names = TABLE_SCHEMAS[table].names
    t = pq.read_table(str(table_dir(out, table)))  # partition folders (topic=...) come back as a column
    return sorted(tuple(r[n] for n in names) for r in t.to_pylist())


def _expected(tables, table: str) -> list[tuple]:
    names = TABLE_SCHEMAS[table].names
    return sorted(tuple(r[n] for n in names) for r in tables.table(table).to_pylist())


@pytest.fixture(scope="module")
def sample_export(spark, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("export") / "out")
    result = export(spark, [str(SAMPLE)], out, records=True)
    return out, result


def test_every_table_equals_the_pure_reader_row_for_row(sample_export):
    out, _ = sample_export
    tables = read_log_dirs([SAMPLE.resolve()], records=True)
    for table in COMPARED:
        assert _rows(out, table) == _expected(tables, table), table
    exported = pq.read_table(str(table_dir(out, "records"))).to_pylist()
    raw = tables.table("records").to_pylist()
    key = lambda r: (r["topic"], r["partition"], r["offset"])  # noqa: E731
    assert sorted(map(key, exported)) == sorted(map(key, raw))
    by_key = {key(r): r for r in raw}
    for r in exported:
        src = by_key[key(r)]
        assert r["key"] == src["key"] and r["value_size"] == (len(src["value"]) if src["value"] is not None else -1)
        assert (r["key_hash"] is None) == (src["key"] is None) and (r["value_hash"] is None) == (src["value"] is None)
    hashes = {}
    for r in exported:  # equal values hash equally, different ones (here) do not collide
        if r["value_hash"] is not None:
            hashes.setdefault(r["value_hash"], set()).add(by_key[key(r)]["value"])
    assert all(len(v) == 1 for v in hashes.values())


def test_the_manifest_is_written_last_and_names_every_table(sample_export):
    out, result = sample_export
    manifest = read_manifest(out, EXPORT)
    assert manifest["run_id"] == result.run_id and manifest["files"] == 37
    assert set(manifest["rows"]) == {p.name for p in Path(out).iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert manifest["rows"]["batches"] == 670 and manifest["rows"]["parse_errors"] == 4
    assert [p.name for p in Path(out).iterdir() if p.name.startswith(".")] == []  # no temporary link left behind
    assert os.listdir(Path(out, "_runs")) == [result.run_id]  # the one run, nothing else
    assert {p.name for p in table_dir(out, "batches").iterdir() if p.is_dir()} >= {"topic=clean", "topic=torn-tails"}


def test_log_start_offsets_come_from_the_checkpoint(sample_export):
    out, _ = sample_export
    starts = {(r["topic"], r["partition"]): r["log_start_offset"] for r in pq.read_table(str(table_dir(out, "log_start_offsets"))).to_pylist()}
    assert starts[("retention-head", 0)] > 0 and starts[("clean", 0)] == 0
    # each row names its checkpoint file, whose folder is the log dir the offset belongs to
    files = {r["file"] for r in pq.read_table(str(table_dir(out, "log_start_offsets"))).to_pylist()}
    assert files and all(f.endswith("/log-start-offset-checkpoint") for f in files)


def test_bad_files_are_parse_errors_and_the_rest_exports(spark, tmp_path):
    logs = tmp_path / "logs"
    generate(logs, "corrupt-crc")
    generate(tmp_path / "tails", "torn-tails")
    for part in (tmp_path / "tails").iterdir():
        if part.is_dir():
            shutil.move(str(part), logs / part.name)
    (logs / "corrupt-crc-0" / "notes.txt").write_text("not kafka")
    (logs / "corrupt-crc-0" / "00000000000000000000.log.deleted").write_bytes(b"x" * 10)
    out = str(tmp_path / "out")
    export(spark, [str(logs)], out)
    tables = read_log_dirs([logs])
    assert _rows(out, "batches") == _expected(tables, "batches")
    kinds = sorted(r[4] for r in _rows(out, "parse_errors"))
    assert kinds == ["crc_mismatch", "crc_mismatch", "temporary_file", "truncated", "unknown_file", "zero_filled"]
    assert _rows(out, "parse_errors") == _expected(tables, "parse_errors")


def test_a_rerun_replaces_the_output_with_the_same_rows(spark, sample_export, tmp_path):
    out = str(tmp_path / "out")
    first = export(spark, [str(SAMPLE)], out, records=True)  # its records table must go with it
    before = {t: _rows(out, t) for t in COMPARED}
    assert (Path(out) / "records").is_dir()
    second = export(spark, [str(SAMPLE)], out)
    assert second.run_id != first.run_id and read_manifest(out, EXPORT)["run_id"] == second.run_id
    assert {t: _rows(out, t) for t in COMPARED} == before
    assert not published(out).has("records")  # and its Delta table, for other engines, holds no row
    assert DeltaTable(str(Path(out) / "records")).to_pyarrow_table().num_rows == 0


def test_a_failed_run_leaves_the_previous_output_complete(spark, tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    export(spark, [str(SAMPLE)], out)
    manifest = read_manifest(out, EXPORT)
    import analytics.export as ex

    def boom(*args, **kwargs):
        raise RuntimeError("the disk filled up")

    # the row counts from the staged tables' footers: after every table is staged, before the swap
    monkeypatch.setattr(ex.reuse, "parquet_rows", boom)
    with pytest.raises(RuntimeError):
        export(spark, [str(SAMPLE)], out)
    assert read_manifest(out, EXPORT) == manifest
    assert [p.name for p in Path(out).iterdir() if p.name.startswith(".")] == []
    assert _rows(out, "segments")


def test_an_output_without_manifest_is_not_an_export(tmp_path):
    from analytics.errors import StageMissing

    (tmp_path / "batches").mkdir()
    with pytest.raises(StageMissing, match=MANIFEST):
        read_manifest(str(tmp_path), EXPORT)


def test_dump_log_text_exports_the_same_batches(spark, sample_export, tmp_path):
    out, _ = sample_export
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    for i, segment in enumerate(sorted(SAMPLE.rglob("*.log"))):
        (dumps / f"dump-{i:03d}.txt").write_text("\n".join(dump_segment(str(segment.resolve()))) + "\n")
    dump_out = str(tmp_path / "dump-out")
    export(spark, [str(dumps)], dump_out, input_format="dump-log")
    drop = TABLE_SCHEMAS["batches"].names.index("base_timestamp")

    def comparable(rows):
        return sorted(r[:drop] + r[drop + 1:] for r in rows)

    assert comparable(_rows(dump_out, "batches")) == comparable(_rows(out, "batches"))
    errors = _rows(dump_out, "parse_errors")  # a dump tells a zero-filled tail from a torn one by nothing
    assert sorted((r[4], r[6]) for r in errors) == sorted(
        ("truncated" if r[4] == "zero_filled" else r[4], r[6]) for r in _rows(out, "parse_errors"))


def test_cli_export_prints_row_counts_and_rejects_missing_input(spark, tmp_path, capsys):
    from analytics.cli import main

    assert main(["export", str(SAMPLE), "--out", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    assert_own_lines(err)
    assert "batches" in out
    assert main(["export", str(tmp_path / "missing"), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "no such file" in err
    (tmp_path / "empty").mkdir()
    assert main(["export", str(tmp_path / "empty"), "--out", str(tmp_path / "o3")]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "no Kafka segments" in err


@pytest.mark.corpus
def test_corpus_export_equals_the_pure_reader(corpus_dir, corpus_export):
    result, out = corpus_export
    assert result.files == 241 and result.rows["batches"] == 91_590 and result.rows["parse_errors"] == 0
    tables = read_log_dirs([corpus_dir])
    for table in ("batches", "segments", "producer_snapshots"):
        assert _rows(out, table) == _expected(tables, table), table
    assert json.loads((Path(out) / MANIFEST).read_text())["rows"]["producer_snapshots"] == len(tables.producer_snapshots)


def test_a_small_local_export_runs_in_the_commands_own_process_and_writes_what_spark_writes(spark, tmp_path):
    """``segaudit export`` of a small local log dir runs the data source's tasks in its own process:
    every read happened in the command's process, with no JVM among its parents (Spark's tasks run
    in Python workers under the JVM); the tables are those an export in Spark writes."""
    import subprocess
    import sys

    task_log, out, in_spark = tmp_path / "tasks.jsonl", tmp_path / "out", tmp_path / "spark"
    proc = subprocess.run([sys.executable, "-m", "analytics", "export", str(SAMPLE), "--out", str(out), "--records"],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "SEGAUDIT_TASK_LOG": str(task_log)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_own_lines(proc.stderr)
    reads = [json.loads(line) for line in task_log.read_text().splitlines()]
    assert {r["table"] for r in reads} == {"export-segments", "export-sidecars"}
    assert sorted(r["file"] for r in reads if r["table"] == "export-segments") == sorted(map(str, SAMPLE.rglob("*.log")))
    assert len({r["pid"] for r in reads}) == 1  # one process read every file: the command's own
    for r in reads:
        assert "-m analytics export" in r["ancestry"][0], r["ancestry"]
        assert not any("java" in cmdline for cmdline in r["ancestry"]), r["ancestry"]
    export(spark, [str(SAMPLE)], str(in_spark), records=True)
    manifests = [json.loads(Path(o, MANIFESTS[EXPORT]).read_text()) for o in (out, in_spark)]
    assert manifests[0]["rows"] == manifests[1]["rows"] and manifests[0]["rows"]["batches"] > 0
    for table in sorted(manifests[1]["rows"]):
        got, want = (pq.read_table(str(table_dir(o, table))) for o in (out, in_spark))
        columns = sorted(c for c in want.column_names if c in got.column_names)
        assert sorted(map(repr, got.select(columns).to_pylist())) == sorted(map(repr, want.select(columns).to_pylist())), table
