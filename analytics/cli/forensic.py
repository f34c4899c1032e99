"""Text layouts of the forensic answers: ``explain`` (one offset) and ``producer`` (one producer's history)."""

from __future__ import annotations

from analytics.cli.render import render_table
from analytics.contract import INFO_VERDICTS, OK_VERDICTS, VERDICTS


def explain_text(e) -> str:
    """The batch holding the offset, the reasoning, and the producer's batches around it."""
    where = e.folder if e.folder else (e.log_dir if len(e.log_dirs) > 1 else None)
    # the incarnation: a topic deleted and created again under its name is another topic, with another id
    known = next((b for b in [*e.batches, *e.nearest.values()] if b and b.get("topic_id")), None)
    incarnation = (f" (topic id {known['topic_id']}{', deleted' if known.get('topic_deleted') else ''})"
                   if known else "")
    lines = [f"{e.topic}-{e.partition} offset {e.offset}" + (f" in {where}" if where else "") + incarnation]
    for b in e.batches:
        lines.append(f"  batch {b['base_offset']}..{b['last_offset']} in {b['file']} at byte {b['file_position']}: "
                     f"{b['verdict']} ({b['severity']}{', explained by ' + b['explained_by'] if b['explained_by'] else ''})")
    lines.append("")
    lines += [f"  {line}" for line in e.reasoning]
    neighbours = [*e.before, *e.batches[:1], *e.after] if e.batches else [r for r in e.nearest.values() if r]
    if neighbours:
        title = f"producer {e.batches[0]['producer_id']}, batches around it" if e.batches else "the batches around it"
        here = e.batches[0]["base_offset"] if e.batches else None
        lines += ["", f"{title}:", render_table(
            ["", "base_offset", "last_offset", "epoch", "sequences", "idle_ms", "verdict", "explained_by"], [
                [">" if r["base_offset"] == here else "", r["base_offset"], r["last_offset"], r["producer_epoch"],
                 "-" if r["is_control"] else f"{r['base_sequence']}..{r['last_sequence']}", r["idle_ms"],
                 r["verdict"] if not r["is_control"] else f"{r['verdict']} {r['control_type'] or ''}".rstrip(),
                 r["explained_by"]]
                for r in neighbours])]
    return "\n".join(lines)


