"""The task types of the ``kafka-segments`` data source: what a Spark task does with each file
of its group, on an executor.

A task type is a small frozen dataclass of plain options (picklable, shipped with the read). It
knows which files it reads (``plan``, on the driver) and turns one file into Arrow record
batches (``read``, on an executor); ``schema`` is the Arrow schema of those batches and
``table`` the value of the data source's ``table`` option that chose it. One type per family:

- :class:`SegmentTask` reads segments into ``batches``, ``records`` or ``segments`` rows, from
  binary ``.log`` files or ``kafka-dump-log.sh`` text (its decoder, :mod:`analytics.spark.decoders`);
- :class:`SidecarTask` reads the sidecar files of one table (``producer_snapshots``,
  ``aborted_transactions``, ``leader_epochs``, ``checkpoints``, ``partition_metadata``).

Both only read. The export's two types write Parquet, and their table names say so:

- :class:`SegmentExportTask` (``export-segments``) writes a segment file's batches (and records)
  under ``tablesOut`` and yields the file's ``segments`` row;
- :class:`SidecarExportTask` (``export-sidecars``) writes every sidecar table under ``tablesOut``
  and yields a row counting what it wrote.

Both write each file's parse errors to ``errorsOut``. Why the tasks write: rows yielded by a
Python data source are converted to JVM rows one by one (about 3 µs a batch row); written from
Arrow by the task, the same rows cost a fraction of that, and Spark still plans, places and
retries the tasks. Outputs are named after their input file (:attr:`FileTask.output_name`),
written under a temporary name and renamed, so a retried or speculative task overwrites its own
files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import nullcontext
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analytics.contract.schemas import BATCHES, OUT_SCHEMAS, PARSE_ERRORS, RECORDS, SEGMENTS, TRANSACTIONAL_IDS
from analytics.contract.vocabulary import SIDECAR_TABLES
from analytics.kafka.coordinator import TRANSACTION_STATE_TOPIC, decode_change
from analytics.kafka.errors import KafkaFormatError
from analytics.kafka import sinks
from analytics.kafka.fs import RemotePath, is_remote
from analytics.kafka.logdir import SIDECAR_TABLE_OF, row_dict
from analytics.kafka.model import ParseError, SegmentInfo
from analytics.kafka.sidecars import read_sidecar
from analytics.spark.decoders import BinarySegments, Decoder
from analytics.spark.files import FileTask
from analytics.spark.listing import sidecar_files

SEGMENT_TABLES = ("batches", "records", "segments")  # the tables a segment file holds
# What SidecarExportTask yields per file (the rows themselves go to Parquet).
SIDECAR_SUMMARY = pa.schema([("file", pa.string()), ("rows", pa.int64()), ("errors", pa.int64())])
TASK_LOG_ENV = "SEGAUDIT_TASK_LOG"
SEED = 42  # Spark's xxhash64 seed: key_hash and value_hash equal xxhash64(key) / xxhash64(value) in Spark SQL


@dataclass(frozen=True, slots=True)
class SegmentTask:
    """Reads segment files into the rows of one of their tables: ``batches``, ``records`` (the
    value replaced by its size and hashes, as under ``OUT``) or ``segments`` (one row a file)."""

    table: str
    decoder: Decoder = BinarySegments()

    def __post_init__(self):
        if self.table not in SEGMENT_TABLES:
            raise ValueError(f"a segment file holds {', '.join(SEGMENT_TABLES)}, not {self.table!r}")

    @property
    def schema(self) -> pa.Schema:
        return OUT_SCHEMAS[self.table]

    def plan(self, paths: list[str]) -> list[FileTask]:
        return self.decoder.plan(paths)

    def read(self, file: FileTask) -> Iterator[pa.RecordBatch]:
        decoded = self.decoder.decode(file, records=self.table == "records")
        for chunk in decoded:
            if self.table == "batches" and chunk.batches.num_rows:
                yield chunk.batches
            elif self.table == "records" and chunk.records is not None and chunk.records.num_rows:
                yield to_contract_records(chunk.records, chunk.batches)
        if self.table == "segments":
            yield segments_batch(decoded.segments)


@dataclass(frozen=True, slots=True)
class SidecarTask:
    """Reads the sidecar files of one table into its rows. A file's parse errors are not rows of
    the table: the export reports them (:class:`SidecarExportTask`)."""

    table: str

    def __post_init__(self):
        if self.table not in SIDECAR_TABLES:
            raise ValueError(f"sidecar tables are {', '.join(SIDECAR_TABLES)}, not {self.table!r}")

    @property
    def schema(self) -> pa.Schema:
        return OUT_SCHEMAS[self.table]

    def plan(self, paths: list[str]) -> list[FileTask]:
        return sidecar_files(paths, (self.table,))

    def read(self, file: FileTask) -> Iterator[pa.RecordBatch]:
        rows = read_sidecar(_path(file.path), topic=file.topic, partition=file.partition).rows
        if rows:
            yield pa.RecordBatch.from_pylist([row_dict(r, self.schema) for r in rows], schema=self.schema)


@dataclass(frozen=True, slots=True)
class SegmentExportTask:
    """Writes each segment file's ``batches`` (and with ``records`` its ``records``) as Parquet
    under ``tables_out``, and its parse errors to ``errors_out``; yields the file's ``segments`` row.
    A segment of ``__transaction_state`` also gives its ``transactional_ids`` rows, records or not.

    Files: ``<tables_out>/batches/topic=<topic>/part-<file>.parquet`` (``records`` likewise),
    ``<tables_out>/transactional_ids/part-<file>.parquet`` and ``<errors_out>/segment-<file>.parquet``,
    written when the file is done.
    """

    tables_out: str
    errors_out: str
    decoder: Decoder = BinarySegments()
    records: bool = False
    skip: frozenset = frozenset()  # files not to read (an incremental export keeps their tables)
    # segments that grew: path -> (the segments row of the read of their head, its output name)
    grown: dict = field(default_factory=dict)
    table: ClassVar[str] = "export-segments"
    schema: ClassVar[pa.Schema] = SEGMENTS

    @staticmethod
    def errors_file(file: FileTask) -> str:
        """The name of a file's parse-errors output, whose appearance means the file is done."""
        return f"segment-{file.output_name}.parquet"

    def plan(self, paths: list[str]) -> list[FileTask]:
        return resumed([f for f in self.decoder.plan(paths) if f.path not in self.skip], self.grown)

    def read(self, file: FileTask) -> Iterator[pa.RecordBatch]:
        # The coordinator's log: its records are transactional_ids rows (binary segments: the text of
        # kafka-dump-log.sh prints the coordinator's values in its own words, not their bytes)
        coordinator = file.topic == TRANSACTION_STATE_TOPIC and self.decoder.input_format == "segments"
        decoded = self.decoder.decode(file, records=self.records or coordinator)
        export_chunks(self.tables_out, self.errors_out, file.output_name, self.errors_file(file), decoded,
                      lambda: decoded.errors, records=self.records, coordinator=coordinator)
        yield segments_batch(decoded.segments)


