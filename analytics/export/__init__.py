"""The export job: Kafka log files to the Parquet tables of the contract, in one Spark application.

Tables under ``OUT``: ``batches`` (partitioned by topic), ``records`` (with ``records=True``),
``segments``, ``parse_errors``, ``producer_snapshots``, ``aborted_transactions``,
``leader_epochs``, ``checkpoints`` (the four log-dir offset checkpoints), ``log_start_offsets``,
``partition_metadata``, ``transactional_ids`` (the coordinator's ``__transaction_state`` records) and
``cluster_configs`` (the KRaft metadata log's configs, :mod:`analytics.export.configs`), and
``OUT/_export.json`` describing the run.

Each segment is read once, on an executor, by the data source's ``export-segments`` table: its
tasks write the file's batches (and records) and parse errors, and yield its ``segments`` row;
``export-sidecars`` writes the sidecar tables likewise (see :mod:`analytics.spark.tasks`).

A run is atomic: it is published as one stage (:mod:`analytics.publish`, ``_export.json`` last),
so a run that dies leaves the previous export, or no ``_export.json``, which readers of ``OUT``
require: nothing half-written looks complete.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from analytics import reuse
from analytics.contract import EXPORT, SIDECAR_TABLES
from analytics.contract import schemas as schema
from analytics.errors import InputError
from analytics.export.coverage import coverage
from analytics.kafka import sinks
from analytics.kafka.fs import is_remote, local_path
from analytics.kafka.model import SegmentInfo
from analytics.progress import Ticker
from analytics.publish import continued, publication, published

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
    incremental: bool = False,
) -> ExportResult:
    """Export ``paths`` (log dirs, partition folders, files) to ``out``; returns what was written.

    ``spark`` None: the data source's tasks run in this process (a few at once), without a JVM
    (for a small local input, where starting Spark costs far more than the reading; the choice is
    :func:`analytics.export_plan.export_plan`'s).

    ``incremental``: continue the export published in ``out`` (or, for a ``segaudit run``'s folder, in
    the OUT it is published to: :func:`analytics.publish.continued`): only the segment files new or
    changed since are read, the others' rows kept (:mod:`analytics.reuse`); the tables are a full
    export's."""
    started = time.monotonic()
    say = progress or (lambda _msg: None)
    reading = _reading(paths, input_format, records, continued(out) if incremental else None, say)
    with publication(out, EXPORT) as run:
        read = _announce(run, reading, say)
        _read_segments(spark, run, reading, read, say)
        _read_sidecars(spark, run, reading)
        metadata = _cluster_configs(run, reading)
        write_missing_tables(run, records)
        parse_errors = _merge_small_tables(run, reading)
        rows = {t: reuse.parquet_rows(run.path(t)) for t in run.written()}
        run.publish(_manifest(run, reading, read, rows, metadata) | {"coverage": _coverage(reading, parse_errors)})
    seconds = time.monotonic() - started
    say(f"exported {len(reading.files)} files ({reading.total_bytes / 1e6:,.1f} MB) in {seconds:.1f} s")
    return ExportResult(run.store.path(), run.run_id, len(reading.files), reading.total_bytes, rows, seconds)


@dataclass(frozen=True)
class _Reading:
    """What an export reads: its inputs (absolute, or URIs), the segment files found in them, and of
    an incremental export the OUT it continues, the previous export's manifest and segments table,
    the files kept whole (path -> Parquet name) and those that only grew."""

    paths: list[str]
    input_format: str
    records: bool
    files: list
    total_bytes: int
    continued_out: str | None
    previous: dict | None
    before: pa.Table | None
    kept: dict
    grown: dict


def _reading(paths: list[str], input_format: str, records: bool, continued_out: str | None, say) -> _Reading:
    """The segment files of ``paths`` and, continuing an export, what it keeps of it."""
    from analytics.spark.listing import kafka_log_dirs, segment_files

    paths = [p if is_remote(p) else os.path.abspath(local_path(p)) for p in paths]
    files = segment_files(paths, input_format)
    if not files and not (input_format == "segments" and kafka_log_dirs(paths)):
        raise ExportError(f"no Kafka segments found in {' '.join(paths)}")
    previous = None if continued_out is None else _previous(continued_out, paths, input_format, records, say)
    before = None if previous is None else _read_parts(published(continued_out).path("segments"), schema.SEGMENTS)
    kept = _kept(previous, files)
    return _Reading(paths, input_format, records, files, sum(f.size for f in files), continued_out, previous,
                    before, kept, _grown(previous, files, kept, before))


def _announce(run, reading: _Reading, say) -> list:
    """The files to read now (says how many and, continuing, links the kept files' Parquet files)."""
    from analytics.spark.tasks import resumed

    files, kept, grown = reading.files, reading.kept, reading.grown
    read = resumed([f for f in files if f.path not in kept], grown)
    if reading.previous is None:
        say(f"exporting {len(files)} files, {reading.total_bytes / 1e6:,.1f} MB, to {run.store.path()}")
    else:
        linked = reuse.link_parts(published(reading.continued_out).path, run.path(), reading.previous,
                                  [*kept, *grown])
        say(f"exporting {len(read)} new or changed files of {len(files)} ({len(grown)} of them grown: only "
            f"their new bytes), {sum(f.size for f in read) / 1e6:,.1f} MB, to {run.store.path()}; "
            f"{linked} Parquet files kept")
    return read


def _writing(run, reading: _Reading, table: str, **more: str) -> dict[str, str]:
    """The options of a read of one of the data source's tables that write: tables to the run
    folder, errors to its ``_parts``."""
    return {"table": table, "inputFormat": reading.input_format, "paths": json.dumps(reading.paths),
            "tablesOut": run.path(), "errorsOut": run.path("_parts", "parse_errors"), **more}


def _read_segments(spark, run, reading: _Reading, read: list, say) -> None:
    """One pass over the segments: tasks write batches (and records) as Parquet, one segments row per
    file; the kept files' segments rows beside them."""
    from analytics.spark.listing import file_errors
    from analytics.spark.session import default_parallelism
    from analytics.spark.source import in_process, load
    from analytics.spark.tasks import SegmentExportTask, write_rows

    errors = run.path("_parts", "parse_errors")
    if reading.input_format == "segments":
        write_rows(errors, "driver.parquet", file_errors(reading.paths), schema.PARSE_ERRORS)
    segments = _writing(run, reading, SegmentExportTask.table, records=str(reading.records).lower(),
                        skipFiles=json.dumps(sorted(reading.kept)),
                        grownFiles=json.dumps({path: [dataclasses.asdict(head), name]
                                               for path, (head, name) in reading.grown.items()}))
    with _files_read(errors, read, say):
        if spark is None:
            _write_small(run.path("segments"), pa.Table.from_batches(in_process(segments), schema.SEGMENTS))
        else:
            min_tasks = 2 * default_parallelism(spark)  # two tasks a core evens out uneven files
            load(spark, {**segments, "minTasks": str(min_tasks)}).repartition(1).write.parquet(run.path("segments"))
    if reading.kept:
        sinks.write_parquet(reuse.of_files(reading.before, reading.kept), run.path("segments", "part-kept.parquet"))


def _read_sidecars(spark, run, reading: _Reading) -> None:
    """Every sidecar file in one job; the tasks write the tables."""
    from analytics.spark.source import in_process, load
    from analytics.spark.tasks import SidecarExportTask

    if reading.input_format != "segments":
        return
    sidecars = _writing(run, reading, SidecarExportTask.table)
    if spark is None:
        in_process(sidecars)
    else:
        load(spark, {**sidecars, "minTasks": "1"}).write.format("noop").mode("overwrite").save()


def _cluster_configs(run, reading: _Reading) -> dict:
    """The KRaft metadata log's configs, read whole on the driver; per log dir, the snapshot and
    records they came from."""
    from analytics.export.configs import cluster_configs
    from analytics.spark.tasks import write_rows

    if reading.input_format != "segments":
        return {}
    configs, undecoded, metadata = cluster_configs(reading.paths)
    if undecoded:
        write_rows(run.path("_parts", "parse_errors"), "cluster-metadata.parquet", undecoded, schema.PARSE_ERRORS)
    _write_small(run.path("cluster_configs"), pa.Table.from_pylist(configs, schema.CLUSTER_CONFIGS))
    return metadata


def _coverage(reading: _Reading, parse_errors: pa.Table) -> dict:
    """The files read whole of the segment and sidecar files present (:mod:`analytics.export.coverage`)."""
    from analytics.spark.listing import sidecar_files

    sidecars = sidecar_files(reading.paths) if reading.input_format == "segments" else []
    return coverage(len(reading.files) + len(sidecars), reading.total_bytes + sum(f.size for f in sidecars),
                    parse_errors)


def _merge_small_tables(run, reading: _Reading) -> pa.Table:
    """Parse errors (a row per problem, written per file by the tasks, and the kept files') and the
    log start offsets (the checkpoints' rows), merged without Spark; the parse errors."""
    parse_errors = _read_parts(run.path("_parts", "parse_errors"), schema.PARSE_ERRORS)
    if reading.kept:
        earlier = published(reading.continued_out).path("parse_errors")
        parse_errors = pa.concat_tables([parse_errors, reuse.kept_rows(earlier, reading.kept, schema.PARSE_ERRORS)])
    _write_small(run.path("parse_errors"), parse_errors)
    checkpoints = _read_parts(run.path("checkpoints"), schema.CHECKPOINTS)
    starts = checkpoints.filter(pc.equal(checkpoints["checkpoint"], LOG_START_OFFSET))
    _write_small(run.path("log_start_offsets"), pa.table(
        {"topic": starts["topic"], "partition": starts["partition"], "log_start_offset": starts["offset"],
         "file": starts["file"]}))
    return parse_errors


def _manifest(run, reading: _Reading, read: list, rows: dict, metadata: dict) -> dict:
    """``_export.json``: the inputs, the rows per table and each segment file's fingerprint."""
    previous, kept = reading.previous, reading.kept
    prints = (reuse.segment_files(_read_parts(run.path("segments"), schema.SEGMENTS), read, previous, kept,
                                  run.run_id)
              if reading.input_format == "segments" else {})
    return {
        "inputs": reading.paths,
        "input_format": reading.input_format,
        "records": reading.records,
        "files": len(reading.files),
        "input_bytes": reading.total_bytes,
        "rows": rows,
        "segment_files": prints,
        "cluster_metadata": metadata,  # per log dir: the snapshot and records cluster_configs came from
        "incremental": None if previous is None else {"continued_export": previous["run_id"],
                                                      "files_read": len(read), "files_kept": len(kept),
                                                      "files_grown": len(reading.grown)},
    }


def _previous(out: str, paths: list[str], input_format: str, records: bool, say) -> dict | None:
    """The manifest of the export in ``out`` an incremental export continues: one of the same inputs,
    format and records, with fingerprints, in a local folder (else None, and ``say`` says why)."""
    from analytics.errors import StageMissing
    from analytics.publish import read_manifest

    if not reuse.can_link(out):
        say("an incremental export keeps files by links or a store's copies, which OUT has not: every file is read")
        return None
    try:
        manifest = read_manifest(out, EXPORT)
    except StageMissing:
        say("no complete export in OUT to continue: every file is read")
        return None
    same = (manifest.get("inputs"), manifest.get("input_format"), manifest.get("records")) == (paths, input_format, records)
    if not same or not manifest.get("segment_files"):
        say("the export in OUT was made from other inputs or options: every file is read")
        return None
    return manifest


def _kept(previous: dict | None, files: list[FileTask]) -> dict[str, str]:
    """The unchanged files to keep (path -> their Parquet name), less any whose Parquet names a file
    read now would take."""
    kept = reuse.unchanged(previous, files) if previous else {}
    return _clear(previous, files, kept, lambda path: path not in kept)


def _grown(previous: dict | None, files: list[FileTask], kept: dict[str, str], segments: pa.Table | None
           ) -> dict[str, tuple[SegmentInfo, str]]:
    """The segments that only grew since the previous export (:func:`analytics.reuse.grown`; ``segments``:
    its table), less any whose earlier Parquet names a file read whole now would take."""
    if previous is None:
        return {}
    grown = reuse.grown(previous, [f for f in files if f.path not in kept], segments)
    return _clear(previous, files, grown, lambda path: path not in kept and path not in grown)


def _clear(previous: dict, files: list[FileTask], chosen: dict, whole: Callable[[str], bool]) -> dict:
    """``chosen`` (path -> ...: files whose earlier Parquet files are kept) less any whose names a file
    read whole now (``whole(path)``, as ``chosen`` shrinks) would take."""
    while True:
        taken = {f.output_name for f in files if whole(f.path)}
        clash = [path for path in chosen if any(p["name"] in taken for p in
                                                reuse.parts(previous["segment_files"][path], previous["run_id"]))]
        if not clash:
            return chosen
        for path in clash:
            del chosen[path]


def write_missing_tables(run, records: bool) -> None:
    """An empty table for each export table no task wrote a row of (``records`` only when exported):
    every table of the stage exists, rows or not. ``batches`` and ``records``, partitioned by topic
    when they have rows, hold ``topic`` as a column of their one empty file: a reader finds every
    column of the contract, and no topic folder."""
    empty = {"batches": schema.BATCHES, **({"records": schema.RECORDS} if records else {})}
    empty.update({table: schema.READ_SCHEMAS[table] for table in SIDECAR_TABLES})
    empty.update(transactional_ids=schema.TRANSACTIONAL_IDS, coordinator_transactions=schema.COORDINATOR_TRANSACTIONS,
                 cluster_configs=schema.CLUSTER_CONFIGS)
    for table, target in empty.items():
        if not sinks.is_dir(run.path(table)):
            _write_small(run.path(table), target.empty_table())


def _read_parts(folder: str, target: pa.Schema) -> pa.Table:
    files = sinks.parquet_files(folder)
    return pa.concat_tables([sinks.read_table(f, schema=target) for f in files]) if files else target.empty_table()


def _write_small(folder: str, table: pa.Table) -> None:
    sinks.write_parquet(table, sinks.join(folder, "part-00000.parquet"))


def _files_read(folder: str, files: list[FileTask], say: Callable[[str], None]) -> Ticker:
    """Says the files and bytes read while the ``export-segments`` read runs, from the parse-errors
    files its tasks write into ``folder`` as each file is done."""
    from analytics.spark.tasks import SegmentExportTask

    sizes = {SegmentExportTask.errors_file(f): f.size for f in files}
    total = sum(sizes.values())

    def describe(_seconds: float) -> str | None:
        try:
            done = [n for n in sinks.names(folder) if n in sizes]
        except OSError:
            return None
        return f"  read {len(done)}/{len(sizes)} files, {sum(sizes[n] for n in done) / 1e6:,.1f}/{total / 1e6:,.1f} MB"

    return Ticker(describe, say)
