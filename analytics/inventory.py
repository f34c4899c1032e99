"""What a set of log directories holds, per partition of each log dir: the ``inspect`` command's library half.

Built on the pure reader (no Spark): counts come from batch headers, so records are not decoded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from analytics.contract import HISTORY_KEY, log_dir_of
from analytics.kafka.logdir import read_log_dirs
from analytics.kafka.model import ParseError


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    topic: str
    partition: int
    log_dir: str  # the folder above the partition folder: replicas of a partition are summed apart
    segments: int
    size_bytes: int
    valid_bytes: int
    batches: int
    records: int  # records present in CRC-valid batches, from their headers
    first_offset: int | None
    last_offset: int | None
    producers: int  # distinct producer ids >= 0
    idempotent_batches: int  # data batches with a producer id
    transactional_batches: int  # data batches in transactions
    commits: int
    aborts: int
    codecs: str  # compression codecs seen, comma-separated
    snapshots: int  # producer entries in .snapshot files
    errors: int


@dataclass(frozen=True, slots=True)
class Inventory:
    partitions: list[PartitionSummary]
    errors: list[ParseError]

    @property
    def total(self) -> dict[str, int]:
        keys = ("segments", "size_bytes", "valid_bytes", "batches", "records", "errors")
        return {k: sum(getattr(p, k) for p in self.partitions) for k in keys} | {"partitions": len(self.partitions)}


def take_inventory(paths: Iterable[str | os.PathLike]) -> Inventory:
    tables = read_log_dirs(paths)
    batches = tables.table("batches")
    valid = batches.filter(pc.field("crc_valid"))
    data = valid.filter(~pc.field("is_control"))
    per_partition: dict[tuple[str, str, int], dict] = {}

    def slot(log_dir: str, topic: str, partition: int) -> dict:
        return per_partition.setdefault((log_dir, topic, partition), {"codecs": set()})

    for seg in tables.segments:
        s = slot(log_dir_of(seg.file), seg.topic, seg.partition)
        s["segments"] = s.get("segments", 0) + 1
        s["size_bytes"] = s.get("size_bytes", 0) + seg.size_bytes
        s["valid_bytes"] = s.get("valid_bytes", 0) + seg.valid_bytes
    for row in _grouped(batches, [("file_position", "count")]):
        slot(row["log_dir"], row["topic"], row["partition"])["batches"] = row["file_position_count"]
    for row in _grouped(valid, [("record_count", "sum"), ("base_offset", "min"), ("last_offset", "max")]):
        s = slot(row["log_dir"], row["topic"], row["partition"])
        s["records"] = row["record_count_sum"]
        s["first_offset"], s["last_offset"] = row["base_offset_min"], row["last_offset_max"]
    for row in _grouped(valid, [("compression", "distinct")]):
        slot(row["log_dir"], row["topic"], row["partition"])["codecs"].update(row["compression_distinct"])
    idempotent = data.filter(pc.field("producer_id") >= 0)
    for row in _grouped(idempotent, [("producer_id", "count_distinct"), ("is_transactional", "sum"), ("producer_id", "count")]):
        s = slot(row["log_dir"], row["topic"], row["partition"])
        s["producers"] = row["producer_id_count_distinct"]
        s["idempotent_batches"] = row["producer_id_count"]
        s["transactional_batches"] = row["is_transactional_sum"]
    markers = valid.filter(pc.field("is_control"))
    for kind in ("COMMIT", "ABORT"):
        for row in _grouped(markers.filter(pc.field("control_type") == kind), [("file_position", "count")]):
            slot(row["log_dir"], row["topic"], row["partition"])[kind.lower() + "s"] = row["file_position_count"]
    for entry in tables.producer_snapshots:
        s = slot(log_dir_of(entry.file), entry.topic, entry.partition)
        s["snapshots"] = s.get("snapshots", 0) + 1
    for error in tables.parse_errors:
        if error.partition >= 0:
            s = slot(log_dir_of(error.file), error.topic, error.partition)
            s["errors"] = s.get("errors", 0) + 1
    summaries = [
        PartitionSummary(
            topic=topic,
            partition=partition,
            log_dir=log_dir,
            segments=s.get("segments", 0),
            size_bytes=s.get("size_bytes", 0),
            valid_bytes=s.get("valid_bytes", 0),
            batches=s.get("batches", 0),
            records=s.get("records", 0),
            first_offset=s.get("first_offset"),
            last_offset=s.get("last_offset"),
            producers=s.get("producers", 0),
            idempotent_batches=s.get("idempotent_batches", 0),
            transactional_batches=s.get("transactional_batches", 0),
            commits=s.get("commits", 0),
            aborts=s.get("aborts", 0),
            codecs=",".join(sorted(s["codecs"])),
            snapshots=s.get("snapshots", 0),
            errors=s.get("errors", 0),
        )
        for (log_dir, topic, partition), s in sorted(per_partition.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0]))
    ]
    return Inventory(summaries, tables.parse_errors)


def _grouped(table: pa.Table, aggregations: list[tuple[str, str]]) -> list[dict]:
    """Aggregates per history (log dir, topic, partition): the key the audit replays by."""
    log_dir = pc.replace_substring_regex(table["file"], pattern=r"/?[^/]*/[^/]*$", replacement="")
    keyed = table.append_column("log_dir", log_dir)
    return keyed.group_by(list(HISTORY_KEY)).aggregate(aggregations).to_pylist()
