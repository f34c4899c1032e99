"""Explicit schemas of every table the reader and the stages produce, in one place.

Column names and types follow ``docs/design.md`` (the interface contract); columns after the
contract's are extensions. Arrow types map one to one onto Spark SQL types (int64 → bigint,
int32 → int, int16 → smallint, large_binary → binary).
"""

from __future__ import annotations

import pyarrow as pa

from analytics.contract.vocabulary import SIDECAR_TABLES, TABLES, VERDICTS

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
        ("file", pa.string()),  # extension: the file of the record's batch (its log dir: replicas apart)
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
        # extension: CRC-32 of the file's first and last 64 KiB as read (an incremental export's fingerprint)
        ("edge_crc", pa.int64()),
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
        ("producer_id", pa.int64()),  # null: an empty .snapshot's marker row (every producer column null)
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
        ("file", pa.string()),  # extension: the leader-epoch-checkpoint file (its log dir: the replica)
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
        ("file", pa.string()),  # extension: the partition.metadata file (its folder: the partition folder)
    ]
)

LOG_START_OFFSETS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("log_start_offset", pa.int64()),
        ("file", pa.string()),  # extension: the checkpoint file (its folder is the log dir)
    ]
)

# -- the audit's tables -----------------------------------------------------------------------
BATCH_VERDICTS = pa.schema(
    [
        *BATCHES,
        ("verdict", pa.string()),
        ("severity", pa.string()),
        ("explained_by", pa.string()),
        ("expected_sequence", pa.int32()),
        ("prev_base_offset", pa.int64()),
        ("idle_ms", pa.int64()),
        ("offset_holes", pa.int64()),
        ("explanation", pa.string()),
        # extensions: the facts every explanation and check reads from the row itself
        ("txn_open", pa.bool_()),
        ("offset_overlap", pa.int64()),
        ("state_last_sequence", pa.int32()),
        ("state_last_offset", pa.int64()),
        ("expired_offset", pa.int64()),
        ("conflict_offset", pa.int64()),
        ("topic_id", pa.string()),  # the partition folder's topic id (partition.metadata), null without one
        ("topic_deleted", pa.bool_()),  # extension: the incarnation was deleted (analytics.audit.incarnations)
    ]
)
ANOMALIES = BATCH_VERDICTS  # the rows of batch_verdicts whose severity is not ok

PRODUCER_SESSIONS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("log_dir", pa.string()),
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("first_timestamp", pa.int64()),
        ("last_timestamp", pa.int64()),
        ("batches", pa.int64()),
        ("records", pa.int64()),
        ("first_sequence", pa.int32()),
        ("last_sequence", pa.int32()),
        *[(v.lower(), pa.int64()) for v in VERDICTS],  # batches per verdict
        ("topic_id", pa.string()),  # extension: the incarnation of the topic (null: not known)
        ("topic_deleted", pa.bool_()),  # extension: the incarnation was deleted (analytics.audit.incarnations)
    ]
)

TRANSACTIONS = pa.schema(
    [
        ("topic", pa.string()), ("partition", pa.int32()), ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()), ("first_offset", pa.int64()), ("end_offset", pa.int64()),
        ("status", pa.string()),
        ("coordinator_epoch", pa.int32()),
        ("last_timestamp", pa.int64()),
        ("log_dir", pa.string()),
        ("coordinator_view", pa.string()),  # extension: an open transaction against a live cluster's coordinators
        ("topic_id", pa.string()),  # extension: the incarnation of the topic (null: not known)
        ("topic_deleted", pa.bool_()),  # extension: the incarnation was deleted (analytics.audit.incarnations)
    ]
)

SNAPSHOT_CHECKS = pa.schema(
    [
        ("topic", pa.string()), ("partition", pa.int32()), ("snapshot_offset", pa.int64()),
        ("producer_id", pa.int64()), ("status", pa.string()),
        ("expected_epoch", pa.int16()), ("replayed_epoch", pa.int16()),
        ("expected_last_sequence", pa.int32()), ("replayed_last_sequence", pa.int32()),
        ("expected_last_offset", pa.int64()), ("replayed_last_offset", pa.int64()), ("log_dir", pa.string()),
        ("topic_id", pa.string()),  # extension: the incarnation of the topic (null: not known)
        ("topic_deleted", pa.bool_()),  # extension: the incarnation was deleted (analytics.audit.incarnations)
    ]
)

