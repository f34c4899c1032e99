"""The text checkpoints: a partition's ``leader-epoch-checkpoint`` and a log dir's four offset
checkpoints (``log-start-offset-checkpoint`` and its kin), read and written.

Both share CheckpointFile's framing: a version line, a count line, one entry per line, each
ended by ``BufferedWriter.newLine()`` ("\\n" on the Linux brokers this audits).

Upstream sources, under https://github.com/apache/kafka/blob/trunk/:
- server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java
- storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/LeaderEpochCheckpointFile.java
- storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/OffsetCheckpointFile.java
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from analytics.kafka.errors import KafkaFormatError
from analytics.kafka.model import CheckpointEntry, LeaderEpochEntry, SidecarResult
from analytics.kafka.sidecars.results import corrupt, entry_values, error_row
from analytics.kafka.sidecars.text import TOKEN, as_bytes, checked, java_integer, java_split, lines, quote

CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# Log-dir checkpoint file name -> the kind name of its CheckpointEntry rows.
CHECKPOINT_FILES = {
    "log-start-offset-checkpoint": "log-start-offset",
    "recovery-point-offset-checkpoint": "recovery-point-offset",
    "replication-offset-checkpoint": "replication-offset",  # the high watermarks
    "cleaner-offset-checkpoint": "cleaner-offset",
}
# A log-dir checkpoint belongs to no partition (its rows name their own), so its error rows carry these.
LOG_DIR_TOPIC = ""
LOG_DIR_PARTITION = -1


def read_leader_epoch_checkpoint(
    data: bytes | str, *, topic: str, partition: int, file: str
) -> SidecarResult:
    """The (leader epoch, start offset) lines of a ``leader-epoch-checkpoint``.

    >>> result = read_leader_epoch_checkpoint(b"0\\n2\\n0 0\\n4 1500\\n", topic="t", partition=0, file="f")
    >>> [(row.leader_epoch, row.start_offset) for row in result.rows]
    [(0, 0), (4, 1500)]
    >>> read_leader_epoch_checkpoint(b"0\\n3\\n0 0\\n", topic="t", partition=0, file="f").errors[0].message
    'the count line says 3 entries, the file has 1'
    """
    try:
        entries = _decode_checkpoint(as_bytes(data), _leader_epoch_entry)
    except KafkaFormatError as exc:
        return SidecarResult(errors=[error_row(topic, partition, file, exc)])
    return SidecarResult(rows=[LeaderEpochEntry(topic, partition, *entry, file=file) for entry in entries])


def _leader_epoch_entry(fields: list[str]) -> tuple[int, int] | None:
    if len(fields) != 2:
        return None
    epoch, start_offset = java_integer(fields[0], 32), java_integer(fields[1], 64)
    return None if epoch is None or start_offset is None else (epoch, start_offset)


def write_leader_epoch_checkpoint(entries: Iterable) -> bytes:
    """A ``leader-epoch-checkpoint`` from :class:`LeaderEpochEntry` rows or (epoch, startOffset) pairs.

    >>> write_leader_epoch_checkpoint([(0, 0), (4, 1500)])
    b'0\\n2\\n0 0\\n4 1500\\n'
    """
    out = []
    for entry in entries:
        epoch, start_offset = entry_values(entry, LeaderEpochEntry, ("leader_epoch", "start_offset"))
        out.append(f"{checked(epoch, 32, 'leader epoch')} {checked(start_offset, 64, 'start offset')}")
    return _checkpoint_bytes(out)


def read_offset_checkpoint(data: bytes | str, *, checkpoint: str, file: str) -> SidecarResult:
    """The (topic, partition, offset) lines of a log-dir offset checkpoint.

    ``checkpoint`` is the kind name for the rows (a value of :data:`CHECKPOINT_FILES`). Error rows
    carry :data:`LOG_DIR_TOPIC` and :data:`LOG_DIR_PARTITION`: the file belongs to no partition.

    >>> data = b"0\\n1\\nmy.topic-v2 3 42\\n"
    >>> read_offset_checkpoint(data, checkpoint="log-start-offset", file="f").rows
    [CheckpointEntry(checkpoint='log-start-offset', topic='my.topic-v2', partition=3, offset=42, file='f')]
    """
    try:
        entries = _decode_checkpoint(as_bytes(data), _offset_entry)
    except KafkaFormatError as exc:
        return SidecarResult(errors=[error_row(LOG_DIR_TOPIC, LOG_DIR_PARTITION, file, exc)])
    return SidecarResult(rows=[CheckpointEntry(checkpoint, *entry, file=file) for entry in entries])


def _offset_entry(fields: list[str]) -> tuple[str, int, int] | None:
    # A leading space would give an empty topic, which Kafka's formatter accepts but no broker writes.
    if len(fields) != 3 or not fields[0]:
        return None
    partition, offset = java_integer(fields[1], 32), java_integer(fields[2], 64)
    return None if partition is None or offset is None else (fields[0], partition, offset)


def write_offset_checkpoint(entries: Iterable) -> bytes:
    """A log-dir offset checkpoint from :class:`CheckpointEntry` rows or (topic, partition, offset) tuples.

    Kafka writes its map in hash order; here the given order is kept.

    >>> write_offset_checkpoint([("orders", 0, 1234), ("__consumer_offsets", 31, 0)])
    b'0\\n2\\norders 0 1234\\n__consumer_offsets 31 0\\n'
    """
    out = []
    for entry in entries:
        topic, partition, offset = entry_values(entry, CheckpointEntry, ("topic", "partition", "offset"))
        if not TOKEN.fullmatch(topic):
            raise ValueError(f"topic {topic!r} is empty or holds whitespace, so its line would not read back")
        out.append(f"{topic} {checked(partition, 32, 'partition')} {checked(offset, 64, 'offset')}")
    return _checkpoint_bytes(out)


def _decode_checkpoint(data: bytes, parse_entry: Callable[[list[str]], tuple | None]) -> list[tuple]:
    """The entries of a CheckpointFile, following CheckpointReadBuffer.read line by line."""
    size = len(data)
    found = lines(data)
    # CheckpointReadBuffer returns no entries for an empty file (Kafka creates checkpoints empty)
    # and for one that ends after its version line.
    if not found:
        return []
    position, text = found[0]
    version = java_integer(text, 32)
    if version is None:
        raise corrupt(f"malformed version line: {quote(text)}", position, size)
    if version != CHECKPOINT_VERSION:
        raise corrupt(f"unknown checkpoint version {version}, expected {CHECKPOINT_VERSION}", position, size)
    if len(found) == 1:
        return []
    count_position, text = found[1]
    count = java_integer(text, 32)
    if count is None:
        raise corrupt(f"malformed count line: {quote(text)}", count_position, size)
    entries = []
    for number, (position, text) in enumerate(found[2:], start=3):
        entry = parse_entry(java_split(text))
        if entry is None:
            raise corrupt(f"malformed line {number}: {quote(text)}", position, size)
        entries.append(entry)
    if len(entries) != count:
        raise corrupt(
            f"the count line says {count} entries, the file has {len(entries)}", count_position, size
        )
    return entries


def _checkpoint_bytes(entry_lines: list[str]) -> bytes:
    all_lines = (str(CHECKPOINT_VERSION), str(len(entry_lines)), *entry_lines)
    return "".join(f"{line}\n" for line in all_lines).encode()
