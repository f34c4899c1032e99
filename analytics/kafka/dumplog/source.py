"""The file a dump is made of: which files DumpLogSegments dumps as batches, how it prints a
path, and the file's bytes (local or remote)."""

from __future__ import annotations

import re

from analytics.kafka.fs import open_file

# DumpLogSegments dumps .log segments and KRaft .checkpoint snapshots as batches; the other
# suffixes (.index, .timeindex, .snapshot, .txnindex) print index or producer-state lines.
BATCH_FILE_SUFFIXES = (".log", ".checkpoint")


def java_path(path: str) -> str:
    """The path as ``new File(path)`` prints it: repeated separators collapsed, no trailing one.

    >>> java_path("/d//t-0/00000000000000000000.log/"), java_path("s3://b//t-0/x.log")
    ('/d/t-0/00000000000000000000.log', 's3://b//t-0/x.log')
    """
    if "://" in path:
        return path
    collapsed = re.sub(r"/{2,}", "/", path)
    return collapsed.rstrip("/") or collapsed


def read_all(path: str) -> bytes:
    """The whole file, for the sidecar files the tool prints (small: no windowed reading)."""
    with open_file(path) as source:
        return source.read_at(0, source.size)
