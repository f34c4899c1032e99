"""How much of its input an export read: every segment and sidecar file present, read whole or not,
and why not (``summary.json``'s ``coverage``, the stdout summary, the report's findings; the check
``every_file_read`` judges the same rows).

A file is not read when the operating system refused it (``unreadable``: permissions, I/O) or it was
gone when read (``vanished``: deleted while the export ran). A broker's temporary file (``.deleted``,
``.cleaned``, ``.swap``) or a file Kafka does not write is left unread by design (``not_data``): the
broker finishes or ignores it too.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from analytics.contract.vocabulary import NOT_DATA, NOT_READ


def coverage(files: int, total_bytes: int, parse_errors: pa.Table) -> dict:
    """``files`` segment and sidecar files of ``total_bytes`` present; ``parse_errors`` the export's.

    >>> import pyarrow as pa
    >>> errors = pa.table({"file": ["a.log", "b.log", "b.log"], "error_kind": ["unreadable", "crc_mismatch", "vanished"],
    ...                    "bytes_affected": [920, 88, 100]})
    >>> c = coverage(3, 3000, errors)
    >>> c["files_read"], c["bytes_read"], c["not_read"]
    (1, 1980, {'unreadable': {'files': 1, 'bytes': 920}, 'vanished': {'files': 1, 'bytes': 100}})
    """
    not_read, not_data = _by_kind(parse_errors, NOT_READ), _by_kind(parse_errors, NOT_DATA)
    # a file that could not be read is one error: refused at open, or the rest of it after a failed read
    return {"files": files, "bytes": total_bytes, "files_read": files - sum(v["files"] for v in not_read.values()),
            "bytes_read": total_bytes - sum(v["bytes"] for v in not_read.values()), "not_read": not_read,
            "not_data": not_data}


def _by_kind(errors: pa.Table, kinds: tuple[str, ...]) -> dict[str, dict[str, int]]:
    found = {}
    for kind in kinds:
        rows = errors.filter(pc.equal(errors["error_kind"], kind))
        if rows.num_rows:
            found[kind] = {"files": len(set(rows["file"].to_pylist())),
                           "bytes": pc.sum(rows["bytes_affected"]).as_py() or 0}
    return found


def described(c: dict | None) -> str | None:
    """One line for an operator: how much was read, and what was not.

    >>> described({"files": 37, "bytes": 118005, "files_read": 36, "bytes_read": 117085,
    ...            "not_read": {"unreadable": {"files": 1, "bytes": 920}}, "not_data": {}})
    'Read 36 of 37 files whole (117,085 of 118,005 bytes). NOT READ: 1 file unreadable (920 bytes): their batches are in no check (every_file_read names them)'
    """
    if not c:
        return None
    line = f"Read {c['files_read']:,} of {c['files']:,} files whole ({c['bytes_read']:,} of {c['bytes']:,} bytes)."
    if c["not_read"]:
        parts = ", ".join(f"{v['files']:,} file{'s' * (v['files'] != 1)} {k} ({v['bytes']:,} bytes)"
                          for k, v in c["not_read"].items())
        line += f" NOT READ: {parts}: their batches are in no check (every_file_read names them)"
    if c["not_data"]:
        line += " Left unread by design: " + ", ".join(
            f"{v['files']:,} {k.replace('_', ' ')}{'s' * (v['files'] != 1)}" for k, v in c["not_data"].items()) + "."
    return line