# What an audit leaves for the next (analytics.audit.state): the state a broker would hold for each
# producer, then the aggregates the replay carries into the batches after the audited ones.
_SPANS = pa.struct([("span", pa.int64()), ("top", pa.int64()), ("low", pa.int64())])
_ORDER = [("base_offset", pa.int64()), ("file_position", pa.int64())]
PRODUCER_STATE = pa.schema(
    [
        ("log_dir", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("topic_id", pa.string()),
        ("producer_id", pa.int64()), ("producer_epoch", pa.int16()), ("last_sequence", pa.int32()),
        ("last_offset", pa.int64()),
        ("last_timestamp", pa.int64()),
        ("txn_open", pa.bool_()),
        ("last", pa.struct([*_ORDER, ("epoch", pa.int16()), ("max_timestamp", pa.int64()), ("cum_holes", pa.int64())])),
        ("coordinator_epoch", pa.int32()),
        ("txn_data", pa.int64()),
        ("marker", pa.int64()),
        ("data_seq", pa.struct([*_ORDER, ("seq", pa.int32())])),
        ("expired", pa.int64()),
        ("left", pa.struct([*_ORDER, ("seq", pa.int32()), ("off", pa.int64())])),
        ("runs", pa.int64()),
        ("wraps", pa.int64()),
        ("mark", pa.struct([("run", pa.int64()), ("seq", pa.int64()), ("offset", pa.int64())])),
    ]
)

# The batches audited per segment file: the export run that read them into Parquet (read_by, from the
# export's manifest) and their fingerprint (analytics.audit.state.fingerprint). An incremental audit
# reads only the files read since, and checks a history's audited prefix from these rows.
FILE_STATE = pa.schema(
    [
        ("log_dir", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("topic_id", pa.string()),
        ("file", pa.string()), ("read_by", pa.string()), ("batches", pa.int64()), ("end_offset", pa.int64()),
        ("fingerprint_a", pa.int64()), ("fingerprint_b", pa.int64()),
    ]
)

# The idempotent batches per segment file, producer and epoch (analytics.audit.tables.per_file): what
# producer_sessions sums per log dir and snapshot_checks searches, kept so that an incremental audit
# adds its new batches' rows instead of aggregating every verdict again. The base sequences bound
# where its duplicate check looks back; last_state is the state left by the last batch that leaves one.
_LONGS = ("first_offset", "last_offset", "first_timestamp", "last_timestamp", "batches", "records")
PRODUCER_FILES = pa.schema(
    [
        ("topic", pa.string()), ("partition", pa.int32()), ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()), ("file", pa.string()), *[(c, pa.int64()) for c in _LONGS],
        ("first_sequence", pa.int32()), ("first_data_offset", pa.int64()),
        ("last_sequence", pa.int32()), ("last_data_offset", pa.int64()),
        ("first_state_offset", pa.int64()), ("last_state_offset", pa.int64()),
        ("min_base_sequence", pa.int32()), ("max_base_sequence", pa.int32()),
        ("last_state", pa.struct([*_ORDER, ("sequence", pa.int32()), ("offset", pa.int64())])),
        *[(v.lower(), pa.int64()) for v in VERDICTS],
        ("topic_id", pa.string()),
    ]
)

PARTITION_STATE = pa.schema(
    [
        ("log_dir", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("topic_id", pa.string()),
        ("batches", pa.int64()), ("end_offset", pa.int64()), ("fingerprint_a", pa.int64()),
        ("fingerprint_b", pa.int64()), ("log_start_offset", pa.int64()), ("valid", _SPANS), ("corrupt", _SPANS),
    ]
)

RECORD_DUPLICATES = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("dedup_key", pa.string()),
        ("offset", pa.int64()),
        ("first_offset", pa.int64()),
        ("producer_id", pa.int64()),
        ("first_producer_id", pa.int64()),
        ("log_dir", pa.string()),  # extension: copies are counted within one log dir (replica)
        # extension: what a read_committed consumer makes of the copy (vocabulary.DUPLICATE_KINDS): only
        # "duplicate" rows are received twice (no_duplicate_record, summary.json's record_duplicates)
        ("kind", pa.string()),
        ("topic_id", pa.string()),  # extension: the incarnation of the topic (null: not known)
        ("topic_deleted", pa.bool_()),  # extension: the incarnation was deleted (analytics.audit.incarnations)
    ]
)

REPLICA_DIVERGENCE = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("log_dir", pa.string()),  # the replica that holds the offsets (different_batch: the first of the pair)
        ("other_log_dir", pa.string()),
        ("kind", pa.string()),
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("leader_epoch", pa.int32()),  # the highest leader epoch that wrote the range in log_dir
        ("other_leader_epoch", pa.int32()),  # ... in other_log_dir (its batches, else its epoch at first_offset)
        ("severity", pa.string()),
        ("batches", pa.int64()),  # extension: log_dir's batches in the range
        ("records", pa.int64()),  # extension: their records
        ("other_batches", pa.int64()),  # extension: other_log_dir's batches in the range (different_batch)
        ("other_records", pa.int64()),  # extension: their records
        ("explained_by", pa.string()),  # extension: compaction, for a missing range of a compacted topic
        ("topic_id", pa.string()),  # extension: the incarnation both replicas hold (null: not known)
        ("topic_deleted", pa.bool_()),  # extension: the incarnation was deleted (analytics.audit.incarnations)
    ]
)

