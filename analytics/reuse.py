"""What an incremental export keeps from the previous one: the tables of the segment files that did
not change since.

Every export records each segment file's fingerprint in ``_export.json`` (``segment_files``: its
size, a CRC-32 of its first and last ``EDGE_BYTES`` bytes as the task that read it took them, and
the name its tables' Parquet files carry). An incremental export reads only the files whose fingerprint is new or different: new
segments, the active segment that grew, a segment the cleaner rewrote; a segment retention deleted
is simply not listed any more. The kept files' Parquet files (``batches``, ``records``: one per
file and topic) are linked into the new export, their ``segments`` and ``parse_errors`` rows copied:
the tables are those a full export writes, row for row.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analytics.kafka.fs import edge_crc, is_remote, open_file

FINGERPRINT_THREADS = 16
PER_FILE_TABLES = ("batches", "records", "transactional_ids")  # one Parquet file per segment file (and topic)


def fingerprint(path: str) -> tuple[int, int]:
    """(size, CRC-32 of the first and last ``EDGE_BYTES``) of a file."""
    with open_file(path) as f:
        return f.size, edge_crc(f)


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


def segment_files(segments: pa.Table, files, previous: dict | None, kept: dict[str, str],
                  run_id: str) -> dict[str, dict]:
    """``segment_files`` of a manifest: the fingerprint of each file read, as its task took it (a
    ``segments`` row's size and ``edge_crc``; none for a file whose read failed), and of each kept
    file, as the previous manifest holds it. ``read_by``: the export run that read the file's rows
    into Parquet (this one, ``run_id``, or for a kept file the run its rows were kept from), so that
    an audit can tell the rows it audited from rows read since."""
    names = {f.path: f.output_name for f in files}
    prints = {path: {"read_by": previous["run_id"]} | previous["segment_files"][path] for path in kept}
    for file, size, crc in zip(*(segments[c].to_pylist() for c in ("file", "size_bytes", "edge_crc"))):
        if crc is not None and file in names and file not in kept:
            prints[file] = {"size": size, "crc": crc, "name": names[file], "read_by": run_id}
    return dict(sorted(prints.items()))


def can_link(out: str) -> bool:
    """Kept files are hard-linked: OUT must be a local folder."""
    return not is_remote(out)


def link_parts(previous_out: str, staging: str, kept: dict[str, str]) -> int:
    """Links the kept files' Parquet files of the per-file tables into ``staging``; returns how many."""
    names = {f"part-{name}.parquet" for name in kept.values()}
    linked = 0
    for table in PER_FILE_TABLES:
        root = Path(previous_out, table)
        if not root.is_dir():
            continue
        for part in root.rglob("part-*.parquet"):
            if part.name in names:
                target = Path(staging, table, part.relative_to(root))
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(part, target)
                linked += 1
    return linked


def parquet_files(folder: str) -> list[str]:
    """The Parquet files of a table folder, sorted (hidden and ``_`` entries left out: files being
    written, and Spark's markers); none when there is no such folder."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        found += [os.path.join(root, n) for n in names if n.endswith(".parquet") and not n.startswith((".", "_"))]
    return sorted(found)


def link_tree(source: str, target: str) -> int:
    """Links every Parquet file of the table folder ``source`` into ``target`` (same relative paths,
    e.g. ``topic=t/part-....parquet``); returns how many."""
    parts = parquet_files(source)
    for part in parts:
        destination = Path(target, os.path.relpath(part, source))
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.link(part, destination)
    return len(parts)


def kept_rows(previous_out: str, table: str, kept: dict[str, str], schema: pa.Schema) -> pa.Table:
    """The previous export's rows of ``table`` whose ``file`` is a kept one."""
    files = parquet_files(os.path.join(previous_out, table))
    if not files or not kept:
        return schema.empty_table()
    rows = pa.concat_tables([pq.read_table(f, schema=schema) for f in files])
    return rows.filter(pc.is_in(rows["file"], value_set=pa.array(sorted(kept))))
