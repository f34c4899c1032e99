"""Files the readers read by position: local ones with ``os.pread``, the others through pyarrow.

A path with a scheme (``s3://bucket/kafka-logs``) is opened through
``pyarrow.fs.FileSystem.from_uri`` (S3, GCS, HDFS, ...); a plain path or ``file://`` URI stays
local. For ``s3://`` (and ``s3a://``, Hadoop's name) pyarrow honours the standard AWS environment
itself: ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` (path-style addressing), ``AWS_REGION``
(else the bucket's region is asked), the keys and ``AWS_SESSION_TOKEN``, and ``AWS_PROFILE``'s
credentials, though not a profile's ``endpoint_url`` (pyarrow 26 against versitygw). Clients are
cached per bucket and per ``AWS_*`` environment. :func:`open_uri` gives the filesystem of any path. Remote files are :class:`RemotePath` strings, which have the few ``pathlib`` members the
readers use (``name``, ``read_bytes``, ``stat``), so discovery, the segment reader and the sidecar
reader work on them unchanged. :func:`open_file` opens either kind for reads by position.
"""

from __future__ import annotations

import os
import posixpath
import zlib
from dataclasses import dataclass
from functools import lru_cache

# A segment grows at its end and the cleaner rewrites it whole: its size and both edges tell.
EDGE_BYTES = 64 * 1024


def is_remote(path) -> bool:
    """True for a URI with a scheme other than ``file``.

    >>> is_remote("s3://bucket/logs"), is_remote("/var/kafka"), is_remote("file:///var/kafka")
    (True, False, False)
    """
    text = str(path)
    return "://" in text and not text.startswith("file://")


def local_path(path) -> str:
    """A local path from a plain path or a ``file://`` URI."""
    text = str(path)
    return text[len("file://"):] if text.startswith("file://") else text


def _aws_environment() -> tuple:
    """The ``AWS_*`` environment an S3 client reads when made: a changed endpoint, profile or key
    gets a new client."""
    return tuple(sorted((key, value) for key, value in os.environ.items() if key.startswith("AWS_")))


@lru_cache(maxsize=16)
def _filesystem(root: str, environment: tuple = ()):
    """The filesystem of a URI and the URI's prefix up to its path (cached: clients are costly)."""
    from pyarrow import fs

    filesystem, path = fs.FileSystem.from_uri(root)
    if isinstance(filesystem, fs.S3FileSystem):
        filesystem = _written_whole(filesystem)
    return filesystem, root[: len(root) - len(path)] if root.endswith(path) else root


def _written_whole(filesystem):
    """``filesystem`` (S3) with its output streams opened when they first upload: a file smaller than
    one part is then one ``PutObject`` at its close, not a multipart upload's three requests (start,
    part, end). A refusal (a missing bucket, denied access) surfaces at that upload instead of at the
    open; :func:`check_exists` has asked the store first."""
    rebuild, (options,) = filesystem.__reduce__()
    return rebuild({**options, "allow_delayed_open": True})


def filesystem(uri: str):
    """(pyarrow filesystem, path inside it) of a remote URI (``s3a://`` read as ``s3://``)."""
    scheme, rest = uri.split("://", 1)
    scheme = "s3" if scheme.lower() == "s3a" else scheme
    netloc = rest.split("/", 1)[0]
    fs, _ = _filesystem(f"{scheme}://{netloc}", _aws_environment() if scheme == "s3" else ())
    path = rest[len(netloc):] if scheme in ("hdfs", "viewfs") else rest
    return fs, path.lstrip("/") if scheme not in ("hdfs", "viewfs") else path


def open_uri(uri) -> tuple:
    """(pyarrow filesystem, path inside it) of any path or URI: a remote one as :func:`filesystem`
    opens it, a plain path or ``file://`` URI on the local filesystem (made absolute).

    >>> type(open_uri("/tmp/out")[0]).__name__, open_uri("file:///tmp/out")[1]
    ('LocalFileSystem', '/tmp/out')
    """
    if is_remote(uri):
        return filesystem(str(uri))
    from pyarrow import fs

    return fs.LocalFileSystem(), os.path.abspath(local_path(uri))


@dataclass(frozen=True)
class _Stat:
    st_size: int


class RemotePath(str):
    """A remote file's URI, with its size from the listing that found it."""

    size: int

    def __new__(cls, uri: str, size: int = -1):
        obj = super().__new__(cls, uri)
        obj.size = size
        return obj

    @property
    def name(self) -> str:
        return posixpath.basename(self.rstrip("/"))

    def stat(self) -> _Stat:
        if self.size < 0:
            fs, path = filesystem(self)
            self.size = fs.get_file_info(path).size or 0
        return _Stat(self.size)

    def read_bytes(self) -> bytes:
        fs, path = filesystem(self)
        with fs.open_input_file(path) as f:
            return f.read()


