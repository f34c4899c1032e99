"""What one ``kafka-segments`` task does on an executor: read one file and yield Arrow batches.

Two ways to use it:

- as a plain source (``table`` = batches, records, producer_snapshots, ...): the rows are
  yielded to Spark;
- as the export's writer (``table`` = segments, with ``batchesOut`` / ``recordsOut``): the task
  writes the file's batches and records straight from Arrow to Parquet under those folders
  (``topic=<name>/part-<task>.parquet``, written to a temporary name and renamed), and yields
  one ``segments`` row. Spark schedules, retries and places the tasks; the heavy rows never go
  through the JVM, which would convert them one by one.

With ``sideOutput``, each task also writes its file's parse errors as one small Parquet file
named after the file, so a retried task overwrites its own output.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analytics.contract import schemas as schema
from analytics.kafka.errors import CRC_MISMATCH
from analytics.kafka.logdir import SIDECAR_TABLE_OF, row_dict, stream_segment
from analytics.kafka.model import ParseError, SegmentInfo
from analytics.kafka.sidecars import read_sidecar

SIDECAR_SCHEMAS = {table: schema.READ_SCHEMAS[table] for table in SIDECAR_TABLE_OF.values()}
# What the export's sidecar pass yields per file (the rows themselves go to Parquet).
SIDECAR_SUMMARY = pa.schema([("file", pa.string()), ("rows", pa.int64()), ("errors", pa.int64())])
TASK_LOG_ENV = "SEGAUDIT_TASK_LOG"
SEED = 42  # Spark's xxhash64 seed: key_hash and value_hash equal xxhash64(key) / xxhash64(value) in Spark SQL
_DUMP_BATCH_ROWS = 8192


def read_task(task, *, table: str, input_format: str, side_output: str | None, window: int,
              max_decompressed_bytes: int, batches_out: str | None = None,
              records_out: str | None = None, sidecars_out: str | None = None) -> Iterator[pa.RecordBatch]:
    from analytics.spark.source import task_name

    name = task_name(task)
    _log_task(task, table)
    if table == "sidecars":  # the export: every sidecar table in one pass, written by the task
        result = read_sidecar(_path(task.path), topic=task.topic, partition=task.partition)
        by_table: dict[str, list] = {}
        for row in result.rows:
            by_table.setdefault(SIDECAR_TABLE_OF[type(row).__name__], []).append(row)
        for name_of_table, rows in by_table.items():
            write_rows(os.path.join(sidecars_out, name_of_table), f"part-{name}.parquet", rows, SIDECAR_SCHEMAS[name_of_table])
        _side(side_output, f"sidecar-{name}.parquet", result.errors)
        yield pa.RecordBatch.from_pylist([{"file": task.path, "rows": len(result.rows), "errors": len(result.errors)}],
                                         schema=SIDECAR_SUMMARY)
        return
    if table in SIDECAR_SCHEMAS:
        result = read_sidecar(_path(task.path), topic=task.topic, partition=task.partition)
        target = SIDECAR_SCHEMAS[table]
        if result.rows:
            yield pa.RecordBatch.from_pylist([row_dict(r, target) for r in result.rows], schema=target)
        _side(side_output, f"{table}-{name}.parquet", result.errors)
        return
    if table == "segments":  # the export: write batches and records, yield the file's segments row(s)
        sinks = {"batches": _TopicParquet(batches_out, name, schema.BATCHES) if batches_out else None,
                 "records": _TopicParquet(records_out, name, schema.RECORDS) if records_out else None}
        try:
            if input_format == "dump-log":
                segments, errors = _drain(_read_dump(task, with_records=bool(records_out)), sinks)
            else:
                stream = stream_segment(task.path, topic=task.topic, partition=task.partition,
                                        base_offset=task.base_offset, records=bool(records_out), window=window,
                                        max_decompressed_bytes=max_decompressed_bytes)
                info, errors = _drain(stream, sinks)
                segments = [info]
        finally:
            for sink in sinks.values():
                if sink:
                    sink.close()
        _side(side_output, f"segment-{name}.parquet", errors)
        yield pa.RecordBatch.from_pylist([row_dict(s, schema.SEGMENTS) for s in segments], schema=schema.SEGMENTS)
        return
    # a plain read of batches or records
    if input_format == "dump-log":
        source = _read_dump(task, with_records=table == "records")
    else:
        source = stream_segment(task.path, topic=task.topic, partition=task.partition, base_offset=task.base_offset,
                                records=table == "records", window=window, max_decompressed_bytes=max_decompressed_bytes)
    while True:
        try:
            chunk = next(source)
        except StopIteration:
            return
        batch = chunk.batches if table == "batches" else to_contract_records(chunk.records)
        if batch is not None and batch.num_rows:
            yield batch


def _drain(stream, sinks: dict):
    """Write every chunk of a stream to the sinks; return the stream's result."""
    while True:
        try:
            chunk = next(stream)
        except StopIteration as done:
            return done.value
        if sinks["batches"] and chunk.batches.num_rows:
            sinks["batches"].write(chunk.batches)
        if sinks["records"] and chunk.records is not None and chunk.records.num_rows:
            sinks["records"].write(to_contract_records(chunk.records))


