"""``explain``: the batch holding one offset, its producer's neighbours, the verdict and why.

Reads one topic's folder of ``batch_verdicts`` and, within it, the row groups of one partition
around the offset (:mod:`analytics.forensics.tables`), plus the small ``segments``,
``transactions`` and ``log_start_offsets`` tables.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

import pyarrow.compute as pc

from analytics.contract import DUPLICATE, PRODUCER_EXPIRATION, TOPIC_ID, log_dir_of
from analytics.forensics.reasoning import no_batch_reasoning, other_folders, other_log_dirs, verdict_reasoning
from analytics.forensics.tables import Audit, NotFound, Table, in_folder, in_log_dir
from analytics.kafka.discovery import LEFTOVER_SUFFIXES, parse_partition_dir
from analytics.publish import AsOf

# The columns an explanation shows for a batch and its neighbours.
BATCH_FIELDS = [
    "topic", "partition", "file", "file_position", "base_offset", "last_offset", "record_count", "max_timestamp",
    "producer_id", "producer_epoch", "base_sequence", "last_sequence", "is_transactional", "is_control",
    "control_type", "coordinator_epoch", "crc_valid", "verdict", "severity", "explained_by", "expected_sequence",
    "prev_base_offset", "idle_ms", "offset_holes", "explanation", "txn_open", "offset_overlap",
    "expired_offset", "conflict_offset", "topic_id", "topic_deleted",
]
# What ``explain`` shows of the batch another replica holds at the offset.
REPLICA_FIELDS = ["base_offset", "last_offset", "record_count", "producer_id", "producer_epoch", "base_sequence",
                  "last_sequence", "partition_leader_epoch", "crc", "is_control", "verdict", "severity"]


@dataclass
class Explanation:
    topic: str
    partition: int
    offset: int
    batches: list[dict]  # the batch(es) holding the offset in the log dir explained (more than one only in a broken log)
    before: list[dict]  # the producer's batches before it, nearest last
    after: list[dict]  # the producer's batches after it, nearest first
    reasoning: list[str]  # sentences, in order
    earlier_copy: dict | None = None  # for a DUPLICATE: the first batch with the same range
    transaction: dict | None = None  # the transaction the batch belongs to, if any
    nearest: dict = field(default_factory=dict)  # when no batch holds the offset: the batches around it
    log_dir: str | None = None  # the log dir (broker) whose log is explained
    log_dirs: list[str] = field(default_factory=list)  # every log dir holding batches of the partition
    # the partition folder explained, when its log dir holds more than one of the partition (a deleted,
    # moved-away or stray copy beside the live folder: each a history of its own)
    folder: str | None = None
    # for a break explained by an earlier expiration of its producer: the batch at its expired_offset
    expiry: dict | None = None
    # every other log dir of the partition: what it holds at the offset (``batch``, None for nothing;
    # ``same``: the same batch, by CRC and offsets), its log start and end, and the replica_divergence
    # range of the pair covering the offset
    replicas: list[dict] = field(default_factory=list)


def explain(out: str, topic: str, partition: int, offset: int, context: int = 3,
            log_dir: str | None = None, as_of: AsOf | None = None) -> Explanation:
    """The batch holding ``offset`` in one log dir of the partition, its producer's neighbours there,
    the verdict and why.

    The same partition exported from several log dirs (replicas on several brokers) is several
    logs, each replayed apart: one is explained, ``log_dir`` (the folder above the partition folder,
    or its trailing components) names which; by default the first, in path order, holding the offset.
    An unknown topic, a partition without batches or an unknown log dir is :class:`NotFound`.
    ``as_of`` answers from a past version of ``out`` (time travel).
    """
    audit = Audit(out, as_of)
    verdicts = audit.verdicts(topic)
    folders = _partition_folders(audit, topic, partition)
    dirs = sorted({posixpath.dirname(f) for f in folders})
    here = pc.field("partition") == partition
    everywhere = verdicts.rows(here & (pc.field("base_offset") <= offset) & (pc.field("last_offset") >= offset),
                               list(dict.fromkeys([*BATCH_FIELDS, *REPLICA_FIELDS])))
    everywhere.sort(key=lambda r: (log_dir_of(r["file"]), r["base_offset"], r["file"], r["file_position"]))
    named = _named_folder(folders, log_dir)
    chosen = (posixpath.dirname(named) if named else
              _chosen_log_dir(topic, partition, dirs, list(dict.fromkeys(log_dir_of(r["file"]) for r in everywhere)),
                              log_dir))
    mine = [f for f in folders if posixpath.dirname(f) == chosen]
    folder = named or _chosen_folder(mine, [posixpath.dirname(r["file"]) for r in everywhere])
    if len(dirs) > 1 or len(mine) > 1:
        here &= in_folder(folder) if len(mine) > 1 else in_log_dir(chosen)
    # one log a log dir: the folder explained there, another log dir's as its replica
    everywhere = [r for r in everywhere if log_dir_of(r["file"]) != chosen or posixpath.dirname(r["file"]) == folder]
    where = [log_dir_of(r["file"]) for r in everywhere]
    holding = [r for r, d in zip(everywhere, where) if d == chosen]
    result = Explanation(topic, partition, offset, [{c: r[c] for c in BATCH_FIELDS} for r in holding], [], [], [],
                         log_dir=chosen, log_dirs=dirs, folder=folder if len(mine) > 1 else None)
    incarnation = _incarnation(verdicts, here)
    result.replicas = _replicas(audit, verdicts, topic, partition, offset, chosen, dirs, everywhere, where,
                                incarnation)
    also = other_folders(folder, mine) + other_log_dirs(offset, chosen, dirs, result.replicas)
    if not holding:
        below = verdicts.first(here & (pc.field("last_offset") < offset), "last_offset", descending=True,
                               columns=BATCH_FIELDS)
        above = verdicts.first(here & (pc.field("base_offset") > offset), "base_offset", columns=BATCH_FIELDS)
        if not below and not above:
            raise NotFound(f"{topic}-{partition} has no batches in {chosen}")
        result.nearest = {"below": below[0] if below else None, "above": above[0] if above else None}
        # the checkpoint's entry is the live folder's: a leftover of another incarnation has none
        start = None if _leftover(folder) else _log_start(audit, topic, partition, chosen)
        result.reasoning = [*no_batch_reasoning(offset, result.nearest["below"], result.nearest["above"], start),
                            *also]
        return result
    batch = holding[0]
    if batch["producer_id"] is not None and batch["producer_id"] >= 0:
        _producer_context(audit, verdicts, here & (pc.field("producer_id") == batch["producer_id"]), batch, result,
                          context)
    result.reasoning = verdict_reasoning(batch, result, audit.config)
    if len(holding) > 1:
        result.reasoning.append(f"{len(holding)} batches hold offset {offset}: the log repeats offsets "
                                "(see offset_overlap and the segment_integrity suite).")
    result.reasoning.extend(also)
    return result


def _producer_context(audit: Audit, verdicts: Table, same: pc.Expression, batch: dict, result: Explanation,
                      context: int) -> None:
    """The producer's batches around ``batch`` in its log (``same``: the producer's rows there), the
    earlier copy of a duplicate, the transaction it belongs to and its producer's expiry point."""
    at = batch["base_offset"]
    earlier = same & (pc.field("base_offset") < at)
    result.before = verdicts.first(earlier, "base_offset", context, descending=True, columns=BATCH_FIELDS)[::-1]
    result.after = verdicts.first(same & (pc.field("base_offset") > at), "base_offset", context, columns=BATCH_FIELDS)
    if batch["verdict"] == DUPLICATE:
        copy = (earlier & (pc.field("producer_epoch") == batch["producer_epoch"])
                & (pc.field("base_sequence") == batch["base_sequence"])
                & (pc.field("last_sequence") == batch["last_sequence"]) & ~pc.field("is_control"))
        result.earlier_copy = next(iter(verdicts.first(copy, "base_offset", columns=BATCH_FIELDS)), None)
    if batch["is_transactional"]:
        result.transaction = _transaction_of(audit, batch, result.log_dir)
    expired = batch["expired_offset"]
    if batch["explained_by"] == PRODUCER_EXPIRATION and expired is not None and expired < at:
        point = verdicts.first(same & (pc.field("base_offset") == expired), "base_offset", columns=BATCH_FIELDS)
        result.expiry = next(iter(point), None)


