-- The audit's classification (analytics/audit/rules.py) in DuckDB SQL, for bench/bench_audit.py.
-- The same windows and the same verdict, severity, explained_by and explanation columns over the
-- exported batches; broker restarts are not templated (the benchmark configures none).
-- Placeholders: {batches} {log_starts} {out} {expiration_ms} {compacted} {internal}.
COPY (
WITH b AS (
    SELECT * EXCLUDE (topic), topic, regexp_extract(file, '^(.*)/[^/]+/[^/]+$', 1) AS log_dir
    FROM read_parquet('{batches}/**/*.parquet', hive_partitioning = true)
),
valid1 AS (
    SELECT *,
        first_value(base_offset) OVER (part ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS partition_first_offset,
        coalesce(sum(last_offset - base_offset + 1) OVER earlier, 0) AS carried,
        greatest(coalesce(max(last_offset) OVER earlier - base_offset + 1, 0), 0) AS offset_overlap
    FROM b WHERE crc_valid
    WINDOW part AS (PARTITION BY log_dir, topic, "partition" ORDER BY base_offset, file_position),
           earlier AS (part ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
valid AS (
    SELECT * EXCLUDE (carried), base_offset - partition_first_offset - carried AS cum_holes FROM valid1
),
replayed AS (
    SELECT * FROM valid
    WHERE magic = 2 AND producer_id >= 0 AND NOT (is_control AND record_count = 0) AND topic NOT IN ({internal})
),
state1 AS (
    SELECT *,
        lag(producer_epoch) OVER prod AS prev_epoch,
        lag(max_timestamp) OVER prod AS prev_max_timestamp,
        lag(base_offset) OVER prod AS prev_base_offset,
        cum_holes - lag(cum_holes) OVER prod AS offset_holes,
        max(coordinator_epoch) OVER before AS prev_coordinator_epoch,
        last_value(CASE WHEN NOT is_control AND is_transactional THEN base_offset END IGNORE NULLS) OVER before AS last_txn_data,
        last_value(CASE WHEN is_control THEN base_offset END IGNORE NULLS) OVER before AS last_marker,
        CASE WHEN NOT is_control THEN row_number() OVER (
            PARTITION BY log_dir, topic, "partition", producer_id, producer_epoch, base_sequence, last_sequence
            ORDER BY base_offset, file_position) END AS dup_rank
    FROM replayed
    WINDOW prod AS (PARTITION BY log_dir, topic, "partition", producer_id ORDER BY base_offset, file_position),
           before AS (PARTITION BY log_dir, topic, "partition", producer_id ORDER BY base_offset, file_position
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
state2 AS (
    SELECT *,
        CASE WHEN NOT is_control THEN last_sequence
             WHEN prev_epoch IS NULL OR producer_epoch != prev_epoch THEN -1 END AS seq_after,
        last_txn_data IS NOT NULL AND (last_marker IS NULL OR last_txn_data > last_marker) AS txn_open,
        max_timestamp - prev_max_timestamp AS idle_ms
    FROM state1
),
state3 AS (
    SELECT *, last_value(seq_after IGNORE NULLS) OVER (
        PARTITION BY log_dir, topic, "partition", producer_id ORDER BY base_offset, file_position
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS state_last_seq
    FROM state2
),
state4 AS (
    SELECT *,
        CASE WHEN NOT is_control THEN
            CASE WHEN dup_rank > 1 THEN 'DUPLICATE'
                 WHEN prev_epoch IS NULL AND base_sequence = 0 THEN 'OK'
                 WHEN prev_epoch IS NULL THEN 'FIRST_SEEN_NONZERO'
                 WHEN producer_epoch > prev_epoch THEN CASE WHEN base_sequence = 0 THEN 'EPOCH_BUMP' ELSE 'EPOCH_BUMP_NONZERO' END
                 WHEN producer_epoch < prev_epoch THEN 'FENCED_ZOMBIE_WRITE'
                 WHEN base_sequence::BIGINT = state_last_seq::BIGINT + 1 OR (base_sequence = 0 AND state_last_seq = 2147483647) THEN 'OK'
                 WHEN ((base_sequence::BIGINT - state_last_seq::BIGINT - 1) % 2147483648 + 2147483648) % 2147483648
                      BETWEEN 1 AND 1073741823 THEN 'SEQUENCE_GAP'
                 ELSE 'SEQUENCE_REGRESSION' END
        ELSE
            CASE WHEN prev_epoch IS NOT NULL AND producer_epoch < prev_epoch THEN 'MARKER_EPOCH_REGRESSION'
                 WHEN coordinator_epoch < prev_coordinator_epoch THEN 'COORDINATOR_EPOCH_REGRESSION'
                 ELSE 'CONTROL_MARKER' END
        END AS verdict0,
        CASE WHEN is_control THEN NULL
             WHEN prev_epoch IS NULL OR producer_epoch != prev_epoch THEN 0
             ELSE ((state_last_seq::BIGINT + 1) % 2147483648)::INTEGER END AS expected_sequence,
        ((base_sequence::BIGINT - state_last_seq::BIGINT - 1) % 2147483648 + 2147483648) % 2147483648 AS missing
    FROM state3
),
state AS (
    SELECT * EXCLUDE (verdict0),
        CASE WHEN verdict0 IN ('OK', 'EPOCH_BUMP') AND NOT is_control AND txn_open AND NOT is_transactional
             THEN 'INVALID_TXN_STATE' ELSE verdict0 END AS verdict
    FROM state4
),
merged AS (
    SELECT * EXCLUDE (cum_holes, prev_coordinator_epoch, last_txn_data, last_marker, dup_rank, seq_after)
    FROM state
    UNION ALL BY NAME
    SELECT * EXCLUDE (cum_holes),
        CASE WHEN is_control AND magic = 2 THEN 'CONTROL_MARKER'
             WHEN producer_id < 0 OR magic < 2 THEN 'NON_IDEMPOTENT' ELSE 'OK' END AS verdict
    FROM valid
    WHERE NOT (magic = 2 AND producer_id >= 0 AND NOT (is_control AND record_count = 0) AND topic NOT IN ({internal}))
    UNION ALL BY NAME
    SELECT *, 'CORRUPT' AS verdict FROM b WHERE NOT crc_valid
),
starts AS (
    SELECT topic, "partition", max(log_start_offset) AS log_start_offset
    FROM read_parquet('{log_starts}/**/*.parquet') GROUP BY ALL
),
explained AS (
    SELECT m.*, s.log_start_offset,
        CASE WHEN m.verdict IN ('OK', 'EPOCH_BUMP', 'NON_IDEMPOTENT', 'CONTROL_MARKER', 'CORRUPT', 'INVALID_TXN_STATE') THEN NULL
             WHEN m.idle_ms >= {expiration_ms} AND NOT coalesce(m.txn_open, false) THEN 'producer_expiration'
             WHEN m.verdict = 'SEQUENCE_GAP' AND m.topic IN ({compacted}) AND m.missing <= m.offset_holes THEN 'compaction'
             WHEN m.verdict = 'FIRST_SEEN_NONZERO'
              AND (s.log_start_offset > 0 OR m.partition_first_offset > 0 OR m.topic IN ({compacted})) THEN 'partial_history'
        END AS explained_by
    FROM merged m LEFT JOIN starts s ON m.topic = s.topic AND m."partition" = s."partition"
),
texts AS (
    SELECT *,
        CASE WHEN verdict IN ('OK', 'EPOCH_BUMP') THEN 'ok'
             WHEN verdict IN ('NON_IDEMPOTENT', 'CONTROL_MARKER') THEN 'info'
             WHEN explained_by IS NOT NULL THEN 'explained' ELSE 'violation' END AS severity,
        'epoch ' || producer_epoch || ', sequence ' || base_sequence || '..' || last_sequence AS seen
    FROM explained
)
SELECT * EXCLUDE (seen, missing, log_dir, log_start_offset, state_last_seq, prev_max_timestamp, partition_first_offset),
    CASE verdict
        WHEN 'OK' THEN 'in sequence: ' || seen
        WHEN 'EPOCH_BUMP' THEN 'new epoch starting at 0: ' || seen
        WHEN 'NON_IDEMPOTENT' THEN 'no producer id or a legacy message: not tracked by the broker'
        WHEN 'CONTROL_MARKER' THEN coalesce(control_type, 'control') || ' marker at epoch ' || producer_epoch
        WHEN 'CORRUPT' THEN 'CRC mismatch: the batch is not replayed'
        WHEN 'DUPLICATE' THEN 'the same epoch and sequence range as an earlier batch: ' || seen
        ELSE concat_ws('; ', verdict || ': ' || seen, 'expected sequence ' || expected_sequence,
                       'idle ' || idle_ms || ' ms since the producer''s previous batch')
    END || coalesce(' — explained by ' || explained_by, '') AS explanation
FROM texts
) TO '{out}' (FORMAT parquet, PARTITION_BY (topic), OVERWRITE_OR_IGNORE);
