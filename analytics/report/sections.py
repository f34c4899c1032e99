"""The page's sections after the summary, one function each: ``data`` (the whole report dict) in,
one ``<section>`` out. A section whose part of the data is missing or empty says so rather than
disappearing, so the page always has the same outline."""

from __future__ import annotations

import posixpath

from analytics.contract import (
    ABORTED, COMMITTED, DUP_DUPLICATE, DUPLICATE_KIND_MEANING, DUPLICATE_KINDS, HANGING, MATCH, MISMATCH, NOT_IN_LOG, NOT_IN_SNAPSHOT, OPEN, REPORT_DIR, SEV_EXPLAINED,
    SEV_INFO, SEV_OK, SEV_VIOLATION, SNAPSHOT_STATUSES, TEMPORARY_FILE, TRUNCATED, TXN_STATUSES, VALIDATION_DIR,
    ZERO_FILLED, dedup_key_meaning,
)
from analytics.report.charts import (
    SHAPE_NAMES, idle_chart, minibar, sequence_chart, timeline_chart, trend_chart, trend_legend,
)
from analytics.report.markup import (
    CHECK, PARTITION, SNAPSHOT, TIMELINE, anchor, badge, details, nothing, section, showing, span, table,
)
from analytics.report.style import MUTED
from analytics.report.summary import DATA_ANSWER, DATA_QUESTION, question
from analytics.report.svg import SEVERITY_LEGEND, legend
from analytics.report.values import (
    DASH, as_dict, as_int, as_list, esc, fmt, fmt_id, fmt_path, fmt_time, is_num, partition_name,
)

# The Data Docs site of the validation, from the report's folder: both live under OUT, so the link
# holds as long as OUT does (copied or moved whole); it is the page's one link out of itself.
DATA_DOCS = posixpath.relpath(f"{VALIDATION_DIR}/data_docs/index.html", REPORT_DIR)
# Validation statuses (``build._validation``) drawn in the severity palette.
STATUS_SEVERITY = {"pass": SEV_OK, "warn": SEV_EXPLAINED, "fail": SEV_VIOLATION}
TXN_SEVERITY = {COMMITTED: SEV_OK, ABORTED: SEV_INFO, OPEN: SEV_EXPLAINED, HANGING: SEV_VIOLATION}
# A snapshot the replay cannot compare (the producer left the log by retention, or wrote after the
# snapshot) is information; a disagreement on a producer both know is a violation.
SNAPSHOT_SEVERITY = {MATCH: SEV_OK, MISMATCH: SEV_VIOLATION, NOT_IN_LOG: SEV_INFO, NOT_IN_SNAPSHOT: SEV_INFO}
# Parse errors a broker leaves in normal operation (a preallocated segment's zero tail, files it
# has yet to finish renaming) are information; every other kind is bytes the log lost.
EXPECTED_ERRORS = (ZERO_FILLED, TEMPORARY_FILE)
# The end of a segment an unclean shutdown left half written: the broker truncates it on recovery.
TORN_TAILS = (TRUNCATED, ZERO_FILLED)


def validation(data: dict) -> str:
    """The checks, then each failed or warned check with its offending rows (the sample in results.json)."""
    intro = question(DATA_QUESTION, DATA_ANSWER)
    v = data.get("validation")
    if not isinstance(v, dict):
        return section("validation", "Validation", intro + nothing("no validation results (segaudit validate OUT)"))

    def status(c: dict) -> str:
        st = c.get("status")
        return st if st in STATUS_SEVERITY else ("pass" if c.get("success") else "fail")

    checks = [as_dict(c) for c in as_list(v.get("checks"))]
    rows = [[esc(c.get("suite", "")), span("mono", esc(c.get("check", ""))), esc(c.get("description", "")),
             span("num", fmt(c.get("unexpected"))), badge(status(c), STATUS_SEVERITY[status(c)])]
            for c in checks]
    if v.get("success"):
        overall = badge("all expectations met", SEV_OK)
    else:
        overall = badge("expectations failed", SEV_VIOLATION)
    run = f" {span('muted', 'validation run ' + span('mono', esc(v['run_id'])))}" if v.get("run_id") else ""
    headers = ["suite", "check", "description", "unexpected rows", "status"]
    listed = table(headers, rows) if rows else nothing("no checks")
    # each check's block and rows are anchored by its position in the list (the Findings table links them)
    offending = "".join(
        details(0, f"{badge(status(c), STATUS_SEVERITY[status(c)])} {span('mono', esc(c.get('check', '')))} "
                   f"{span('muted', esc(c.get('description', '')))}",
                showing(len(as_list(c.get("rows"))), c.get("unexpected"), "offending rows")
                + rows_table(as_list(c.get("rows")), i), opened=True, target=anchor(CHECK, i))
        for i, c in enumerate(checks) if status(c) != "pass" and as_list(c.get("rows")))
    offending = f"<h3>Offending rows</h3>{offending}" if offending else ""
    docs = f'<p class="note">This validation\'s Data Docs: <a href="{DATA_DOCS}">{esc(DATA_DOCS)}</a></p>'
    return section("validation", "Validation", f"{intro}<p>{overall}{run}</p>{docs}{listed}{offending}")


