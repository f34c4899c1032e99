"""Who a producer id was: the transactional ids of the coordinator's log (``transactional_ids``).

A transactional id's rows, in the order of its ``__transaction_state`` partition, are its life:
each producer id it was given (an *era*), the epochs each had, its transactions, the fencings and
the expiration that ended an era. ``producer --transactional-id`` shows them all; ``producer
--producer-id`` names the transactional ids a producer id served and the ids before and after it.

A partition of ``__transaction_state`` exported from several log dirs (its replicas) holds each
change once per replica: the changes are taken once, from the first log dir holding each offset.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from analytics.contract import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_EPOCH_FENCE,
    TOMBSTONE,
)
from analytics.forensics.tables import Audit, NotFound, Table, log_dirs
from analytics.publish import AsOf

TABLE = "transactional_ids"
MAX_EPOCH = 32767  # Short.MaxValue: an epoch that cannot be bumped again, so the producer id rotates
# the events of a transactional id's life, as ``event`` of its changes
INITIALIZED = "initialized"  # InitProducerId: a new producer instance; earlier instances are fenced
FENCED = "fenced"  # an open transaction aborted by the coordinator because a new instance initialised
TIMED_OUT = "timed_out"  # an open transaction aborted by the coordinator past its timeout
EXPIRED = "expired"  # the coordinator removed the id after transactional.id.expiration.ms
NEW_PRODUCER_ID = "new_producer_id"
EVENT_MEANING = {
    INITIALIZED: "a producer instance initialised (InitProducerId): every earlier instance of this id is fenced",
    FENCED: "its open transaction was aborted by the coordinator at a bumped epoch because a new producer instance "
            "initialised: the old instance is a zombie from here on",
    TIMED_OUT: "its open transaction was aborted by the coordinator: open longer than its transaction.timeout.ms",
    EXPIRED: "the coordinator removed the transactional id: idle past transactional.id.expiration.ms",
    NEW_PRODUCER_ID: "the transactional id got a new producer id: sequences restart at 0 under it",
}
CHANGE_FIELDS = ["offset", "timestamp", "update_timestamp", "state", "producer_id", "producer_epoch", "previous_producer_id",
                 "next_producer_id", "timeout_ms", "partitions", "event"]


@dataclass
class TransactionalIdHistory:
    transactional_id: str
    coordinator_partition: int
    producer_ids: list[dict]  # one per era, in order: the producer id, its epochs, transactions, how it ended
    changes: list[dict]  # the state changes (the first ``limit``), with the event each marks
    changes_total: int
    replicas: int  # log dirs holding the coordinator's partition


def transactional_id_history(out: str, transactional_id: str, limit: int = 50,
                             as_of: AsOf | None = None) -> TransactionalIdHistory:
    """Every producer id ``transactional_id`` had, with its state changes; NotFound when the export's
    ``__transaction_state`` holds no record of it."""
    table = _table(Audit(out, as_of))
    rows, replicas = _changes(table, pc.field("transactional_id") == transactional_id)
    if not rows:
        known = sorted(set(table.read(None, ["transactional_id"]).column(0).to_pylist()))
        hint = f"; transactional ids: {', '.join(known[:10])}{' ...' if len(known) > 10 else ''}" if known else ""
        raise NotFound(f"transactional id {transactional_id!r} is in no __transaction_state record of this export{hint}")
    _mark_events(rows)
    return TransactionalIdHistory(transactional_id, rows[0]["coordinator_partition"], _eras(rows),
                                  [{c: r[c] for c in CHANGE_FIELDS} for r in rows[:limit]], len(rows), replicas)


def served_by(audit: Audit, producer_id: int) -> list[dict]:
    """The transactional ids ``producer_id`` served, each with its era (epochs, transactions, times)
    and the producer ids the transactional id had before and after it. Empty when the export holds no
    coordinator's log, or no record of the producer id."""
    table = audit.table(TABLE)
    if table is None:
        return []
    named = table.read(pc.field("producer_id") == producer_id, ["transactional_id"]).column(0).unique().to_pylist()
    out = []
    for tid in sorted(named):
        rows, _ = _changes(table, pc.field("transactional_id") == tid)
        _mark_events(rows)
        eras = _eras(rows)
        for i, era in enumerate(eras):
            if era["producer_id"] == producer_id:
                out.append({"transactional_id": tid, **era,
                            "before": eras[i - 1]["producer_id"] if i else None,
                            "after": eras[i + 1]["producer_id"] if i + 1 < len(eras) else None})
    return out


