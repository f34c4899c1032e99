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
from analytics.publish import AsOf
from analytics.forensics.transactional import served_by

LONGEST = 5  # the longest pauses listed, beside every pause at or above the expiration
UNFINISHED_FIRST = [HANGING, OPEN, ABORTED]  # the order transactions are listed in; the rest after
PAUSE_FIELDS = ["topic", "partition", "base_offset", "prev_base_offset", "max_timestamp", "idle_ms", "verdict",
                "severity", "explained_by", "log_dir"]
# What the epoch changes and the pauses read of every batch of the producer, in one scan; the other
# columns are fetched for the few batches they list.
NARROW = ["partition", "file", "file_position", "base_offset", "producer_epoch", "idle_ms", "crc_valid"]
KEY = ("partition", "base_offset", "file", "file_position")


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
    transactional_ids: list[dict]  # the transactional ids it served, with the producer ids before and after


def producer_history(out: str, producer_id: int, topic: str | None = None, limit: int = 50,
                     as_of: AsOf | None = None) -> ProducerHistory:
    """The history of ``producer_id`` (on ``topic`` only, when given); :class:`NotFound` when it wrote
    no batch there and (without ``topic``) served no transactional id of the coordinator's log.
    Findings, transactions, epoch changes and pauses list at most ``limit`` rows (findings and
    transactions are all counted). ``as_of``: from a past version of ``out``."""
    audit = Audit(out, as_of)
    expiration = audit.config.get("producer_id_expiration_ms")
    mine = pc.field("producer_id") == producer_id
    if topic is not None:
        mine &= pc.field("topic") == topic
    sessions_table = audit.table("producer_sessions")
    sessions = [] if sessions_table is None else sessions_table.rows(mine)
    served = served_by(audit, producer_id) if topic is None else []
    if not sessions and not served:
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
        verdicts = audit.verdicts(name, dictionary=("file", "verdict", "severity", "explained_by"))
        where = pc.field("partition").isin(partitions) & (pc.field("producer_id") == producer_id)
        rows = verdicts.read(where, NARROW).combine_chunks()  # one scan of a few columns for both answers
        details = _Details(verdicts, where)
        changes += _epoch_changes(rows.filter(pc.field("crc_valid")), name, limit, details)
        idle += _pauses(details, rows.filter(pc.field("idle_ms").is_valid()), expiration, limit)
    return ProducerHistory(producer_id, sessions, changes, findings, findings_total, transactions, transactions_total,
                           idle, expiration, served)


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


class _Details:
    """Every column of a few of the producer's batches, fetched by partition and offset (row-group
    statistics skip the rest)."""

    def __init__(self, verdicts, where: pc.Expression):
        self.verdicts, self.where = verdicts, where

    def of(self, picked: pa.Table, columns: list[str]) -> list[dict]:
        """``columns`` of the rows of ``picked`` (which has the ``KEY`` columns), in its order."""
        if picked.num_rows == 0:
            return []
        offsets = picked["base_offset"]
        fetch = self.where & (pc.field("base_offset") >= pc.min(offsets)) & (pc.field("base_offset") <= pc.max(offsets)) \
            & pc.field("base_offset").isin(offsets.unique())
        found = {tuple(r[c] for c in KEY): r for r in self.verdicts.rows(fetch, list(dict.fromkeys([*KEY, *columns])))}
        return [{c: found[tuple(r[c] for c in KEY)][c] for c in columns} for r in picked.select(list(KEY)).to_pylist()]


def _epoch_changes(rows: pa.Table, topic: str, limit: int, details: _Details) -> list[dict]:
    """Every batch of the producer (``rows``: its CRC-valid batches on ``topic``) whose epoch differs
    from its previous batch's in the same log, in (partition, offset, log dir) order."""
    epoch = rows["producer_epoch"].to_numpy()
    if rows.num_rows < 2 or np.all(epoch == epoch[0]):  # one epoch throughout: nothing to sort
        return []
    names, dirs = _log_dir_codes(rows["file"])
    parts = rows["partition"].to_numpy()
    offsets, positions = rows["base_offset"].to_numpy(), rows["file_position"].to_numpy()
    order = np.lexsort((positions, offsets, parts, dirs))
    rows, dirs, parts, offsets = rows.take(pa.array(order)), dirs[order], parts[order], offsets[order]
    epoch = rows["producer_epoch"].to_numpy()
    at = np.flatnonzero((dirs[1:] == dirs[:-1]) & (parts[1:] == parts[:-1]) & (epoch[1:] != epoch[:-1])) + 1
    at = at[np.lexsort((dirs[at], offsets[at], parts[at]))][:limit]
    full = details.of(rows.take(pa.array(at)), ["partition", "base_offset", "max_timestamp", "producer_epoch",
                                                "verdict"])
    return [{"topic": topic, "partition": r["partition"], "from_epoch": int(epoch[i - 1]),
             "to_epoch": r["producer_epoch"], "at_offset": r["base_offset"], "at_timestamp": r["max_timestamp"],
             "verdict": r["verdict"], "log_dir": names[code]}
            for i, code, r in zip(at, dirs[at], full)]


def _log_dir_codes(files: pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """The log dirs of ``files`` in path order, and each row's position among them; the file
    column is read dictionary-encoded, so each distinct path is looked at once."""
    names = sorted({log_dir_of(f) for c in files.chunks for f in c.dictionary.to_pylist()})
    if len(names) == 1:  # one log dir, the usual case: nothing to look up per row
        return names, np.zeros(len(files), dtype=np.int32)
    code = {d: i for i, d in enumerate(names)}
    return names, np.concatenate(
        [np.array([code[log_dir_of(f)] for f in c.dictionary.to_pylist()], dtype=np.int32)[
            c.indices.to_numpy(zero_copy_only=False)] for c in files.chunks])


def _pauses(details: _Details, rows: pa.Table, expiration: int | None, limit: int) -> list[dict]:
    """The producer's longest pauses and (the first ``limit``) pauses at or above the expiration, in
    (partition, offset, log dir) order; ``rows``: its batches on one topic that have an idle time."""
    columns = [*PAUSE_FIELDS[:-1], "file"]
    picked = _first(rows, "idle_ms", LONGEST, descending=True)
    if expiration is not None:
        picked = pa.concat_tables([picked, _first(rows.filter(pc.field("idle_ms") >= expiration), "base_offset",
                                                  limit)])
    pauses = {}
    for r in details.of(picked, columns):
        pause = {**{c: r[c] for c in PAUSE_FIELDS[:-1]}, "log_dir": log_dir_of(r["file"])}
        pauses[tuple(pause.values())] = pause
    return sorted(pauses.values(), key=lambda p: (p["partition"], p["base_offset"], p["log_dir"]))


def _first(rows: pa.Table, by: str, k: int, *, descending: bool = False,
           then: tuple[str, ...] = ("file", "file_position")) -> pa.Table:
    """The first ``k`` of ``rows`` ordered by ``by``, ties by ``then`` (in the same direction): only
    the rows up to the k-th value of ``by`` are sorted."""
    if k < 1 or rows.num_rows == 0:
        return rows.slice(0, 0)
    pick = pc.top_k_unstable if descending else pc.bottom_k_unstable
    values = rows[by]
    chosen = values.take(pick(values, k=min(k, len(values))))
    near = rows.filter((pc.field(by) >= pc.min(chosen)) if descending else (pc.field(by) <= pc.max(chosen)))
    keys = near.select([by, *then]).to_pylist()
    order = sorted(range(len(keys)), key=lambda i: tuple(keys[i].values()), reverse=descending)[:k]
    return near.take(pa.array(order, pa.int64()))
