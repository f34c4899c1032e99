"""Readers and byte-exact writers for the files Kafka keeps beside its log segments.

A partition folder holds producer-state snapshots (``<offset>.snapshot``), transaction indexes
(``<offset>.txnindex``), a ``leader-epoch-checkpoint`` and a ``partition.metadata``; a log dir holds
the four offset checkpoints (``log-start-offset-checkpoint`` and its kin). Each reader takes the
file's bytes and returns a :class:`~analytics.kafka.model.SidecarResult`: a file that does not
parse becomes ``corrupt_sidecar`` rows, never an exception. Each writer returns the bytes the
broker writes for the same content, so tests and generated log directories are real Kafka files.

Where the broker tolerates something (an empty checkpoint file, a partial trailing ``.txnindex``
entry) the reader follows the broker's reading, and says so where it does.

Upstream sources, under https://github.com/apache/kafka/blob/trunk/:
- storage/src/main/resources/message/ProducerSnapshot.json
- storage/src/main/java/org/apache/kafka/storage/internals/log/ProducerStateManager.java
- storage/src/main/java/org/apache/kafka/storage/internals/log/AbortedTxn.java
- storage/src/main/java/org/apache/kafka/storage/internals/log/TransactionIndex.java
- storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/LeaderEpochCheckpointFile.java
- storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/PartitionMetadataFile.java
  (with PartitionMetadataReadBuffer.java and PartitionMetadata.java beside it)
- storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/OffsetCheckpointFile.java
- server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java
  (the text framing shared by the leader-epoch and offset checkpoints)
"""

from __future__ import annotations

import re
import stat
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

from analytics.kafka.errors import CORRUPT_SIDECAR, UNKNOWN_FILE, UNREADABLE, KafkaFormatError
from analytics.kafka.model import (
    AbortedTxn,
    CheckpointEntry,
    LeaderEpochEntry,
    ParseError,
    PartitionMetadata,
    SidecarResult,
    SnapshotEntry,
)
from analytics.kafka.util import crc32c

# --- Producer-state snapshot (ProducerStateManager.writeSnapshot / readSnapshot).
SNAPSHOT_HEADER = struct.Struct(
    ">h"  # 0 version: SNAPSHOT_VERSION; any other value is a CorruptSnapshotException
    "I"  # 2 crc: CRC-32C of bytes [SNAPSHOT_CRC_START, EOF)
    "i"  # 6 entry count (the length of the ProducerEntries array)
)
SNAPSHOT_ENTRY = struct.Struct(
    ">q"  # producerId
    "h"  # epoch
    "i"  # lastSequence
    "q"  # lastOffset: -1 when the entry has no data batch (only a marker)
    "i"  # offsetDelta: lastOffset - firstOffset of the last batch
    "q"  # timestamp: the entry's last timestamp, epoch ms
    "i"  # coordinatorEpoch: -1 before the producer's first marker
    "q"  # currentTxnFirstOffset: -1 when no transaction is open
)
SNAPSHOT_VERSION = 1
SNAPSHOT_CRC_POSITION = 2
SNAPSHOT_CRC_START = 6  # PRODUCER_ENTRIES_OFFSET: the CRC covers the count and every entry
SNAPSHOT_COUNT_POSITION = 6
SNAPSHOT_SUFFIX = ".snapshot"
# SnapshotEntry fields in on-disk order, after its topic, partition and snapshot_offset.
_SNAPSHOT_FIELDS = (
    "producer_id",
    "producer_epoch",
    "last_sequence",
    "last_offset",
    "offset_delta",
    "timestamp",
    "coordinator_epoch",
    "current_txn_first_offset",
)
# LogFileUtils.producerSnapshotFile: the offset zero-padded to 20 digits. re.ASCII keeps \d to 0-9.
_SNAPSHOT_NAME = re.compile(r"(\d{20})\.snapshot", re.ASCII)

# --- Transaction index: a bare sequence of AbortedTxn records, no header.
ABORTED_TXN = struct.Struct(
    ">h"  # version: ABORTED_TXN_VERSION
    "q"  # producerId
    "q"  # firstOffset: the transaction's first offset
    "q"  # lastOffset: the ABORT marker's offset
    "q"  # lastStableOffset: the last stable offset when the marker was appended
)
ABORTED_TXN_VERSION = 0
TXNINDEX_SUFFIX = ".txnindex"
_ABORTED_TXN_FIELDS = ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset")

