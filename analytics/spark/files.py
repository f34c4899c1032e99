"""The unit of work of the ``kafka-segments`` data source: one file to read (:class:`FileTask`),
and the files one Spark task reads one after the other (:class:`FileGroup`).

The driver plans them (:mod:`analytics.spark.listing`), Spark ships them to the executors, where a
task type (:mod:`analytics.spark.tasks`) reads each file: plain values, picklable.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from analytics.kafka.model import SegmentInfo


@dataclass(frozen=True, slots=True)
class FileTask:
    """One file to read: where it is, what it is, and its place in the plan."""

    index: int  # position in the plan, from 0: names the task's output files
    path: str  # a local path or a filesystem URI
    topic: str  # "" for a file outside a partition folder (a log-dir checkpoint, dump-log text)
    partition: int  # -1 likewise
    base_offset: int  # from the 20-digit file name; -1 when the name carries none
    size: int  # bytes, for packing files into groups (those after ``after``, when given)
    # a segment that grew since a previous read of its head: that read's segments row (a
    # SegmentInfo, whole valid batches only) and the name its outputs had; only the rest is read
    after: SegmentInfo | None = None
    after_name: str = ""

    @property
    def output_name(self) -> str:
        """A stable name for what a task writes about this file: its index and a checksum of its path;
        for the rest of a grown segment, the name of the read of its head and where the rest starts.

        >>> FileTask(3, "/logs/t-0/00000000000000000000.log", "t", 0, 0, 100).output_name
        '0000003-9ee2ab10'
        """
        if self.after is not None:
            return f"{self.after_name}+{self.after.size_bytes}"
        return f"{self.index:07d}-{zlib.crc32(self.path.encode()):08x}"


class FileGroup(InputPartition):
    """The files one Spark task reads, one after the other (a task costs ~0.1 s of overhead, so
    small files share one)."""

    def __init__(self, number: int, files: Sequence[FileTask]):
        super().__init__(number)
        self.files = list(files)


def group_files(files: Sequence[FileTask], *, target_bytes: int, min_groups: int) -> list[list[FileTask]]:
    """Consecutive files packed into groups of about ``target_bytes`` (less when that would give
    fewer than ``min_groups`` groups, so every core gets work). Order is kept.

    >>> files = [FileTask(i, f"f{i}", "t", 0, 0, 10) for i in range(10)]
    >>> [len(g) for g in group_files(files, target_bytes=30, min_groups=1)]
    [3, 3, 3, 1]
    >>> len(group_files(files, target_bytes=1000, min_groups=4)) >= 4
    True
    """
    total = sum(f.size for f in files)
    target = max(1, min(target_bytes, -(-total // max(1, min_groups))))
    groups: list[list[FileTask]] = []
    size = 0
    for f in files:
        if not groups or (size and size + f.size > target):
            groups.append([])
            size = 0
        groups[-1].append(f)
        size += f.size
    return groups
