"""The ``export-fetch`` table of the ``kafka-segments`` data source: offset ranges of a live
cluster's partitions fetched over the protocol by Spark tasks, on the executors, and written as an
export's segment files are (:func:`analytics.spark.tasks.export_chunks`).

    spark.read.format("kafka-segments").option("table", "export-fetch")
        .option("cluster", "kafka://b1:9092")      # the bootstrap servers
        .option("clientConfig", "/etc/client.properties")  # optional: read by each task, never shipped
        .option("ranges", json)                    # the driver's plan (analytics.cluster.capture.split)
        .option("tablesOut", staging).option("errorsOut", errors).option("records", "true")
        .option("bytesPerSecond", "1000000")       # each task's share of the export's byte rate
        .load("kafka://<cluster id>")

Each range is one "file" of the plan (``FileTask`` with the range's ``file`` locator, its start as
base offset, its offset count as size); the ranges of one group, all of one leader, are one Spark
task, read one after the other: the plan bounds the fetches a broker serves at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

from analytics.cluster.fetch import DEFAULT_FETCH_BYTES, Limits
from analytics.cluster.capture import FetchRange
from analytics.contract.schemas import SEGMENTS
from analytics.kafka.coordinator import TRANSACTION_STATE_TOPIC
from analytics.spark.files import FileTask


@dataclass(frozen=True, slots=True)
class FetchExportTask:
    """Fetches each range, writes its ``batches`` (and ``records``, and for ``__transaction_state``
    its ``transactional_ids``) under ``tables_out`` and its parse errors to ``errors_out``; yields
    the range's ``segments`` row."""

    tables_out: str
    errors_out: str
    cluster: str
    client_config: str | None
    ranges: tuple[FetchRange, ...]
    limits: Limits = Limits()
    records: bool = False
    table: ClassVar[str] = "export-fetch"
    schema: ClassVar[pa.Schema] = SEGMENTS

    @classmethod
    def from_options(cls, options: Mapping[str, str], tables_out: str, errors_out: str) -> FetchExportTask:
        ranges = tuple(FetchRange(**r) for r in json.loads(options.get("ranges", "[]")))
        rate = options.get("bytesPerSecond")
        limits = Limits(float(rate) if rate else None, int(options.get("fetchBytes", DEFAULT_FETCH_BYTES)),
                        float(options.get("retrySeconds", 60)))
        records = options.get("records", "false").lower()
        if records not in ("true", "false"):
            raise ValueError(f"records must be true or false, not {records!r}")
        cluster = options.get("cluster")
        if not cluster:
            raise ValueError("table export-fetch needs the cluster option (kafka://HOST:PORT,...)")
        return cls(tables_out, errors_out, cluster, options.get("clientConfig"), ranges, limits, records == "true")

    @staticmethod
    def errors_file(file: FileTask) -> str:
        return f"fetch-{file.output_name}.parquet"

    def plan(self, paths: list[str]) -> list[FileTask]:
        return [FileTask(r.index, r.file, r.topic, r.partition, r.start, r.end - r.start) for r in self.ranges]

    def groups(self, files: list[FileTask]) -> list[list[FileTask]]:
        """The files of each of the plan's groups, in the plan's order."""
        by_group: dict[int, list[FileTask]] = {}
        for f in files:
            by_group.setdefault(self.ranges[f.index].group, []).append(f)
        return [by_group[g] for g in sorted(by_group)]

    def read(self, file: FileTask) -> Iterator[pa.RecordBatch]:
        from analytics.cluster.client import Cluster
        from analytics.cluster.config import load
        from analytics.cluster.fetch import Throttle, fetch_range
        from analytics.kafka.reader import StreamScanner
        from analytics.spark.tasks import export_chunks, segments_batch

        r = self.ranges[file.index]
        coordinator = r.topic == TRANSACTION_STATE_TOPIC
        scanner = StreamScanner(topic=r.topic, partition=r.partition, file=r.file, base_offset=r.start,
                                records=self.records or coordinator)
        with Cluster(load(self.cluster, self.client_config)) as cluster:
            chunks = fetch_range(cluster, r, scanner, self.limits, Throttle(self.limits.bytes_per_second))
            export_chunks(self.tables_out, self.errors_out, file.output_name, self.errors_file(file), chunks,
                          lambda: scanner.errors, records=self.records, coordinator=coordinator)
        yield segments_batch([scanner.info])