def to_contract_records(raw: pa.RecordBatch) -> pa.RecordBatch:
    """The reader's records (with their values) as ``OUT/records`` rows: value size and hashes, no value."""
    import xxhash

    def hashes(column) -> pa.Array:
        out = []
        for v in column.to_pylist():
            if v is None:
                out.append(None)
            else:
                h = xxhash.xxh64_intdigest(v, seed=SEED)
                out.append(h - (1 << 64) if h >= 1 << 63 else h)
        return pa.array(out, pa.int64())

    cols = {name: raw.column(name) for name in raw.schema.names}
    cols["key_hash"] = hashes(raw.column("key"))
    cols["value_hash"] = hashes(raw.column("value"))
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema.RECORDS], schema=schema.RECORDS)


class _TopicParquet:
    """Parquet files of one task under ``folder/topic=<topic>/``, one per topic, renamed into place on close."""

    def __init__(self, folder: str, name: str, target: pa.Schema):
        self.folder = folder
        self.name = name
        self.schema = pa.schema([f for f in target if f.name != "topic"])
        self.writers: dict[str, tuple[pq.ParquetWriter, str, str]] = {}

    def write(self, batch: pa.RecordBatch) -> None:
        topics = batch.column("topic")
        first = topics[0].as_py()
        if pc.all(pc.equal(topics, first)).as_py():
            self._writer(first).write_batch(batch.drop_columns(["topic"]))
            return
        for topic in pc.unique(topics).to_pylist():
            part = batch.filter(pc.equal(topics, topic))
            self._writer(topic).write_batch(part.drop_columns(["topic"]))

    def _writer(self, topic: str) -> pq.ParquetWriter:
        if topic not in self.writers:
            directory = os.path.join(self.folder, f"topic={topic}")
            os.makedirs(directory, exist_ok=True)
            final = os.path.join(directory, f"part-{self.name}.parquet")
            tmp = os.path.join(directory, f".part-{self.name}.{os.getpid()}.tmp")
            self.writers[topic] = (pq.ParquetWriter(tmp, self.schema), tmp, final)
        return self.writers[topic][0]

    def close(self) -> None:
        for writer, tmp, final in self.writers.values():
            writer.close()
            os.replace(tmp, final)