# --- Text files. CheckpointFile: version line, count line, one entry per line, each ended by
# BufferedWriter.newLine() ("\n" on the Linux brokers this audits).
CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
PARTITION_METADATA_VERSION = 0
# Uuid.ZERO_UUID.toString(): Kafka's "no topic id" sentinel, which PartitionMetadataReadBuffer refuses.
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
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

# BufferedReader.readLine ends a line at "\n", "\r" or "\r\n".
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
# Java's \s is ASCII whitespace only; str.split() would also split on NBSP and other Unicode spaces.
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
_TOKEN = re.compile(r"[^ \t\n\x0b\f\r]+")
# Integer.parseInt / Long.parseLong syntax. Java would also take non-ASCII digits, which no broker
# writes; here they make the line malformed.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_QUOTE_LIMIT = 80  # characters of a bad line quoted in an error message


def snapshot_offset_from_name(name: str) -> int | None:
    """The offset in a snapshot file name (20 digits + ``.snapshot``), or None for any other name.

    >>> snapshot_offset_from_name("00000000000001234569.snapshot")
    1234569
    >>> snapshot_offset_from_name("00000000000001234569.snapshot.deleted") is None
    True
    """
    match = _SNAPSHOT_NAME.fullmatch(name)
    if match is None:
        return None
    offset = int(match.group(1))
    # 20 digits reach past int64, which Long.parseLong (LogFileUtils.offsetFromFileName) refuses.
    return offset if offset < 1 << 63 else None


def read_snapshot(
    data: bytes, *, topic: str, partition: int, file: str, snapshot_offset: int
) -> SidecarResult:
    """The producers of a ``.snapshot`` file, or one error row if the broker would refuse the file.

    A wrong version, a count that disagrees with the file size, a CRC mismatch or a short file
    leaves no row: the broker discards the whole snapshot, so no entry of it can be trusted.

    >>> data = write_snapshot([(23423, 146, 0, 1234569, 2, 3, 15, -1)])
    >>> read_snapshot(data, topic="t", partition=0, file="f", snapshot_offset=7).rows[0].producer_epoch
    146
    >>> read_snapshot(data[:-1], topic="t", partition=0, file="f", snapshot_offset=7).errors[0].message
    'entry count 1 needs 56 bytes, the file has 55'
    """
    try:
        entries = _decode_snapshot(data)
    except KafkaFormatError as exc:
        return SidecarResult(errors=[_error_row(topic, partition, file, exc)])
    return SidecarResult(
        rows=[SnapshotEntry(topic, partition, snapshot_offset, *values, file=file) for values in entries]
    )


def _decode_snapshot(data: bytes) -> Iterable[tuple]:
    size = len(data)
    if size < SNAPSHOT_HEADER.size:
        raise _corrupt(
            f"snapshot is {size} bytes, shorter than its {SNAPSHOT_HEADER.size}-byte header", 0, size
        )
    version, stored_crc, count = SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise _corrupt(f"unknown snapshot version {version}, expected {SNAPSHOT_VERSION}", 0, size)
    # The count is checked against the bytes present before anything is built from it.
    if count < 0:
        raise _corrupt(f"entry count {count} is negative", SNAPSHOT_COUNT_POSITION, size)
    needed = SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size
    if needed != size:
        raise _corrupt(
            f"entry count {count} needs {needed} bytes, the file has {size}", SNAPSHOT_COUNT_POSITION, size
        )
    view = memoryview(data)
    computed_crc = crc32c(view[SNAPSHOT_CRC_START:])
    if computed_crc != stored_crc:
        raise _corrupt(
            f"CRC-32C mismatch: stored {stored_crc:#010x}, computed {computed_crc:#010x}",
            SNAPSHOT_CRC_POSITION,
            size,
        )
    return SNAPSHOT_ENTRY.iter_unpack(view[SNAPSHOT_HEADER.size :])


