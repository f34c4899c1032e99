"""The words of an explanation: a batch's verdict, the evidence behind it, and the offset no batch holds.

Pure functions of rows (dicts of ``batch_verdicts`` columns) and the audit's configuration.
"""

from __future__ import annotations

import datetime
import posixpath

from analytics.contract import (
    COMPACTION,
    CORRUPT,
    DUPLICATE,
    NON_IDEMPOTENT,
    PARTIAL_HISTORY,
    PRODUCER_EXPIRATION,
    SEQUENCE_GAP,
    SEQUENCE_REGRESSION,
    SEQUENCE_REUSE,
    SEV_VIOLATION,
    STATE_LOSS,
    UNREAD_FILE,
    VERDICT_MEANING,
)
from analytics.report.values import human_ms


def utc(ms) -> str | None:
    """Epoch milliseconds as UTC text to the millisecond; None stays None."""
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _ms(ms) -> str:
    """Milliseconds with a human unit: ``90,000,000 ms (25 h)``."""
    if ms is None:
        return "unknown"
    return f"{ms:,} ms ({human_ms(ms)})" if abs(ms) >= 1000 else f"{ms:,} ms"


def _when(ms) -> str:
    return "at an unknown time" if ms is None or ms < 0 else f"{utc(ms)} UTC"


def verdict_reasoning(b: dict, result, config: dict) -> list[str]:
    """The verdict of batch ``b`` in words: what the broker expected, what the log shows, and the
    evidence; ``result`` is the :class:`~analytics.forensics.offset.Explanation` being built (its
    neighbours, earlier copy, transaction and expiry point)."""
    verdict = b["verdict"]
    says = [f"{verdict}: {VERDICT_MEANING.get(verdict, verdict)}."]
    if b["producer_id"] is None or b["producer_id"] < 0 or verdict in (NON_IDEMPOTENT, CORRUPT):
        return says + ([b["explanation"]] if b["explanation"] else [])
    seen = f"producer {b['producer_id']} epoch {b['producer_epoch']}"
    if b["is_control"]:
        says.append(f"A {b['control_type'] or 'control'} marker of {seen}, coordinator epoch {b['coordinator_epoch']}.")
    else:
        records = f"{b['record_count']} record{'' if b['record_count'] == 1 else 's'}"
        says.append(f"Seen: {seen}, sequences {b['base_sequence']}..{b['last_sequence']} "
                    f"({records} at offsets {b['base_offset']}..{b['last_offset']}, written {_when(b['max_timestamp'])}).")
    prev = result.before[-1] if result.before else None
    if prev is None:
        says.append("This is the producer's first batch in the exported log of this partition.")
    else:
        left = (f"sequence {prev['last_sequence']}" if not prev["is_control"]
                else f"a {prev['control_type'] or 'control'} marker")
        says.append(f"Before it: offset {prev['base_offset']}, epoch {prev['producer_epoch']}, {left}.")
    if b["expected_sequence"] is not None and not b["is_control"]:
        match = "and saw it" if b["expected_sequence"] == b["base_sequence"] else f"but saw {b['base_sequence']}"
        says.append(f"The broker expected sequence {b['expected_sequence']} {match}.")
    expiration = config.get("producer_id_expiration_ms")
    if b["idle_ms"] is not None:
        relation = "at least" if expiration is not None and b["idle_ms"] >= expiration else "below"
        says.append(f"Idle {_ms(b['idle_ms'])} since the producer's previous batch: {relation} "
                    f"producer.id.expiration.ms = {_ms(expiration)}.")
    if b["offset_holes"]:
        says.append(f"{b['offset_holes']:,} offsets between the two batches are carried by no batch "
                    "(removed by compaction, or missing from the export).")
    if b["txn_open"]:
        says.append("A transaction of this producer was open before this batch.")
    if result.earlier_copy:
        e = result.earlier_copy
        says.append(f"The first copy is at offset {e['base_offset']} ({e['file']} position {e['file_position']}).")
    if result.transaction:
        t = result.transaction
        end = f"ends at {t['end_offset']}" if t["end_offset"] is not None else "has no marker in the log"
        says.append(f"It belongs to a transaction from offset {t['first_offset']} that {end}: {t['status']}.")
    says.extend(evidence(b, config, result.expiry))
    if b["severity"] == SEV_VIOLATION:
        says.append("No evidence in the log or the configuration explains it: a violation.")
    return says


