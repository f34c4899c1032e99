"""Rows the reader produces: one dataclass per table of the interface contract.

Field names are the column names of ``docs/design.md`` (``OUT/batches``, ``OUT/records``,
``OUT/segments``, ``OUT/parse_errors``, ``OUT/producer_snapshots``), so turning a row into a
table row is ``dataclasses.asdict`` plus the topic, partition and file of its context.
Offsets and ids are int64, epochs int16, sequences int32, timestamps epoch milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Batch:
    """One record batch (magic 2) or one legacy message-set entry (magic 0/1)."""

    topic: str
    partition: int
    file: str
    file_position: int  # byte position of the entry in its file
    batch_size: int  # bytes of the whole entry, framing included (12 + size field)
    magic: int
    crc_valid: bool
    base_offset: int
    last_offset: int
    record_count: int  # records present (below last-base+1 after compaction)
    partition_leader_epoch: int  # -1 for legacy entries
    compression: str  # none, gzip, snappy, lz4, zstd, or unknown(N)
    timestamp_type: str  # CreateTime, LogAppendTime, NoTimestampType
    is_transactional: bool
    is_control: bool
    base_timestamp: int | None  # -1 for an empty batch; holds deleteHorizonMs when that bit is set
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int  # derived, with the int32 wrap; -1 without a sequence
    control_type: str | None  # COMMIT, ABORT, another control type name, or None
    coordinator_epoch: int | None  # from the COMMIT/ABORT marker value
    attributes: int = 0  # raw attribute bits (extension column)
    delete_horizon_ms: int | None = None  # set when the batch carries the 3.1+ delete horizon
    crc: int | None = None  # the stored checksum (CRC-32C for v2, CRC-32 for legacy), as written


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record; for a control batch, the control record with its raw key and value."""

    offset: int
    timestamp: int
    sequence: int  # -1 without a producer sequence
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class ParseError:
    """A problem found while reading: one row of ``OUT/parse_errors``."""

    topic: str
    partition: int
    file: str
    file_position: int
    error_kind: str
    message: str
    bytes_affected: int  # bytes that are in no valid parsed batch because of this problem


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One file read: a row of ``OUT/segments``."""

    topic: str
    partition: int
    file: str
    base_offset: int  # from the 20-digit file name; -1 when the name carries none
    size_bytes: int
    valid_bytes: int  # bytes in CRC-valid batches; size_bytes - valid_bytes is in parse_errors
    batch_count: int  # entries with a parsed header, CRC-valid or not
    first_offset: int | None
    last_offset: int | None
    status: str  # ok, or the error kind that ended or marred the file
    edge_crc: int | None = None  # CRC-32 of the file's first and last EDGE_BYTES as read (fs.edge_crc)


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One producer of a broker ``.snapshot`` file: a row of ``OUT/producer_snapshots``. An empty
    file's marker row has None in every producer field (``sidecars.snapshot.empty_snapshot_marker``)."""

    topic: str
    partition: int
    snapshot_offset: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int  # -1 when the entry has no data batch (only a marker)
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1 when no transaction is open
    file: str = ""  # the .snapshot file (extension: places the snapshot in its log dir)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One ``.txnindex`` entry (AbortedTxn.java)."""

    topic: str
    partition: int
    file: str
    version: int
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class LeaderEpochEntry:
    """One line of a partition's ``leader-epoch-checkpoint``."""

    topic: str
    partition: int
    leader_epoch: int
    start_offset: int
    # the checkpoint file: its log dir tells the replicas of a partition apart (provenance: not compared)
    file: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class CheckpointEntry:
    """One line of a log-dir offset checkpoint (``log-start-offset-checkpoint`` and its kin)."""

    checkpoint: str  # log-start-offset, recovery-point-offset, replication-offset, cleaner-offset
    topic: str
    partition: int
    offset: int
    # the checkpoint file, which sits in the log dir it describes (provenance: not compared)
    file: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """A partition's ``partition.metadata`` file."""

    topic: str
    partition: int
    version: int
    topic_id: str
    # the partition.metadata file: its folder is the partition folder whose identity it gives
    file: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class TransactionalIdChange:
    """One record of the coordinator's ``__transaction_state`` log: a row of ``OUT/transactional_ids``."""

    coordinator_partition: int  # the partition of __transaction_state holding the transactional id
    file: str
    offset: int
    timestamp: int  # the record's timestamp
    transactional_id: str
    state: str  # Kafka's TransactionState name, or Tombstone for a null value (the id removed)
    producer_id: int | None = None
    producer_epoch: int | None = None
    previous_producer_id: int | None = None  # -1 unless the value is version 1 and carries it
    next_producer_id: int | None = None
    timeout_ms: int | None = None
    partitions: tuple[str, ...] | None = None  # "topic-partition" of the transaction, sorted
    update_timestamp: int | None = None  # the coordinator's txnLastUpdateTimestamp
    start_timestamp: int | None = None  # txnStartTimestamp
    client_transaction_version: int | None = None
    value_version: int | None = None


@dataclass(slots=True)
class SidecarResult:
    """What one sidecar file yielded: its rows, or the errors that kept them from being read."""

    rows: list = field(default_factory=list)
    errors: list[ParseError] = field(default_factory=list)