def _table(audit: Audit) -> Table:
    table = audit.table(TABLE)
    if table is None:
        raise NotFound("this export has no transactional_ids table: re-export it with this version of segaudit")
    return table


def _changes(table: Table, where) -> tuple[list[dict], int]:
    """The rows matching ``where`` in log order, each (coordinator partition, offset) once, from the
    first log dir holding it; and how many log dirs hold them."""
    rows = table.read(where)
    rows = rows.append_column("log_dir", log_dirs(rows["file"]))
    by_place: dict[tuple, dict] = {}
    for r in sorted(rows.to_pylist(), key=lambda r: (r["coordinator_partition"], r["offset"], r["log_dir"])):
        by_place.setdefault((r["coordinator_partition"], r["offset"]), r)
    return list(by_place.values()), len(set(rows["log_dir"].to_pylist()))


def _mark_events(rows: list[dict]) -> None:
    """Sets each change's ``event`` (None for the plain steps of a transaction) from its neighbours.

    An open transaction aborted and followed at once by an ``Empty`` of the same producer id (an
    ``InitProducerId``) was fenced by a new instance: the coordinator aborted it at a bumped epoch.
    (Under transactions V2 every end bumps the epoch, so only the ``Empty`` after it tells a fence
    from the client's own abort; under V1 the fence's abort is also the only one at a bumped epoch.)
    One aborted at least ``timeout_ms`` after it started was aborted by the coordinator's timeout.
    """
    previous = None
    for i, r in enumerate(rows):
        event = None
        if r["state"] == TOMBSTONE:
            event = EXPIRED
        elif previous is None or previous["state"] == TOMBSTONE or r["producer_id"] != previous["producer_id"]:
            event = NEW_PRODUCER_ID if previous is not None else INITIALIZED
        elif r["state"] == PREPARE_EPOCH_FENCE:
            event = FENCED
        elif r["state"] == PREPARE_ABORT and previous["state"] == ONGOING:
            after = rows[i + 1:i + 3]
            reinitialised = (len(after) == 2 and after[0]["state"] == COMPLETE_ABORT and after[1]["state"] == EMPTY
                             and after[1]["producer_id"] == r["producer_id"])
            bumped = r["producer_epoch"] > previous["producer_epoch"]
            v2 = (r["client_transaction_version"] or 0) >= 2
            started, timeout = r["start_timestamp"], r["timeout_ms"]
            if reinitialised and (bumped or v2):
                event = FENCED
            elif started is not None and started >= 0 and timeout is not None and r["update_timestamp"] - started >= timeout:
                event = TIMED_OUT
        elif r["state"] == EMPTY and r["producer_epoch"] != previous["producer_epoch"]:
            event = INITIALIZED
        r["event"] = event
        previous = r


def _eras(rows: list[dict]) -> list[dict]:
    """The producer ids of one transactional id's changes (events marked), one entry per era."""
    eras: list[dict] = []
    for r in rows:
        if r["state"] == TOMBSTONE:
            if eras:
                eras[-1]["ended"] = EXPIRED
                eras[-1]["last_time"] = r["timestamp"]
            continue
        if not eras or eras[-1]["producer_id"] != r["producer_id"] or eras[-1]["ended"] == EXPIRED:
            if eras and eras[-1]["ended"] is None:
                exhausted = eras[-1]["last_epoch"] >= MAX_EPOCH - 1
                eras[-1]["ended"] = "epoch exhausted" if exhausted else NEW_PRODUCER_ID
            eras.append({"producer_id": r["producer_id"], "first_epoch": r["producer_epoch"],
                         "last_epoch": r["producer_epoch"], "first_time": r["update_timestamp"],
                         "last_time": r["update_timestamp"], "committed": 0, "aborted": 0, "fenced": 0,
                         "initialized": 0, "timed_out": 0, "ended": None})
        era = eras[-1]
        era["last_epoch"] = max(era["last_epoch"], r["producer_epoch"])
        era["first_epoch"] = min(era["first_epoch"], r["producer_epoch"])
        era["last_time"] = r["update_timestamp"]
        era["committed"] += r["state"] == COMPLETE_COMMIT
        era["aborted"] += r["state"] == COMPLETE_ABORT
        era["fenced"] += r["event"] == FENCED
        era["timed_out"] += r["event"] == TIMED_OUT
        era["initialized"] += r["event"] in (INITIALIZED, NEW_PRODUCER_ID)
    return eras
