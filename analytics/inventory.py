"""What a set of log directories holds, per partition of each log dir: the ``inspect`` command's library half.

Built on the pure reader (no Spark): counts come from batch headers, so records are not decoded.
The same summary of an export (``inspect OUT``) comes from its Parquet tables
(:func:`inventory_of_export`), which a big log dir answers in a second instead of re-reading every
batch header.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analytics.contract import HISTORY_KEY, log_dir_of
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


# The columns of ``batches`` the summary reads.
BATCH_COLUMNS = ["topic", "partition", "file", "crc_valid", "is_control", "record_count",
                 "base_offset", "last_offset", "compression", "producer_id", "is_transactional", "control_type"]


def take_inventory(paths: Iterable[str | os.PathLike]) -> Inventory:
    """What the log dirs, partition folders or files at ``paths`` hold (every byte read)."""
    from analytics.kafka.logdir import read_log_dirs

    tables = read_log_dirs(paths)
    segments = [(s.file, s.topic, s.partition, s.size_bytes, s.valid_bytes) for s in tables.segments]
    snapshots = [(e.file, e.topic, e.partition) for e in tables.producer_snapshots
                 if e.producer_id is not None]  # an empty .snapshot's marker row is no entry
    return _summarise([tables.table("batches")], segments, snapshots, tables.parse_errors)


def inventory_of_export(out: str) -> Inventory:
    """The same summary of an export's tables under ``out`` (pyarrow, no Spark). The batches are
    read a record batch at a time, so memory stays flat whatever the export's size."""
    from analytics.publish import published, read_manifest

    read_manifest(out, "export")
    store = published(out)

    def rows(name: str, columns: list[str]) -> list[tuple]:
        parts = list(_parquet_parts(store, name, columns))
        return [tuple(r[c] for c in columns) for part in parts for r in part.to_pylist()]

    batches = _parquet_parts(store, "batches", BATCH_COLUMNS, dictionary=("file", "compression"))
    segments = rows("segments", ["file", "topic", "partition", "size_bytes", "valid_bytes"])
    # an empty .snapshot file's marker row (null producer_id) is no producer entry
    snapshots = [r[:3] for r in rows("producer_snapshots", ["file", "topic", "partition", "producer_id"])
                 if r[3] is not None]
    errors = sorted((ParseError(*r) for r in rows("parse_errors", list(ParseError.__slots__))),
                    key=lambda e: (e.file, e.file_position))
    return _summarise(batches, segments, snapshots, errors)


