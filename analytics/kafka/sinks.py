"""Files the export writes and reads back, on a local disk or in an object store, each appearing whole.

A local file is written under a hidden temporary name beside its final one and renamed into place
when complete; an object is uploaded under its final key, which an object store makes visible only
when the upload completes (no rename exists there, and none is needed). Either way a reader never
sees half a file, and a failed write leaves nothing. Folders are listed through pyarrow for both.
"""

from __future__ import annotations

import os
import posixpath

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.kafka.fs import filesystem, is_remote


def join(folder: str, *parts: str) -> str:
    """A path under ``folder`` (a local path or a URI)."""
    return posixpath.join(folder, *parts) if is_remote(folder) else os.path.join(folder, *parts)


def makedirs(folder: str) -> None:
    """Create a local folder; an object store has none to create."""
    if not is_remote(folder):
        os.makedirs(folder, exist_ok=True)


class Whole:
    """A file written whole: write to :attr:`where` (with :attr:`fs`, None for a local path), then
    :meth:`done`, or :meth:`discard` when the write failed."""

    def __init__(self, final: str):
        self.final = final
        if is_remote(final):
            self.fs, self.where = filesystem(final)
        else:
            folder, name = os.path.split(final)
            os.makedirs(folder, exist_ok=True)
            self.fs, self.where = None, os.path.join(folder, f".{name}.{os.getpid()}.tmp")

    def done(self) -> None:
        if self.fs is None:
            os.replace(self.where, self.final)

    def discard(self) -> None:
        try:
            if self.fs is None:
                os.remove(self.where)
            else:
                self.fs.delete_file(self.where)
        except (FileNotFoundError, OSError):
            pass


def write_parquet(table: pa.Table, path: str) -> None:
    """``table`` as one Parquet file at ``path``, appearing whole."""
    whole = Whole(path)
    try:
        pq.write_table(table, whole.where, filesystem=whole.fs)
    except BaseException:
        whole.discard()
        raise
    whole.done()


def fill_empty(folder: str, schema: pa.Schema) -> None:
    """An empty Parquet file with ``schema``'s columns in a table folder that holds no data file (Spark
    writes none for no rows, so a reader would find no schema)."""
    if not parquet_files(folder):
        write_parquet(schema.empty_table(), join(folder, "part-00000.parquet"))


def can_keep(folder: str) -> bool:
    """Whether a file under ``folder`` can be kept for a new run without being written again: a hard
    link on a local disk, a server-side copy in an S3 bucket."""
    return not is_remote(folder) or folder.startswith(("s3://", "s3a://"))


def keep(source: str, target: str) -> None:
    """The file ``source`` kept as ``target`` (same disk or same store): hard-linked locally (copied when
    on another device), copied by the store in a bucket."""
    if is_remote(target):
        store, path = filesystem(target)
        store.copy_file(filesystem(source)[1], path)
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        import shutil

        shutil.copyfile(source, target)


def basename(path: str) -> str:
    return posixpath.basename(path) if is_remote(path) else os.path.basename(path)


def relative(path: str, folder: str) -> str:
    """``path`` relative to ``folder`` (``topic=t/part-x.parquet``)."""
    if is_remote(path):
        return path[len(folder.rstrip("/")) + 1:]
    return os.path.relpath(path, folder)


def parquet_files(folder: str) -> list[str]:
    """The Parquet files of a table folder, sorted (hidden and ``_`` entries left out: files being
    written, and Spark's markers); none when there is no such folder."""
    if not is_remote(folder):
        found = []
        for root, dirs, names in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
            found += [os.path.join(root, n) for n in names if n.endswith(".parquet") and not n.startswith((".", "_"))]
        return sorted(found)
    from pyarrow import fs as pafs

    store, path = filesystem(folder)
    prefix = folder[: len(folder) - len(path)] if folder.endswith(path) else folder.split("://")[0] + "://"
    base = path.rstrip("/") + "/"
    found = []
    for info in store.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True)):
        inner = info.path[len(base):].split("/")
        if info.type == pafs.FileType.File and inner[-1].endswith(".parquet") \
                and not any(p.startswith((".", "_")) for p in inner):
            found.append(prefix + info.path)
    return sorted(found)


def is_dir(folder: str) -> bool:
    """Whether a folder exists (on an object store: whether any key lies under it)."""
    if not is_remote(folder):
        return os.path.isdir(folder)
    from pyarrow import fs as pafs

    store, path = filesystem(folder)
    return store.get_file_info(path).type == pafs.FileType.Directory


def names(folder: str) -> list[str]:
    """The entries of a folder (names only); none when it does not exist."""
    if not is_remote(folder):
        try:
            return os.listdir(folder)
        except FileNotFoundError:
            return []
    from pyarrow import fs as pafs

    store, path = filesystem(folder)
    return [posixpath.basename(i.path.rstrip("/"))
            for i in store.get_file_info(pafs.FileSelector(path, allow_not_found=True))]


def read_table(path: str, schema: pa.Schema | None = None) -> pa.Table:
    """One Parquet file."""
    if not is_remote(path):
        return pq.read_table(path, schema=schema)
    store, inner = filesystem(path)
    return pq.read_table(inner, schema=schema, filesystem=store)


def read_metadata(path: str):
    """One Parquet file's footer."""
    if not is_remote(path):
        return pq.read_metadata(path)
    store, inner = filesystem(path)
    with store.open_input_file(inner) as f:
        return pq.read_metadata(f)
