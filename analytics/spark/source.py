"""``spark.read.format("kafka-segments")``: Kafka log files as DataFrames, read on the executors.

A read of a table, with no side effect:

    spark.read.format("kafka-segments")
        .option("table", "batches")        # batches | records | segments | producer_snapshots | checkpoints
                                           # | aborted_transactions | leader_epochs | partition_metadata
        .option("inputFormat", "segments") # or "dump-log": kafka-dump-log.sh text (batches, records, segments)
        .load("/var/kafka-logs")           # log dirs, partition folders or files, separated by commas
                                           # (or a JSON list in .option("paths", ...))

The export's two tables that write, which their names say (see :mod:`analytics.spark.tasks`):

    .option("table", "export-segments")    # writes batches (and with records=true records) as Parquet,
        .option("tablesOut", staging)      #   yields the segments rows
        .option("errorsOut", errors)       # every file's parse errors, one Parquet file each
        .option("records", "true")
    .option("table", "export-sidecars")    # writes every sidecar table, yields a row per file
        .option("tablesOut", staging).option("errorsOut", errors)
    .option("table", "export-fetch")       # a live cluster's offset ranges over the protocol
                                           #   (analytics.spark.fetching), written as export-segments writes

Tuning: ``taskBytes`` (bytes of files per Spark task, 128 MiB), ``minTasks`` (2),
``windowBytes`` (the reader's window, 8 MiB), ``maxDecompressedBytes`` (per batch, 64 MiB).

The options name one task type; the driver lists its files (only names and sizes) and packs
them into groups of about ``taskBytes`` (at least ``minTasks`` groups); each group is one input
partition, whose files the task type reads one after the other on an executor, yielding Arrow
record batches. Stateless and picklable: the task type and the groups are plain values.

segaudit's own reads go through :func:`load`, which reads the same way without the driver's
Python where the driver cannot start the Python the executors run: a relative
``spark.pyspark.python`` (``./env/bin/python`` of an environment shipped with ``--archives``) names
a file in the executors' working folders only, and Spark starts a data source's planning on the
driver with that same path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql.datasource import CaseInsensitiveDict, DataSource, DataSourceReader

from analytics.contract.vocabulary import SIDECAR_TABLES
from analytics.kafka.model import SegmentInfo
from analytics.spark.files import FileGroup, group_files
from analytics.tuning import DEFAULT_MIN_TASKS, DEFAULT_TASK_BYTES

if TYPE_CHECKING:
    from analytics.spark.tasks import Task

WRITE_OPTIONS = ("tablesOut", "errorsOut", "records", "skipFiles", "grownFiles")  # options of the tables that write only


def task_for(options: Mapping[str, str]) -> Task:
    """The task type a read's options name (see the module docstring); ValueError for bad options."""
    # Imported here, where reads are planned and run (Python workers): the task types bring pyarrow
    # and the reader, which a driver that only registers the source has no use for.
    from analytics.spark.decoders import INPUT_FORMATS, BinarySegments, DumpLogText
    from analytics.spark.tasks import (
        SEGMENT_TABLES,
        WRITING_TABLES,
        SegmentExportTask,
        SegmentTask,
        SidecarExportTask,
        SidecarTask,
    )

    from analytics.spark.fetching import FetchExportTask

    options = CaseInsensitiveDict(options)
    table = options.get("table", "batches")
    input_format = options.get("inputFormat", "segments")
    if table == FetchExportTask.table:
        return FetchExportTask.from_options(options, _required(options, table, "tablesOut"),
                                            _required(options, table, "errorsOut"))
    tables = (*SEGMENT_TABLES, *SIDECAR_TABLES, *WRITING_TABLES, FetchExportTask.table)
    if table not in tables:
        raise ValueError(f"table must be one of {', '.join(tables)}, not {table!r}")
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"inputFormat must be one of {', '.join(INPUT_FORMATS)}, not {input_format!r}")
    if table not in WRITING_TABLES:
        stray = [name for name in WRITE_OPTIONS if name in options]
        if stray:
            raise ValueError(f"{', '.join(stray)}: options of the tables that write "
                             f"({', '.join(WRITING_TABLES)}), not of a read of {table}")
    if input_format == "dump-log":
        if table not in (*SEGMENT_TABLES, SegmentExportTask.table):
            raise ValueError(f"dump-log text holds {', '.join(SEGMENT_TABLES)}, not {table}")
        decoder = DumpLogText()
    else:
        tuning = {"window": "windowBytes", "max_decompressed_bytes": "maxDecompressedBytes"}
        decoder = BinarySegments(**{f: int(options[name]) for f, name in tuning.items() if name in options})
    if table in SEGMENT_TABLES:
        return SegmentTask(table, decoder)
    if table in SIDECAR_TABLES:
        return SidecarTask(table)
    tables_out, errors_out = _required(options, table, "tablesOut"), _required(options, table, "errorsOut")
    if table == SegmentExportTask.table:
        records = options.get("records", "false").lower()
        if records not in ("true", "false"):
            raise ValueError(f"records must be true or false, not {records!r}")
        skip = frozenset(json.loads(options.get("skipFiles", "[]")))  # kept from the previous export
        # grown since the previous export: path -> [the segments row of the read of its head, its name]
        grown = {path: (SegmentInfo(**row), name) for path, (row, name) in json.loads(options.get("grownFiles", "{}")).items()}
        return SegmentExportTask(tables_out, errors_out, decoder, records=records == "true", skip=skip, grown=grown)
    return SidecarExportTask(tables_out, errors_out)