def rows_table(rows: list, check: int | None = None) -> str:
    """Rows of any table (a check's sample): one column per key, in the order they first appear;
    ``check``: the check's position, which anchors each row."""
    rows = [as_dict(r) for r in rows]
    columns = list(dict.fromkeys(str(k) for r in rows for k in r))
    ids = [anchor(CHECK, check, j) for j in range(len(rows))] if check is not None else None
    return table(columns, [[cell(c, r.get(c)) for c in columns] for r in rows], ids)


def cell(column: str, v) -> str:
    """One value of a sample row, formatted by what its column holds: ids and sequences without
    thousands separators, paths wrapping, names in mono, an explanation as the broker's answer."""
    if v is None:
        return DASH
    if column == "explained_by":
        return badge(v, SEV_EXPLAINED)
    if column == "file" or column.endswith("_file"):
        return span("mono path", fmt_path(v))
    if column == "partition" or column.endswith(("_id", "epoch", "sequence")):
        return span("num", fmt_id(v))
    if is_num(v):
        return span("num", fmt(v))
    if column in ("verdict", "error_kind", "dedup_key", "status"):
        return span("mono", esc(v))
    return esc(v)


def parse_errors(data: dict) -> str:
    """What the reader could not parse, per file and position: torn tails, CRC mismatches, bad framing."""
    pe = as_dict(data.get("parse_errors"))
    rows = [as_dict(r) for r in as_list(pe.get("rows"))]
    if not rows:
        what = "no parse errors: every byte of every file is in a parsed batch" if pe else "parse errors not read"
        return section("parse-errors", "Parse errors and torn tails", nothing(what))
    kinds = as_dict(pe.get("kinds"))
    chips = " ".join(
        badge(f"{k} {fmt(as_int(as_dict(n).get('errors')))} ({fmt(as_int(as_dict(n).get('bytes')))} bytes)",
              SEV_INFO if k in EXPECTED_ERRORS else SEV_VIOLATION) for k, n in sorted(kinds.items()))
    note = ('<p class="note">Every byte of every file is in a parsed batch or counted here. A torn tail '
            f"({', '.join(TORN_TAILS)}) is the end of a segment an unclean shutdown left half written.</p>")
    headers = ["topic", "partition", "file", "position", "kind", "bytes affected", "message"]
    cells = table(headers, [
        [esc(r.get("topic", "")), fmt_id(r.get("partition")), span("mono path", fmt_path(r.get("file", ""))),
         span("num", fmt(r.get("file_position"))),
         badge(r.get("error_kind", "?"), SEV_INFO if r.get("error_kind") in EXPECTED_ERRORS else SEV_VIOLATION)
         + (f" {span('muted', 'torn tail')}" if r.get("error_kind") in TORN_TAILS else ""),
         span("num", fmt(r.get("bytes_affected"))), esc(r.get("message", ""))]
        for r in rows])
    return section("parse-errors", "Parse errors and torn tails",
                   f"<p>{chips}</p>{note}" + showing(len(rows), pe.get("rows_total"), "parse errors") + cells)


