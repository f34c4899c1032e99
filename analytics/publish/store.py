"""A folder on a filesystem, local or an object store: the few operations publishing needs.

Paths are relative to the root and use ``/``. Beyond reading, writing and listing, publishing needs
two operations a filesystem and an object store do differently:

- :meth:`Store.create_text`, a write that succeeds only when the name is free (the commit): on a
  local disk ``link(2)`` of a complete temporary file, which fails when the name exists; on S3 a
  ``PUT`` with ``If-None-Match: *``, which the store refuses with 412 when the key exists;
- a file of another run kept (an incremental run): a hard link on a local disk, a server-side copy
  on an object store (:func:`analytics.kafka.sinks.keep`).

Nothing is ever renamed: an object store has no renames, and publishing does not need them.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import uuid

import pyarrow.fs as pafs

from analytics.contract.vocabulary import OUT_SCHEMES
from analytics.errors import UsageError
from analytics.kafka.fs import filesystem, is_remote, local_path



class Store:
    """A root folder: a local path, or a URI pyarrow opens (``s3://bucket/prefix``)."""

    def __init__(self, root: str):
        root = str(root)
        self.remote = is_remote(root)
        if self.remote:
            self.fs, path = filesystem(root.rstrip("/"))
            self.root = path.rstrip("/")
            self.uri = root.rstrip("/")
            self.scheme = root.split("://", 1)[0]
        else:
            self.fs = pafs.LocalFileSystem()
            self.root = self.uri = os.path.abspath(local_path(root))
            self.scheme = "file"

    def path(self, *parts: str) -> str:
        """The full path (or URI) of a path under the root, as Spark and pyarrow readers take it."""
        return posixpath.join(self.uri, *parts) if parts else self.uri

    def _p(self, name: str) -> str:
        return posixpath.join(self.root, name) if name else self.root

    def exists(self, name: str) -> bool:
        return self.fs.get_file_info(self._p(name)).type != pafs.FileType.NotFound

    def is_dir(self, name: str) -> bool:
        return self.fs.get_file_info(self._p(name)).type == pafs.FileType.Directory

    def is_file(self, name: str) -> bool:
        return self.fs.get_file_info(self._p(name)).type == pafs.FileType.File

    def names(self, name: str = "") -> list[str]:
        """The entries of a folder (names only); empty when it does not exist."""
        selector = pafs.FileSelector(self._p(name), allow_not_found=True)
        return sorted(posixpath.basename(info.path.rstrip("/")) for info in self.fs.get_file_info(selector))

    def size(self, name: str) -> int:
        """The bytes of a file, or of every file under a folder; 0 when it does not exist."""
        info = self.fs.get_file_info(self._p(name))
        if info.type == pafs.FileType.File:
            return info.size or 0
        if info.type != pafs.FileType.Directory:
            return 0
        selector = pafs.FileSelector(self._p(name), recursive=True)
        return sum(i.size or 0 for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File)

    def makedirs(self, name: str) -> None:
        if not self.remote:  # an object store has no folders: a key's prefix is one
            self.fs.create_dir(self._p(name), recursive=True)

    def delete(self, name: str) -> None:
        """Remove a file or a folder with everything in it; nothing when it is gone already."""
        if not self.remote and os.path.islink(self._p(name)):
            os.unlink(self._p(name))
            return
        info = self.fs.get_file_info(self._p(name))
        try:
            if info.type == pafs.FileType.Directory and self.remote:
                self._delete_objects(self._p(name))
            elif info.type == pafs.FileType.Directory:
                self.fs.delete_dir(self._p(name))
            elif info.type == pafs.FileType.File:
                self.fs.delete_file(self._p(name))
        except FileNotFoundError:  # removed meanwhile
            pass

    def _delete_objects(self, path: str) -> None:
        """Every object under a prefix, then the folders' marker objects deepest first: a store that keeps
        folders (versitygw over a POSIX folder) refuses a marker whose folder still holds objects."""
        infos = self.fs.get_file_info(pafs.FileSelector(path, recursive=True))
        files = [i.path for i in infos if i.type == pafs.FileType.File]
        bucket = path.split("/", 1)[0]
        for start in range(0, len(files), 1000):  # DeleteObjects takes 1,000 keys a request
            keys = [{"Key": f.split("/", 1)[1]} for f in files[start:start + 1000]]
            s3_client().delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        folders = [i.path for i in infos if i.type == pafs.FileType.Directory] + [path]
        for folder in sorted(folders, key=lambda p: -p.count("/")):
            try:
                self.fs.delete_dir(folder)
            except (FileNotFoundError, OSError):
                if self.fs.get_file_info(folder).type != pafs.FileType.NotFound:
                    raise

    def read_text(self, name: str) -> str:
        with self.fs.open_input_stream(self._p(name)) as f:
            return f.read().decode()

    def write_text(self, name: str, text: str) -> None:
        """Write a file whole: an object store's PUT is; a local file is written aside and renamed."""
        if self.remote:
            with self.fs.open_output_stream(self._p(name)) as f:
                f.write(text.encode())
            return
        self.makedirs(posixpath.dirname(name))
        tmp = self._p(f"{name}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self._p(name))
        except BaseException:
            _unlink(tmp)
            raise

    def create_text(self, name: str, text: str) -> bool:
        """Write ``name`` only if no such name exists, atomically; False when it does (someone else's)."""
        if self.remote:
            return _s3_create(self.scheme, self._p(name), text)
        self.makedirs(posixpath.dirname(name))
        tmp = self._p(f"{name}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.link(tmp, self._p(name))  # fails when the name exists, and is never half-written
            return True
        except FileExistsError:
            return False
        finally:
            _unlink(tmp)

    def upload(self, local_folder: str, name: str) -> None:
        """Every file of a local folder, copied to ``name`` (an object store's, or a local one)."""
        pafs.copy_files(local_folder, self._p(name), source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=self.fs)

    def download(self, name: str, local_folder: str) -> None:
        """Every file under ``name``, copied into a local folder (the inverse of :meth:`upload`)."""
        root = self._p(name)
        for info in self.fs.get_file_info(pafs.FileSelector(root, recursive=True)):
            if info.type == pafs.FileType.File:
                target = os.path.join(local_folder, posixpath.relpath(info.path, root))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with self.fs.open_input_stream(info.path) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)

    def files(self, name: str) -> set[str]:
        """Every file under the folder ``name``, as paths relative to it; empty when it does not exist."""
        root = self._p(name)
        selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
        return {posixpath.relpath(i.path, root) for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File}

    def copy(self, name: str, target: str) -> None:
        """The file ``name`` copied to ``target``: one server-side ``CopyObject`` in a bucket."""
        if self.remote:
            copy_object(self._p(name), self._p(target))
        else:
            self.makedirs(posixpath.dirname(target))
            self.fs.copy_file(self._p(name), self._p(target))

    def link(self, name: str, target: str) -> None:
        """Point the symbolic link ``name`` at ``target`` (relative to the root), replacing what link was
        there; local disks only. A folder or file of that name is left alone: never user data."""
        path = self._p(name)
        if os.path.lexists(path) and not os.path.islink(path):
            return
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.link-{uuid.uuid4().hex[:8]}")
        os.symlink(os.path.relpath(self._p(target), os.path.dirname(path)), tmp)
        os.replace(tmp, path)

    def links(self) -> list[str]:
        """The names at the root that are symbolic links (local disks)."""
        if self.remote or not os.path.isdir(self.root):
            return []
        return sorted(n for n in os.listdir(self.root) if os.path.islink(self._p(n)))


def check_commit_scheme(uri: str) -> None:
    """:class:`UsageError` for an ``OUT`` on a store whose conditional create is not implemented."""
    scheme = str(uri).split("://", 1)[0] if is_remote(uri) else "file"
    if scheme != "file" and scheme not in OUT_SCHEMES:
        raise UsageError(f"OUT on {scheme}:// is not supported yet: segaudit commits with a conditional "
                         f"create, implemented for local disks and s3:// (see docs/architecture.md)")


def _s3_create(scheme: str, path: str, text: str) -> bool:
    """``PUT`` with ``If-None-Match: *``: the store refuses it (412) when the key exists."""
    if scheme not in OUT_SCHEMES:
        check_commit_scheme(f"{scheme}://")
    from botocore.exceptions import ClientError

    bucket, key = path.split("/", 1)
    try:
        s3_client().put_object(Bucket=bucket, Key=key, Body=text.encode(), IfNoneMatch="*")
        return True
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
            return False
        raise


_clients: list = []


def copy_object(source: str, target: str) -> None:
    """One server-side ``CopyObject``: ``bucket/key`` to ``bucket/key``."""
    bucket, key = source.split("/", 1)
    target_bucket, target_key = target.split("/", 1)
    s3_client().copy_object(Bucket=target_bucket, Key=target_key, CopySource={"Bucket": bucket, "Key": key})


def s3_client():
    """A boto3 S3 client from AWS's standard sources (environment, profiles, instance roles); path-style
    addressing when an endpoint is given (``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``)."""
    if not _clients:
        import boto3
        from botocore.config import Config

        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        config = Config(s3={"addressing_style": "path"}) if endpoint else None
        _clients.append(boto3.session.Session().client("s3", config=config))
    return _clients[0]


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