def _incarnation(verdicts: Table, here: pc.Expression) -> str | None:
    """The topic id of the explained folder's rows (``here``), or None (no ids: the name alone)."""
    if TOPIC_ID not in verdicts.columns:
        return None
    first = verdicts.first(here, "base_offset", columns=[TOPIC_ID])
    return first[0][TOPIC_ID] if first else None


def _replicas(audit: Audit, verdicts: Table, topic: str, partition: int, offset: int, chosen: str,
              dirs: list[str], everywhere: list[dict], where: list[str], incarnation: str | None) -> list[dict]:
    """What each other log dir of the partition holds at ``offset``, against the chosen one's batch: the
    log dirs holding the explained folder's incarnation (``incarnation``: its topic id; a folder of
    another id under the name is another topic, no replica of it)."""
    if len(dirs) < 2:
        return []
    ours = (lambda r: r.get(TOPIC_ID) == incarnation) if incarnation else (lambda r: True)
    mine = next((r for r, d in zip(everywhere, where) if d == chosen and ours(r)), None)
    table = audit.table("replica_divergence")
    same_topic = (pc.field("topic") == topic) & (pc.field("partition") == partition)
    if incarnation and table is not None and TOPIC_ID in table.columns:
        same_topic &= pc.field(TOPIC_ID) == incarnation
    ranges = [] if table is None else table.rows(
        same_topic & (pc.field("first_offset") <= offset) & (pc.field("last_offset") >= offset))
    out = []
    for d in dirs:
        if d == chosen:
            continue
        there = (pc.field("partition") == partition) & in_log_dir(d)
        if incarnation:
            there &= pc.field(TOPIC_ID) == incarnation
        end = verdicts.first(there, "last_offset", descending=True, columns=["last_offset"])
        if incarnation and not end:
            continue  # only another incarnation of the name there
        batch = next((r for r, w in zip(everywhere, where) if w == d and ours(r)), None)
        same = (batch is not None and mine is not None and batch["crc"] == mine["crc"]
                and (batch["base_offset"], batch["last_offset"]) == (mine["base_offset"], mine["last_offset"]))
        pair = [r for r in ranges if {r["log_dir"], r["other_log_dir"]} == {chosen, d}]
        out.append({"log_dir": d, "batch": None if batch is None else {c: batch[c] for c in REPLICA_FIELDS},
                    "same": same, "log_start": _log_start(audit, topic, partition, d),
                    "log_end": end[0]["last_offset"] if end else None,
                    "divergence": min(pair, key=lambda r: (r["severity"] != "violation", r["first_offset"]), default=None)})
    return out