def _parquet_parts(store, name: str, columns: list[str], dictionary: tuple[str, ...] = ()) -> Iterator[pa.Table]:
    """The rows of a table Spark wrote under ``store/name``, a record batch at a time, with the
    columns of its Hive folders (``topic=...``) filled in. ``pyarrow.parquet`` alone: the dataset
    module would import pandas, a third of a cold ``inspect``'s time."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    selector = pafs.FileSelector(store._p(name), recursive=True, allow_not_found=True)
    for info in sorted(store.fs.get_file_info(selector), key=lambda i: i.path):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
            continue
        folders = dict(part.split("=", 1) for part in info.path[len(store._p(name)):].split("/")[:-1] if "=" in part)
        with store.fs.open_input_file(info.path) as f:
            parquet = pq.ParquetFile(f, read_dictionary=[c for c in dictionary if c not in folders])
            stored = [c for c in columns if c not in folders]
            for batch in parquet.iter_batches(batch_size=1 << 20, columns=stored):
                table = pa.Table.from_batches([batch])
                for column, value in folders.items():
                    if column in columns:
                        table = table.append_column(column, pa.DictionaryArray.from_arrays(
                            pa.array(np.zeros(table.num_rows, dtype=np.int32)), pa.array([value])))
                yield table.select(columns)


def _summarise(batches: Iterable[pa.Table], segments: list[tuple], snapshots: list[tuple],
               errors: list[ParseError]) -> Inventory:
    """``batches``: the batch rows, in one or more tables; ``segments``: (file, topic, partition,
    size_bytes, valid_bytes); ``snapshots``: (file, topic, partition) per producer entry."""
    per_partition: dict[tuple[str, str, int], dict] = {}

    def slot(log_dir: str, topic: str, partition: int) -> dict:
        return per_partition.setdefault((log_dir, topic, partition), {"codecs": set()})

    for file, topic, partition, size_bytes, valid_bytes in segments:
        s = slot(log_dir_of(file), topic, partition)
        s["segments"] = s.get("segments", 0) + 1
        s["size_bytes"] = s.get("size_bytes", 0) + size_bytes
        s["valid_bytes"] = s.get("valid_bytes", 0) + valid_bytes
    for part in batches:
        for row in _batch_counts(part):
            s = slot(row.pop("log_dir"), row.pop("topic"), row.pop("partition"))
            s["codecs"].update(row.pop("codecs"))
            s.setdefault("producer_ids", set()).update(row.pop("producer_ids"))
            for key in ("first_offset", "last_offset"):
                value, pick = row.pop(key), (min if key == "first_offset" else max)
                if value is not None:
                    s[key] = value if s.get(key) is None else pick(s[key], value)
            for key, n in row.items():
                s[key] = s.get(key, 0) + n
    for file, topic, partition in snapshots:
        s = slot(log_dir_of(file), topic, partition)
        s["snapshots"] = s.get("snapshots", 0) + 1
    for error in errors:
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
            producers=len(s.get("producer_ids", ())),
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
    return Inventory(summaries, errors)


def _batch_counts(batches: pa.Table) -> list[dict]:
    """The batch counts of each history (log dir, topic, partition: the key the audit replays by) in
    ``batches`` (a part of the rows: counts add up, producer ids and codecs are sets), in one pass: each count reads a column masked to the batches it counts (CRC-valid ones, data
    batches of idempotent producers, markers)."""
    valid = pc.fill_null(batches["crc_valid"], False)
    control = pc.and_(valid, batches["is_control"])
    idempotent = pc.and_(pc.and_(valid, pc.invert(batches["is_control"])), pc.greater_equal(batches["producer_id"], 0))

    def only(mask, column):
        return pc.if_else(mask, batches[column], None)

    names, codes = _log_dir_codes(batches["file"])
    codec_names, codec_codes = _codes(batches["compression"])
    keyed = pa.table({
        "log_dir_code": codes, "topic": batches["topic"], "partition": batches["partition"],
        "records": only(valid, "record_count"), "first_offset": only(valid, "base_offset"),
        "last_offset": only(valid, "last_offset"), "codecs": pc.if_else(valid, codec_codes, None),
        "producers": only(idempotent, "producer_id"), "transactional": only(idempotent, "is_transactional"),
        "commits": pc.and_(control, pc.equal(batches["control_type"], "COMMIT")),
        "aborts": pc.and_(control, pc.equal(batches["control_type"], "ABORT")),
    })
    rows = keyed.group_by(["log_dir_code", "topic", "partition"]).aggregate([
        ([], "count_all"), ("records", "sum"), ("first_offset", "min"), ("last_offset", "max"),
        ("codecs", "distinct"), ("producers", "distinct"), ("producers", "count"),
        ("transactional", "sum"), ("commits", "sum"), ("aborts", "sum"),
    ]).to_pylist()
    return [{"log_dir": names[r["log_dir_code"]], "topic": r["topic"], "partition": r["partition"],
             "batches": r["count_all"], "records": r["records_sum"] or 0, "first_offset": r["first_offset_min"],
             "last_offset": r["last_offset_max"],
             "codecs": [codec_names[c] for c in r["codecs_distinct"] if c is not None],
             "producer_ids": [p for p in r["producers_distinct"] if p is not None],
             "idempotent_batches": r["producers_count"],
             "transactional_batches": r["transactional_sum"] or 0, "commits": r["commits_sum"] or 0,
             "aborts": r["aborts_sum"] or 0} for r in rows]


def _codes(column: pa.ChunkedArray) -> tuple[list, pa.ChunkedArray]:
    """The distinct values of a column and each row's position among them (a dictionary-encoded
    column with one dictionary: its indices)."""
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    column = pa.table({"c": column}).unify_dictionaries()["c"]
    if column.num_chunks == 0:
        return [], pa.chunked_array([], pa.int32())
    return column.chunk(0).dictionary.to_pylist(), pa.chunked_array([c.indices for c in column.chunks])


def _log_dir_codes(files: pa.ChunkedArray) -> tuple[list[str], pa.ChunkedArray]:
    """The log dirs of ``files``, and each row's position among them; a dictionary-encoded column
    has each distinct path looked at once."""
    chunks = [c if pa.types.is_dictionary(c.type) else c.dictionary_encode() for c in files.chunks]
    dirs = [[log_dir_of(f) for f in c.dictionary.to_pylist()] for c in chunks]
    names = sorted({d for chunk in dirs for d in chunk})
    code = {d: i for i, d in enumerate(names)}
    return names, pa.chunked_array([pa.array([code[d] for d in chunk], pa.int32()).take(c.indices)
                                    for c, chunk in zip(chunks, dirs)], pa.int32())
