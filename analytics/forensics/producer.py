"""``producer``: one producer's history — sessions, epoch changes, findings, transactions, pauses.

The small ``producer_sessions`` table names the partitions the producer wrote; only those are
read from ``batch_verdicts`` (their topics' folders, their partitions' row groups), and of them
only the columns each answer needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analytics.contract import ABORTED, FINDING_SEVERITIES, HANGING, OPEN, log_dir_of
from analytics.forensics.offset import BATCH_FIELDS
from analytics.errors import unknown
from analytics.forensics.tables import Audit, NotFound, log_dirs

LONGEST = 5  # the longest pauses listed, beside every pause at or above the expiration
UNFINISHED_FIRST = [HANGING, OPEN, ABORTED]  # the order transactions are listed in; the rest after
PAUSE_FIELDS = ["topic", "partition", "base_offset", "prev_base_offset", "max_timestamp", "idle_ms", "verdict",
                "severity", "explained_by", "log_dir"]


@dataclass
class ProducerHistory:
    producer_id: int
    sessions: list[dict]  # one per (topic, partition, epoch), in time order
    epoch_changes: list[dict]  # where and when the producer's epoch changed
    findings: list[dict]  # its batches whose severity is explained or violation
    findings_total: int
    transactions: list[dict]
    transactions_total: int
    idle: list[dict]  # its longest pauses, and every pause at or above the expiration
    expiration_ms: int


def producer_history(out: str, producer_id: int, topic: str | None = None, limit: int = 50) -> ProducerHistory:
    """The history of ``producer_id`` (on ``topic`` only, when given); :class:`NotFound` when it wrote
    no batch there. Findings, transactions, epoch changes and pauses list at most ``limit`` rows
    (findings and transactions are all counted)."""
    audit = Audit(out)
    expiration = audit.config.get("producer_id_expiration_ms")
    mine = pc.field("producer_id") == producer_id
    if topic is not None:
        mine &= pc.field("topic") == topic
    sessions_table = audit.table("producer_sessions")
    sessions = [] if sessions_table is None else sessions_table.rows(mine)
    if not sessions:
        scope = f" on topic {topic}" if topic is not None else ""
        why = f"producer {producer_id} wrote no batch{scope} in this audit"
        if topic is not None and topic not in audit.topics():
            why += "; " + unknown("topic", topic, audit.topics())
        raise NotFound(why)
    order = ["first_timestamp", "topic", "partition", "producer_epoch", "log_dir"]
    sessions.sort(key=lambda s: [(s.get(c) is not None, s.get(c)) for c in order])  # nulls first, as SQL sorts
    wanted = sorted({(s["topic"], s["partition"]) for s in sessions})
    findings, findings_total = _findings(audit, mine, limit)
    transactions, transactions_total = _transactions(audit, mine, limit)
    changes, idle = [], []
    for name in sorted({t for t, _ in wanted}):
        partitions = [p for t, p in wanted if t == name]
        changes += _epoch_changes(audit, name, partitions, producer_id, limit)
        idle += _pauses(audit, name, partitions, producer_id, expiration, limit)
    return ProducerHistory(producer_id, sessions, changes, findings, findings_total, transactions, transactions_total,
                           idle, expiration)


def _findings(audit: Audit, mine: pc.Expression, limit: int) -> tuple[list[dict], int]:
    """The producer's batches whose severity is a finding, from ``anomalies``: the first ``limit`` in
    (topic, partition, offset, log dir) order, and how many there are."""
    anomalies = audit.table("anomalies")
    if anomalies is None:
        return [], 0
    rows = anomalies.read(mine & pc.field("severity").isin(FINDING_SEVERITIES), BATCH_FIELDS)
    rows = rows.append_column("log_dir", log_dirs(rows["file"]))
    first = rows.sort_by([(c, "ascending") for c in ("topic", "partition", "base_offset", "log_dir")]).slice(0, limit)
    return anomalies.dicts(first, [*BATCH_FIELDS, "log_dir"]), rows.num_rows


def _transactions(audit: Audit, mine: pc.Expression, limit: int) -> tuple[list[dict], int]:
    """The producer's transactions, unfinished first, and how many there are."""
    transactions = audit.table("transactions")
    if transactions is None:
        return [], 0
    rows = transactions.read(mine)
    rank = pc.fill_null(pc.index_in(rows["status"], value_set=pa.array(UNFINISHED_FIRST)), len(UNFINISHED_FIRST))
    first = rows.append_column("rank", rank).sort_by(
        [(c, "ascending") for c in ("rank", "topic", "partition", "first_offset")]).slice(0, limit).drop_columns("rank")
    return transactions.dicts(first, transactions.columns), rows.num_rows


