"""The Findings section: where the audit found something, one partition at a time, right under the
summary cards.

Each partition (log dir, topic, partition) with a violating batch, a failed or warned check's
offending row or a snapshot mismatch gets a group of rows: what was found (a verdict, a check, a
snapshot status), how many, the first offsets, and links down the page to the evidence (the check's
rows, the partition's timeline, the snapshot row, the partition's row). The links are ``markup.anchor``
ids built from the positions of the same lists the other sections draw, never from data.

The sources are already on the page: ``data["violations"]`` (violating batches per partition and
verdict, ``build``), the checks' offending rows (the sample results.json keeps, so a partition's count
of a check's rows is a lower bound when the sample is shorter than the check's total) and the snapshot
disagreements. A check's row names its partition by topic and number; its log dir comes from its
``log_dir`` or ``file``, else from the one log dir the page knows for that topic-partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analytics.contract import MISMATCH, SEV_OK, SEV_VIOLATION, VERDICTS, log_dir_of
from analytics.report.markup import (
    CHECK, PARTITION, SNAPSHOT, TIMELINE, anchor, badge, link, nothing, section, showing, span,
)
from analytics.report.sections import STATUS_SEVERITY
from analytics.report.values import DASH, as_dict, as_int, as_list, esc, fmt, fmt_path, is_num, partition_name

MAX_FINDING_PARTITIONS = 100  # partitions listed; the rest are counted in the note above the table
MAX_OFFSETS = 3  # first offsets shown per finding
# The checks' statuses (``build._validation``) that make their rows findings: all but a pass.
FAILED_STATUSES = {status: severity for status, severity in STATUS_SEVERITY.items() if severity != SEV_OK}
# Columns of a check's row that say where it is: an offset (a batch's, a record's, a transaction's
# first or a divergent range's first) or, for what the reader could not parse, a byte position.
OFFSET_COLUMNS = ("offset", "first_offset")
POSITION_COLUMNS = ("file_position",)
PLURALS = {"batch": "batches", "row": "rows", "producer": "producers"}


@dataclass
class Finding:
    """One thing found in one partition: ``kind`` is a verdict, a check id or a snapshot status."""

    kind: str
    severity: str
    status: str  # the badge: the verdict, the check's status, the snapshot status
    count: int
    noun: str  # what ``count`` counts
    at_least: bool = False  # counted in a sample shorter than the check's total
    where: list[tuple[str, int, str | None]] = field(default_factory=list)  # (unit, value, anchor)
    target: str | None = None  # the evidence further down the page
    target_label: str = ""
    is_check: bool = False


@dataclass
class Place:
    log_dir: str | None
    topic: str
    partition: int
    findings: list[Finding] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return sum(f.count for f in self.findings if f.severity == SEV_VIOLATION and not f.is_check)

    @property
    def rows(self) -> int:
        return sum(f.count for f in self.findings if f.is_check)


def _key(row: dict) -> tuple:
    """(log dir or None, topic, partition) of a row; the log dir from ``log_dir`` or ``file``."""
    log_dir = row.get("log_dir")
    if not log_dir and isinstance(row.get("file"), str):
        log_dir = log_dir_of(row["file"]) or None
    return log_dir, str(row.get("topic")), as_int(row.get("partition"), -1)


def _where(row: dict) -> tuple[str, int] | None:
    for column in OFFSET_COLUMNS:
        if is_num(row.get(column)):
            return "offset", int(row[column])
    for column in POSITION_COLUMNS:
        if is_num(row.get(column)):
            return "byte", int(row[column])
    return None


def places(data: dict) -> list[Place]:
    """Every partition with findings, the most violations first, then the most offending rows."""
    found: dict[tuple, Place] = {}
    known = _known_log_dirs(data)

    def place(key: tuple) -> Place:
        log_dir, topic, partition = key
        if log_dir is None and len(known.get((topic, partition), ())) == 1:
            [log_dir] = known[(topic, partition)]
        key = (log_dir, topic, partition)
        return found.setdefault(key, Place(*key))

    timeline_of = {_key(t): anchor(TIMELINE, i) for i, t in enumerate(map(as_dict, as_list(data.get("timelines"))))}
    marks_of = {_key(t): [as_dict(m) for m in as_list(as_dict(t).get("marks"))]
                for t in map(as_dict, as_list(data.get("timelines")))}
    checks = [as_dict(c) for c in as_list(as_dict(data.get("validation")).get("checks"))]
    rows_at: dict[tuple, str] = {}  # (topic, partition, offset) -> the first check row there
    for i, c in enumerate(checks):
        for j, row in enumerate(map(as_dict, as_list(c.get("rows")))):
            where = _where(row)
            if where and where[0] == "offset":
                rows_at.setdefault((str(row.get("topic")), as_int(row.get("partition"), -1), where[1]),
                                   anchor(CHECK, i, j))

    for v in map(as_dict, as_list(data.get("violations"))):
        key = _key(v)
        # the verdict's first offset (from the count), and the next ones the partition's timeline marks
        offsets = {int(v["first_offset"])} if is_num(v.get("first_offset")) else set()
        offsets |= {int(m["offset"]) for m in marks_of.get(key, []) if is_num(m.get("offset"))
                    and m.get("verdict") == v.get("verdict") and m.get("severity") == SEV_VIOLATION}
        offsets = sorted(offsets)
        timeline = timeline_of.get(key)
        place(key).findings.append(Finding(
            str(v.get("verdict")), SEV_VIOLATION, str(v.get("verdict")), as_int(v.get("batches")), "batch",
            where=[("offset", o, rows_at.get((key[1], key[2], o))) for o in offsets[:MAX_OFFSETS]],
            target=timeline, target_label="timeline" if timeline else ""))

    for i, c in enumerate(checks):
        severity = FAILED_STATUSES.get(str(c.get("status")))
        rows = [as_dict(r) for r in as_list(c.get("rows"))]
        if severity is None or not rows:
            continue
        partial = as_int(c.get("unexpected"), len(rows)) > len(rows)
        by_place: dict[tuple, list[tuple[int, dict]]] = {}
        for j, row in enumerate(rows):
            if row.get("topic") is not None:
                by_place.setdefault(_key(row), []).append((j, row))
        for key, mine in by_place.items():
            where = sorted({(w, j) for j, row in mine if (w := _where(row))})
            first: dict[tuple, int] = {}
            for w, j in where:
                first.setdefault(w, j)
            place(key).findings.append(Finding(
                str(c.get("check")), severity, str(c.get("status")), len(mine), "row", at_least=partial,
                where=[(unit, value, anchor(CHECK, i, j)) for (unit, value), j in list(first.items())[:MAX_OFFSETS]],
                target=anchor(CHECK, i, mine[0][0]), target_label="offending rows", is_check=True))

    for j, s in enumerate(map(as_dict, as_list(as_dict(data.get("snapshot_checks")).get("rows")))):
        if s.get("status") != MISMATCH:
            continue
        p = place(_key(s))
        same = next((f for f in p.findings if f.kind == MISMATCH), None)
        if same is None:
            same = Finding(MISMATCH, SEV_VIOLATION, f"snapshot {MISMATCH}", 0, "producer", target=anchor(SNAPSHOT, j),
                           target_label="snapshot row")
            p.findings.append(same)
        same.count += 1
        if is_num(s.get("snapshot_offset")) and len(same.where) < MAX_OFFSETS:
            same.where.append(("snapshot at offset", int(s["snapshot_offset"]), anchor(SNAPSHOT, j)))

    order = {v: n for n, v in enumerate(VERDICTS)}
    for p in found.values():  # verdicts in the contract's order, then checks and snapshots as listed
        p.findings.sort(key=lambda f: order.get(f.kind, len(order)))
    return sorted(found.values(), key=lambda p: (-p.violations, -p.rows, p.topic, p.partition, p.log_dir or ""))


def _known_log_dirs(data: dict) -> dict[tuple, set]:
    """(topic, partition) -> the log dirs the page's data names for it."""
    known: dict[tuple, set] = {}
    for name in ("partitions", "timelines", "violations"):
        for row in map(as_dict, as_list(data.get(name))):
            log_dir, topic, partition = _key(row)
            if log_dir:
                known.setdefault((topic, partition), set()).add(log_dir)
    return known