def _read_dump(task, *, with_records: bool):
    """kafka-dump-log.sh text as chunks of batch (and record) rows; returns (segments rows, errors)."""
    from analytics.kafka.dumplog import DumpRecord, parse_dump
    from analytics.kafka.model import Batch
    from analytics.kafka.reader import Chunk

    batches: list[dict] = []
    records: list[dict] = []
    per_file: dict[str, dict] = {}
    errors: list[ParseError] = []

    def chunk() -> Chunk:
        rec = pa.RecordBatch.from_pylist(records, schema=schema.RECORDS_RAW) if with_records else None
        out = Chunk(pa.RecordBatch.from_pylist(batches, schema=schema.BATCHES), rec)
        batches.clear()
        records.clear()
        return out

    # Lines end at "\n" only (parse_dump strips a "\r" of Windows dumps): a printed payload may hold "\r".
    with open(task.path, encoding="utf-8", errors="replace", newline="\n") as f:
        for item in parse_dump(f, source=task.path):
            if isinstance(item, ParseError):
                errors.append(item)
                if item.error_kind == "truncated" and item.file in per_file:
                    per_file[item.file]["invalid"] += item.bytes_affected
            elif isinstance(item, Batch):
                _tally(per_file, item)
                batches.append(row_dict(item, schema.BATCHES))
                if not item.crc_valid:  # as the binary reader reports it
                    errors.append(ParseError(item.topic, item.partition, item.file, item.file_position, CRC_MISMATCH,
                                             f"batch at offset {item.base_offset}: the dump says isvalid: false",
                                             item.batch_size))
            elif with_records and isinstance(item, DumpRecord):
                r = item.record
                size = item.value_size if item.value_size is not None else (len(r.value) if r.value is not None else -1)
                records.append({
                    "topic": item.topic, "partition": item.partition, "offset": r.offset, "timestamp": r.timestamp,
                    "batch_base_offset": item.batch_base_offset, "producer_id": None, "producer_epoch": None,
                    "sequence": r.sequence, "key": r.key, "value": r.value, "headers": [], "value_size": size,
                    "is_control": None,
                })
            if len(batches) >= _DUMP_BATCH_ROWS or len(records) >= _DUMP_BATCH_ROWS:
                yield chunk()
    if batches or records:
        yield chunk()
    segments = [
        SegmentInfo(t["topic"], t["partition"], file, t["base_offset"], t["valid"] + t["bad"] + t["invalid"], t["valid"],
                    t["count"], t["first"], t["last"], "ok" if not (t["bad"] or t["invalid"]) else "corrupt")
        for file, t in per_file.items()
    ]
    return segments, errors


def _tally(per_file: dict, b) -> None:
    t = per_file.setdefault(b.file, {"topic": b.topic, "partition": b.partition, "base_offset": b.base_offset,
                                     "valid": 0, "bad": 0, "invalid": 0, "count": 0, "first": None, "last": None})
    t["count"] += 1
    if b.crc_valid:
        t["valid"] += b.batch_size
        t["first"] = b.base_offset if t["first"] is None else t["first"]
        t["last"] = b.last_offset
    else:
        t["bad"] += b.batch_size


def _path(path: str):
    from pathlib import Path

    from analytics.kafka.fs import RemotePath, is_remote

    return RemotePath(path) if is_remote(path) else Path(path)


def _side(side_output: str | None, name: str, errors: list[ParseError]) -> None:
    """Write a file's parse errors as ``<side_output>/parse_errors/<name>`` (temporary name, then renamed)."""
    if not side_output:
        return
    write_rows(os.path.join(side_output, "parse_errors"), name, errors, schema.PARSE_ERRORS)


def write_rows(directory: str, name: str, rows: list, target: pa.Schema) -> None:
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, name)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    pq.write_table(pa.Table.from_pylist([row_dict(r, target) for r in rows], schema=target), tmp)
    os.replace(tmp, final)


def _log_task(task, table: str) -> None:
    """With SEGAUDIT_TASK_LOG set (for example through spark.executorEnv), append which process read
    which file, with the command lines of its parent processes: where the reading really happens."""
    target = os.environ.get(TASK_LOG_ENV)
    if not target:
        return
    ancestry = []
    pid = os.getpid()
    for _ in range(4):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            break
        ancestry.append(cmdline if len(cmdline) <= 400 else f"{cmdline[:150]} ... {cmdline[-250:]}")
        pid = int(status.split("PPid:")[1].split()[0])
    line = json.dumps({"pid": os.getpid(), "table": table, "file": task.path, "ancestry": ancestry})
    with open(target, "a") as f:
        f.write(line + "\n")
