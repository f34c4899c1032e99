"""What an incremental export keeps from the previous one: the tables of the segment files that did
not change since, and of the head of a segment that grew.

Every export records each segment file's fingerprint in ``_export.json`` (``segment_files``: its
size, a CRC-32 of its first and last ``EDGE_BYTES`` bytes as the task that read it took them, and
the name its tables' Parquet files carry). An incremental export reads only the files whose
fingerprint is new or different: new segments, a segment the cleaner rewrote; a segment retention
deleted is simply not listed any more. The kept files' Parquet files (``batches``, ``records``: one
per file and topic) are linked into the new export, their ``segments`` and ``parse_errors`` rows
copied: the tables are those a full export writes, row for row.

A segment that only grew (the active one: longer now, its first bytes with the fingerprint the
previous read took of them, and that read ended with whole valid batches) keeps the Parquet files
of its head too, and only the bytes after it are read, into Parquet files of their own named after
where they start (:attr:`~analytics.spark.files.FileTask.output_name`); the task counts on from the
previous read's ``segments`` row, so the file's row is the one a read of the whole file gives. Its
manifest entry lists its ``parts``: each read's name, the run that read it and the size it read up
to, so that an audit can tell the rows it audited from the rows read since.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

from analytics.kafka.coordinator import TRANSACTION_STATE_TOPIC
from analytics.kafka import sinks
from analytics.kafka.fs import edge_crc, open_file
from analytics.kafka.model import SegmentInfo
from analytics.tuning import FINGERPRINT_THREADS

PER_FILE_TABLES = ("batches", "records", "transactional_ids")  # one Parquet file per segment file (and topic)


def fingerprint(path: str, size: int | None = None) -> tuple[int, int]:
    """(size, CRC-32 of the first and last ``EDGE_BYTES``) of a file, or of its first ``size`` bytes."""
    with open_file(path) as f:
        return (f.size if size is None else size), edge_crc(f, size)


def parts(entry: dict, run_id: str) -> list[dict]:
    """The reads a manifest's ``segment_files`` entry holds the rows of: ``name``, ``read_by`` (the
    export run; ``run_id`` where the entry does not say) and ``size`` (the bytes read up to)."""
    return entry.get("parts") or [{"name": entry["name"], "read_by": entry.get("read_by", run_id), "size": entry["size"]}]


def grown(previous: dict | None, files, segments: pa.Table) -> dict[str, tuple[SegmentInfo, str]]:
    """The segments that only grew since the previous export (``segments``: its table): path -> (its
    ``segments`` row of the previous read, the output name of its first read). A file is grown when it is longer
    now, the previous read of it ended with whole valid batches (``ok``, every byte valid: the rest
    starts at a batch), and its first bytes up to the previous size have the fingerprint that read
    took. Not the coordinator's log: its ``transactional_ids`` rows are derived from a whole file."""
    before = (previous or {}).get("segment_files") or {}
    candidates = {f.path: f for f in files if f.path in before and f.size > before[f.path]["size"]
                  and f.topic != TRANSACTION_STATE_TOPIC}
    rows = {r["file"]: r for r in of_files(segments, candidates).to_pylist()}
    clean = [path for path, r in rows.items()
             if r["status"] == "ok" and r["valid_bytes"] == r["size_bytes"] == before[path]["size"]]
    with ThreadPoolExecutor(FINGERPRINT_THREADS) as pool:
        prints = list(pool.map(lambda path: fingerprint(path, before[path]["size"]), clean))
    return {path: (SegmentInfo(**rows[path]), before[path]["name"]) for path, now in zip(clean, prints)
            if (before[path]["size"], before[path]["crc"]) == now}


def unchanged(previous: dict | None, files) -> dict[str, str]:
    """The files (:class:`~analytics.spark.files.FileTask`) the previous manifest holds with the same
    fingerprint: path -> their Parquet name there. Only the files whose path and size it holds are
    fingerprinted here, on the driver; the export's tasks fingerprint the files they read."""
    before = (previous or {}).get("segment_files") or {}
    candidates = [f for f in files if f.path in before and before[f.path]["size"] == f.size]
    with ThreadPoolExecutor(FINGERPRINT_THREADS) as pool:
        prints = list(pool.map(lambda f: fingerprint(f.path), candidates))
    return {f.path: before[f.path]["name"] for f, now in zip(candidates, prints)
            if (before[f.path]["size"], before[f.path]["crc"]) == now}