def _partition_folders(audit: Audit, topic: str, partition: int) -> list[str]:
    """The partition folders holding batches of the partition, from the small ``segments`` table (a
    row per file read); :class:`NotFound`, naming the topic's partitions, when there is none. A log
    dir holds more than one while a deleted, moved-away or stray copy lingers beside the live folder."""
    segments = audit.table("segments")
    files = [] if segments is None else segments.rows(
        (pc.field("topic") == topic) & (pc.field("batch_count") > 0), ["partition", "file"])
    folders = sorted({posixpath.dirname(f["file"]) for f in files if f["partition"] == partition})
    if not folders:
        partitions = ", ".join(str(p) for p in sorted({f["partition"] for f in files})) or "none"
        raise NotFound(f"{topic}-{partition} has no batches in this audit; partitions of {topic}: {partitions}")
    return folders


def _named_folder(folders: list[str], wanted: str | None) -> str | None:
    """The partition folder ``wanted`` names (its path or trailing components), if it names one."""
    if wanted is None:
        return None
    wanted = wanted.rstrip("/")
    matches = [f for f in folders if f == wanted or f.endswith("/" + wanted)]
    return matches[0] if len(matches) == 1 else None


def _chosen_folder(mine: list[str], holding: list[str]) -> str:
    """Of the log dir's folders of the partition, the one explained: the live one (no ``-delete``,
    ``-future`` or ``-stray`` suffix) when there is one, else the first holding the offset."""
    live = [f for f in mine if (parse_partition_dir(posixpath.basename(f)) or (None, None, "?"))[2] is None]
    return (live or [f for f in mine if f in holding] or mine)[0]


def _chosen_log_dir(topic: str, partition: int, dirs: list[str], holding: list[str], wanted: str | None) -> str:
    """The log dir ``wanted`` names (its path or trailing components), else the first holding the offset."""
    if wanted is None:
        return holding[0] if holding else dirs[0]
    wanted = wanted.rstrip("/")
    matches = [d for d in dirs if d == wanted or d.endswith("/" + wanted)]
    if len(matches) != 1:
        how = "no" if not matches else "more than one"
        raise NotFound(f"{how} log dir of {topic}-{partition} matches {wanted!r}; its log dirs: {', '.join(dirs)}")
    return matches[0]


def _transaction_of(audit: Audit, batch: dict, log_dir: str) -> dict | None:
    """The latest transaction of the batch's producer that started at or before it and had not ended."""
    transactions = audit.table("transactions")
    if transactions is None:
        return None
    at = batch["base_offset"]
    where = ((pc.field("topic") == batch["topic"]) & (pc.field("partition") == batch["partition"])
             & (pc.field("producer_id") == batch["producer_id"]) & (pc.field("first_offset") <= at)
             & (~pc.field("end_offset").is_valid() | (pc.field("end_offset") >= at)))
    if "log_dir" in transactions.columns:
        where &= pc.field("log_dir") == log_dir
    return max(transactions.rows(where), key=lambda t: t["first_offset"], default=None)


def _leftover(folder: str | None) -> bool:
    """Whether ``folder`` is a partition's leftover (``-delete``, ``-stray``), which the broker keeps no
    checkpoint entry for.

    >>> _leftover("/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete"), _leftover("/d/t-0"), _leftover(None)
    (True, False, False)
    """
    parsed = parse_partition_dir(posixpath.basename(folder)) if folder else None
    return parsed is not None and parsed[2] in LEFTOVER_SUFFIXES


def _log_start(audit: Audit, topic: str, partition: int, log_dir: str) -> int | None:
    """The partition's log start offset in the checkpoint of ``log_dir`` (exports before the
    ``file`` column kept one checkpoint for all)."""
    starts = audit.table("log_start_offsets")
    if starts is None:
        return None
    rows = starts.rows((pc.field("topic") == topic) & (pc.field("partition") == partition))
    if "file" in starts.columns:
        rows = [r for r in rows if log_dir_of(r["file"], levels=1) == log_dir]
    return max((r["log_start_offset"] for r in rows if r["log_start_offset"] is not None), default=None)