def producer_text(h, utc) -> str:
    """Sessions, epoch changes, findings, transactions and the longest pauses of one producer.

    A partition exported from several log dirs (replicas) has a session per log dir: they are shown
    apart, and the header counts the batches of each partition's first log dir only.
    """
    dirs = sorted({s.get("log_dir") for s in h.sessions}, key=str)
    several = len(dirs) > 1
    first_dir = {}
    for s in sorted(h.sessions, key=lambda s: str(s.get("log_dir"))):
        first_dir.setdefault((s["topic"], s["partition"]), s.get("log_dir"))
    batches = sum(s["batches"] for s in h.sessions if s.get("log_dir") == first_dir[(s["topic"], s["partition"])])
    out = [f"producer {h.producer_id}: partitions {len(first_dir)}, "
           f"epochs {sorted({s['producer_epoch'] for s in h.sessions})}, batches {batches:,}, "
           f"findings {h.findings_total:,}, transactions {h.transactions_total:,}"
           + (f", log dirs {len(dirs)} (batches counted in the first log dir of each partition)" if several else "")
           + "\n"]
    out.append("sessions (one per topic, partition and epoch" + (", in each log dir):" if several else "):"))
    out.append(render_table(["topic", "partition", *(["log_dir"] if several else []), "epoch", "offsets", "sequences",
                             "first_time", "last_time", "batches", "records", "findings"], [
        [s["topic"], s["partition"], *([s.get("log_dir")] if several else []), s["producer_epoch"],
         f"{s['first_offset']}..{s['last_offset']}",
         "-" if s["first_sequence"] is None else f"{s['first_sequence']}..{s['last_sequence']}",
         utc(s["first_timestamp"]), utc(s["last_timestamp"]),
         s["batches"], s["records"], session_findings(s)] for s in h.sessions]))
    # with several log dirs, every table names the log dir of each row
    where = (lambda r: [r["log_dir"]]) if several else (lambda r: [])
    head = ["log_dir"] if several else []
    if h.epoch_changes:
        out += ["\nepoch changes:", render_table(["topic", "partition", *head, "from", "to", "at_offset", "at_time", "verdict"], [
            [c["topic"], c["partition"], *where(c), c["from_epoch"], c["to_epoch"], c["at_offset"], utc(c["at_timestamp"]),
             c["verdict"]] for c in h.epoch_changes])]
    out.append(f"\nfindings ({len(h.findings)} of {h.findings_total}):" if h.findings else "\nfindings: none")
    if h.findings:
        out.append(render_table(["topic", "partition", *head, "offset", "epoch", "sequences", "expected", "verdict",
                                 "explained_by"], [
            [f["topic"], f["partition"], *where(f), f["base_offset"], f["producer_epoch"],
             f"{f['base_sequence']}..{f['last_sequence']}", f["expected_sequence"], f["verdict"], f["explained_by"]]
            for f in h.findings]))
    if h.transactions:
        out += [f"\ntransactions ({len(h.transactions)} of {h.transactions_total}, unfinished first):",
                render_table(["topic", "partition", *head, "epoch", "first_offset", "end_offset", "status"], [
                    [t["topic"], t["partition"], *where(t), t["producer_epoch"], t["first_offset"], t["end_offset"],
                     t["status"]] for t in h.transactions])]
    out += [f"\nlongest pauses (producer.id.expiration.ms = {h.expiration_ms}):",
            render_table(["topic", "partition", *head, "offset", "after_offset", "idle_ms", "verdict", "explained_by"], [
                [i["topic"], i["partition"], *where(i), i["base_offset"], i["prev_base_offset"], i["idle_ms"],
                 i["verdict"], i["explained_by"]] for i in h.idle])]
    if h.transactional_ids:
        out += ["\ntransactional ids served (from __transaction_state):", render_table(
            ["transactional_id", "epochs", "first_time", "last_time", "committed", "aborted", "fenced", "ended",
             "producer_id_before", "producer_id_after"],
            [[t["transactional_id"], _epochs(t), utc(t["first_time"]), utc(t["last_time"]), t["committed"],
              t["aborted"], t["fenced"], t["ended"] or "-", _or_dash(t["before"]), _or_dash(t["after"])]
             for t in h.transactional_ids])]
    return "\n".join(out)


def transactional_id_text(h, utc) -> str:
    """Every producer id of one transactional id, then its state changes with the events they mark."""
    from analytics.forensics.transactional import EVENT_MEANING

    ids = [e["producer_id"] for e in h.producer_ids]
    out = [f"transactional id {h.transactional_id!r} (__transaction_state partition {h.coordinator_partition}"
           + (f", {h.replicas} replicas" if h.replicas > 1 else "") + f"): producer ids {ids}, "
           f"state changes {h.changes_total:,}\n", "producer ids, in order:", render_table(
        ["producer_id", "epochs", "first_time", "last_time", "committed", "aborted", "fenced", "timed_out",
         "initialised", "ended"],
        [[e["producer_id"], _epochs(e), utc(e["first_time"]), utc(e["last_time"]), e["committed"], e["aborted"],
          e["fenced"], e["timed_out"], e["initialized"], e["ended"] or "-"] for e in h.producer_ids])]
    out += [f"\nstate changes ({len(h.changes)} of {h.changes_total}):", render_table(
        ["offset", "time", "state", "producer_id", "epoch", "partitions", "event"],
        [[c["offset"], utc(c["update_timestamp"] if c["update_timestamp"] is not None else c["timestamp"]), c["state"], _or_dash(c["producer_id"]), _or_dash(c["producer_epoch"]),
          ",".join(c["partitions"] or []) or "-", c["event"] or ""] for c in h.changes])]
    events = sorted({c["event"] for c in h.changes if c["event"]})
    out += ["", *(f"{e}: {EVENT_MEANING[e]}" for e in events)]
    return "\n".join(out)


def _epochs(era: dict) -> str:
    return str(era["first_epoch"]) if era["first_epoch"] == era["last_epoch"] else f"{era['first_epoch']}..{era['last_epoch']}"


def _or_dash(value) -> str:
    return "-" if value is None else str(value)


def session_findings(s: dict) -> str:
    """The non-ok verdict counts of a producer session, e.g. ``"DUPLICATE 2, SEQUENCE_GAP 1"``."""
    return ", ".join(f"{v} {s[v.lower()]}" for v in VERDICTS
                     if v not in (*OK_VERDICTS, *INFO_VERDICTS) and s.get(v.lower()))