def resumed(files: list[FileTask], grown: dict) -> list[FileTask]:
    """``files`` with each grown segment's task (``grown``: path -> (``SegmentInfo`` of the read of
    its head, that read's output name)) reading only the bytes after its head."""
    return [f if f.path not in grown else dataclasses.replace(
        f, size=f.size - grown[f.path][0].size_bytes, after=grown[f.path][0], after_name=grown[f.path][1])
        for f in files]


def export_chunks(tables_out: str, errors_out: str, name: str, errors_file: str, chunks, errors_of, *,
                  records: bool, coordinator: bool) -> None:
    """Writes the batches (and with ``records`` the records) of ``chunks``, one input's, as Parquet
    named after ``name`` under ``tables_out``; for the coordinator's log its ``transactional_ids``
    too; then the input's parse errors (``errors_of()``, complete once the chunks are) as
    ``errors_out/errors_file``."""
    changes: list = []
    batches_out = _TopicParquet(sinks.join(tables_out, "batches"), name, BATCHES)
    records_out = _TopicParquet(sinks.join(tables_out, "records"), name, RECORDS) if records else nullcontext()
    with batches_out as batch_sink, records_out as record_sink:
        for chunk in chunks:
            if chunk.batches.num_rows:
                batch_sink.write(chunk.batches)
            if record_sink and chunk.records is not None and chunk.records.num_rows:
                record_sink.write(to_contract_records(chunk.records, chunk.batches))
            if coordinator and chunk.records is not None:
                changes += transactional_id_changes(chunk.records, chunk.batches)
    errors = list(errors_of())
    if coordinator:
        errors += [c for c in changes if isinstance(c, ParseError)]
        write_rows(sinks.join(tables_out, "transactional_ids"), f"part-{name}.parquet",
                   [c for c in changes if not isinstance(c, ParseError)], TRANSACTIONAL_IDS)
    write_rows(errors_out, errors_file, errors, PARSE_ERRORS)


@dataclass(frozen=True, slots=True)
class SidecarExportTask:
    """Writes every sidecar table as Parquet under ``tables_out`` and each file's parse errors to
    ``errors_out``; yields a :data:`SIDECAR_SUMMARY` row per file.

    Files: ``<tables_out>/<table>/part-<file>.parquet`` and, for a file with parse errors,
    ``<errors_out>/sidecar-<file>.parquet``.
    """

    tables_out: str
    errors_out: str
    table: ClassVar[str] = "export-sidecars"
    schema: ClassVar[pa.Schema] = SIDECAR_SUMMARY

    def plan(self, paths: list[str]) -> list[FileTask]:
        return sidecar_files(paths)

    def read(self, file: FileTask) -> Iterator[pa.RecordBatch]:
        result = read_sidecar(_path(file.path), topic=file.topic, partition=file.partition)
        by_table: dict[str, list] = {}
        for row in result.rows:
            by_table.setdefault(SIDECAR_TABLE_OF[type(row).__name__], []).append(row)
        for table, rows in by_table.items():
            write_rows(sinks.join(self.tables_out, table), f"part-{file.output_name}.parquet", rows,
                       OUT_SCHEMAS[table])
        if result.errors:  # none is the common case: no file, no request in a bucket
            write_rows(self.errors_out, f"sidecar-{file.output_name}.parquet", result.errors, PARSE_ERRORS)
        summary = {"file": file.path, "rows": len(result.rows), "errors": len(result.errors)}
        yield pa.RecordBatch.from_pylist([summary], schema=SIDECAR_SUMMARY)