def _epoch_changes(audit: Audit, topic: str, partitions: list[int], producer_id: int, limit: int) -> list[dict]:
    """Every batch of the producer whose epoch differs from its previous batch's in the same log, in
    (partition, offset, log dir) order: a sort of the producer's CRC-valid batches by their log."""
    verdicts = audit.verdicts(topic, dictionary=("file", "verdict"))
    rows = verdicts.read(pc.field("partition").isin(partitions) & (pc.field("producer_id") == producer_id)
                         & pc.field("crc_valid"),
                         ["partition", "file", "file_position", "base_offset", "max_timestamp", "producer_epoch",
                          "verdict"])
    if rows.num_rows < 2:
        return []
    names, dirs = _log_dir_codes(rows["file"])
    rows = rows.append_column("log_dir_code", dirs)
    rows = rows.take(pc.sort_indices(rows, [(c, "ascending") for c in (
        "log_dir_code", "partition", "base_offset", "file_position")]))
    epoch = rows["producer_epoch"].to_numpy()
    dirs, parts = rows["log_dir_code"].to_numpy(), rows["partition"].to_numpy()
    at = np.flatnonzero((dirs[1:] == dirs[:-1]) & (parts[1:] == parts[:-1]) & (epoch[1:] != epoch[:-1])) + 1
    at = at[np.lexsort((dirs[at], rows["base_offset"].to_numpy()[at], parts[at]))][:limit]
    return [{"topic": topic, "partition": r["partition"], "from_epoch": int(epoch[i - 1]),
             "to_epoch": r["producer_epoch"], "at_offset": r["base_offset"], "at_timestamp": r["max_timestamp"],
             "verdict": r["verdict"], "log_dir": names[code]}
            for i, code, r in zip(at, dirs[at], rows.take(pa.array(at)).to_pylist())]


def _log_dir_codes(files: pa.ChunkedArray) -> tuple[list[str], pa.ChunkedArray]:
    """The log dirs of ``files`` in path order, and each row's position among them; the file
    column is read dictionary-encoded, so each distinct path is looked at once."""
    names = sorted({log_dir_of(f) for c in files.chunks for f in c.dictionary.to_pylist()})
    code = {d: i for i, d in enumerate(names)}
    return names, pa.chunked_array(
        [pa.array([code[log_dir_of(f)] for f in c.dictionary.to_pylist()], pa.int32()).take(c.indices)
         for c in files.chunks], pa.int32())


def _pauses(audit: Audit, topic: str, partitions: list[int], producer_id: int, expiration: int | None,
            limit: int) -> list[dict]:
    """The producer's longest pauses and (the first ``limit``) pauses at or above the expiration, in
    (partition, offset, log dir) order."""
    verdicts = audit.verdicts(topic)
    paused = (pc.field("partition").isin(partitions) & (pc.field("producer_id") == producer_id)
              & pc.field("idle_ms").is_valid())
    columns = [*PAUSE_FIELDS[:-1], "file"]
    rows = verdicts.first(paused, "idle_ms", LONGEST, descending=True, columns=columns)
    if expiration is not None:
        rows += verdicts.first(paused & (pc.field("idle_ms") >= expiration), "base_offset", limit, columns=columns)
    pauses = {}
    for r in rows:
        pause = {**{c: r[c] for c in PAUSE_FIELDS[:-1]}, "log_dir": log_dir_of(r["file"])}
        pauses[tuple(pause.values())] = pause
    return sorted(pauses.values(), key=lambda p: (p["partition"], p["base_offset"], p["log_dir"]))