def snapshot_checks(data: dict) -> str:
    """The producers whose replayed state disagrees with a broker snapshot: expected (the snapshot)
    beside replayed (the audit), a differing replayed value marked."""
    sc = as_dict(data.get("snapshot_checks"))
    counts = as_dict(sc.get("counts")) or as_dict(as_dict(data.get("summary")).get("snapshot_checks"))
    chips = " ".join(badge(f"{k} {fmt(as_int(counts.get(k)))}", SNAPSHOT_SEVERITY[k]) for k in SNAPSHOT_STATUSES)
    rows = [as_dict(r) for r in as_list(sc.get("rows"))]
    if not rows:
        what = "every snapshot agrees with the replay" if sc else "no snapshot checks"
        return section("snapshots", "Snapshot checks", f"<p>{chips}</p>" + nothing(what))

    def pair(r: dict, field: str) -> list[str]:
        expected, replayed = r.get(f"expected_{field}"), r.get(f"replayed_{field}")
        shown = fmt(replayed) if field == "last_offset" else fmt_id(replayed)
        differs = expected is not None and replayed is not None and expected != replayed
        return [span("num", fmt(expected) if field == "last_offset" else fmt_id(expected)),
                span("num diff" if differs else "num", shown)]

    headers = ["topic", "partition", "snapshot offset", "producer", "status", "expected epoch", "replayed epoch",
               "expected last sequence", "replayed last sequence", "expected last offset", "replayed last offset"]
    cells = table(headers, [
        [esc(r.get("topic", "")), fmt_id(r.get("partition")), span("num", fmt(r.get("snapshot_offset"))),
         fmt_id(r.get("producer_id")), badge(r.get("status", "?"), SNAPSHOT_SEVERITY.get(str(r.get("status")), SEV_INFO)),
         *pair(r, "epoch"), *pair(r, "last_sequence"), *pair(r, "last_offset")]
        for r in rows], [anchor(SNAPSHOT, j) for j in range(len(rows))])
    return section("snapshots", "Snapshot checks",
                   f"<p>{chips}</p>" + showing(len(rows), sc.get("rows_total"), "disagreements") + cells)


def _verdict_chips(verdicts: dict, parse_errors) -> str:
    chips = [span("chip mono", f"{esc(k)} {fmt(as_int(v))}") for k, v in verdicts.items() if as_int(v)]
    if as_int(parse_errors):
        chips.append(badge(f"parse errors {fmt(as_int(parse_errors))}", SEV_VIOLATION))
    return " ".join(chips)


def partitions(data: dict) -> str:
    parts = [as_dict(p) for p in as_list(data.get("partitions"))]
    if not parts:
        return section("partitions", "Partitions", nothing("no partitions"))
    rows = [[esc(p.get("topic", "")) + _incarnations(p), span("num", fmt_id(p.get("partition"))),
             span("mono muted path", fmt_path(p.get("log_dir", ""))), span("num", fmt(p.get("batches"))),
             span("num", fmt(p.get("records"))),
             span("num", f"{fmt(p.get('first_offset'))} – {fmt(p.get('last_offset'))}"),
             minibar(as_dict(p.get("severities"))),
             _verdict_chips(as_dict(p.get("verdicts")), p.get("parse_errors"))]
            for p in parts]
    headers = ["topic", "partition", "log dir", "batches", "records", "offsets", "severities", "verdicts"]
    note = showing(len(parts), data.get("partitions_total"), "partitions")
    return section("partitions", "Partitions", note + table(headers, rows, [anchor(PARTITION, i) for i in range(len(rows))]))


def _incarnations(p: dict) -> str:
    """The topic ids under a partition's name, where more than one is or one was deleted.

    >>> _incarnations({"incarnations": [{"topic_id": "A", "deleted": True}, {"topic_id": "B", "deleted": False}]})
    '<br><span class="muted mono">topic ids A (deleted), B</span>'
    """
    seen = [as_dict(i) for i in as_list(p.get("incarnations"))]
    if not seen:
        return ""
    ids = ", ".join(f"{esc(i.get('topic_id') or 'none')}{' (deleted)' if i.get('deleted') else ''}" for i in seen)
    return f'<br>{span("muted mono", ("topic ids " if len(seen) > 1 else "topic id ") + ids)}'


def timelines(data: dict) -> str:
    items = [as_dict(t) for t in as_list(data.get("timelines"))]
    if not items:
        return section("timelines", "Timelines", nothing("no partition has explained or violating batches"))
    blocks = []
    for i, t in enumerate(items):
        marks = as_list(t.get("marks"))
        head = (f"<b>{esc(partition_name(t))}</b> {span('muted mono path', fmt_path(t.get('log_dir', '')))} "
                f"<span class='muted'>offsets {fmt(t.get('first_offset'))}–{fmt(t.get('last_offset'))}, "
                f"{fmt(as_int(t.get('marks_total'), len(marks)))} findings</span>")
        note = showing(len(marks), t.get("marks_total"), "findings")
        # a partition with violations starts open: the Findings table links to it
        violating = any(as_dict(m).get("severity") == SEV_VIOLATION for m in marks)
        blocks.append(details(i, head, timeline_chart(t) + note, opened=violating, target=anchor(TIMELINE, i)))
    return section("timelines", "Timelines", "".join(blocks) + legend(SEVERITY_LEGEND))