Task = SegmentTask | SidecarTask | SegmentExportTask | SidecarExportTask
WRITING_TABLES = (SegmentExportTask.table, SidecarExportTask.table)


def to_contract_records(raw: pa.RecordBatch, batches: pa.RecordBatch) -> pa.RecordBatch:
    """The reader's records (with their values) as ``OUT/records`` rows: value size and hashes, no
    value, and the ``file`` of the batch each record came from (``batches``: the same chunk's)."""
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
    cols["file"] = _files_of(raw, batches)
    return pa.RecordBatch.from_arrays([cols[f.name] for f in RECORDS], schema=RECORDS)


def transactional_id_changes(raw: pa.RecordBatch, batches: pa.RecordBatch) -> list:
    """The ``__transaction_state`` records of a chunk as state changes, and a ``record_decode``
    :class:`ParseError` (at its batch's position, no bytes lost: the batch is read) for each record
    whose key or value does not decode. Control records (markers) are skipped."""
    where = dict(zip(zip(batches.column("partition").to_pylist(), batches.column("base_offset").to_pylist()),
                     zip(batches.column("file").to_pylist(), batches.column("file_position").to_pylist())))
    out: list = []
    columns = ("topic", "partition", "batch_base_offset", "offset", "timestamp", "key", "value", "is_control")
    for topic, partition, base, offset, timestamp, key, value, control in zip(*(raw.column(c).to_pylist() for c in columns)):
        if control:
            continue
        file, position = where.get((partition, base), ("", -1))
        try:
            out.append(decode_change(key, value, partition=partition, file=file, offset=offset, timestamp=timestamp))
        except KafkaFormatError as exc:
            out.append(ParseError(topic, partition, file, position, exc.kind, f"offset {offset}: {exc}", 0))
    return out


def _files_of(records: pa.RecordBatch, batches: pa.RecordBatch) -> pa.Array:
    """Each record's batch's ``file``: one file for the whole chunk (a segment's), else looked up by
    (topic, partition, batch base offset) (a ``kafka-dump-log.sh`` text may hold several files)."""
    files = batches.column("file").unique()
    if len(files) == 1:
        return pa.array([files[0].as_py()] * records.num_rows, pa.string())
    where = {(t, p, o): f for t, p, o, f in zip(*(batches.column(c).to_pylist()
                                                  for c in ("topic", "partition", "base_offset", "file")))}
    keys = zip(*(records.column(c).to_pylist() for c in ("topic", "partition", "batch_base_offset")))
    return pa.array([where.get(k) for k in keys], pa.string())


def write_rows(directory: str, name: str, rows: list, target: pa.Schema) -> None:
    """Row objects as one Parquet file ``directory/name``, appearing whole (:mod:`analytics.kafka.sinks`)."""
    sinks.write_parquet(pa.Table.from_pylist([row_dict(r, target) for r in rows], schema=target),
                        sinks.join(directory, name))


def log_task(file: FileTask, table: str) -> None:
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
    line = json.dumps({"pid": os.getpid(), "table": table, "file": file.path, "ancestry": ancestry})
    with open(target, "a") as f:
        f.write(line + "\n")


class _TopicParquet:
    """One task's Parquet files of a table partitioned by topic, ``folder/topic=<topic>/part-<name>.parquet``,
    each appearing whole when done, none when the task failed (:class:`analytics.kafka.sinks.Whole`)."""

    def __init__(self, folder: str, name: str, target: pa.Schema):
        self.folder = folder
        self.name = name
        self.schema = pa.schema([f for f in target if f.name != "topic"])
        self.writers: dict[str, tuple[pq.ParquetWriter, sinks.Whole]] = {}

    def __enter__(self) -> _TopicParquet:
        return self

    def __exit__(self, failure, *_) -> None:
        for writer, whole in self.writers.values():
            writer.close()
            if failure is None:
                whole.done()
            else:
                whole.discard()

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
            whole = sinks.Whole(sinks.join(self.folder, f"topic={topic}", f"part-{self.name}.parquet"))
            self.writers[topic] = (pq.ParquetWriter(whole.where, self.schema, filesystem=whole.fs), whole)
        return self.writers[topic][0]


def segments_batch(segments: list[SegmentInfo]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([row_dict(s, SEGMENTS) for s in segments], schema=SEGMENTS)


def _path(path: str) -> Path | RemotePath:
    return RemotePath(path) if is_remote(path) else Path(path)