def write_snapshot(entries: Iterable) -> bytes:
    """A version-1 ``.snapshot`` file, in the given entry order.

    ``entries`` are :class:`SnapshotEntry` rows or tuples of the eight on-disk values (producerId,
    epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch,
    currentTxnFirstOffset). A value outside its field's range raises ``struct.error``.

    >>> write_snapshot([]).hex()
    '000148674bc700000000'
    """
    body = b"".join(
        SNAPSHOT_ENTRY.pack(*_fields(entry, SnapshotEntry, _SNAPSHOT_FIELDS)) for entry in entries
    )
    out = bytearray(SNAPSHOT_HEADER.size) + body
    count = len(body) // SNAPSHOT_ENTRY.size
    # The CRC covers the count, so the header is written twice: count first, then the CRC over it.
    SNAPSHOT_HEADER.pack_into(out, 0, SNAPSHOT_VERSION, 0, count)
    SNAPSHOT_HEADER.pack_into(out, 0, SNAPSHOT_VERSION, crc32c(memoryview(out)[SNAPSHOT_CRC_START:]), count)
    return bytes(out)


def read_txnindex(data: bytes, *, topic: str, partition: int, file: str) -> SidecarResult:
    """The aborted transactions of a ``.txnindex`` file.

    Entries are independent records, so one bad entry does not condemn the others: an unknown
    version is an error for its 34 bytes; a partial trailing entry (which the broker's iterator
    skips) is an error for its bytes; a lastOffset that does not increase keeps its row and adds an
    error with no bytes affected, since TransactionIndex.append would have refused to write it.

    >>> data = write_txnindex([(7, 100, 105, 100), (7, 110, 104, 110)])
    >>> result = read_txnindex(data, topic="t", partition=0, file="f")
    >>> [row.last_offset for row in result.rows], [error.bytes_affected for error in result.errors]
    ([105, 104], [0])
    """
    result = SidecarResult()
    whole = len(data) - len(data) % ABORTED_TXN.size
    previous_last_offset = None
    for index, values in enumerate(ABORTED_TXN.iter_unpack(memoryview(data)[:whole])):
        position = index * ABORTED_TXN.size
        row = AbortedTxn(topic, partition, file, *values)
        if row.version != ABORTED_TXN_VERSION:
            # Kafka writes only version 0, so the other fields of this entry cannot be interpreted.
            message = f"unknown aborted transaction version {row.version}, expected {ABORTED_TXN_VERSION}"
            result.errors.append(
                ParseError(topic, partition, file, position, CORRUPT_SIDECAR, message, ABORTED_TXN.size)
            )
            continue
        if previous_last_offset is not None and row.last_offset <= previous_last_offset:
            message = f"lastOffset {row.last_offset} is not above the previous entry's {previous_last_offset}"
            result.errors.append(ParseError(topic, partition, file, position, CORRUPT_SIDECAR, message, 0))
        previous_last_offset = row.last_offset
        result.rows.append(row)
    tail = len(data) - whole
    if tail:
        message = f"{tail} trailing bytes do not make a whole {ABORTED_TXN.size}-byte entry"
        result.errors.append(ParseError(topic, partition, file, whole, CORRUPT_SIDECAR, message, tail))
    return result


def write_txnindex(entries: Iterable) -> bytes:
    """A ``.txnindex`` file holding ``entries`` in the given order.

    ``entries`` are :class:`AbortedTxn` rows (written with their own version) or tuples
    (producerId, firstOffset, lastOffset, lastStableOffset) written as version 0, like Kafka's
    ``AbortedTxn`` constructor. The order is not checked, so a file that breaks
    TransactionIndex.append's rule can be built on purpose.
    """
    return b"".join(ABORTED_TXN.pack(*_aborted_txn_fields(entry)) for entry in entries)


def _aborted_txn_fields(entry) -> tuple:
    if isinstance(entry, AbortedTxn):
        return _fields(entry, AbortedTxn, _ABORTED_TXN_FIELDS)
    return (ABORTED_TXN_VERSION, *entry)


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
        entries = _decode_checkpoint(_as_bytes(data), _leader_epoch_entry)
    except KafkaFormatError as exc:
        return SidecarResult(errors=[_error_row(topic, partition, file, exc)])
    return SidecarResult(rows=[LeaderEpochEntry(topic, partition, *entry) for entry in entries])


def _leader_epoch_entry(fields: list[str]) -> tuple[int, int] | None:
    if len(fields) != 2:
        return None
    epoch, start_offset = _java_integer(fields[0], 32), _java_integer(fields[1], 64)
    return None if epoch is None or start_offset is None else (epoch, start_offset)