class LocalFile:
    """A local file read by position (``os.pread``): no shared file offset, no seeks."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size

    def read_at(self, offset: int, length: int) -> bytes:
        data = os.pread(self._fd, length, offset)
        while len(data) < length:  # pread may return short; a file shrinking under us ends early
            more = os.pread(self._fd, length - len(data), offset + len(data))
            if not more:
                break
            data += more
        return data

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> "LocalFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ArrowFile:
    """A remote file read by position, like :class:`LocalFile`."""

    def __init__(self, uri: str):
        fs, path = filesystem(uri)
        self.path = uri
        self._file = fs.open_input_file(path)
        self.size = self._file.size()

    def read_at(self, offset: int, length: int) -> bytes:
        data = self._file.read_at(length, offset)  # bytes, or a pyarrow Buffer on some filesystems
        return data if isinstance(data, bytes) else data.to_pybytes()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "ArrowFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_file(path) -> LocalFile | ArrowFile:
    """``path`` opened for reads by position: a remote URI through pyarrow, anything else locally."""
    text = str(path)
    return ArrowFile(text) if is_remote(text) else LocalFile(local_path(text))


def list_tree(uri: str) -> list[tuple[str, bool, int]]:
    """Everything below a remote folder, in one listing: (uri, is_dir, size)."""
    from pyarrow import fs as pafs

    fs, path = filesystem(uri)
    base = uri.rstrip("/")
    out = []
    for info in fs.get_file_info(pafs.FileSelector(path.rstrip("/"), recursive=True)):
        rel = info.path[len(path.rstrip("/")):].lstrip("/")
        out.append((f"{base}/{rel}", info.type == pafs.FileType.Directory, info.size or 0))
    return out


def edge_crc(source, size: int | None = None) -> int:
    """CRC-32 of the first and last ``EDGE_BYTES`` of an open file (:func:`open_file`), or of its
    first ``size`` bytes: with the size, the fingerprint that tells an incremental export a segment
    did not change (or only grew)."""
    size = source.size if size is None else size
    head = source.read_at(0, min(size, EDGE_BYTES))
    tail = source.read_at(max(0, size - EDGE_BYTES), min(size, EDGE_BYTES))
    return zlib.crc32(tail, zlib.crc32(head))


# What the object store's own error codes mean for the operator: pyarrow names them in its messages
# ("AWS Error ACCESS_DENIED during HeadObject"), boto3 as ClientError codes or exception classes.
_STORE_PROBLEMS = (
    (("ACCESS_DENIED", "AccessDenied", "INVALID_ACCESS_KEY_ID", "InvalidAccessKeyId", "SIGNATURE_DOES_NOT_MATCH",
      "SignatureDoesNotMatch", "NoCredentialsError", "Unable to locate credentials", "HTTP status 403"),
     "access denied: check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the "
     "instance or pod role) and that they may read and write this bucket"),
    (("NETWORK_CONNECTION", "EndpointConnectionError", "Could not connect", "curlCode", "ConnectTimeout"),
     "the object store cannot be reached{endpoint}: check AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) and the network"),
    (("NO_SUCH_BUCKET", "NoSuchBucket"),
     "no such bucket{endpoint}: check the bucket's name, the endpoint and the region"),
    (("PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraint", "HTTP status 301",
      "wrong region"),
     "the bucket is in another region: set AWS_REGION to the bucket's region"),
)


def store_problem(exc: BaseException) -> str | None:
    """One line for an object store's refusal (credentials, endpoint, bucket, region), saying what to
    check; None when ``exc`` is no such refusal. The URI comes from the message when it names one."""
    text = f"{type(exc).__name__}: {exc}"
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "") if hasattr(exc, "response") else ""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    for marks, advice in _STORE_PROBLEMS:
        if any(mark in text or mark == code for mark in marks):
            where = _named_key(str(exc))
            return (f"{where}: " if where else "") + advice.format(endpoint=f" at {endpoint}" if endpoint else "")
    return None


def _named_key(message: str) -> str | None:
    """``s3://bucket/key`` from pyarrow's "... for key 'K' in bucket 'B' ..."."""
    import re

    found = re.search(r"key '([^']*)' in bucket '([^']*)'", message)
    return f"s3://{found.group(2)}/{found.group(1)}".rstrip("/") if found else None


def check_exists(uri: str) -> bool:
    """Whether a remote input exists, asked once with one retry, so a wrong endpoint or credentials
    are answered in a second rather than after the clients' retries; raises the store's error."""
    from pyarrow import fs

    scheme = uri.split("://", 1)[0].lower()
    if scheme in ("s3", "s3a") and "?" not in uri:  # options in the URI: pyarrow's own parsing, below
        options = {}
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            protocol, _, host = endpoint.rpartition("://")
            options.update(endpoint_override=host.rstrip("/"), scheme=protocol or "https")
        if os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"):
            options["region"] = os.environ.get("AWS_REGION") or os.environ["AWS_DEFAULT_REGION"]
        store = fs.S3FileSystem(retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=2), **options)
        path = uri.split("://", 1)[1]
    else:
        store, path = filesystem(uri)
    return store.get_file_info(path.rstrip("/") or path).type != fs.FileType.NotFound
