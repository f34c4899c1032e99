"""What one ``kafka-segments`` task does on an executor: read one file, yield Arrow batches, and
(with a side output) write the file's ``segments`` row and parse errors as small Parquet files."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from analytics import schema
from analytics.kafka.errors import CRC_MISMATCH
from analytics.kafka.logdir import stream_segment
from analytics.kafka.model import ParseError, SegmentInfo
from analytics.kafka.sidecars import read_sidecar

SIDECAR_SCHEMAS = {
    "producer_snapshots": schema.PRODUCER_SNAPSHOTS,
    "aborted_transactions": schema.ABORTED_TRANSACTIONS,
    "leader_epochs": schema.LEADER_EPOCHS,
    "checkpoints": schema.CHECKPOINTS,
    "partition_metadata": schema.PARTITION_METADATA,
}
_DUMP_BATCH_ROWS = 8192


def read_task(task, *, table: str, input_format: str, side_output: str | None, window: int,
              max_decompressed_bytes: int) -> Iterator[pa.RecordBatch]:
    from analytics.spark.source import task_name

    name = task_name(task)
    _log_task(task, table)
    if input_format == "dump-log":
        segments, errors = yield from _read_dump(task, table)
        _side(side_output, "segments", f"{name}.parquet", segments, schema.SEGMENTS)
        _side(side_output, "parse_errors", f"{table}-{name}.parquet", errors, schema.PARSE_ERRORS)
        return
    if table in SIDECAR_SCHEMAS:
        result = read_sidecar(_as_path(task.path), topic=task.topic, partition=task.partition)
        target = SIDECAR_SCHEMAS[table]
        if result.rows:
            yield pa.RecordBatch.from_pylist([_row(r, target) for r in result.rows], schema=target)
        _side(side_output, "parse_errors", f"{table}-{name}.parquet", result.errors, schema.PARSE_ERRORS)
        return
    records = table == "records"
    stream = stream_segment(task.path, topic=task.topic, partition=task.partition, base_offset=task.base_offset,
                            records=records, window=window, max_decompressed_bytes=max_decompressed_bytes)
    info, errors = yield from _each(stream, "records" if records else "batches")
    if records:  # the batches pass reports everything else about the file
        _side(side_output, "parse_errors", f"records-{name}.parquet", [e for e in errors if e.bytes_affected == 0], schema.PARSE_ERRORS)
    else:
        _side(side_output, "segments", f"{name}.parquet", [info], schema.SEGMENTS)
        _side(side_output, "parse_errors", f"batches-{name}.parquet", errors, schema.PARSE_ERRORS)


TASK_LOG_ENV = "SEGAUDIT_TASK_LOG"


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


def _each(stream, attr: str):
    """Yield one attribute of every chunk; return the stream's result."""
    while True:
        try:
            chunk = next(stream)
        except StopIteration as done:
            return done.value
        batch = getattr(chunk, attr)
        if batch.num_rows:
            yield batch


def _read_dump(task, table: str):
    """kafka-dump-log.sh text: batch rows (or record rows), plus a segments row per dumped file."""
    from analytics.kafka.dumplog import DumpRecord, parse_dump
    from analytics.kafka.model import Batch

    rows: list[dict] = []
    per_file: dict[str, dict] = {}
    errors: list[ParseError] = []
    with open(task.path, encoding="utf-8", errors="replace") as f:
        for item in parse_dump(f, source=task.path):
            if isinstance(item, ParseError):
                errors.append(item)
                if item.error_kind == "truncated" and item.file in per_file:
                    per_file[item.file]["invalid"] += item.bytes_affected
                continue
            if isinstance(item, Batch):
                _tally(per_file, item)
                if not item.crc_valid:  # as the binary reader reports it
                    errors.append(ParseError(item.topic, item.partition, item.file, item.file_position, CRC_MISMATCH,
                                             f"batch at offset {item.base_offset}: the dump says isvalid: false",
                                             item.batch_size))
                if table == "batches":
                    rows.append(_row(item, schema.BATCHES))
            elif table == "records" and isinstance(item, DumpRecord):
                r = item.record
                rows.append({
                    "topic": item.topic, "partition": item.partition, "offset": r.offset, "timestamp": r.timestamp,
                    "batch_base_offset": item.batch_base_offset, "producer_id": None, "producer_epoch": None,
                    "sequence": r.sequence, "key": r.key, "value": r.value, "headers": [],
                    "value_size": item.value_size if item.value_size is not None else (len(r.value) if r.value is not None else -1),
                })
            if len(rows) >= _DUMP_BATCH_ROWS:
                yield pa.RecordBatch.from_pylist(rows, schema=_target(table))
                rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=_target(table))
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


def _target(table: str) -> pa.Schema:
    return schema.BATCHES if table == "batches" else schema.RECORDS_RAW


def _row(obj, target: pa.Schema) -> dict:
    d = dataclasses.asdict(obj)
    return {name: d.get(name) for name in target.names}


def _as_path(path: str):
    from pathlib import Path

    return Path(path)


def _side(side_output: str | None, kind: str, name: str, rows: list, target: pa.Schema) -> None:
    """Write rows as ``<side_output>/<kind>/<name>``: written to a temporary name, then renamed."""
    if not side_output:
        return
    directory = os.path.join(side_output, kind)
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, name)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    pq.write_table(pa.Table.from_pylist([_row(r, target) for r in rows], schema=target), tmp)
    os.replace(tmp, final)
