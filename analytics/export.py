"""The export job: Kafka log files to the Parquet tables of the contract, in one Spark application.

Tables under ``OUT``: ``batches`` (partitioned by topic), ``records`` (with ``records=True``),
``segments``, ``parse_errors``, ``producer_snapshots``, ``aborted_transactions``,
``leader_epochs``, ``checkpoints`` (the four log-dir offset checkpoints), ``log_start_offsets``
and ``partition_metadata``, and ``OUT/_export.json`` describing the run.

Each segment is read once, on an executor, by the data source's ``export-segments`` table: its
tasks write the file's batches (and records) and parse errors, and yield its ``segments`` row;
``export-sidecars`` writes the sidecar tables likewise (see :mod:`analytics.spark.tasks`).

A run is atomic: it is published as one stage (:mod:`analytics.publish`, ``_export.json`` last),
so a run that dies leaves the previous export, or no ``_export.json``, which readers of ``OUT``
require: nothing half-written looks complete.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analytics.contract import EXPORT, SIDECAR_TABLES
from analytics.contract import schemas as schema
from analytics.errors import InputError
from analytics.kafka.fs import is_remote, local_path
from analytics.publish import publication

if TYPE_CHECKING:
    from analytics.spark.files import FileTask

LOG_START_OFFSET = "log-start-offset"  # the checkpoint whose rows are the log start offsets


class ExportError(InputError):
    """Inputs that cannot be exported (nothing to read, a bad option): exit code 2."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    out: str
    run_id: str
    files: int
    input_bytes: int
    rows: dict[str, int]
    seconds: float


def export(
    spark,
    paths: list[str],
    out: str,
    *,
    records: bool = False,
    input_format: str = "segments",
    progress: Callable[[str], None] | None = None,
) -> ExportResult:
    """Export ``paths`` (log dirs, partition folders, files) to ``out``; returns what was written."""
    from analytics.spark.plan import file_errors, segment_files
    from analytics.spark.session import default_parallelism
    from analytics.spark.tasks import SegmentExportTask, SidecarExportTask, write_rows

    started = time.monotonic()
    paths = [p if is_remote(p) else os.path.abspath(local_path(p)) for p in paths]
    files = segment_files(paths, input_format)
    if not files:
        raise ExportError(f"no Kafka segments found in {' '.join(paths)}")
    total_bytes = sum(f.size for f in files)
    say = progress or (lambda _msg: None)
    min_tasks = 2 * default_parallelism(spark)  # two tasks a core evens out uneven files
    with publication(out, EXPORT) as run:
        staging = run.path()
        errors = run.path("_parts", "parse_errors")
        say(f"exporting {len(files)} files, {total_bytes / 1e6:,.1f} MB, to {run.store.path()}")

        def writing_read(table: str):
            """A read of one of the data source's tables that write: tables to staging, errors to _parts."""
            return (spark.read.format("kafka-segments").option("table", table).option("inputFormat", input_format)
                    .option("paths", json.dumps(paths)).option("tablesOut", staging).option("errorsOut", errors))

        if input_format == "segments":
            write_rows(errors, "driver.parquet", file_errors(paths), schema.PARSE_ERRORS)
        # One pass over the segments: tasks write batches (and records) as Parquet, one segments row per file.
        segments = writing_read(SegmentExportTask.table).option("records", records).option("minTasks", min_tasks)
        with _Progress(errors, files, say):
            segments.load().repartition(1).write.parquet(run.path("segments"))
        for table, target, wanted in (("batches", schema.BATCHES, True), ("records", schema.RECORDS, records)):
            if wanted and not os.path.isdir(run.path(table)):  # no rows at all: still a table
                _write_small(run.path(table), pa.schema([f for f in target if f.name != "topic"]).empty_table())
        if input_format == "segments":  # every sidecar file in one job; the tasks write the tables
            sidecars = writing_read(SidecarExportTask.table).option("minTasks", 1)
            sidecars.load().write.format("noop").mode("overwrite").save()
        for table in SIDECAR_TABLES:
            if not os.path.isdir(run.path(table)):
                _write_small(run.path(table), schema.READ_SCHEMAS[table].empty_table())
        # Parse errors are small (a row per problem), written per file by the tasks: merged without Spark.
        _write_small(run.path("parse_errors"), _read_parts(errors, schema.PARSE_ERRORS))
        checkpoints = _read_parts(run.path("checkpoints"), schema.CHECKPOINTS)
        starts = checkpoints.filter(pc.equal(checkpoints["checkpoint"], LOG_START_OFFSET))
        _write_small(run.path("log_start_offsets"), pa.table(
            {"topic": starts["topic"], "partition": starts["partition"], "log_start_offset": starts["offset"],
             "file": starts["file"]}))
        rows = {t: _count_rows(run.path(t)) for t in run.written()}
        run.publish({
            "inputs": paths,
            "input_format": input_format,
            "records": records,
            "files": len(files),
            "input_bytes": total_bytes,
            "rows": rows,
        })
    seconds = time.monotonic() - started
    say(f"exported {len(files)} files ({total_bytes / 1e6:,.1f} MB) in {seconds:.1f} s")
    return ExportResult(run.store.path(), run.run_id, len(files), total_bytes, rows, seconds)


def _read_parts(folder: str, target: pa.Schema) -> pa.Table:
    files = sorted(f for f in Path(folder).rglob("*.parquet") if not f.name.startswith(".")) if os.path.isdir(folder) else []
    return pa.concat_tables([pq.read_table(f, schema=target) for f in files]) if files else target.empty_table()


def _write_small(folder: str, table: pa.Table) -> None:
    os.makedirs(folder, exist_ok=True)
    pq.write_table(table, os.path.join(folder, "part-00000.parquet"))


def _count_rows(folder: str) -> int:
    """Rows of a Parquet table folder, from the files' footers."""
    return sum(pq.read_metadata(f).num_rows for f in Path(folder).rglob("*.parquet"))


class _Progress:
    """Reports files and bytes done while the ``export-segments`` read runs, from the parse-errors
    files its tasks write into ``folder`` as each file is done."""

    def __init__(self, folder: str, files: list[FileTask], say: Callable[[str], None], every: float = 5.0):
        from analytics.spark.tasks import SegmentExportTask

        self.folder = folder
        self.sizes = {SegmentExportTask.errors_file(f): f.size for f in files}
        self.total = sum(self.sizes.values())
        self.say = say
        self.every = every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        last = None
        while not self.stop.wait(self.every):
            try:
                done = [n for n in os.listdir(self.folder) if n in self.sizes]
            except FileNotFoundError:
                continue
            state = (len(done), sum(self.sizes[n] for n in done))
            if state != last:
                last = state
                self.say(f"  read {state[0]}/{len(self.sizes)} files, {state[1] / 1e6:,.1f}/{self.total / 1e6:,.1f} MB")