def parse_paths(value: str) -> list[str]:
    """Paths from ``load()`` or the ``paths`` option: a JSON list, or comma-separated.

    >>> parse_paths('["/a,b", "/c"]'), parse_paths("/a,/b")
    (['/a,b', '/c'], ['/a', '/b'])
    """
    value = value.strip()
    if value.startswith("["):
        return [str(p) for p in json.loads(value)]
    return [p for p in value.split(",") if p]


def spark_schema(arrow):
    """The Spark schema of an Arrow schema."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow)


class KafkaSegmentsDataSource(DataSource):
    """The ``kafka-segments`` data source: its options choose a task type (:func:`task_for`)."""

    @classmethod
    def name(cls) -> str:
        return "kafka-segments"

    def __init__(self, options):
        super().__init__(options)
        self.task = task_for(options)

    def schema(self):
        return spark_schema(self.task.schema)

    def reader(self, schema):
        return KafkaSegmentsReader(self.task, self.options)


class KafkaSegmentsReader(DataSourceReader):
    """Plans a read's files into groups on the driver; runs its task type on each file, on the executors."""

    def __init__(self, task: Task, options: Mapping[str, str]):
        options = CaseInsensitiveDict(options)
        self.task = task
        self.paths = parse_paths(options.get("path") or options.get("paths") or "")
        if not self.paths:
            raise ValueError("kafka-segments needs paths: load(path) or .option('paths', ...)")
        self.target_bytes = int(options.get("taskBytes", DEFAULT_TASK_BYTES))
        self.min_tasks = int(options.get("minTasks", DEFAULT_MIN_TASKS))

    def partitions(self) -> list[FileGroup]:
        files = self.task.plan(self.paths)
        if hasattr(self.task, "groups"):  # the task type's plan chose its groups (export-fetch)
            groups = self.task.groups(files)
        else:
            groups = group_files(files, target_bytes=self.target_bytes, min_groups=self.min_tasks)
        return [FileGroup(i, g) for i, g in enumerate(groups)]

    def read(self, partition):
        from analytics.spark.tasks import log_task

        # Spark's single partition when partitions() found no file: None up to 4.2, a bare InputPartition from 4.3
        files = getattr(partition, "files", None)
        if files is None:
            return
        for file in files:
            log_task(file, self.task.table)
            yield from self.task.read(file)


def load(spark, options: Mapping[str, str], path: str | None = None, *, on_executors: bool | None = None):
    """The DataFrame of a read of this source with ``options`` (and ``path``, as ``load(path)`` takes it).

    Through ``spark.read`` where the driver can start the Python of the session's Python functions;
    else (``on_executors``, by default :func:`driver_cannot_start_python`) the same reader's plan is
    made here, in the driver's own process, and its groups are read by ``mapInArrow`` over one row per
    group, a public form whose Python runs on the executors only: the same task type on the same
    groups writes the same files and yields the same rows."""
    options = dict(options) if path is None else {**options, "path": path}
    if on_executors is None:
        on_executors = driver_cannot_start_python(spark)
    if not on_executors:
        return spark.read.format(KafkaSegmentsDataSource.name()).options(**options).load()
    reader = KafkaSegmentsReader(task_for(options), options)
    groups = reader.partitions()

    def read(batches):
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from reader.read(groups[index])

    ids = spark.range(0, len(groups), 1, max(1, len(groups)))
    return ids.mapInArrow(read, spark_schema(reader.task.schema))


def driver_cannot_start_python(spark) -> bool:
    """Whether the Python a classic session gives its Python functions (``spark.pyspark.python``,
    ``PYSPARK_PYTHON``) is a relative path missing from the driver's working folder: an environment
    that ``--archives`` unpacks in each executor's folder. (Over Spark Connect the server starts it.)"""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return False
    executable = spark.sparkContext.pythonExec
    return os.sep in executable and not os.path.isabs(executable) and not os.path.exists(executable)


def in_process(options: dict[str, str]) -> list:
    """The rows (Arrow record batches) of a read of this source with ``options``, its tasks run in
    this process instead of in Spark's: the same task type, the same files written (an export of a
    small local input, without a JVM). ``IN_PROCESS_THREADS`` tasks run at once, so that one task's
    writes (a bucket's ``PutObject`` a file) wait beside another's reading; the rows come in the
    tasks' order."""
    from concurrent.futures import ThreadPoolExecutor

    from analytics.spark.tasks import log_task
    from analytics.tuning import IN_PROCESS_THREADS

    task = task_for(options)

    def one(file) -> list:
        log_task(file, task.table)
        return list(task.read(file))

    with ThreadPoolExecutor(IN_PROCESS_THREADS) as pool:
        return [row for rows in pool.map(one, task.plan(parse_paths(options["paths"]))) for row in rows]


def _required(options: Mapping[str, str], table: str, name: str) -> str:
    value = options.get(name)
    if not value:
        raise ValueError(f"table {table} writes Parquet and needs the {name} option")
    return value