# OUT/transactional_ids: one row per record of __transaction_state (analytics.kafka.coordinator)
TRANSACTIONAL_IDS = pa.schema(
    [
        ("transactional_id", pa.string()),
        ("producer_id", pa.int64()),  # null for a tombstone
        ("producer_epoch", pa.int16()),
        ("previous_producer_id", pa.int64()),  # -1 unless the record carries it (value version 1)
        ("next_producer_id", pa.int64()),
        ("state", pa.string()),  # Kafka's TransactionState name, or Tombstone
        ("timeout_ms", pa.int32()),
        ("partitions", pa.list_(pa.string())),  # "topic-partition", sorted
        ("update_timestamp", pa.int64()),
        ("start_timestamp", pa.int64()),  # extension: txnStartTimestamp
        ("offset", pa.int64()),  # extension: the record's offset in the coordinator's partition
        ("timestamp", pa.int64()),  # extension: the record's timestamp
        ("coordinator_partition", pa.int32()),  # extension: the partition of __transaction_state
        ("client_transaction_version", pa.int16()),  # extension
        ("value_version", pa.int16()),  # extension: 0, or 1 (flexible, KIP-890)
        ("file", pa.string()),  # extension: the segment
    ]
)

# OUT/coordinator_transactions: the transaction coordinators' view of a live cluster at the export
# (ListTransactions and DescribeTransactions; empty for an export of log dirs)
COORDINATOR_TRANSACTIONS = pa.schema(
    [
        ("transactional_id", pa.string()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("state", pa.string()),  # Kafka's TransactionState name (Ongoing, PrepareCommit, ...)
        ("timeout_ms", pa.int32()),
        ("start_timestamp", pa.int64()),  # -1 when no transaction is running
        ("partitions", pa.list_(pa.string())),  # "topic-partition", sorted
        ("coordinator", pa.int32()),  # the broker that answered
        ("captured_at", pa.int64()),  # ms since the epoch, when the coordinators were asked
        ("log_dir", pa.string()),  # kafka://<cluster id>: the log dir of the export's batches
    ]
)

# OUT/reconciliation: per log dir, topic, partition and bucket of record timestamps (analytics.reconcile)
RECONCILIATION = pa.schema(
    [
        ("topic", pa.string()),  # null when the expected counts are for every topic together
        ("partition", pa.int32()),  # null when they are per topic
        ("log_dir", pa.string()),
        ("bucket_start", pa.timestamp("us", tz="UTC")),
        ("bucket_end", pa.timestamp("us", tz="UTC")),
        ("expected", pa.int64()),  # null without expected counts for the bucket
        ("records", pa.int64()),  # data records in the log
        ("distinct", pa.int64()),  # records less the repeated copies
        ("duplicated", pa.int64()),  # repeated copies (record_duplicates rows)
        ("missing", pa.int64()),  # expected - distinct when above 0
        ("surplus", pa.int64()),  # extension: distinct - expected when above 0
        ("level", pa.string()),  # extension: partition, topic or all
    ]
)

# OUT/cluster_configs (extension): the configs in force at the end of each log dir's KRaft metadata log
CLUSTER_CONFIGS = pa.schema([("resource_type", pa.string()), ("resource_name", pa.string()), ("name", pa.string()),
                             ("value", pa.string()), ("offset", pa.int64()), ("log_dir", pa.string()),
                             ("node_id", pa.int32()), ("end_offset", pa.int64()), ("file", pa.string())])

# Every table under OUT by its contract name (``records`` as written: value replaced by size and hash).
OUT_SCHEMAS = dict(
    batches=BATCHES, records=RECORDS, segments=SEGMENTS, parse_errors=PARSE_ERRORS,
    producer_snapshots=PRODUCER_SNAPSHOTS, aborted_transactions=ABORTED_TRANSACTIONS, leader_epochs=LEADER_EPOCHS,
    checkpoints=CHECKPOINTS, partition_metadata=PARTITION_METADATA, log_start_offsets=LOG_START_OFFSETS,
    transactional_ids=TRANSACTIONAL_IDS, coordinator_transactions=COORDINATOR_TRANSACTIONS,
    cluster_configs=CLUSTER_CONFIGS, batch_verdicts=BATCH_VERDICTS, anomalies=ANOMALIES,
    producer_sessions=PRODUCER_SESSIONS, transactions=TRANSACTIONS, snapshot_checks=SNAPSHOT_CHECKS,
    producer_state=PRODUCER_STATE, partition_state=PARTITION_STATE, producer_files=PRODUCER_FILES,
    file_state=FILE_STATE, record_duplicates=RECORD_DUPLICATES, replica_divergence=REPLICA_DIVERGENCE,
    reconciliation=RECONCILIATION,
)
# What the reader yields per table (``records`` with the raw value), for the tables it reads.
READ_SCHEMAS = {**{name: OUT_SCHEMAS[name] for name in (
    "batches", "segments", "parse_errors", *SIDECAR_TABLES)}, "records": RECORDS_RAW}

assert set(OUT_SCHEMAS) == set(TABLES), "every table of the contract has a schema"
