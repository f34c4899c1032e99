"""The export of a live cluster over the Kafka protocol: ``segaudit export kafka://HOST:PORT ...``.

The same tables as an export of log dirs, so the audit, validation, report and forensic commands
work unchanged:

- ``batches`` (``records``), ``segments``, ``parse_errors``: each partition's captured offsets
  (:func:`analytics.cluster.capture.capture`), fetched by Spark tasks on the executors
  (:mod:`analytics.spark.fetching`). A fetched range stands where a segment file stands: its
  ``file`` is ``kafka://<cluster id>/<topic>-<partition>/<range start, 20 digits>``, and
  ``file_position`` is the byte position of a batch in the bytes fetched for the range, so
  ``log_dir`` is ``kafka://<cluster id>``;
- ``producer_snapshots``: DescribeProducers at each partition's leader, one row per producer the
  broker holds in memory, at ``snapshot_offset`` = the captured end (no ``last_offset``: the
  protocol does not give it), when the partition's end did not move while it was asked;
- ``log_start_offsets``: the captured log start of each partition;
- ``partition_metadata``: each partition's topic id as the Metadata API gives it (v10 on, brokers
  from 2.8), in ``partition.metadata``'s form; its ``file`` is
  ``kafka://<cluster id>/<topic>-<partition>/partition.metadata`` (no ``version``: no file was read),
  so the audit keys the fetched rows by (topic id, partition) as it keys a log dir's; no row for a
  partition whose topic id the broker did not give;
- ``coordinator_transactions``: ListTransactions and DescribeTransactions at every coordinator;
- ``transactional_ids``: the coordinator's log, when ``__transaction_state`` is among the topics;
- the other sidecar tables (``.txnindex``, checkpoints, ...) are empty: no protocol serves them.

``_export.json`` records the cluster id, the captured ranges and the options; never the client
configuration's contents (only its path).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from analytics.cluster.client import Cluster
from analytics.cluster.config import load
from analytics.cluster.capture import DEFAULT_PER_BROKER, DEFAULT_RANGE_OFFSETS, Capture, capture, locator, split
from analytics.contract import EXPORT
from analytics.contract import schemas as schema
from analytics.errors import InputError
from analytics.kafka.sidecars.metadata import PARTITION_METADATA
from analytics.export import (
    ExportError,
    ExportResult,
    _read_parts,
    _write_small,
    write_missing_tables,
)
from analytics.publish import publication
from analytics.reuse import parquet_rows

LOG_START_FILE = "log-start-offset"  # the log_start_offsets rows' file: kafka://<cluster id>/log-start-offset
PRODUCER_STATE_TRIES = 3  # DescribeProducers asked again while a partition's end moves


def export_cluster(
    spark,
    source: str,
    out: str,
    *,
    topics: str = ".*",
    records: bool = False,
    client_config: str | None = None,
    from_offset: int | None = None,
    from_time: int | None = None,
    until_time: int | None = None,
    max_bytes_per_second: float | None = None,
    per_broker: int = DEFAULT_PER_BROKER,
    range_offsets: int = DEFAULT_RANGE_OFFSETS,
    progress: Callable[[str], None] | None = None,
) -> ExportResult:
    """Export the topics matching ``topics`` (a regex over whole names) of the cluster ``source``
    (``kafka://HOST:PORT[,...]``) to ``out``; returns what was written."""
    from analytics.spark.session import default_parallelism

    started = time.monotonic()
    say = progress or (lambda _msg: None)
    config = load(source, client_config)
    with Cluster(config) as cluster:
        captured = capture(cluster, topics, from_offset=from_offset, from_time=from_time, until_time=until_time)
        if not captured.partitions:
            raise ExportError(f"no topic of kafka://{config.bootstrap} that the principal may describe matches "
                              f"--topics {topics!r}")
        producers, unsettled = _producer_state(cluster, captured)
        coordinator, coordinator_note = _coordinator_transactions(cluster, captured)
        configs = _configs(cluster, captured, f"kafka://{config.bootstrap}")
    ranges = split(captured, range_offsets=range_offsets, per_broker=per_broker)
    offsets = sum(p.end - p.start for p in captured.partitions)
    groups = len({r.group for r in ranges})
    share = None
    if max_bytes_per_second:
        share = max_bytes_per_second / max(1, min(groups, default_parallelism(spark)))
    for topic, partition in unsettled:
        say(f"{topic}-{partition} was written to while its producers were asked: no live producer state for it")
    if coordinator_note:
        say(coordinator_note)
    with publication(out, EXPORT) as run:
        say(f"exporting {len(captured.partitions)} partitions of cluster {captured.cluster_id}, {offsets:,} offsets "
            f"in {len(ranges)} ranges, {groups} tasks, to {run.store.path()}")
        errors = _fetch_segments(spark, run, source, captured.log_dir, ranges, records=records,
                                 client_config=client_config, share=share)
        _write_side_tables(run, captured, producers, coordinator, configs, records, errors)
        rows = {t: parquet_rows(run.path(t)) for t in run.written()}
        received = _received(run.path("segments"))
        run.publish({
            "inputs": [source],
            "input_format": "kafka",
            "records": records,
            "files": len(ranges),
            "input_bytes": received,
            "rows": rows,
            "cluster": _cluster_manifest(captured, config.bootstrap, topics, client_config, max_bytes_per_second,
                                         per_broker, unsettled, coordinator_note),
        })
    seconds = time.monotonic() - started
    say(f"exported {offsets:,} offsets of {len(captured.partitions)} partitions ({received / 1e6:,.1f} MB fetched) "
        f"in {seconds:.1f} s")
    return ExportResult(run.store.path(), run.run_id, len(ranges), received, rows, seconds)


def _fetch_segments(spark, run, source: str, log_dir: str, ranges: list, *, records: bool,
                    client_config: str | None, share: float | None) -> str:
    """Fetch the ranges in Spark's tasks (the ``kafka-segments`` source writes the batches, records
    and sidecar tables into the run folder, and one ``segments`` row per range); the folder of the
    tasks' parse errors."""
    from analytics.spark.fetching import FetchExportTask

    errors = run.path("_parts", "parse_errors")
    if not ranges:
        _write_small(run.path("segments"), schema.SEGMENTS.empty_table())
        return errors
    from analytics.spark.source import load

    options = {"table": FetchExportTask.table, "cluster": source, "tablesOut": run.path(), "errorsOut": errors,
               "ranges": json.dumps([r.to_json() for r in ranges]), "records": str(records).lower()}
    if client_config:
        options["clientConfig"] = os.path.abspath(client_config)
    if share:
        options["bytesPerSecond"] = str(share)
    load(spark, options, log_dir).repartition(1).write.parquet(run.path("segments"))
    return errors


def _write_side_tables(run, captured: Capture, producers: list[dict], coordinator: list[dict], configs: list[dict],
                       records: bool, errors: str) -> None:
    """The tables the cluster's answers give (producer state, the coordinator's transactions, configs,
    topic ids, log start offsets), the parse errors the tasks found, and the empty tables of a log
    dir's export."""
    _write_small(run.path("producer_snapshots"), pa.Table.from_pylist(producers, schema.PRODUCER_SNAPSHOTS))
    _write_small(run.path("coordinator_transactions"),
                 pa.Table.from_pylist(coordinator, schema.COORDINATOR_TRANSACTIONS))
    _write_small(run.path("cluster_configs"), pa.Table.from_pylist(configs, schema.CLUSTER_CONFIGS))
    _write_small(run.path("partition_metadata"), pa.Table.from_pylist(
        [{"topic": p.topic, "partition": p.partition, "version": None, "topic_id": p.topic_id,
          "file": locator(captured.log_dir, p.topic, p.partition, PARTITION_METADATA)}
         for p in captured.partitions if p.topic_id], schema.PARTITION_METADATA))
    write_missing_tables(run, records)
    _write_small(run.path("parse_errors"), _read_parts(errors, schema.PARSE_ERRORS))
    _write_small(run.path("log_start_offsets"), pa.Table.from_pylist(
        [{"topic": p.topic, "partition": p.partition, "log_start_offset": p.log_start,
          "file": f"{captured.log_dir}/{LOG_START_FILE}"} for p in captured.partitions],
        schema.LOG_START_OFFSETS))


def _cluster_manifest(captured: Capture, bootstrap: str, topics: str, client_config: str | None,
                      max_bytes_per_second: float | None, per_broker: int, unsettled: list,
                      coordinator_note: str | None) -> dict:
    """The manifest's ``cluster`` entry: what was captured, how, and what could not be settled."""
    return {
        "cluster_id": captured.cluster_id,
        "bootstrap": bootstrap,
        "topics": topics,
        "client_config": os.path.abspath(client_config) if client_config else None,
        "captured_at_ms": captured.captured_at,
        "max_bytes_per_second": max_bytes_per_second,
        "per_broker": per_broker,
        "partitions": [{"topic": p.topic, "partition": p.partition, "topic_id": p.topic_id, "start": p.start,
                        "end": p.end, "log_start": p.log_start, "leader": p.leader} for p in captured.partitions],
        "producer_state_unsettled": [f"{t}-{p}" for t, p in unsettled],
        "coordinator_transactions": coordinator_note or "complete",
    }


def _producer_state(cluster: Cluster, captured: Capture) -> tuple[list[dict], list[tuple[str, int]]]:
    """``producer_snapshots`` rows from DescribeProducers at the captured end of each partition that
    ends at its high watermark, and the partitions whose end moved while they were asked (no rows:
    their state would belong to no offset of the export)."""
    wanted = {(p.topic, p.partition): p for p in captured.partitions if p.end == p.high_watermark}
    rows: list[dict] = []
    pending = dict(wanted)
    for _ in range(PRODUCER_STATE_TRIES):
        if not pending:
            break
        states = cluster.producers(list(pending))
        ends = cluster.offsets(list(pending), "latest")
        for key, p in list(pending.items()):
            if ends[key] != p.end:
                continue
            del pending[key]
            for s in states.get(key, []):
                rows.append({
                    "topic": p.topic, "partition": p.partition, "snapshot_offset": p.end,
                    "producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
                    "last_sequence": s.last_sequence, "last_offset": None, "offset_delta": None,
                    "timestamp": s.last_timestamp, "coordinator_epoch": s.coordinator_epoch,
                    "current_txn_first_offset": s.current_transaction_start_offset,
                    "file": locator(captured.log_dir, p.topic, p.partition, f"producers-{p.end:020d}"),
                })
    return rows, sorted(pending)


def _coordinator_transactions(cluster: Cluster, captured: Capture) -> tuple[list[dict], str | None]:
    """``coordinator_transactions`` rows, and why there are none when the coordinators would not say."""
    try:
        described = cluster.transactions()
    except InputError as e:
        return [], f"the transaction coordinators were not asked: {e}"
    asked = int(time.time() * 1000)
    rows = [{
        "transactional_id": tid, "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
        "state": getattr(d.state, "value", str(d.state)), "timeout_ms": d.transaction_timeout_ms,
        "start_timestamp": d.transaction_start_time_ms,
        "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions),
        "coordinator": d.coordinator_id, "captured_at": asked, "log_dir": captured.log_dir,
    } for tid, d in described]
    return rows, None


def _received(folder: str) -> int:
    """Bytes fetched, from the segments rows just written."""
    table = _read_parts(folder, schema.SEGMENTS)
    return int(pc.sum(table["size_bytes"]).as_py() or 0) if table.num_rows else 0


def _configs(cluster: Cluster, captured: Capture, where: str) -> list[dict]:
    """``cluster_configs`` rows of the exported topics and the brokers, asked now (DescribeConfigs):
    ``log_dir`` the cluster, ``node_id`` the broker a broker's own row is of."""
    rows = cluster.configs(sorted({p.topic for p in captured.partitions}))
    return [r | {"offset": None, "log_dir": where, "end_offset": None, "file": None,
                 "node_id": int(r["resource_name"]) if r["resource_type"] != "topic" and r["resource_name"] else None}
            for r in rows]