def write_leader_epoch_checkpoint(entries: Iterable) -> bytes:
    """A ``leader-epoch-checkpoint`` from :class:`LeaderEpochEntry` rows or (epoch, startOffset) pairs.

    >>> write_leader_epoch_checkpoint([(0, 0), (4, 1500)])
    b'0\\n2\\n0 0\\n4 1500\\n'
    """
    lines = []
    for entry in entries:
        epoch, start_offset = _fields(entry, LeaderEpochEntry, ("leader_epoch", "start_offset"))
        lines.append(f"{_checked(epoch, 32, 'leader epoch')} {_checked(start_offset, 64, 'start offset')}")
    return _checkpoint_bytes(lines)


def read_offset_checkpoint(data: bytes | str, *, checkpoint: str, file: str) -> SidecarResult:
    """The (topic, partition, offset) lines of a log-dir offset checkpoint.

    ``checkpoint`` is the kind name for the rows (a value of :data:`CHECKPOINT_FILES`). Error rows
    carry :data:`LOG_DIR_TOPIC` and :data:`LOG_DIR_PARTITION`: the file belongs to no partition.

    >>> data = b"0\\n1\\nmy.topic-v2 3 42\\n"
    >>> read_offset_checkpoint(data, checkpoint="log-start-offset", file="f").rows
    [CheckpointEntry(checkpoint='log-start-offset', topic='my.topic-v2', partition=3, offset=42, file='f')]
    """
    try:
        entries = _decode_checkpoint(_as_bytes(data), _offset_entry)
    except KafkaFormatError as exc:
        return SidecarResult(errors=[_error_row(LOG_DIR_TOPIC, LOG_DIR_PARTITION, file, exc)])
    return SidecarResult(rows=[CheckpointEntry(checkpoint, *entry, file=file) for entry in entries])


def _offset_entry(fields: list[str]) -> tuple[str, int, int] | None:
    # A leading space would give an empty topic, which Kafka's formatter accepts but no broker writes.
    if len(fields) != 3 or not fields[0]:
        return None
    partition, offset = _java_integer(fields[1], 32), _java_integer(fields[2], 64)
    return None if partition is None or offset is None else (fields[0], partition, offset)


def write_offset_checkpoint(entries: Iterable) -> bytes:
    """A log-dir offset checkpoint from :class:`CheckpointEntry` rows or (topic, partition, offset) tuples.

    Kafka writes its map in hash order; here the given order is kept.

    >>> write_offset_checkpoint([("orders", 0, 1234), ("__consumer_offsets", 31, 0)])
    b'0\\n2\\norders 0 1234\\n__consumer_offsets 31 0\\n'
    """
    lines = []
    for entry in entries:
        topic, partition, offset = _fields(entry, CheckpointEntry, ("topic", "partition", "offset"))
        if not _TOKEN.fullmatch(topic):
            raise ValueError(f"topic {topic!r} is empty or holds whitespace, so its line would not read back")
        lines.append(f"{topic} {_checked(partition, 32, 'partition')} {_checked(offset, 64, 'offset')}")
    return _checkpoint_bytes(lines)


def read_partition_metadata(data: bytes | str, *, topic: str, partition: int, file: str) -> SidecarResult:
    """The topic id of a ``partition.metadata`` file, as one :class:`PartitionMetadata` row.

    The topic id is kept as written (Kafka's base64-url ``Uuid.toString``); any token is taken
    except the zero Uuid, which the broker refuses. Like PartitionMetadataReadBuffer, any version
    from 0 up is accepted (for downgrades) and lines after the topic id are ignored. An empty
    file gives no row and no error: brokers 2.8 to 3.0 created it empty before the topic id was
    known and skipped it while empty.

    >>> data = b"version: 0\\ntopic_id: ECE8pXTPS4K8OWe9Uc0cUQ"
    >>> read_partition_metadata(data, topic="t", partition=0, file="f").rows
    [PartitionMetadata(topic='t', partition=0, version=0, topic_id='ECE8pXTPS4K8OWe9Uc0cUQ')]
    """
    try:
        parsed = _decode_partition_metadata(_as_bytes(data))
    except KafkaFormatError as exc:
        return SidecarResult(errors=[_error_row(topic, partition, file, exc)])
    return SidecarResult(rows=[] if parsed is None else [PartitionMetadata(topic, partition, *parsed)])