def producers(data: dict) -> str:
    items = [p for p in map(as_dict, as_list(data.get("producers"))) if as_list(p.get("points"))]
    if not items:
        return section("producers", "Producers", nothing("no producer with findings"))
    blocks = []
    for i, p in enumerate(items):
        chart, kinds = sequence_chart(p)
        shapes = legend([(name, kind, MUTED) for kind, name in SHAPE_NAMES.items() if kind in kinds]
                        + SEVERITY_LEGEND[1:])
        epochs = ", ".join(fmt_id(e) for e in as_list(p.get("epochs"))) or DASH
        points = as_list(p.get("points"))
        head = (f"<b>producer {fmt_id(p.get('producer_id'))}</b> in <b>{esc(partition_name(p))}</b> "
                + span("muted", f"epochs {epochs} · {span('mono path', fmt_path(p.get('log_dir', '')))}"))
        note = showing(len(points), p.get("points_total"), "batches")
        blocks.append(details(i, head, chart + shapes + note))
    return section("producers", "Producers", "".join(blocks))


def idle(data: dict) -> str:
    """Idle time before each resumption, ordered by topic, partition and offset; the threshold is
    the one the report was built with, else the audit configuration's expiration."""
    idle_data = as_dict(data.get("idle"))
    pts = sorted((q for q in map(as_dict, as_list(idle_data.get("points"))) if is_num(q.get("idle_ms"))),
                 key=lambda q: (str(q.get("topic")), as_int(q.get("partition")), as_int(q.get("offset"))))
    if not pts:
        return section("idle", "Producer idle times", nothing("no producer resumptions"))
    config = as_dict(as_dict(data.get("summary")).get("configuration"))
    candidates = (idle_data.get("threshold_ms"), config.get("producer_id_expiration_ms"))
    threshold = next((v for v in candidates if is_num(v)), None)
    note = (f'<p class="note">{fmt(len(pts))} resumptions: those with findings plus the largest idle times. '
            "Above the line the broker may have expired the producer's state.</p>")
    return section("idle", "Producer idle times", idle_chart(pts, threshold) + legend(SEVERITY_LEGEND) + note)


def transactions(data: dict) -> str:
    txn = as_dict(data.get("transactions"))
    counts = as_dict(txn.get("counts")) or as_dict(as_dict(data.get("summary")).get("transactions"))
    chips = " ".join(badge(f"{k} {fmt(as_int(counts.get(k)))}", TXN_SEVERITY[k]) for k in TXN_STATUSES)
    rows = [as_dict(r) for r in as_list(txn.get("rows"))]
    if not rows:
        return section("transactions", "Transactions", f"<p>{chips}</p>" + nothing("no transactions"))
    headers = ["topic", "partition", "producer", "epoch", "first offset", "end offset", "status",
               "last timestamp"]
    cells = table(headers, [
        [esc(r.get("topic", "")), fmt_id(r.get("partition")), fmt_id(r.get("producer_id")),
         fmt_id(r.get("producer_epoch")), fmt(r.get("first_offset")), fmt(r.get("end_offset")),
         badge(r.get("status", "?"), TXN_SEVERITY.get(str(r.get("status")), SEV_INFO)),
         fmt_time(r.get("last_timestamp"))]
        for r in rows])
    return section("transactions", "Transactions",
                   f"<p>{chips}</p>" + showing(len(rows), txn.get("rows_total"), "transactions") + cells)


