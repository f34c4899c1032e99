"""Explicit schemas of every table the reader and the jobs produce, in one place.

Column names and types follow ``docs/design.md`` (the interface contract); columns after the
contract's are extensions. Arrow types map one to one onto Spark SQL types (int64 → bigint,
int32 → int, int16 → smallint, large_binary → binary).
"""

from __future__ import annotations

import pyarrow as pa

BATCHES = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("file", pa.string()),
        ("file_position", pa.int64()),
        ("batch_size", pa.int32()),
        ("magic", pa.int8()),
        ("crc_valid", pa.bool_()),
        ("base_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("record_count", pa.int32()),
        ("partition_leader_epoch", pa.int32()),
        ("compression", pa.string()),
        ("timestamp_type", pa.string()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),
        ("base_timestamp", pa.int64()),
        ("max_timestamp", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("base_sequence", pa.int32()),
        ("last_sequence", pa.int32()),
        ("control_type", pa.string()),
        ("coordinator_epoch", pa.int32()),
        # extensions
        ("attributes", pa.int16()),
        ("delete_horizon_ms", pa.int64()),
        ("crc", pa.int64()),  # stored checksum, an unsigned 32-bit value
    ]
)

HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])

# What the reader yields per record; the export derives value_size and the hashes from it.
RECORDS_RAW = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("batch_base_offset", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("sequence", pa.int32()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.list_(HEADER)),
        ("value_size", pa.int32()),  # -1 for a null value; known even when the value is not (dump-log input)
        ("is_control", pa.bool_()),  # a control batch's record (a COMMIT/ABORT marker, ...)
    ]
)

# OUT/records: the record's value is replaced by its size and hash (xxhash64, seed 42, as Spark SQL's xxhash64).
RECORDS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("batch_base_offset", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("sequence", pa.int32()),
        ("key", pa.binary()),
        ("value_size", pa.int32()),
        ("key_hash", pa.int64()),
        ("value_hash", pa.int64()),
        ("headers", pa.list_(HEADER)),
        ("is_control", pa.bool_()),  # extension: a control batch's record
    ]
)

SEGMENTS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("file", pa.string()),
        ("base_offset", pa.int64()),
        ("size_bytes", pa.int64()),
        ("valid_bytes", pa.int64()),
        ("batch_count", pa.int64()),
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("status", pa.string()),
    ]
)

PARSE_ERRORS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("file", pa.string()),
        ("file_position", pa.int64()),
        ("error_kind", pa.string()),
        ("message", pa.string()),
        ("bytes_affected", pa.int64()),
    ]
)

PRODUCER_SNAPSHOTS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("snapshot_offset", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("last_sequence", pa.int32()),
        ("last_offset", pa.int64()),
        ("offset_delta", pa.int32()),
        ("timestamp", pa.int64()),
        ("coordinator_epoch", pa.int32()),
        ("current_txn_first_offset", pa.int64()),
        ("file", pa.string()),  # extension: the .snapshot file
    ]
)

ABORTED_TRANSACTIONS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("file", pa.string()),
        ("version", pa.int16()),
        ("producer_id", pa.int64()),
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("last_stable_offset", pa.int64()),
    ]
)

LEADER_EPOCHS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("leader_epoch", pa.int32()),
        ("start_offset", pa.int64()),
    ]
)

# Log-dir offset checkpoints; checkpoint = 'log-start-offset' rows are the log start offsets.
CHECKPOINTS = pa.schema(
    [
        ("checkpoint", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("file", pa.string()),  # the checkpoint file: its folder is the log dir it describes
    ]
)

PARTITION_METADATA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("version", pa.int32()),
        ("topic_id", pa.string()),
    ]
)
