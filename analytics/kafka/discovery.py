"""Find the files of Kafka log directories, mirroring their layout: log dir → partition → files.

Names follow ``LogFileUtils.java`` and ``LocalLog.parseTopicPartitionName``: partition folders
are ``<topic>-<partition>``, or ``<topic>-<partition>.<32-hex uid>-delete|-future|-stray`` for
logs being deleted, moved between log dirs, or found stray in KRaft mode; segment files carry
their base offset as 20 digits. Segments are ordered by that offset, not by name.

An input path may be a log directory (folders of partitions, possibly several levels down, as
in a copied ``log.dirs`` tree), a single partition folder, or a single ``.log`` file.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from analytics.kafka.fs import RemotePath, filesystem, is_remote, list_tree, local_path
from analytics.kafka.sidecars.checkpoints import CHECKPOINT_FILES, LEADER_EPOCH_CHECKPOINT
from analytics.kafka.sidecars.metadata import PARTITION_METADATA

PARTITION_DIR = re.compile(
    r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)(?:\.(?P<uid>[0-9a-fA-F]{32})-(?P<suffix>delete|future|stray))?$"
)
OFFSET_FILE = re.compile(r"^(?P<offset>\d{20})\.(?P<ext>log|index|timeindex|snapshot|txnindex)$")
# A KRaft snapshot: <end offset>-<epoch>.checkpoint, and the bootstrap snapshot of a log dir.
KRAFT_SNAPSHOT = re.compile(r"^(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint$")
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
TEMPORARY_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")
# Partition folders a broker no longer serves: a deleted or moved-away replica, one KRaft found stray.
LEFTOVER_SUFFIXES = ("delete", "stray")

# Files a broker keeps that hold nothing the audit reads.
IGNORED_LOG_DIR_FILES = frozenset({"meta.properties", ".kafka_cleanshutdown", ".lock", BOOTSTRAP_CHECKPOINT})
IGNORED_PARTITION_FILES = frozenset({"quorum-state"})  # KRaft's __cluster_metadata-0


@dataclass(frozen=True, slots=True)
class Segment:
    base_offset: int
    path: Path


@dataclass(slots=True)
class PartitionDir:
    topic: str
    partition: int
    path: Path
    suffix: str | None = None  # delete, future, stray
    segments: list[Segment] = field(default_factory=list)  # sorted by base offset
    snapshots: list[Segment] = field(default_factory=list)  # .snapshot, sorted by offset
    txn_indexes: list[Segment] = field(default_factory=list)
    ignored: list[Path] = field(default_factory=list)  # .index, .timeindex, KRaft snapshots: recognised, not read
    leader_epoch_checkpoint: Path | None = None
    partition_metadata: Path | None = None
    temporary: list[Path] = field(default_factory=list)  # .deleted, .cleaned, .swap, .tmp
    unknown: list[Path] = field(default_factory=list)  # files Kafka does not write

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True)
class LogDir:
    path: Path
    partitions: list[PartitionDir] = field(default_factory=list)
    checkpoints: dict[str, Path] = field(default_factory=dict)  # kind name -> file
    unknown: list[Path] = field(default_factory=list)


def parse_partition_dir(name: str) -> tuple[str, int, str | None] | None:
    """(topic, partition, suffix) of a partition folder name, or None.

    >>> parse_partition_dir("orders.v1-12"), parse_partition_dir("t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete")
    (('orders.v1', 12, None), ('t', 0, 'delete'))
    """
    m = PARTITION_DIR.match(name)
    if not m:
        return None
    return m["topic"], int(m["partition"]), m["suffix"]


def discover(path: str | Path) -> list[LogDir]:
    """The log directories at or below ``path``, each with its partitions; raises FileNotFoundError.

    ``path`` may be a URI of any pyarrow filesystem (``s3://bucket/kafka-logs``); its files are
    then :class:`~analytics.kafka.fs.RemotePath` strings.
    """
    if is_remote(path):
        return _discover_remote(str(path))
    path = Path(local_path(path))
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {path}")
    if path.is_file():
        return [_single_file(path)]
    parsed = parse_partition_dir(path.name)
    if parsed and _holds_partition_files(path):
        log_dir = LogDir(path.parent)
        log_dir.partitions.append(_partition(path, *parsed))
        return [log_dir]
    found: list[LogDir] = []
    _walk(path, found)
    return found


def _holds_partition_files(directory: Path) -> bool:
    """A folder named like a partition is one if it holds a partition's files, or holds no folders.

    Names alone are ambiguous (``my-project-2`` parses as topic ``my-project``, partition 2), so a
    folder of folders is walked into instead.
    """
    has_dirs = False
    for p in directory.iterdir():
        if p.is_file() and _is_partition_file(p.name):
            return True
        has_dirs = has_dirs or p.is_dir()
    return not has_dirs


def _single_file(path: Path) -> LogDir:
    parent = RemotePath(posixpath.dirname(path)) if isinstance(path, RemotePath) else path.parent
    parsed = parse_partition_dir(parent.name)
    topic, partition, suffix = parsed if parsed else ("", -1, None)
    part = PartitionDir(topic, partition, parent, suffix)
    m = OFFSET_FILE.match(path.name)
    if m and m["ext"] == "log":
        part.segments.append(Segment(int(m["offset"]), path))
    elif path.suffix == ".log":
        part.segments.append(Segment(-1, path))  # a renamed copy: read it, its base offset is unknown
    else:
        _classify(part, path)
    if isinstance(path, RemotePath):
        log_dir = LogDir(RemotePath(posixpath.dirname(parent)) if parsed else parent)
    else:
        log_dir = LogDir(path.parent.parent if parsed else path.parent)
    log_dir.partitions.append(part)
    return log_dir


def _walk(directory: Path, found: list[LogDir]) -> None:
    log_dir = LogDir(directory)
    loose_files = []
    subdirs = []
    for child in sorted(directory.iterdir(), key=lambda p: p.name):
        if child.is_symlink():
            continue  # never follow links: a copied tree may loop
        if child.is_dir():
            parsed = parse_partition_dir(child.name)
            if parsed and _holds_partition_files(child):
                log_dir.partitions.append(_partition(child, *parsed))
            else:
                subdirs.append(child)
        elif child.is_file():
            if child.name in CHECKPOINT_FILES:
                log_dir.checkpoints[CHECKPOINT_FILES[child.name]] = child
            elif child.name not in IGNORED_LOG_DIR_FILES:
                loose_files.append(child)
    if log_dir.partitions or log_dir.checkpoints:
        log_dir.unknown.extend(loose_files)
        found.append(log_dir)
    for sub in subdirs:
        _walk(sub, found)


def _partition(path: Path, topic: str, partition: int, suffix: str | None) -> PartitionDir:
    part = PartitionDir(topic, partition, path, suffix)
    for child in path.iterdir():
        if child.is_file() and not child.is_symlink():
            _classify(part, child)
    _sort(part)
    return part


def _discover_remote(uri: str) -> list[LogDir]:
    """As :func:`discover`, over one recursive listing of a remote folder."""
    from pyarrow import fs as pafs

    fs, inner = filesystem(uri)
    info = fs.get_file_info(inner)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"no such file or directory: {uri}")
    root = uri.rstrip("/")
    if info.type == pafs.FileType.File:
        return [_single_file(RemotePath(root, info.size or 0))]
    children: dict[str, list[tuple[str, bool, int]]] = {}
    for full, is_dir, size in list_tree(root):
        children.setdefault(posixpath.dirname(full), []).append((full, is_dir, size))
    for entries in children.values():
        entries.sort()

    def holds_partition_files(d: str) -> bool:
        entries = children.get(d, [])
        if any(not is_dir and _is_partition_file(posixpath.basename(f)) for f, is_dir, _ in entries):
            return True
        return not any(is_dir for _, is_dir, _ in entries)

    def partition(d: str, topic: str, number: int, suffix: str | None) -> PartitionDir:
        part = PartitionDir(topic, number, RemotePath(d), suffix)
        for f, is_dir, size in children.get(d, []):
            if not is_dir:
                _classify(part, RemotePath(f, size))
        _sort(part)
        return part

    name = posixpath.basename(root)
    parsed = parse_partition_dir(name)
    if parsed and holds_partition_files(root):
        log_dir = LogDir(RemotePath(posixpath.dirname(root)))
        log_dir.partitions.append(partition(root, *parsed))
        return [log_dir]
    found: list[LogDir] = []
    pending = [root]
    while pending:
        d = pending.pop(0)
        log_dir = LogDir(RemotePath(d))
        loose, subdirs = [], []
        for f, is_dir, size in children.get(d, []):
            base = posixpath.basename(f)
            if is_dir:
                parsed = parse_partition_dir(base)
                if parsed and holds_partition_files(f):
                    log_dir.partitions.append(partition(f, *parsed))
                else:
                    subdirs.append(f)
            elif base in CHECKPOINT_FILES:
                log_dir.checkpoints[CHECKPOINT_FILES[base]] = RemotePath(f, size)
            elif base not in IGNORED_LOG_DIR_FILES:
                loose.append(RemotePath(f, size))
        if log_dir.partitions or log_dir.checkpoints:
            log_dir.unknown.extend(loose)
            found.append(log_dir)
        pending.extend(subdirs)
    return found


def _is_partition_file(name: str) -> bool:
    return bool(OFFSET_FILE.match(name)) or name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA)


def _sort(part: PartitionDir) -> None:
    for files in (part.segments, part.snapshots, part.txn_indexes):
        files.sort(key=lambda s: s.base_offset)
    for files in (part.ignored, part.temporary, part.unknown):
        files.sort()


def _classify(part: PartitionDir, child: Path) -> None:
    name = child.name
    m = OFFSET_FILE.match(name)
    if m:
        segment = Segment(int(m["offset"]), child)
        {
            "log": part.segments,
            "snapshot": part.snapshots,
            "txnindex": part.txn_indexes,
            "index": part.ignored,
            "timeindex": part.ignored,
        }[m["ext"]].append(segment if m["ext"] in ("log", "snapshot", "txnindex") else child)
    elif name == LEADER_EPOCH_CHECKPOINT:
        part.leader_epoch_checkpoint = child
    elif name == PARTITION_METADATA:
        part.partition_metadata = child
    elif name.endswith(TEMPORARY_SUFFIXES):
        part.temporary.append(child)
    elif KRAFT_SNAPSHOT.match(name) or name in IGNORED_PARTITION_FILES:
        part.ignored.append(child)
    else:
        part.unknown.append(child)
