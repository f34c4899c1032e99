"""``spark.read.format("kafka-segments")``: Kafka log files as DataFrames, read on the executors.

    spark.read.format("kafka-segments")
        .option("table", "batches")        # batches | records | segments | producer_snapshots
                                           # | aborted_transactions | leader_epochs | checkpoints | partition_metadata
        .option("inputFormat", "segments") # or "dump-log": kafka-dump-log.sh text files
        .option("sideOutput", "/out/.staging/_parts")   # optional: per-file parse errors go there
        .load("/var/kafka-logs")           # log dirs, partition folders or files; several separated by commas

The driver only lists files (:mod:`analytics.kafka.discovery`) and packs them into groups of
about ``taskBytes`` (at least ``minTasks`` groups); each group is one input partition, whose
files are opened and decoded by the pure reader inside ``read()`` on an executor, which yields
Arrow record batches.

``table = "segments"`` with ``batchesOut`` / ``recordsOut``, and ``table = "sidecars"`` with
``sidecarsOut``, are the export's modes: the tasks write the tables as Parquet themselves and
yield one row per file (see :mod:`analytics.spark.tasks`).

Stateless and picklable: partitions carry plain strings and numbers, heavy imports happen in
``read()``.
"""

from __future__ import annotations

import json
import zlib

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

TABLES = (
    "batches",
    "records",
    "segments",
    "sidecars",
    "producer_snapshots",
    "aborted_transactions",
    "leader_epochs",
    "checkpoints",
    "partition_metadata",
)
INPUT_FORMATS = ("segments", "dump-log")


class FileTask:
    """One file to read: where it is, what it is, and its index for the side output's name."""

    def __init__(self, index: int, path: str, topic: str, partition: int, base_offset: int, size: int):
        self.index, self.path, self.topic, self.partition, self.base_offset, self.size = (
            index, path, topic, partition, base_offset, size
        )

    def __repr__(self) -> str:
        return f"FileTask({self.index}, {self.path!r})"


class FileGroup(InputPartition):
    """The files one Spark task reads, one after the other (grouped: a task costs ~0.1 s of overhead)."""

    def __init__(self, number: int, files: list[tuple]):
        super().__init__(number)
        self.files = files

    def tasks(self) -> list[FileTask]:
        return [FileTask(*f) for f in self.files]


def group_files(files: list[tuple], *, target_bytes: int, min_groups: int) -> list[list[tuple]]:
    """Consecutive files packed into groups of about ``target_bytes`` (less when that would give
    fewer than ``min_groups`` groups, so every core gets work). Order is kept.

    >>> [len(g) for g in group_files([(i, "f", "t", 0, 0, 10) for i in range(10)], target_bytes=30, min_groups=1)]
    [3, 3, 3, 1]
    >>> len(group_files([(i, "f", "t", 0, 0, 10) for i in range(10)], target_bytes=1000, min_groups=4)) >= 4
    True
    """
    total = sum(f[5] for f in files)
    target = max(1, min(target_bytes, -(-total // max(1, min_groups))))
    groups: list[list[tuple]] = []
    size = 0
    for f in files:
        if not groups or (size and size + f[5] > target):
            groups.append([])
            size = 0
        groups[-1].append(f)
        size += f[5]
    return groups


def parse_paths(value: str) -> list[str]:
    """Paths from ``load()`` or the ``paths`` option: a JSON list, or comma-separated."""
    value = value.strip()
    if value.startswith("["):
        return [str(p) for p in json.loads(value)]
    return [p for p in value.split(",") if p]


def arrow_schema(table: str, input_format: str = "segments"):
    from analytics.contract import schemas as schema
    from analytics.spark.tasks import SIDECAR_SUMMARY

    return {
        "batches": schema.BATCHES,
        "records": schema.RECORDS,
        "segments": schema.SEGMENTS,
        "sidecars": SIDECAR_SUMMARY,
        "producer_snapshots": schema.PRODUCER_SNAPSHOTS,
        "aborted_transactions": schema.ABORTED_TRANSACTIONS,
        "leader_epochs": schema.LEADER_EPOCHS,
        "checkpoints": schema.CHECKPOINTS,
        "partition_metadata": schema.PARTITION_METADATA,
    }[table]


def spark_schema(arrow):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow)


class KafkaSegmentsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-segments"

    def __init__(self, options):
        super().__init__(options)
        self.table = options.get("table", "batches")
        self.input_format = options.get("inputFormat", options.get("inputformat", "segments"))
        if self.table not in TABLES:
            raise ValueError(f"table must be one of {', '.join(TABLES)}, not {self.table!r}")
        if self.input_format not in INPUT_FORMATS:
            raise ValueError(f"inputFormat must be one of {', '.join(INPUT_FORMATS)}, not {self.input_format!r}")

    def schema(self):
        return spark_schema(arrow_schema(self.table, self.input_format))

    def reader(self, schema):
        return KafkaSegmentsReader(dict(self.options), self.table, self.input_format)


class KafkaSegmentsReader(DataSourceReader):
    def __init__(self, options: dict, table: str, input_format: str):
        self.table = table
        self.input_format = input_format
        self.paths = parse_paths(options.get("path") or options.get("paths") or "")
        if not self.paths:
            raise ValueError("kafka-segments needs paths: load(path) or .option('paths', ...)")
        self.side_output = options.get("sideOutput") or options.get("sideoutput")
        self.batches_out = options.get("batchesOut") or options.get("batchesout")
        self.records_out = options.get("recordsOut") or options.get("recordsout")
        self.sidecars_out = options.get("sidecarsOut") or options.get("sidecarsout")
        self.window = int(options.get("windowBytes", options.get("windowbytes", 8 * 1024 * 1024)))
        self.target_bytes = int(options.get("taskBytes", options.get("taskbytes", 128 * 1024 * 1024)))
        self.min_tasks = int(options.get("minTasks", options.get("mintasks", 2)))
        self.max_decompressed = int(options.get("maxDecompressedBytes", options.get("maxdecompressedbytes", 64 << 20)))

    def partitions(self):
        from analytics.spark.plan import plan_files

        files = plan_files(self.paths, "batches" if self.table == "segments" else self.table, self.input_format)
        groups = group_files(files, target_bytes=self.target_bytes, min_groups=self.min_tasks)
        return [FileGroup(i, g) for i, g in enumerate(groups)]

    def read(self, partition: FileGroup | None):
        from analytics.spark.tasks import read_task

        if partition is None:  # Spark's single partition when partitions() found no file
            return
        for task in partition.tasks():
            yield from read_task(
                task,
                table=self.table,
                input_format=self.input_format,
                side_output=self.side_output,
                window=self.window,
                max_decompressed_bytes=self.max_decompressed,
                batches_out=self.batches_out,
                records_out=self.records_out,
                sidecars_out=self.sidecars_out,
            )


def task_name(task: FileTask) -> str:
    """A stable name for a task's side-output file: its index and a checksum of its path."""
    return f"{task.index:07d}-{zlib.crc32(task.path.encode()) & 0xFFFFFFFF:08x}"