def _decode_partition_metadata(data: bytes) -> tuple[int, str] | None:
    size = len(data)
    lines = _lines(data)
    if not lines:
        return None
    version_text = _metadata_value(lines[0], "version", size)
    version = _java_integer(version_text, 32)
    if version is None:
        raise _corrupt(f"malformed version line: {_quote(lines[0][1])}", lines[0][0], size)
    if version < PARTITION_METADATA_VERSION:
        raise _corrupt(f"unknown partition.metadata version {version}", lines[0][0], size)
    if len(lines) < 2:
        raise _corrupt("the topic_id line is missing", size, size)
    topic_id = _metadata_value(lines[1], "topic_id", size)
    if not _TOKEN.fullmatch(topic_id):
        raise _corrupt(f"malformed topic_id line: {_quote(lines[1][1])}", lines[1][0], size)
    if topic_id == ZERO_TOPIC_ID:
        raise _corrupt("the topic id is the zero Uuid, which Kafka rejects", lines[1][0], size)
    return version, topic_id


def _metadata_value(line: tuple[int, str], key: str, size: int) -> str:
    # PartitionMetadataReadBuffer splits at the first ":\s+" and wants the exact key before it.
    position, text = line
    match = re.fullmatch(re.escape(key) + r":[ \t\n\x0b\f\r]+(.*)", text, re.DOTALL)
    if match is None:
        raise _corrupt(f"malformed {key} line: {_quote(text)}", position, size)
    return match.group(1)


def write_partition_metadata(topic_id: str, *, version: int = PARTITION_METADATA_VERSION) -> bytes:
    """A ``partition.metadata`` file. As PartitionMetadata.encode, the last line has no newline.

    >>> write_partition_metadata("ECE8pXTPS4K8OWe9Uc0cUQ")
    b'version: 0\\ntopic_id: ECE8pXTPS4K8OWe9Uc0cUQ'
    """
    if not _TOKEN.fullmatch(topic_id):
        raise ValueError(f"topic id {topic_id!r} is empty or holds whitespace, so it would not read back")
    return f"version: {_checked(version, 32, 'version')}\ntopic_id: {topic_id}".encode()


def read_sidecar(path: Path, *, topic: str, partition: int) -> SidecarResult:
    """Read one sidecar file, choosing the reader by its name.

    Names handled: ``*.snapshot``, ``*.txnindex``, ``leader-epoch-checkpoint``,
    ``partition.metadata`` and the keys of :data:`CHECKPOINT_FILES`; any other name raises
    ``ValueError``, since the caller decides which files are sidecars. Error rows name the file by
    ``str(path)``. For a log-dir checkpoint ``topic`` and ``partition`` are not used (see
    :func:`read_offset_checkpoint`). A file the operating system refuses to read is one
    ``unreadable`` row.
    """
    name = path.name
    file = str(path)
    decode = _reader_for(name, topic=topic, partition=partition, file=file)
    if decode is None:
        raise ValueError(f"{name} is not a sidecar file")
    if name in CHECKPOINT_FILES:
        topic, partition = LOG_DIR_TOPIC, LOG_DIR_PARTITION
    try:
        data = path.read_bytes()
    except OSError as exc:
        message = f"cannot read {name}: {exc.strerror or exc}"
        return SidecarResult(
            errors=[ParseError(topic, partition, file, 0, UNREADABLE, message, _size_or_zero(path))]
        )
    return decode(data)


def _reader_for(
    name: str, *, topic: str, partition: int, file: str
) -> Callable[[bytes], SidecarResult] | None:
    if name in CHECKPOINT_FILES:
        return lambda data: read_offset_checkpoint(data, checkpoint=CHECKPOINT_FILES[name], file=file)
    if name == LEADER_EPOCH_CHECKPOINT:
        return lambda data: read_leader_epoch_checkpoint(data, topic=topic, partition=partition, file=file)
    if name == PARTITION_METADATA:
        return lambda data: read_partition_metadata(data, topic=topic, partition=partition, file=file)
    if name.endswith(TXNINDEX_SUFFIX):
        return lambda data: read_txnindex(data, topic=topic, partition=partition, file=file)
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    offset = snapshot_offset_from_name(name)
    if offset is None:
        # Kafka names every snapshot by its offset; without one its rows would have no snapshot_offset.
        message = "a .snapshot file whose name is not a 20-digit offset"
        return lambda data: SidecarResult(
            errors=[ParseError(topic, partition, file, 0, UNKNOWN_FILE, message, len(data))]
        )
    return lambda data: read_snapshot(
        data, topic=topic, partition=partition, file=file, snapshot_offset=offset
    )


