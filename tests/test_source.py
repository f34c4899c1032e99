"""The ``kafka-segments`` data source: its options choose a task type, plain reads equal the pure
reader and write nothing, and the values it ships to executors survive pickling."""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import sys
from pathlib import Path

import pytest

from analytics.contract import OUT_SCHEMAS, SIDECAR_TABLES
from analytics.kafka.dumplog import dump_segment
from analytics.kafka.logdir import read_log_dirs
from analytics.kafka.model import SegmentInfo
from analytics.spark.files import FileGroup, FileTask
from analytics.spark.source import driver_cannot_start_python, load, task_for
from analytics.spark.decoders import BinarySegments, DumpLogText
from analytics.spark.tasks import SegmentExportTask, SegmentTask, SidecarExportTask, SidecarTask
from tests.conftest import REPO

SAMPLE = (REPO / "data" / "mixed").resolve()
PLAIN_TASKS = [SegmentTask("batches"), SegmentTask("records"), SegmentTask("segments"),
               *(SidecarTask(t) for t in SIDECAR_TABLES)]


def test_a_file_task_round_trips_through_pickle():
    task = FileTask(7, "/logs/orders-3/00000000000000001234.log", "orders", 3, 1234, 4096)
    copy = pickle.loads(pickle.dumps(task))
    assert copy == task and hash(copy) == hash(task) and copy.output_name == task.output_name
    fields = [f.name for f in dataclasses.fields(FileTask)]
    assert fields == ["index", "path", "topic", "partition", "base_offset", "size", "after", "after_name"]
    # the rest of a grown segment: named after its first read and where the rest starts
    head = SegmentInfo("orders", 3, task.path, 1234, 1000, 1000, 9, 1234, 1300, "ok", 77)
    rest = pickle.loads(pickle.dumps(dataclasses.replace(task, size=3096, after=head, after_name=task.output_name)))
    assert rest.after == head and rest.output_name == f"{task.output_name}+1000"
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.size = 0  # type: ignore[misc]
    group = pickle.loads(pickle.dumps(FileGroup(2, [task, dataclasses.replace(task, index=8)])))
    assert group.value == 2 and [f.index for f in group.files] == [7, 8]


WRITING_TASKS = [SegmentExportTask("/out", "/errors", BinarySegments(window=1 << 20), records=True),
                 SidecarExportTask("/out", "/errors")]


@pytest.mark.parametrize("task", [*PLAIN_TASKS, SegmentTask("batches", DumpLogText()), *WRITING_TASKS], ids=repr)
def test_every_task_type_round_trips_through_pickle(task):
    assert pickle.loads(pickle.dumps(task)) == task


def test_the_options_choose_the_task_type():
    written = {"tablesOut": "/o", "errorsOut": "/e"}
    assert task_for({}) == SegmentTask("batches", BinarySegments())
    assert task_for({"table": "records", "WINDOWBYTES": "4096"}) == SegmentTask("records", BinarySegments(window=4096))
    assert task_for({"table": "segments", "inputFormat": "dump-log"}) == SegmentTask("segments", DumpLogText())
    assert task_for({"table": "leader_epochs"}) == SidecarTask("leader_epochs")
    assert task_for({"table": "export-segments", "records": "true", **written}) == (
        SegmentExportTask("/o", "/e", BinarySegments(), records=True))
    assert task_for({"table": "export-sidecars", "tablesout": "/o", "errorsout": "/e"}) == SidecarExportTask("/o", "/e")


