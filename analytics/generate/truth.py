"""Ground truth for a generated log directory, written beside it as Parquet.

``<LOGDIR>.truth/`` holds:

- ``batches.parquet``: every batch a reader must find, with its expected ``verdict``,
  ``severity`` and ``explained_by`` (verdict names of ``docs/design.md``);
- ``transactions.parquet``: every non-empty transaction with its expected status;
- ``record_duplicates.parquet``: every repeated (key, value) record of a partition, not the first;
- ``parse_errors.parquet``: exactly the parse errors a reader must report;
- ``audit.toml``: the configuration an operator would give the audit for this log;
- ``scenario.json``: the scenario, seed, scale, profile and counts.

File paths in the truth are relative to the log directory. The labels are
:mod:`analytics.generate.labels`'s; a fault the simulator injected is a violation with no
explanation, and an anomaly with neither a cause nor a fault is a bug in the scenario, so
generation stops.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.contract import HANGING, LATE_TRANSACTION_BUFFER_MS, OPEN, SEV_VIOLATION
from analytics.generate.batches import CORRUPT_FAULT
from analytics.generate.labels import PartitionLabels
from analytics.kafka import layout as L
from analytics.replay.severity import severity

DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000

TRUTH_SCHEMAS = {
    "batches": pa.schema([
        ("topic", pa.string()), ("partition", pa.int32()), ("file", pa.string()), ("file_position", pa.int64()),
        ("base_offset", pa.int64()), ("last_offset", pa.int64()), ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()), ("base_sequence", pa.int32()), ("last_sequence", pa.int32()),
        ("verdict", pa.string()), ("severity", pa.string()), ("explained_by", pa.string()), ("fault", pa.string()),
    ]),
    "transactions": pa.schema([
        ("topic", pa.string()), ("partition", pa.int32()), ("producer_id", pa.int64()), ("producer_epoch", pa.int16()),
        ("first_offset", pa.int64()), ("end_offset", pa.int64()), ("status", pa.string()), ("coordinator_epoch", pa.int32()),
    ]),
    "record_duplicates": pa.schema([
        ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("first_offset", pa.int64()),
        ("producer_id", pa.int64()), ("first_producer_id", pa.int64()),
    ]),
    "parse_errors": pa.schema([
        ("topic", pa.string()), ("partition", pa.int32()), ("file", pa.string()), ("file_position", pa.int64()),
        ("error_kind", pa.string()), ("bytes_affected", pa.int64()),
    ]),
}
_FLUSH_ROWS = 100_000


class ScenarioError(Exception):
    """A scenario wrote an anomaly it neither explained nor labelled as a fault."""


class TruthWriter:
    """Collects labels as the simulator writes files; streams them to ``directory`` (None: keep nothing)."""

    def __init__(self, directory: Path | None, *, scenario: dict | None = None, record_duplicates: bool = True,
                 strict: bool = True):
        """``strict``: an anomaly with no known cause and no injected fault is a scenario bug (raise)."""
        self.directory = Path(directory) if directory else None
        self.strict = strict
        self.record_duplicates = record_duplicates
        self.scenario = scenario or {}
        self._rows: dict[str, list[dict]] = {name: [] for name in TRUTH_SCHEMAS}
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._partitions: dict[tuple[str, int], PartitionLabels] = {}
        self.counts: dict[str, int] = {}
        self.max_timestamp = L.NO_TIMESTAMP
        if self.directory:
            self.directory.mkdir(parents=True, exist_ok=True)

    def _part(self, p) -> PartitionLabels:
        return self._partitions.setdefault((p.topic, p.partition), PartitionLabels())

    def _emit(self, table: str, row: dict) -> None:
        rows = self._rows[table]
        rows.append(row)
        if len(rows) >= _FLUSH_ROWS:
            self._flush(table)

    def _flush(self, table: str) -> None:
        rows = self._rows[table]
        if not self.directory or not rows:
            rows.clear()
            return
        if table not in self._writers:
            self._writers[table] = pq.ParquetWriter(self.directory / f"{table}.parquet", TRUTH_SCHEMAS[table])
        self._writers[table].write_table(pa.Table.from_pylist(rows, schema=TRUTH_SCHEMAS[table]))
        rows.clear()

    # -- events from the simulator ------------------------------------------------------------
    def deleted(self, p, batch, *, by_cleaner: bool = False) -> None:
        if batch.producer_id >= 0:
            self._part(p).removed(batch.producer_id, by_cleaner=by_cleaner)

    def parse_error(self, p, file: str, position: int, kind: str, size: int) -> None:
        self._emit("parse_errors", {"topic": p.topic, "partition": p.partition, "file": file, "file_position": position,
                                    "error_kind": kind, "bytes_affected": size})

    def batch(self, p, b, file: str, position: int, *, corrupt: bool) -> None:
        """Label one batch as it is written to its file (partitions are written in offset order)."""
        part = self._part(p)
        verdict, explained, closed = part.label(p, b, corrupt)
        if closed is not None:
            row = {"topic": p.topic, "partition": p.partition, "producer_id": b.producer_id}
            self._emit("transactions", row | closed._asdict())
        sev = severity(verdict, explained)
        if self.strict and sev == SEV_VIOLATION and not b.fault and not corrupt:
            raise ScenarioError(
                f"{p.name} offset {b.base_offset}: {verdict} with neither an explanation nor an injected fault"
            )
        self.counts[verdict] = self.counts.get(verdict, 0) + 1
        self.max_timestamp = max(self.max_timestamp, b.max_timestamp)
        self._emit("batches", {
            "topic": p.topic, "partition": p.partition, "file": file, "file_position": position,
            "base_offset": b.base_offset, "last_offset": b.last_offset, "producer_id": b.producer_id,
            "producer_epoch": b.producer_epoch, "base_sequence": b.base_sequence, "last_sequence": b.last_sequence,
            "verdict": verdict, "severity": sev, "explained_by": explained,
            "fault": b.fault or (CORRUPT_FAULT if corrupt else None),
        })
        if self.record_duplicates and not corrupt and b.records and not b.is_control:  # data records of valid batches
            for offset, first_offset, producer_id, first_producer_id in part.repeated_records(b):
                self._emit("record_duplicates", {"topic": p.topic, "partition": p.partition, "offset": offset,
                                                 "first_offset": first_offset, "producer_id": producer_id,
                                                 "first_producer_id": first_producer_id})

    # -- the end ------------------------------------------------------------------------------
    def finish(self, log) -> None:
        config = self.scenario.get("audit", {})
        timeout = config.get("transaction_max_timeout_ms", DEFAULT_TRANSACTION_MAX_TIMEOUT_MS)
        export_time = self.max_timestamp
        for (topic, partition), part in sorted(self._partitions.items()):
            for pid, txn in sorted(part.open_txns.items()):
                hanging = export_time - txn.last_timestamp > timeout + LATE_TRANSACTION_BUFFER_MS
                self._emit("transactions", {
                    "topic": topic, "partition": partition, "producer_id": pid,
                    "producer_epoch": txn.producer_epoch, "first_offset": txn.first_offset,
                    "end_offset": None, "status": HANGING if hanging else OPEN, "coordinator_epoch": None,
                })
        for table in TRUTH_SCHEMAS:
            self._flush(table)
            if self.directory and table not in self._writers:  # an empty table still gets its file
                pq.write_table(TRUTH_SCHEMAS[table].empty_table(), self.directory / f"{table}.parquet")
        for w in self._writers.values():
            w.close()
        if self.directory:
            doc = dict(self.scenario, export_time_ms=export_time, verdicts=dict(sorted(self.counts.items())),
                       record_duplicates_computed=self.record_duplicates)
            (self.directory / "scenario.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
            (self.directory / "audit.toml").write_text(_toml(config | {"export_time_ms": export_time}))


def _toml(config: dict) -> str:
    """The audit configuration as TOML: scalars, then tables (``[name]``), then arrays of tables."""
    lines = [f"{k} = {json.dumps(v)}" for k, v in sorted(config.items()) if not isinstance(v, (dict, list))]
    for k, v in sorted(config.items()):
        if isinstance(v, dict):
            lines.append(f"\n[{k}]")
            lines.extend(f"{json.dumps(kk)} = {json.dumps(vv)}" for kk, vv in sorted(v.items()))
    for k, v in sorted(config.items()):
        if isinstance(v, list):
            for item in v:
                lines.append(f"\n[[{k}]]")
                lines.extend(f"{kk} = {json.dumps(vv)}" for kk, vv in item.items())
    return "\n".join(lines) + "\n"