def findings(data: dict) -> str:
    """The ``findings`` section: a group of rows per partition with findings (see the module)."""
    found = places(data)
    if not found:
        what = ("no violating batch, failed check or snapshot mismatch" if data.get("validation")
                else "no violating batch or snapshot mismatch (not validated: segaudit validate OUT)")
        return section("findings", "Findings", nothing(what))
    partition_row = {_key(p): anchor(PARTITION, i) for i, p in enumerate(map(as_dict, as_list(data.get("partitions"))))}
    shown = found[:MAX_FINDING_PARTITIONS]
    body = []
    for p in shown:
        name = span("mono", esc(partition_name({"topic": p.topic, "partition": p.partition})))
        target = partition_row.get((p.log_dir, p.topic, p.partition))
        where = (f'<td rowspan="{len(p.findings)}" class="where"><b>{link(target, name) if target else name}</b></td>'
                 f'<td rowspan="{len(p.findings)}">{span("mono muted path", fmt_path(p.log_dir or DASH))}</td>')
        for k, f in enumerate(p.findings):
            cells = (where if k == 0 else "") + _cells(f)
            body.append(f'<tr class="{"first" if k == 0 else "more"}">{cells}</tr>')
    headers = "".join(f"<th>{h}</th>" for h in ("partition", "log dir", "found", "count", "first offsets", "evidence"))
    partial = any(f.at_least for p in shown for f in p.findings)
    note = ('<p class="note">A check\'s rows are counted in the sample results.json keeps of it; '
            "&ge; marks a count from a sample shorter than the check's total.</p>") if partial else ""
    intro = (f'<p class="note">{fmt(len(found))} partition{"" if len(found) == 1 else "s"} with violating batches, '
             "offending rows of failed or warned checks, or snapshot mismatches; each link leads to the rows "
             "further down.</p>")
    table = (f'<div class="scroll"><table class="findings"><thead><tr>{headers}</tr></thead>'
             f'<tbody>{"".join(body)}</tbody></table></div>')
    return section("findings", "Findings", intro + showing(len(shown), len(found), "partitions") + table + note)


def _cells(f: Finding) -> str:
    label = badge(f.status, f.severity) + (f" {span('mono', esc(f.kind))}" if f.is_check else "")
    count = f"{'&ge;' if f.at_least else ''}{fmt(f.count)} {esc(f.noun if f.count == 1 else PLURALS[f.noun])}"
    where = ", ".join(link(a, _at(unit, value)) if a else _at(unit, value) for unit, value, a in f.where) or DASH
    more = span("muted", " …") if f.count > len(f.where) and f.where else ""
    evidence = link(f.target, esc(f.target_label)) if f.target else DASH
    return (f"<td>{label}</td><td class=\"num\">{count}</td><td>{where}{more}</td><td>{evidence}</td>")


def _at(unit: str, value: int) -> str:
    return span("num", f"{esc(unit)} {fmt(value)}" if unit != "offset" else fmt(value))