def record_duplicates(data: dict) -> str:
    """Extra copies of records (``record_duplicates``), with the key decoded as text: keys are
    arbitrary bytes from producers, so they reach the page only through ``esc``. The copies a
    consumer receives twice (kind ``duplicate``) first; the repeats around aborted transactions apart,
    as information (``DUPLICATE_KIND_MEANING``)."""
    dup = as_dict(data.get("record_duplicates"))
    rows = [as_dict(r) for r in as_list(dup.get("rows"))]
    twice = [r for r in rows if r.get("kind", DUP_DUPLICATE) == DUP_DUPLICATE]
    apart = [r for r in rows if r.get("kind", DUP_DUPLICATE) != DUP_DUPLICATE]
    if not rows:
        what = "no records exported (export with records)" if not dup else "no record repeats its dedup key"
        return section("duplicates", "Record duplicates", nothing(what))
    headers = ["topic", "partition", "log dir", "offset", "first copy at", "producer", "first producer", "key (as text)"]

    def cells(r: dict) -> list[str]:
        return [esc(r.get("topic", "")), fmt_id(r.get("partition")), span("mono", esc(r.get("log_dir") or "")),
                fmt(r.get("offset")), fmt(r.get("first_offset")), fmt_id(r.get("producer_id")),
                fmt_id(r.get("first_producer_id")), span("mono", esc(r.get("key_text", "")))]

    key = dup.get("dedup_key") or ""
    note = (f"<p>dedup key: {span('mono', esc(key))} ({esc(dedup_key_meaning(key))}); copies are counted within each log "
            "dir, and the total sums over log dirs (replicas of a partition are compared under Replicas); internal "
            "and framework topics are not checked (docs/internal-topics.md)</p>")
    body = note + (showing(len(twice), dup.get("rows_total"), "copies") + table(headers, [cells(r) for r in twice])
                   if twice else nothing("no copy a read_committed consumer receives twice"))
    if apart:
        kinds = as_dict(dup.get("kinds"))
        counts = ", ".join(f"{fmt(as_int(kinds.get(k)))} {esc(k)}" for k in DUPLICATE_KINDS if k != DUP_DUPLICATE)
        meaning = "; ".join(f"{span('mono', esc(k))}: {esc(DUPLICATE_KIND_MEANING[k])}"
                            for k in DUPLICATE_KINDS if k != DUP_DUPLICATE)
        body += (f"<h3>Repeats around aborted transactions (information, not counted)</h3><p>{counts}. {meaning}</p>"
                 + showing(len(apart), sum(as_int(kinds.get(k)) for k in DUPLICATE_KINDS if k != DUP_DUPLICATE), "repeats")
                 + table(["kind", *headers], [[badge(r.get("kind", ""), SEV_INFO), *cells(r)] for r in apart]))
    return section("duplicates", "Record duplicates", body)


def replicas(data: dict) -> str:
    """``replica_divergence``: where the replicas of a partition disagree, a pair of log dirs a row."""
    rep = as_dict(data.get("replicas"))
    if not rep:
        return section("replicas", "Replicas", nothing("no partition was exported from several log dirs"))
    rows = [as_dict(r) for r in as_list(rep.get("rows"))]
    note = (f"<p>{fmt(rep.get('partitions'))} partitions exported from several log dirs, each pair of replicas "
            "compared offset by offset. A follower only behind is info; a tail its peer's newer leader epoch cut "
            "off, a hole or a different batch in the range both hold is a violation.</p>")
    if not rows:
        return section("replicas", "Replicas", note + nothing("every replica holds the same batches"))
    headers = ["severity", "topic", "partition", "log dir", "other log dir", "kind", "offsets", "leader epochs",
               "batches", "records"]
    cells = table(headers, [
        [badge(r.get("severity", ""), r.get("severity")), esc(r.get("topic", "")), fmt_id(r.get("partition")),
         span("mono", esc(r.get("log_dir") or "")), span("mono", esc(r.get("other_log_dir") or "")),
         esc(r.get("kind", "")), f"{fmt(r.get('first_offset'))}–{fmt(r.get('last_offset'))}",
         f"{fmt_id(r.get('leader_epoch'))} / {fmt_id(r.get('other_leader_epoch'))}",
         f"{fmt(r.get('batches'))} / {fmt(r.get('other_batches'))}",
         f"{fmt(r.get('records'))} / {fmt(r.get('other_records'))}"]
        for r in rows])
    return section("replicas", "Replicas", note + showing(len(rows), rep.get("rows_total"), "ranges") + cells)


def trend(data: dict) -> str:
    runs = [r for r in map(as_dict, as_list(data.get("history"))) if is_num(r.get("run_time_ms"))]
    if not runs:
        return section("trend", "Trend", nothing("no audit history"))
    note = '<p class="note">Trends need more runs: only one audit run so far.</p>' if len(runs) == 1 else ""
    return section("trend", "Trend", trend_chart(runs) + trend_legend(runs) + note)
