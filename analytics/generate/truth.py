"""Ground truth for a generated log directory, written beside it as Parquet.

``<LOGDIR>.truth/`` holds:

File paths in the truth are relative to the log directory.

- ``batches.parquet``: every batch a reader must find, with its expected ``verdict``,
  ``severity`` and ``explained_by`` (verdict names of ``docs/design.md``);
- ``transactions.parquet``: every non-empty transaction with its expected status;
- ``record_duplicates.parquet``: every repeated (key, value) record of a partition, not the first;
- ``parse_errors.parquet``: exactly the parse errors a reader must report;
- ``audit.toml``: the configuration an operator would give the audit for this log;
- ``scenario.json``: the scenario, seed, scale, profile and counts.

Verdicts follow from the batches that are visible in the log, in offset order per producer,
with the broker's CLIENT rules (§2.4) against a state that every visible batch updates (as a
follower's would), except that sequences are compared with the producer's highest sequence of
its epoch run, which a duplicate or a rewind does not lower (``docs/architecture.md``). Explanations come from what the simulator knows caused an anomaly: an
expiration or a restart it simulated, batches its cleaner or retention removed. A fault it
injected is a violation with no explanation. An anomaly with neither cause nor fault is a bug
in the scenario, and generation stops.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.kafka import layout as L
from analytics.kafka.util import in_sequence, sequence_ahead

SEVERITY = {
    "OK": "ok",
    "EPOCH_BUMP": "ok",
    "NON_IDEMPOTENT": "info",
    "CONTROL_MARKER": "info",
    "CORRUPT": "violation",
}
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000  # ProducerStateManager.LATE_TRANSACTION_BUFFER_MS
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


_SEQ_SPACE = L.INT_MAX + 1  # sequences run mod 2^31


class _EpochHistory:
    """Every visible batch's sequence range of one (producer, epoch), in 4 bytes a batch.

    Batches are kept as runs of consecutive ranges (start sequence + batch lengths). A batch can
    only repeat an earlier range if its sequence is not past the highest one seen (the frontier),
    so the runs are walked only for those batches, which are rare.
    """

    __slots__ = ("runs", "frontier")

    def __init__(self) -> None:
        self.runs: list[list] = []  # [start, end, array of lengths]
        self.frontier: int | None = None

    def add(self, base: int, last: int) -> None:
        length = (last - base) % _SEQ_SPACE + 1
        if self.runs and base == (self.runs[-1][1] + 1) % _SEQ_SPACE:
            run = self.runs[-1]
            run[1] = last
            run[2].append(length)
        else:
            self.runs.append([base, last, array("I", [length])])
        if self.frontier is None or sequence_ahead(self.frontier - 1, last):
            self.frontier = last

    def contains(self, base: int, last: int) -> bool:
        if self.frontier is None or sequence_ahead(self.frontier, base) or base == (self.frontier + 1) % _SEQ_SPACE:
            return False
        for start, _, lengths in self.runs:
            seq = start
            for length in lengths:
                if seq == base and (seq + length - 1) % _SEQ_SPACE == last:
                    return True
                seq = (seq + length) % _SEQ_SPACE
        return False


@dataclass(slots=True)
class _Producer:
    epoch: int
    last_seq: int  # -1 when only a marker is known
    last_ts: int
    txn_first: int | None = None
    coordinator_epoch: int = -1
    history: dict[int, _EpochHistory] = field(default_factory=dict)  # epoch -> visible data batches
    # The last data batch's last sequence on a line that wraps at INT_MAX (each batch one step from
    # the previous the shorter way round), and the highest of the current epoch run: the mark a
    # duplicate or a rewind does not lower (None: the run has no data batch yet).
    position: int | None = None
    mark: int | None = None

    @property
    def seq_mark(self) -> int:
        return -1 if self.mark is None else self.mark % _SEQ_SPACE

    def advance(self, last: int, new_run: bool) -> None:
        if self.position is None:
            self.position = last
        else:
            step = (last - self.position) % _SEQ_SPACE
            self.position += step - _SEQ_SPACE if step > _SEQ_SPACE // 2 else step
        self.mark = self.position if new_run or self.mark is None else max(self.mark, self.position)

    def seen(self, epoch: int, base: int, last: int) -> bool:
        h = self.history.get(epoch)
        return h is not None and h.contains(base, last)


@dataclass(slots=True)
class _PartitionTruth:
    producers: dict[int, _Producer] = field(default_factory=dict)
    first_keys: dict = field(default_factory=dict)  # (key, value) -> (offset, producer id)
    removed_by_cleaner: set = field(default_factory=set)  # producer ids that lost batches to the cleaner
    removed_by_retention: set = field(default_factory=set)
    open_txns: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # pid -> (epoch, first, last ts)


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
        self._partitions: dict[tuple[str, int], _PartitionTruth] = {}
        self.counts: dict[str, int] = {}
        self.max_timestamp = L.NO_TIMESTAMP
        if self.directory:
            self.directory.mkdir(parents=True, exist_ok=True)

    def _part(self, p) -> _PartitionTruth:
        return self._partitions.setdefault((p.topic, p.partition), _PartitionTruth())

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
            part = self._part(p)
            (part.removed_by_cleaner if by_cleaner else part.removed_by_retention).add(batch.producer_id)

    def parse_error(self, p, file: str, position: int, kind: str, size: int) -> None:
        self._emit("parse_errors", {"topic": p.topic, "partition": p.partition, "file": file, "file_position": position,
                                    "error_kind": kind, "bytes_affected": size})

    def batch(self, p, b, file: str, position: int, *, corrupt: bool) -> None:
        """Label one batch as it is written to its file (partitions are written in offset order)."""
        verdict, explained = self._classify(p, b, corrupt)
        if self.strict and verdict not in SEVERITY and not explained and not b.fault and not corrupt:
            raise ScenarioError(
                f"{p.name} offset {b.base_offset}: {verdict} with neither an explanation nor an injected fault"
            )
        severity = SEVERITY.get(verdict) or ("explained" if explained else "violation")
        self.counts[verdict] = self.counts.get(verdict, 0) + 1
        self.max_timestamp = max(self.max_timestamp, b.max_timestamp)
        self._emit("batches", {
            "topic": p.topic, "partition": p.partition, "file": file, "file_position": position,
            "base_offset": b.base_offset, "last_offset": b.last_offset, "producer_id": b.producer_id,
            "producer_epoch": b.producer_epoch, "base_sequence": b.base_sequence, "last_sequence": b.last_sequence,
            "verdict": verdict, "severity": severity, "explained_by": explained, "fault": b.fault or ("corrupt" if corrupt else None),
        })
        if self.record_duplicates and not corrupt and b.records and not b.is_control:  # data records of valid batches
            self._record_duplicates(p, b)

    def _classify(self, p, b, corrupt: bool) -> tuple[str, str | None]:
        if corrupt:
            return "CORRUPT", None  # excluded from the replay: no state change
        if b.magic < L.MAGIC_V2 or b.producer_id < 0:
            return "NON_IDEMPOTENT", None
        part = self._part(p)
        s = part.producers.get(b.producer_id)
        if b.is_control:
            return self._marker(p, part, s, b)
        if s is None:
            if b.base_sequence == 0:
                verdict = "OK"
            else:
                verdict = "FIRST_SEEN_NONZERO"
        elif s.seen(b.producer_epoch, b.base_sequence, b.last_sequence):
            verdict = "DUPLICATE"
        elif b.producer_epoch > s.epoch:
            verdict = "EPOCH_BUMP" if b.base_sequence == 0 else "EPOCH_BUMP_NONZERO"
        elif b.producer_epoch < s.epoch:
            verdict = "FENCED_ZOMBIE_WRITE"
        elif in_sequence(s.seq_mark, b.base_sequence):
            verdict = "OK"
        elif sequence_ahead(s.seq_mark, b.base_sequence):
            verdict = "SEQUENCE_GAP"
        else:
            verdict = "SEQUENCE_REGRESSION"
        if verdict in ("OK", "EPOCH_BUMP") and s is not None and s.txn_first is not None and not b.is_transactional:
            verdict = "INVALID_TXN_STATE"
        explained = None
        if verdict not in SEVERITY:
            if b.explain:
                explained = b.explain
            elif verdict == "FIRST_SEEN_NONZERO" and (
                b.producer_id in part.removed_by_retention
                or p.log_start_offset > 0
                or (p.compacted and b.producer_id in part.removed_by_cleaner)
            ):
                explained = "partial_history"  # §7.3: earlier batches are below the log start or cleaned away
            elif verdict == "SEQUENCE_GAP" and b.producer_id in part.removed_by_cleaner and p.compacted:
                explained = "compaction"
        # state update, as a follower appends whatever is on disk; the mark restarts with the epoch
        new_run = s is None or b.producer_epoch != s.epoch
        if s is None:
            s = part.producers[b.producer_id] = _Producer(b.producer_epoch, -1, b.max_timestamp)
        s.advance(b.last_sequence, new_run)
        s.epoch = b.producer_epoch
        s.last_seq = b.last_sequence
        s.last_ts = b.max_timestamp
        s.history.setdefault(b.producer_epoch, _EpochHistory()).add(b.base_sequence, b.last_sequence)
        if b.is_transactional:
            if s.txn_first is None:
                s.txn_first = b.base_offset
                part.open_txns[b.producer_id] = (b.producer_epoch, b.base_offset, b.max_timestamp)
            else:
                epoch, first, _ = part.open_txns[b.producer_id]
                part.open_txns[b.producer_id] = (epoch, first, b.max_timestamp)
        return verdict, explained

    def _marker(self, p, part: _PartitionTruth, s: _Producer | None, b) -> tuple[str, str | None]:
        """Markers close the producer's open transaction (one row of ``transactions``) and may bump its epoch."""
        verdict = "CONTROL_MARKER"
        if s is not None and b.producer_epoch < s.epoch:
            verdict = "MARKER_EPOCH_REGRESSION"
        elif s is not None and b.coordinator_epoch is not None and b.coordinator_epoch < s.coordinator_epoch:
            verdict = "COORDINATOR_EPOCH_REGRESSION"
        if s is None:
            s = part.producers[b.producer_id] = _Producer(b.producer_epoch, -1, b.max_timestamp)
        if b.producer_epoch != s.epoch:
            s.last_seq = -1  # a marker at a new epoch clears the batch cache: the next batch starts at 0
            s.mark = None
        s.epoch = b.producer_epoch
        s.last_ts = b.max_timestamp
        if b.coordinator_epoch is not None:
            s.coordinator_epoch = max(s.coordinator_epoch, b.coordinator_epoch)
        s.txn_first = None
        txn = part.open_txns.pop(b.producer_id, None)
        if txn is not None and b.control_type in L.END_TXN_MARKER_TYPES:
            self._emit("transactions", {
                "topic": p.topic, "partition": p.partition, "producer_id": b.producer_id, "producer_epoch": txn[0],
                "first_offset": txn[1], "end_offset": b.base_offset,
                "status": "ABORTED" if b.control_type == "ABORT" else "COMMITTED", "coordinator_epoch": b.coordinator_epoch,
            })
        return verdict, (b.explain if verdict != "CONTROL_MARKER" else None)

    def _record_duplicates(self, p, b) -> None:
        part = self._part(p)
        for i, r in enumerate(b.records):
            offset = b.base_offset + (i if r.offset_delta is None else r.offset_delta)
            k = (r.key, r.value)
            first = part.first_keys.get(k)
            if first is None:
                part.first_keys[k] = (offset, b.producer_id)
            else:
                self._emit("record_duplicates", {"topic": p.topic, "partition": p.partition, "offset": offset,
                                                 "first_offset": first[0], "producer_id": b.producer_id,
                                                 "first_producer_id": first[1]})

    # -- the end ------------------------------------------------------------------------------
    def finish(self, log) -> None:
        config = self.scenario.get("audit", {})
        timeout = config.get("transaction_max_timeout_ms", DEFAULT_TRANSACTION_MAX_TIMEOUT_MS)
        export_time = self.max_timestamp
        for (topic, partition), part in sorted(self._partitions.items()):
            for pid, (epoch, first, last_ts) in sorted(part.open_txns.items()):
                status = "HANGING" if export_time - last_ts > timeout + LATE_TRANSACTION_BUFFER_MS else "OPEN"
                self._emit("transactions", {"topic": topic, "partition": partition, "producer_id": pid,
                                            "producer_epoch": epoch, "first_offset": first, "end_offset": None,
                                            "status": status, "coordinator_epoch": None})
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