@pytest.mark.parametrize("options, message", [
    ({"table": "sidecars"}, "table must be one of"),
    ({"inputFormat": "json"}, "inputFormat must be one of"),
    ({"table": "batches", "tablesOut": "/o"}, "tablesOut: options of the tables that write"),
    ({"table": "checkpoints", "errorsOut": "/e", "records": "true"}, "errorsOut, records: options of the tables"),
    ({"table": "producer_snapshots", "inputFormat": "dump-log"}, "dump-log text holds"),
    ({"table": "export-segments", "errorsOut": "/e"}, "needs the tablesOut option"),
    ({"table": "export-segments", "tablesOut": "/o", "errorsOut": "/e", "records": "yes"}, "records must be true"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        task_for(options)


class _Writes:
    """Records, while on, every file-system change Python's audit events announce: opens for
    writing, directories made, files renamed or removed."""

    EVENTS = ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.truncate", "os.symlink", "os.link",
              "shutil.copyfile", "shutil.move", "shutil.rmtree")
    WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    seen: list | None = None
    installed = False

    @classmethod
    def hook(cls, event: str, args: tuple) -> None:
        if cls.seen is None:
            return
        if event == "open":
            path, mode, flags = args
            if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (flags or 0) & cls.WRITE_FLAGS:
                cls.seen.append((event, path))
        elif event in cls.EVENTS:
            cls.seen.append((event, args[0]))

    @classmethod
    def during(cls, action) -> list:
        if not cls.installed:
            sys.addaudithook(cls.hook)  # stays for the process: off unless `seen` is a list
            cls.installed = True
        cls.seen = []
        try:
            action()
            return cls.seen
        finally:
            cls.seen = None


def _run(task, paths) -> int:
    return sum(batch.num_rows for file in task.plan(paths) for batch in task.read(file))


@pytest.mark.parametrize("task", PLAIN_TASKS, ids=repr)
def test_a_plain_read_task_writes_nothing_anywhere(task):
    _run(task, [str(SAMPLE)])  # once unwatched: the first run imports modules (and may write their bytecode)
    rows = []
    assert _Writes.during(lambda: rows.append(_run(task, [str(SAMPLE)]))) == []
    assert rows[0] > 0


def test_the_write_watch_sees_an_export_task_write(tmp_path):
    """The watch above can fail: the same files read by the export's task are seen writing."""
    task = SegmentExportTask(str(tmp_path / "tables"), str(tmp_path / "errors"))
    writes = _Writes.during(lambda: _run(task, [str(SAMPLE / "clean-0")]))
    assert {event for event, _ in writes} >= {"os.mkdir", "os.rename"}


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _rows(table, names) -> list[tuple]:
    return sorted(tuple(r[n] for n in names) for r in table.to_pylist())


@pytest.mark.spark
def test_a_plain_batches_read_writes_nothing_and_equals_the_pure_reader(spark, tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLE, logs)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    before = _tree(tmp_path)
    got = spark.read.format("kafka-segments").option("table", "batches").load(str(logs)).toArrow()
    assert _tree(tmp_path) == before  # nothing beside the input, in it, or where the driver runs
    names = OUT_SCHEMAS["batches"].names
    assert got.num_rows == 670 and _rows(got, names) == _rows(read_log_dirs([logs]).table("batches"), names)


@pytest.mark.spark
@pytest.mark.parametrize("table", ["records", "segments", *SIDECAR_TABLES])
def test_every_plain_table_equals_the_pure_reader(spark, table):
    got = spark.read.format("kafka-segments").option("table", table).load(str(SAMPLE)).toArrow()
    expected = read_log_dirs([SAMPLE], records=table == "records").table(table)
    names = [n for n in OUT_SCHEMAS[table].names if n in expected.schema.names]  # records: hashes, not values
    assert got.schema.names == OUT_SCHEMAS[table].names
    assert got.num_rows > 0 and _rows(got, names) == _rows(expected, names)


@pytest.mark.spark
@pytest.mark.parametrize("table", ["batches", "records", "producer_snapshots"])
def test_a_read_on_the_executors_only_equals_the_data_source(spark, table):
    """What a driver that cannot start the executors' Python reads (``mapInArrow`` over the reader's
    groups): the same schema and rows as the data source, in as many tasks as the source's groups."""
    options = {"table": table, "minTasks": "3"}
    through_source = load(spark, options, str(SAMPLE), on_executors=False)
    on_executors = load(spark, options, str(SAMPLE), on_executors=True)
    assert on_executors.schema == through_source.schema
    got, expected = on_executors.toArrow(), through_source.toArrow()
    assert got.num_rows > 0 and _rows(got, got.schema.names) == _rows(expected, got.schema.names)
    if table == "batches":
        assert on_executors.rdd.getNumPartitions() == through_source.rdd.getNumPartitions() >= 3


@pytest.mark.spark
def test_only_a_relative_python_missing_from_the_drivers_folder_moves_reads_to_the_executors(
        spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    context = spark.sparkContext
    monkeypatch.setattr(context, "pythonExec", "./env/bin/python")  # --archives segaudit-env.tar.gz#env
    assert driver_cannot_start_python(spark)
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").touch()
    assert not driver_cannot_start_python(spark)  # the folder it runs in holds the environment
    for executable in (sys.executable, "python3"):
        monkeypatch.setattr(context, "pythonExec", executable)
        assert not driver_cannot_start_python(spark)


@pytest.mark.spark
def test_dump_log_text_reads_as_the_segments_it_shows(spark, tmp_path):
    segments = sorted(SAMPLE.glob("corrupt-crc-0/*.log"))
    for i, segment in enumerate(segments):
        (tmp_path / f"dump-{i}.txt").write_text("\n".join(dump_segment(str(segment))) + "\n")
    read = spark.read.format("kafka-segments").option("inputFormat", "dump-log").load
    batches = read(str(tmp_path), table="batches").toArrow()
    names = [n for n in OUT_SCHEMAS["batches"].names if n != "base_timestamp"]  # a dump does not print it
    assert _rows(batches, names) == _rows(read_log_dirs(segments).table("batches"), names)
    files = read(str(tmp_path), table="segments").toArrow().column("file").to_pylist()
    assert sorted(files) == [str(s) for s in segments]