def segment_files(segments: pa.Table, read, previous: dict | None, kept: dict[str, str],
                  run_id: str) -> dict[str, dict]:
    """``segment_files`` of a manifest: the fingerprint of each file read (``read``: the export's
    :class:`~analytics.spark.files.FileTask`), as its task took it (a ``segments`` row's size and
    ``edge_crc``; none for a file whose read failed), and of each kept file, as the previous manifest
    holds it. ``read_by``: the export run that read the file's rows into Parquet (this one,
    ``run_id``, or for a kept file the run its rows were kept from), so that an audit can tell the
    rows it audited from rows read since. A grown file (a task reading on ``after`` its head) keeps
    the name of its head's read and lists its ``parts`` (:func:`parts`), the rest read now the last."""
    names = {f.path: f.output_name for f in read}
    grown_files = {f.path for f in read if f.after is not None}
    prints = {path: {"read_by": previous["run_id"]} | previous["segment_files"][path] for path in kept}
    for file, size, crc in zip(*(segments[c].to_pylist() for c in ("file", "size_bytes", "edge_crc"))):
        if crc is None or file not in names or file in kept:
            continue
        if file in grown_files:
            entry = previous["segment_files"][file]
            rest = {"name": names[file], "read_by": run_id, "size": size}
            prints[file] = {"size": size, "crc": crc, "name": entry["name"], "read_by": run_id,
                            "parts": [*parts(entry, previous["run_id"]), rest]}
        else:
            prints[file] = {"size": size, "crc": crc, "name": names[file], "read_by": run_id}
    return dict(sorted(prints.items()))


def can_link(out: str) -> bool:
    """Whether files can be kept in place of a new write: hard links on a local disk, the store's own
    copies in a bucket (:func:`analytics.kafka.sinks.keep`)."""
    return sinks.can_keep(out)


def link_parts(where, staging: str, previous: dict, paths) -> int:
    """Links the Parquet files of the per-file tables of every read the ``previous`` manifest holds
    of ``paths`` (the kept files and the grown ones, :func:`parts`) into ``staging``; returns how many.
    ``where``: the folder of a table of the previous export."""
    names = {f"part-{p['name']}.parquet" for path in paths
             for p in parts(previous["segment_files"][path], previous["run_id"])}
    linked = 0
    for table in PER_FILE_TABLES:
        root = where(table)
        for part in sinks.parquet_files(root):
            if sinks.basename(part) in names:
                sinks.keep(part, sinks.join(staging, table, sinks.relative(part, root)))
                linked += 1
    return linked


def parquet_files(folder: str) -> list[str]:
    """The Parquet files of a table folder, sorted (:func:`analytics.kafka.sinks.parquet_files`)."""
    return sinks.parquet_files(folder)


def parquet_rows(folder: str) -> int:
    """Rows of a Parquet table folder, from its files' footers (no file is read beyond them)."""
    return rows_of(parquet_files(folder))


def rows_of(files) -> int:
    """Rows of these Parquet files, from their footers (read at once: in a bucket, a request or two
    each)."""
    with ThreadPoolExecutor(FINGERPRINT_THREADS) as pool:
        return sum(pool.map(lambda f: sinks.read_metadata(f).num_rows, files))


def link_tree(source: str, target: str) -> int:
    """Links every Parquet file of the table folder ``source`` into ``target`` (same relative paths,
    e.g. ``topic=t/part-....parquet``); returns how many."""
    parts = parquet_files(source)
    for part in parts:
        sinks.keep(part, sinks.join(target, sinks.relative(part, source)))
    return len(parts)


def kept_rows(folder: str, kept: dict[str, str], schema: pa.Schema) -> pa.Table:
    """The previous export's rows of the table in ``folder`` whose ``file`` is a kept one."""
    files = parquet_files(folder)
    if not files or not kept:
        return schema.empty_table()
    return of_files(pa.concat_tables([sinks.read_table(f, schema=schema) for f in files]), kept)


def of_files(rows: pa.Table, files) -> pa.Table:
    """The ``rows`` whose ``file`` is one of ``files``."""
    return rows.filter(pc.is_in(rows["file"], value_set=pa.array(sorted(files), pa.string())))