def _size_or_zero(path: Path) -> int:
    # An unreadable file's bytes are still accounted for when stat works; a directory has no bytes of data.
    try:
        status = path.stat()
    except OSError:
        return 0
    return status.st_size if stat.S_ISREG(status.st_mode) else 0


def _decode_checkpoint(data: bytes, parse_entry: Callable[[list[str]], tuple | None]) -> list[tuple]:
    """The entries of a CheckpointFile, following CheckpointReadBuffer.read line by line."""
    size = len(data)
    lines = _lines(data)
    # CheckpointReadBuffer returns no entries for an empty file (Kafka creates checkpoints empty)
    # and for one that ends after its version line.
    if not lines:
        return []
    position, text = lines[0]
    version = _java_integer(text, 32)
    if version is None:
        raise _corrupt(f"malformed version line: {_quote(text)}", position, size)
    if version != CHECKPOINT_VERSION:
        raise _corrupt(f"unknown checkpoint version {version}, expected {CHECKPOINT_VERSION}", position, size)
    if len(lines) == 1:
        return []
    count_position, text = lines[1]
    count = _java_integer(text, 32)
    if count is None:
        raise _corrupt(f"malformed count line: {_quote(text)}", count_position, size)
    entries = []
    for number, (position, text) in enumerate(lines[2:], start=3):
        entry = parse_entry(_java_split(text))
        if entry is None:
            raise _corrupt(f"malformed line {number}: {_quote(text)}", position, size)
        entries.append(entry)
    if len(entries) != count:
        raise _corrupt(
            f"the count line says {count} entries, the file has {len(entries)}", count_position, size
        )
    return entries


def _checkpoint_bytes(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in (str(CHECKPOINT_VERSION), str(len(lines)), *lines)).encode()


def _as_bytes(data: bytes | str) -> bytes:
    # Text is encoded back so error positions are byte positions; "surrogatepass" turns lone
    # surrogates into bytes that the UTF-8 check then reports instead of raising here.
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)


def _lines(data: bytes) -> list[tuple[int, str]]:
    """(byte position, text) of each line, split as BufferedReader.readLine splits them."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The broker reads these files with a strict UTF-8 decoder (MalformedInputException).
        raise _corrupt(
            f"not UTF-8: byte {data[exc.start]:#04x} at position {exc.start}", exc.start, len(data)
        ) from None
    lines = []
    start = 0
    for line_break in _LINE_BREAK.finditer(data):
        lines.append((start, data[start : line_break.start()].decode("utf-8")))
        start = line_break.end()
    if start < len(data):
        lines.append((start, data[start:].decode("utf-8")))
    return lines


def _java_split(line: str) -> list[str]:
    # String.split("\\s+") keeps a leading empty field but drops trailing ones.
    fields = _JAVA_WHITESPACE.split(line)
    while fields and not fields[-1]:
        fields.pop()
    return fields


def _java_integer(text: str, bits: int) -> int | None:
    """Integer.parseInt (bits 32) or Long.parseLong (bits 64); None where Java would throw."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << (bits - 1)) <= value < 1 << (bits - 1) else None


def _checked(value: int, bits: int, name: str) -> int:
    # Writers refuse what the field cannot hold, as struct.pack does for the binary files.
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ValueError(f"{name} {value} does not fit in int{bits}")
    return value


def _fields(entry, row_type: type, names: tuple[str, ...]) -> tuple:
    if isinstance(entry, row_type):
        return tuple(getattr(entry, name) for name in names)
    return tuple(entry)


def _quote(text: str) -> str:
    return repr(text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + "...")


def _corrupt(message: str, position: int, size: int) -> KafkaFormatError:
    # Every whole-file problem makes the whole file untrusted, so all its bytes are affected.
    return KafkaFormatError(CORRUPT_SIDECAR, message, position, size)


def _error_row(topic: str, partition: int, file: str, exc: KafkaFormatError) -> ParseError:
    return ParseError(topic, partition, file, exc.position, exc.kind, exc.message, exc.bytes_affected)