def evidence(b: dict, config: dict, expiry: dict | None = None) -> list[str]:
    """Why an ``explained_by`` holds, restated from the row, the configuration and (for a repeat
    after an expiration) the batch at the producer's expiry point."""
    why = b["explained_by"]
    expiration = config.get("producer_id_expiration_ms")
    if why == PRODUCER_EXPIRATION and expiry is not None and b.get("conflict_offset") is not None:
        original = {DUPLICATE: "its original batch", SEQUENCE_GAP: "the batch holding its highest sequence",
                    SEQUENCE_REGRESSION: "the batch holding its highest sequence"}.get(b["verdict"], "the batch")
        return [f"Explained by producer expiration: the producer was idle {_ms(expiry['idle_ms'])} before offset "
                f"{expiry['base_offset']} (at least producer.id.expiration.ms {_ms(expiration)}, no open "
                f"transaction), after {original} at offset {b['conflict_offset']}: the broker had forgotten it "
                "and took this batch in sequence with what the producer wrote since."]
    if why == PRODUCER_EXPIRATION:
        return [f"Explained by producer expiration: idle {_ms(b['idle_ms'])} >= producer.id.expiration.ms "
                f"{_ms(expiration)} with no open transaction, so the broker had "
                "forgotten the producer and accepted its next batch as new."]
    if why == SEQUENCE_REUSE:
        original = f" at offset {b['conflict_offset']}" if b.get("conflict_offset") is not None else ""
        return [f"A sequence reuse, not a copy: its records differ in key and value at every position from those "
                f"of every earlier batch with its epoch and sequence range (the first{original}), and the broker "
                "had forgotten the producer (idle past producer.id.expiration.ms), so it took the batch: nothing "
                "repeats for a consumer."]
    if why == PARTIAL_HISTORY:
        return ["Explained by partial history: the producer's earlier batches lie below the log start "
                "(deleted by retention or compaction) or outside the export."]
    if why == COMPACTION:
        return ["Explained by compaction: the topic is compacted and the offset holes between the two batches "
                f"({b['offset_holes']}) cover the missing sequences."]
    if why == UNREAD_FILE:
        return ["Not judged: a segment file of this partition could not be read (every_file_read names it), and "
                f"the offset holes between the two batches ({b['offset_holes']}) cover the missing sequences, "
                "which may be in it. Read that file (check its permissions) and audit again."]
    if why == STATE_LOSS:
        restarts = config.get("broker_restarts") or []
        return [f"Explained by state loss: a broker restart given in the configuration ({restarts}) lies between "
                "the producer's previous batch and this one."]
    return []


def no_batch_reasoning(offset: int, below: dict | None, above: dict | None, log_start: int | None) -> list[str]:
    """Where an offset no batch holds lies: before the first batch (with the log start offset, when
    known), after the last, or in a hole between two."""
    says = [f"No batch of the export holds offset {offset}."]
    if below is None:
        says.append(f"It lies before the first exported batch (offset {above['base_offset']})"
                    + (f"; the log start offset is {log_start}." if log_start is not None else "."))
    elif above is None:
        says.append(f"It lies after the last exported batch (offsets {below['base_offset']}..{below['last_offset']}).")
    else:
        says.append(f"It falls between the batches at {below['base_offset']}..{below['last_offset']} and "
                    f"{above['base_offset']}..{above['last_offset']}: records removed by compaction, or a segment "
                    "missing from the export.")
    return says


def other_folders(folder: str, folders: list[str]) -> list[str]:
    """For a log dir holding more than one folder of the partition (``folders``): which one is
    explained, and that the others are histories of their own.

    >>> other_folders("/d/t-0", ["/d/t-0", "/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete"])[0][:71]
    'The log dir holds 2 folders of the partition, each a history of its own'
    """
    if len(folders) < 2:
        return []
    others = ", ".join(posixpath.basename(f) for f in folders if f != folder)
    return [f"The log dir holds {len(folders)} folders of the partition, each a history of its own (a deleted, "
            f"moved-away or stray copy lingers beside the live one until the broker removes it); this is "
            f"{posixpath.basename(folder)}, the other {others} (--log-dir FOLDER chooses another)."]


def other_log_dirs(offset: int, log_dir: str, log_dirs: list[str], replicas: list[dict]) -> list[str]:
    """For a partition exported from several log dirs: which one is explained, and what each other
    replica holds at the offset (``replicas``: :func:`analytics.forensics.offset.explain`'s)."""
    if len(log_dirs) < 2:
        return []
    says = [(f"The partition is in {len(log_dirs)} log dirs, each replayed apart; this is the log of "
             f"{log_dir} (--log-dir chooses another).")]
    for r in replicas:
        b = r["batch"]
        if b is None:
            held = f"{r['log_dir']} holds no batch at offset {offset}"
            if r["log_end"] is not None and offset > r["log_end"]:
                held += f": its log ends at offset {r['log_end']}"
            elif r["log_start"] is not None and offset < r["log_start"]:
                held += f": its log starts at offset {r['log_start']}"
        elif r["same"]:
            held = (f"{r['log_dir']} holds the same batch {b['base_offset']}..{b['last_offset']} "
                    f"(CRC {_crc(b['crc'])}, leader epoch {b['partition_leader_epoch']})")
        else:
            what = "a control batch" if b["is_control"] else (
                f"producer {b['producer_id']} epoch {b['producer_epoch']} sequences {b['base_sequence']}..{b['last_sequence']}")
            held = (f"{r['log_dir']} holds a different batch {b['base_offset']}..{b['last_offset']}: {what}, "
                    f"{b['record_count']} records, leader epoch {b['partition_leader_epoch']}, CRC {_crc(b['crc'])}")
        d = r["divergence"]
        if d is not None:
            held += (f"; replica_divergence: {d['kind']} {d['first_offset']}..{d['last_offset']} ({d['severity']}; "
                     f"leader epoch {d['leader_epoch']} in {d['log_dir']}, {d['other_leader_epoch']} in {d['other_log_dir']})")
        says.append(held + ".")
    return says


def _crc(value: int | None) -> str:
    return "unknown" if value is None else f"{value:#010x}"
