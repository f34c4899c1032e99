"""Render the audit report: a small, already aggregated ``data`` dict -> one self-contained HTML page.

Standard library only, no Spark: the caller aggregates in Spark and hands over lists of at most a few
thousand items. The page must open offline years later (an audit is evidence), so there is no
JavaScript, no CDN, no external font, image or URL: charts are inline SVG built here, styling is one
``<style>`` block, collapsible parts are ``<details>``. Inline SVG in HTML5 needs no ``xmlns``, so the
page holds no URL at all.

Safety: every value from ``data`` reaches the page only through ``esc`` (strings) or ``fmt`` (numbers;
anything else falls back to ``esc``). Tags, class names and colours come from this module's constants
only, never from data. Output is deterministic: same data, byte-identical page (no clock, no sets).
"""

from __future__ import annotations

import html
import json
import math
import os
from datetime import UTC, datetime

# One palette. Severity colours mean the same in cards, badges, tables and every chart.
SEVERITIES = ("ok", "info", "explained", "violation")
SEVERITY_COLOURS = {"ok": "#9db3a6", "info": "#3b7dd8", "explained": "#d99a22", "violation": "#d64545"}
STATUS_SEVERITY = {"pass": "ok", "warn": "explained", "fail": "violation"}  # validation badges, same palette
INK, MUTED, GRID, LINE = "#1f2933", "#6b7785", "#e3e7ec", "#52606d"
# Trend series: violations and explained keep their severity colour; the others get neutral hues.
TREND_SERIES = (
    ("violation", "violations", SEVERITY_COLOURS["violation"], ""),
    ("explained", "explained", SEVERITY_COLOURS["explained"], ""),
    ("duplicates", "duplicates", "#7b61c9", "5 3"),
    ("gaps", "sequence gaps", "#2a9d8f", "5 3"),
    ("hanging", "hanging transactions", "#52606d", "2 3"),
)
VERDICTS = (  # the contract's order (design.md, "Verdicts"); unknown verdicts from data follow, sorted
    "OK", "EPOCH_BUMP", "NON_IDEMPOTENT", "CONTROL_MARKER", "DUPLICATE", "SEQUENCE_GAP",
    "SEQUENCE_REGRESSION", "EPOCH_BUMP_NONZERO", "FENCED_ZOMBIE_WRITE", "FIRST_SEEN_NONZERO",
    "INVALID_TXN_STATE", "MARKER_EPOCH_REGRESSION", "COORDINATOR_EPOCH_REGRESSION", "CORRUPT",
)
# Marker shapes in the sequence chart, so a finding's kind reads without colour too.
SHAPES = {"DUPLICATE": "ring", "SEQUENCE_GAP": "triangle", "SEQUENCE_REGRESSION": "cross",
          "FENCED_ZOMBIE_WRITE": "cross", "EPOCH_BUMP_NONZERO": "diamond", "FIRST_SEEN_NONZERO": "diamond"}
DURATION_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000), ("ms", 1))
OPEN_CHARTS = 3  # the first few per-partition/per-producer charts start expanded, the rest collapsed
# Chart geometry in SVG user units (the svg scales to the page width). The tall charts (sequence, idle,
# trend) share one layout: y caption above TOP, plot TOP..BOTTOM, x axis at AXIS with its labels below.
WIDTH, LEFT, RIGHT = 900, 70, 880
HEIGHT, TOP, BOTTOM, AXIS = 280, 32, 222, 238
# The timeline strip: severity bars, then a row of finding markers, then the offset axis.
STRIP_HEIGHT, BARS_TOP, BARS_BOTTOM, MARKS_Y, STRIP_AXIS = 196, 30, 116, 136, 156


# ---------------------------------------------------------------- values


def esc(v) -> str:
    """The one way a data value becomes HTML/SVG text or an attribute value."""
    return html.escape(str(v), quote=True)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int(v, default: int = 0) -> int:
    """Counts from data; a missing or non-numeric count is ``default`` (data is rendered, not judged)."""
    return int(v) if _is_num(v) else default


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _list(v) -> list:
    return v if isinstance(v, list) else []


def fmt(v) -> str:
    """A number formatted for people (thousands separators); None is a dash; anything else escaped."""
    if v is None:
        return "—"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if _is_num(v):  # a float: JSON may turn counts into 12.0; seconds keep two decimals
        return f"{int(v):,}" if v.is_integer() else f"{v:,.2f}".rstrip("0").rstrip(".")
    return esc(v)


def fmt_id(v) -> str:
    """Ids, partitions and epochs: no thousands separators (people search for "1000", not "1,000")."""
    if v is None:
        return "—"
    return esc(int(v) if _is_num(v) and float(v).is_integer() else v)


def human_ms(ms) -> str:
    """A duration in ms as people say it: the largest unit that is exact or at least 10 ("7 d", "25 h")."""
    if not _is_num(ms):
        return "—"
    for unit, size in DURATION_UNITS:
        value = abs(ms) / size
        if value >= 10 or value >= 1 and value.is_integer():
            break
    else:
        unit, value = "ms", abs(ms)
    return f"{'-' if ms < 0 else ''}{f'{value:.1f}'.rstrip('0').rstrip('.')} {unit}"


def fmt_time(ms, pattern: str = "%Y-%m-%d %H:%M:%S UTC") -> str:
    """Epoch ms as UTC text; out-of-range or missing values are a dash rather than an exception."""
    if not _is_num(ms) or not -62_135_596_800_000 < ms < 253_402_300_799_000:
        return "—"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime(pattern)


def _tick(v: float) -> str:
    """Compact axis label: offsets reach billions, and a long label would collide with its neighbour."""
    for suffix, size in (("G", 1e9), ("M", 1e6), ("k", 1e4)):
        if abs(v) >= size:
            size = 1e3 if suffix == "k" else size
            return f"{v / size:.3g}{suffix}"
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.3g}"


def _c(x: float) -> str:
    """SVG coordinate with one decimal; ``+ 0.0`` turns -0.0 into 0 so output stays stable."""
    text = f"{round(x, 1) + 0.0:.1f}"
    return text.removesuffix(".0")


def _sev(v) -> str:
    """A severity from data, restricted to the known ones: it becomes a class name and a colour."""
    return v if v in SEVERITIES else "info"


def _colour(severity) -> str:
    return SEVERITY_COLOURS[_sev(severity)]


def _worst_last(row: dict) -> int:
    """Sort key drawing ok first and violations last, so the worst markers end up on top."""
    return SEVERITIES.index(_sev(row.get("severity")))


# ---------------------------------------------------------------- scales


class Scale:
    """Data interval -> pixel interval, linear or log10, clamped to the pixels so bad data stays inside
    the chart. A degenerate interval (one run, one offset) is widened so its value lands in the middle."""

    def __init__(self, lo: float, hi: float, p0: float, p1: float, log: bool = False):
        self.log = log
        if log:
            lo, hi = math.log10(max(lo, 1e-9)), math.log10(max(hi, 1e-9))
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        self.lo, self.hi, self.p0, self.p1 = lo, hi, p0, p1

    def __call__(self, v: float) -> float:
        if self.log:
            v = math.log10(max(v, 1e-9))
        v = min(max(v, self.lo), self.hi)
        return self.p0 + (v - self.lo) * (self.p1 - self.p0) / (self.hi - self.lo)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round ticks (1, 2, 5 x 10^k) within [lo, hi]. Steps are whole numbers: every
    axis using them counts something (offsets, sequences, batches), and "2.5 batches" reads wrong."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    step = max(1, round(step))
    first = math.ceil(lo / step)
    return [k * step for k in range(first, math.floor(hi / step) + 1)]


def duration_ticks(lo: float, hi: float) -> list[int]:
    """Ticks of a log-scaled duration axis at durations people know (1 s, 1 min, 1 h, 1 d, 7 d ...)."""
    known = (1, 10, 100, 1_000, 10_000, 60_000, 600_000, 3_600_000, 21_600_000, 86_400_000,
             604_800_000, 2_592_000_000, 31_536_000_000)
    return [t for t in known if lo <= t <= hi]


# ---------------------------------------------------------------- SVG and HTML pieces


def _svg(cls: str, title: str, height: int, body: list[str], attrs: str = "") -> str:
    return (f'<svg class="{cls}" role="img" viewBox="0 0 {WIDTH} {height}" width="100%"{attrs}>'
            f"<title>{esc(title)}</title>{''.join(body)}</svg>")


def _text(x: float, y: float, label, anchor: str = "start", cls: str = "lbl") -> str:
    return f'<text x="{_c(x)}" y="{_c(y)}" text-anchor="{anchor}" class="{cls}">{esc(label)}</text>'


def _line(x1, y1, x2, y2, colour: str = GRID, dash: str = "", cls: str = "") -> str:
    extra = (f' stroke-dasharray="{dash}"' if dash else "") + (f' class="{cls}"' if cls else "")
    return (f'<line x1="{_c(x1)}" y1="{_c(y1)}" x2="{_c(x2)}" y2="{_c(y2)}" stroke="{colour}"'
            f' stroke-width="1"{extra}/>')


def _x_axis(scale: Scale, y: float, ticks, label_of, caption: str) -> list[str]:
    parts = [_line(scale.p0, y, scale.p1, y, LINE)]
    for t in ticks:
        x = scale(t)
        parts += [_line(x, y, x, y + 4, LINE), _text(x, y + 16, label_of(t), "middle")]
    return parts + [_text(scale.p1, y + 30, caption, "end", "cap")]


def _y_axis(scale: Scale, ticks, label_of, caption: str) -> list[str]:
    parts = [_line(LEFT, scale.p0, LEFT, scale.p1, LINE), _text(8, scale.p1 - 14, caption, "start", "cap")]
    for t in ticks:
        y = scale(t)
        parts += [_line(LEFT, y, RIGHT, y), _text(LEFT - 6, y + 4, label_of(t), "end")]
    return parts


def _shape(kind: str, x: float, y: float, colour: str, tip: str) -> str:
    """One marker with its tooltip; the tooltip is a ``<title>`` child so it works without JavaScript."""
    title, at = f"<title>{esc(tip)}</title>", f'cx="{_c(x)}" cy="{_c(y)}"'
    if kind == "ring":
        return f'<circle {at} r="5" fill="none" stroke="{colour}" stroke-width="2">{title}</circle>'
    if kind == "dot":
        return f'<circle {at} r="3.5" fill="{colour}" fill-opacity="0.85">{title}</circle>'
    if kind == "cross":
        d = "".join(f"M{_c(x - 5)} {_c(y - dy)}L{_c(x + 5)} {_c(y + dy)}" for dy in (5, -5))
        return f'<path d="{d}" stroke="{colour}" stroke-width="2.5" fill="none">{title}</path>'
    corners = {"triangle": ((0, -6), (5.5, 4), (-5.5, 4)), "diamond": ((0, -6), (5, 0), (0, 6), (-5, 0)),
               "square": ((-4, -4), (4, -4), (4, 4), (-4, 4))}[kind]
    points = " ".join(f"{_c(x + dx)},{_c(y + dy)}" for dx, dy in corners)
    return f'<polygon points="{points}" fill="{colour}">{title}</polygon>'


def _swatch(kind: str, colour: str) -> str:
    """A legend entry's symbol: the chart's own marker in a tiny svg (class "swatch", not a chart)."""
    if kind == "bar":
        inner = f'<rect x="2" y="4" width="12" height="8" fill="{colour}"/>'
    else:
        inner = _shape(kind, 8, 8, colour, kind)
    return f'<svg class="swatch" viewBox="0 0 16 16" width="14" height="14" aria-hidden="true">{inner}</svg>'


def _legend(items: list[tuple[str, str, str]]) -> str:
    """HTML legend under a chart: (label, marker kind, colour); wraps with the page, prints well."""
    return '<div class="legend">' + "".join(
        f"<span>{_swatch(kind, colour)}{esc(label)}</span>" for label, kind, colour in items) + "</div>"


SEVERITY_LEGEND = [(s, "bar", SEVERITY_COLOURS[s]) for s in SEVERITIES]


def _badge(label, severity: str) -> str:
    return f'<span class="badge sev-{_sev(severity)}">{esc(label)}</span>'


def _table(headers: list[str], rows: list[list[str]]) -> str:
    """Cells are HTML already built from ``fmt``/``esc``/badges; headers are this module's own text."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _span(cls: str, inner: str) -> str:
    """Wrap HTML that is already safe (built by ``fmt``/``esc``) in a styled span."""
    return f'<span class="{cls}">{inner}</span>'


def _nothing(what: str) -> str:
    return f'<p class="nothing">Nothing to show: {esc(what)}.</p>'


def _showing(shown: int, total, noun: str) -> str:
    total = _int(total, shown)
    return f'<p class="note">showing {fmt(shown)} of {fmt(total)} {esc(noun)}</p>' if total > shown else ""


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2>{body}</section>'


def _partition_name(row: dict) -> str:
    return f"{row.get('topic', '?')}-{row.get('partition', '?')}"


def _details(index: int, summary: str, body: str) -> str:
    return f"<details{' open' if index < OPEN_CHARTS else ''}><summary>{summary}</summary>{body}</details>"


# ---------------------------------------------------------------- sections


def _config_value(v) -> str:
    """Numbers formatted, strings as they are, tables (cleanup policies, restarts) as compact JSON."""
    if _is_num(v) or v is None:
        return fmt(v)
    return esc(v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str))


def _summary(data: dict) -> str:
    s = _dict(data.get("summary"))
    verdicts, sev = _dict(s.get("verdicts")), _dict(s.get("severities"))
    txn, snap = _dict(s.get("transactions")), _dict(s.get("snapshot_checks"))
    record_dups = s.get("record_duplicates")
    not_in_log, not_in_snapshot = _int(snap.get("not_in_log")), _int(snap.get("not_in_snapshot"))
    snap_other = f"{not_in_log:,} not in log, {not_in_snapshot:,} not in snapshot"
    cards = [
        ("batches", sum(_int(v) for v in verdicts.values()), "ok", "all verdicts"),
        ("violations", _int(sev.get("violation")), "violation", "unexplained rule breaks"),
        ("explained", _int(sev.get("explained")), "explained", "rule breaks with evidence"),
        ("duplicates", _int(verdicts.get("DUPLICATE")), "explained", "DUPLICATE batches"),
        ("sequence gaps", _int(verdicts.get("SEQUENCE_GAP")), "explained", "SEQUENCE_GAP batches"),
        ("hanging transactions", _int(txn.get("HANGING")), "violation", "open past the timeout"),
        ("record duplicates", record_dups if _is_num(record_dups) else None, "explained",
         "extra record copies" if _is_num(record_dups) else "not computed (export without --records)"),
        ("snapshot mismatches", _int(snap.get("mismatch")), "violation", snap_other),
    ]
    card_html = "".join(
        f'<div class="card {"sev-" + tone if _is_num(v) and v > 0 and tone != "ok" else ""}">'
        f'<div class="card-value">{fmt(v)}</div><div class="card-label">{esc(label)}</div>'
        f'<div class="card-sub">{esc(sub)}</div></div>' for label, v, tone, sub in cards)
    names = list(VERDICTS) + sorted(str(k) for k in verdicts if k not in VERDICTS)
    verdict_rows = "".join(  # zeros stay listed (the full vocabulary), greyed
        f'<tr class="{"" if _int(verdicts.get(n)) else "zero"}"><td class="mono">{esc(n)}</td>'
        f'<td class="num">{fmt(_int(verdicts.get(n)))}</td></tr>' for n in names)
    verdict_table = ('<table class="verdicts"><thead><tr><th>verdict</th><th>batches</th></tr></thead>'
                     f"<tbody>{verdict_rows}</tbody></table>")
    chips = " ".join(_badge(f"{name} {fmt(_int(sev.get(name)))}", name) for name in SEVERITIES)
    inputs = "".join(f"<li class='mono'>{esc(p)}</li>" for p in _list(s.get("inputs"))) or "<li>—</li>"
    facts = [("run id", esc(s.get("run_id") or "—")),
             ("export run id", esc(s.get("export_run_id") or "—")),
             ("audit time", f"{fmt(s.get('seconds'))} s" if _is_num(s.get("seconds")) else "—"),
             ("output", _span("mono", esc(data.get("out") or "—"))), ("inputs", f"<ul>{inputs}</ul>")]
    config = _dict(s.get("configuration"))
    config_rows = [[_span("mono", esc(k)), _config_value(v),
                    fmt_time(v) if str(k).endswith("_time_ms") else human_ms(v) if str(k).endswith("_ms") else ""]
                   for k, v in config.items()]
    config_html = _nothing("no configuration")
    if config_rows:
        config_html = _table(["setting", "value", "as duration"], config_rows)
    return _section("summary", "Summary", (
        f'<div class="cards">{card_html}</div><p class="chips">{chips}</p><div class="cols">'
        f"<div><h3>Verdicts</h3>{verdict_table}</div><div><h3>Run</h3><dl>"
        + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts)
        + f"</dl><h3>Configuration</h3>{config_html}</div></div>"))


def _validation(data: dict) -> str:
    v = data.get("validation")
    if not isinstance(v, dict):
        return _section("validation", "Validation", _nothing("no validation results (segaudit validate OUT)"))
    checks = [_dict(c) for c in _list(v.get("checks"))]

    def status(c: dict) -> str:
        st = c.get("status")
        return st if st in ("pass", "warn", "fail") else ("pass" if c.get("success") else "fail")

    rows = [[esc(c.get("suite", "")), _span("mono", esc(c.get("check", ""))), esc(c.get("description", "")),
             _span("num", fmt(c.get("unexpected"))), _badge(status(c), STATUS_SEVERITY[status(c)])]
            for c in checks]
    if v.get("success"):
        overall = _badge("all expectations met", "ok")
    else:
        overall = _badge("expectations failed", "violation")
    headers = ["suite", "check", "description", "unexpected rows", "status"]
    table = _table(headers, rows) if rows else _nothing("no checks")
    return _section("validation", "Validation", f"<p>{overall}</p>{table}")


def _minibar(counts: dict) -> str:
    """A partition's severities as one proportional bar; the exact counts are in its tooltip."""
    values = [(s, _int(counts.get(s))) for s in SEVERITIES]
    total, x, rects = sum(v for _, v in values), 0.0, []
    for name, value in values:
        if value and total:
            w = 120 * value / total
            rects.append(f'<rect x="{_c(x)}" y="0" width="{_c(max(w, 1))}" height="10"'
                         f' fill="{_colour(name)}"/>')
            x += w
    tip = ", ".join(f"{name} {value:,}" for name, value in values)
    return (f'<svg class="minibar" role="img" viewBox="0 0 120 10" width="120" height="10">'
            f'<title>{esc(tip)}</title><rect width="120" height="10" fill="{GRID}"/>{"".join(rects)}</svg>')


def _verdict_chips(verdicts: dict) -> str:
    return " ".join(_span("chip mono", f"{esc(k)} {fmt(_int(v))}") for k, v in verdicts.items() if _int(v))


def _partitions(data: dict) -> str:
    parts = [_dict(p) for p in _list(data.get("partitions"))]
    if not parts:
        return _section("partitions", "Partitions", _nothing("no partitions"))
    rows = [[esc(p.get("topic", "")), _span("num", fmt_id(p.get("partition"))),
             _span("mono path", esc(p.get("log_dir", ""))), _span("num", fmt(p.get("batches"))),
             _span("num", fmt(p.get("records"))),
             _span("num", f"{fmt(p.get('first_offset'))} – {fmt(p.get('last_offset'))}"),
             _minibar(_dict(p.get("severities"))), _verdict_chips(_dict(p.get("verdicts")))] for p in parts]
    headers = ["topic", "partition", "log dir", "batches", "records", "offsets", "severities", "verdicts"]
    note = _showing(len(parts), data.get("partitions_total"), "partitions")
    return _section("partitions", "Partitions", note + _table(headers, rows))


def _timeline_chart(t: dict) -> str:
    """Offsets on x; per bin a stacked bar of severities; below it one marker per finding.

    Findings are rare among thousands of ok batches, so a non-zero non-ok segment is drawn at least
    2 px high (the bar may then exceed its scaled height slightly); exact counts are in the tooltips."""
    bins, marks = [_dict(b) for b in _list(t.get("bins"))], [_dict(m) for m in _list(t.get("marks"))]
    starts = [b["start"] for b in bins if _is_num(b.get("start"))]
    starts += [m["offset"] for m in marks if _is_num(m.get("offset"))]
    ends = [b["end"] for b in bins if _is_num(b.get("end"))] + starts
    lo = t["first_offset"] if _is_num(t.get("first_offset")) else min(starts, default=0)
    hi = t["last_offset"] if _is_num(t.get("last_offset")) else max(ends, default=0)
    x = Scale(lo, hi + 1, LEFT, RIGHT)
    peak = max((sum(_int(b.get(s)) for s in SEVERITIES) for b in bins), default=0)
    y = Scale(0, max(peak, 1), BARS_BOTTOM, BARS_TOP)
    body = _y_axis(y, nice_ticks(0, max(peak, 1), 3), _tick, "batches per bin")
    for b in bins:
        if not (_is_num(b.get("start")) and _is_num(b.get("end"))):
            continue
        x0, x1 = x(b["start"]), x(b["end"] + 1)
        counts = [(s, _int(b.get(s))) for s in SEVERITIES]
        total, base, height = sum(c for _, c in counts), y(0), y(0) - y(sum(c for _, c in counts))
        tip = f"offsets {b['start']:,}–{b['end']:,}: " + ", ".join(f"{s} {c:,}" for s, c in counts)
        rects = []
        for name, count in counts:
            if count:
                h = max(height * count / total, 2 if name != "ok" else 0)
                rects.append(f'<rect x="{_c(x0)}" y="{_c(base - h)}" width="{_c(max(x1 - x0 - 0.6, 0.8))}"'
                             f' height="{_c(h)}" fill="{_colour(name)}"/>')
                base -= h
        body.append(f"<g><title>{esc(tip)}</title>{''.join(rects)}</g>")
    body += [_line(LEFT, MARKS_Y, RIGHT, MARKS_Y), _text(LEFT - 6, MARKS_Y + 4, "findings", "end", "cap")]
    for m in sorted(marks, key=_worst_last):
        if _is_num(m.get("offset")):
            explained = f"\nexplained by {m['explained_by']}" if m.get("explained_by") else ""
            tip = (f"{m.get('verdict', '?')} at offset {m['offset']:,} ({_sev(m.get('severity'))})\n"
                   f"producer {m.get('producer_id', '?')} · {fmt_time(m.get('timestamp'))}{explained}\n"
                   f"{m.get('explanation') or ''}").rstrip()
            body.append(_shape("dot", x(m["offset"] + 0.5), MARKS_Y, _colour(m.get("severity")), tip))
    body += _x_axis(x, STRIP_AXIS, nice_ticks(lo, hi, 6), _tick, "offset")
    attrs = f' data-topic="{esc(t.get("topic", ""))}" data-partition="{esc(t.get("partition", ""))}"'
    title = f"Findings along the offsets of {_partition_name(t)}"
    return _svg("chart timeline", title, STRIP_HEIGHT, body, attrs)


def _timelines(data: dict) -> str:
    items = [_dict(t) for t in _list(data.get("timelines"))]
    if not items:
        return _section("timelines", "Timelines", _nothing("no partition has explained or violating batches"))
    blocks = []
    for i, t in enumerate(items):
        marks = _list(t.get("marks"))
        head = (f"<b>{esc(_partition_name(t))}</b> {_span('muted mono', esc(t.get('log_dir', '')))} "
                f"<span class='muted'>offsets {fmt(t.get('first_offset'))}–{fmt(t.get('last_offset'))}, "
                f"{fmt(_int(t.get('marks_total'), len(marks)))} findings</span>")
        note = _showing(len(marks), t.get("marks_total"), "findings")
        blocks.append(_details(i, head, _timeline_chart(t) + note))
    return _section("timelines", "Timelines", "".join(blocks) + _legend(SEVERITY_LEGEND))


def _has_sequence(q: dict) -> bool:
    """Data batches carry sequences; control markers and non-idempotent batches have -1 (none)."""
    return _is_num(q.get("base_sequence")) and _is_num(q.get("last_sequence")) and q["base_sequence"] >= 0


def _sequence_chart(p: dict) -> tuple[str, list[str]]:
    """Sequence against offset: each batch a vertical segment base..last sequence, joined in offset
    order, so a gap is a jump and a regression a drop. Batches without a sequence (markers, -1) sit on
    the bottom edge. Returns the svg and the marker kinds used (for the legend)."""
    pts = [q for q in map(_dict, _list(p.get("points"))) if _is_num(q.get("base_offset"))]
    has_seq = [q for q in pts if _has_sequence(q)]
    offsets = [q["base_offset"] for q in pts]
    seqs = [q["base_sequence"] for q in has_seq] + [q["last_sequence"] for q in has_seq]
    x = Scale(min(offsets, default=0), max(offsets, default=0), LEFT, RIGHT)
    lo, hi = min(seqs, default=0), max(seqs, default=1)
    pad = max((hi - lo) * 0.05, 0.5)  # markers at the extremes stay clear of the frame
    y = Scale(lo - pad, hi + pad, BOTTOM, TOP)
    body = _y_axis(y, nice_ticks(y.lo, y.hi, 4), _tick, "sequence")
    if has_seq:
        d = "".join(f"{'M' if i == 0 else 'L'}{_c(x(q['base_offset']))} {_c(y(q['base_sequence']))}"
                    f"L{_c(x(q['base_offset']))} {_c(y(q['last_sequence']))}" for i, q in enumerate(has_seq))
        body.append(f'<path d="{d}" fill="none" stroke="{LINE}" stroke-width="1.5" stroke-linejoin="round"/>')
    epoch = None
    for q in pts:
        if epoch is not None and q.get("epoch") != epoch:
            px = x(q["base_offset"])
            body += [_line(px, TOP - 12, px, BOTTOM, MUTED, "4 3", "epoch-change"),
                     _text(px + 4, TOP - 4, f"epoch {q.get('epoch')}", "start", "cap")]
        epoch = q.get("epoch")
    if pts:
        body.append(_text(LEFT + 4, TOP - 4, f"epoch {pts[0].get('epoch')}", "start", "cap"))
    kinds = []
    for q in sorted(pts, key=_worst_last):
        if q.get("severity") == "ok":
            continue
        kind = SHAPES.get(str(q.get("verdict")), "square")
        kinds.append(kind)
        py = y(q["last_sequence"]) if _has_sequence(q) else BOTTOM
        tip = (f"{q.get('verdict', '?')} at offset {q['base_offset']:,} ({_sev(q.get('severity'))})\n"
               f"epoch {q.get('epoch')}, sequences {q.get('base_sequence')}–{q.get('last_sequence')}\n"
               f"{fmt_time(q.get('timestamp'))}")
        body.append(_shape(kind, x(q["base_offset"]), py, _colour(q.get("severity")), tip))
    body += _x_axis(x, AXIS, nice_ticks(x.lo, x.hi, 6), _tick, "base offset")
    title = f"Sequence progress of producer {p.get('producer_id', '?')} in {_partition_name(p)}"
    return _svg("chart sequence", title, HEIGHT, body), kinds


def _producers(data: dict) -> str:
    items = [p for p in map(_dict, _list(data.get("producers"))) if _list(p.get("points"))]
    if not items:
        return _section("producers", "Producers", _nothing("no producer with findings"))
    blocks = []
    for i, p in enumerate(items):
        chart, kinds = _sequence_chart(p)
        names = {"ring": "duplicate", "triangle": "gap", "cross": "regression / zombie",
                 "diamond": "nonzero start", "square": "other finding"}
        legend = _legend([(names[k], k, MUTED) for k in names if k in kinds] + SEVERITY_LEGEND[1:])
        epochs = ", ".join(fmt_id(e) for e in _list(p.get("epochs"))) or "—"
        points = _list(p.get("points"))
        head = (f"<b>producer {fmt_id(p.get('producer_id'))}</b> in <b>{esc(_partition_name(p))}</b> "
                + _span("muted", f"epochs {epochs} · {_span('mono', esc(p.get('log_dir', '')))}"))
        note = _showing(len(points), p.get("points_total"), "batches")
        blocks.append(_details(i, head, chart + legend + note))
    return _section("producers", "Producers", "".join(blocks))


def _idle(data: dict) -> str:
    """Idle time before each resumption on a log scale: expirations sit above the threshold line."""
    idle = _dict(data.get("idle"))
    pts = sorted((q for q in map(_dict, _list(idle.get("points"))) if _is_num(q.get("idle_ms"))),
                 key=lambda q: (str(q.get("topic")), _int(q.get("partition")), _int(q.get("offset"))))
    if not pts:
        return _section("idle", "Producer idle times", _nothing("no producer resumptions"))
    config = _dict(_dict(data.get("summary")).get("configuration"))
    candidates = (idle.get("threshold_ms"), config.get("producer_id_expiration_ms"))
    threshold = next((v for v in candidates if _is_num(v)), None)
    values = [max(q["idle_ms"], 1) for q in pts] + ([threshold] if threshold else [])
    lo, hi = min(values) / 2, max(values) * 2
    x, y = Scale(0, len(pts) - 1, LEFT + 6, RIGHT - 6), Scale(lo, hi, BOTTOM, TOP, log=True)
    body = _y_axis(y, duration_ticks(lo, hi) or [min(values), max(values)], human_ms, "idle time (log)")
    if threshold:
        label = f"producer.id.expiration.ms = {threshold:,} ({human_ms(threshold)})"
        ty = y(threshold)
        body += [_line(LEFT, ty, RIGHT, ty, _colour("explained"), "6 4", "threshold"),
                 _text(LEFT + 6, ty - 5, label, "start", "cap")]
    for i, q in sorted(enumerate(pts), key=lambda iq: _worst_last(iq[1])):  # x: position in the sorted list
        explained = f", explained by {q['explained_by']}" if q.get("explained_by") else ""
        tip = (f"{q.get('topic', '?')}-{q.get('partition', '?')} offset {q.get('offset', '?')}, producer "
               f"{q.get('producer_id', '?')}\nidle {human_ms(q['idle_ms'])}: {q.get('verdict', '?')} "
               f"({_sev(q.get('severity'))}{explained})")
        body.append(_shape("dot", x(i), y(max(q["idle_ms"], 1)), _colour(q.get("severity")), tip))
    body += _x_axis(x, AXIS, [], _tick, "resumptions by topic, partition, offset")
    chart = _svg("chart idle", "Producer idle time before each resumption", HEIGHT, body)
    note = (f'<p class="note">{fmt(len(pts))} resumptions: those with findings plus the largest idle times. '
            "Above the line the broker may have expired the producer's state.</p>")
    return _section("idle", "Producer idle times", chart + _legend(SEVERITY_LEGEND) + note)


def _transactions(data: dict) -> str:
    txn = _dict(data.get("transactions"))
    counts = _dict(txn.get("counts")) or _dict(_dict(data.get("summary")).get("transactions"))
    tone = {"COMMITTED": "ok", "ABORTED": "info", "OPEN": "explained", "HANGING": "violation"}
    chips = " ".join(_badge(f"{k} {fmt(_int(counts.get(k)))}", tone[k]) for k in tone)
    rows = [_dict(r) for r in _list(txn.get("rows"))]
    if not rows:
        return _section("transactions", "Transactions", f"<p>{chips}</p>" + _nothing("no transactions"))
    headers = ["topic", "partition", "producer", "epoch", "first offset", "end offset", "status",
               "last timestamp"]
    table = _table(headers, [
        [esc(r.get("topic", "")), fmt_id(r.get("partition")), fmt_id(r.get("producer_id")),
         fmt_id(r.get("producer_epoch")), fmt(r.get("first_offset")), fmt(r.get("end_offset")),
         _badge(r.get("status", "?"), tone.get(str(r.get("status")), "info")),
         fmt_time(r.get("last_timestamp"))]
        for r in rows])
    return _section("transactions", "Transactions",
                    f"<p>{chips}</p>" + _showing(len(rows), txn.get("rows_total"), "transactions") + table)


def _record_duplicates(data: dict) -> str:
    """Extra copies of records (``record_duplicates``), with the key decoded as text: keys are
    arbitrary bytes from producers, so they reach the page only through ``esc``."""
    dup = _dict(data.get("record_duplicates"))
    rows = [_dict(r) for r in _list(dup.get("rows"))]
    if not rows:
        what = "no records exported (export with records)" if not dup else "no record repeats its dedup key"
        return _section("duplicates", "Record duplicates", _nothing(what))
    table = _table(["topic", "partition", "offset", "first copy at", "producer", "first producer", "key (as text)"], [
        [esc(r.get("topic", "")), fmt_id(r.get("partition")), fmt(r.get("offset")), fmt(r.get("first_offset")),
         fmt_id(r.get("producer_id")), fmt_id(r.get("first_producer_id")), _span("mono", esc(r.get("key_text", "")))]
        for r in rows])
    note = f"<p>dedup key: {_span('mono', esc(dup.get('dedup_key', '')))}</p>"
    return _section("duplicates", "Record duplicates", note + _showing(len(rows), dup.get("rows_total"), "copies") + table)


def _trend(data: dict) -> str:
    runs = [r for r in map(_dict, _list(data.get("history"))) if _is_num(r.get("run_time_ms"))]
    if not runs:
        return _section("trend", "Trend", _nothing("no audit history"))
    times = [r["run_time_ms"] for r in runs]
    peak = max((_int(r.get(key)) for r in runs for key, *_ in TREND_SERIES), default=0)
    x, y = Scale(min(times), max(times), LEFT + 20, RIGHT - 20), Scale(0, max(peak, 1), BOTTOM, TOP)
    body = _y_axis(y, nice_ticks(0, max(peak, 1), 4), _tick, "batches")
    for key, label, colour, dash in TREND_SERIES:
        coords = [(x(r["run_time_ms"]), y(_int(r.get(key)))) for r in runs]
        if len(coords) > 1:
            pts = " ".join(f"{_c(a)},{_c(b)}" for a, b in coords)
            extra = f' stroke-dasharray="{dash}"' if dash else ""
            body.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"{extra}/>')
        for r, (a, b) in zip(runs, coords):
            tip = f"{label}: {_int(r.get(key)):,}\nrun {r.get('run_id', '?')} at {fmt_time(r['run_time_ms'])}"
            body.append(_shape("dot", a, b, colour, tip))
    span = max(times) - min(times)
    ticks = [min(times) + span * k / 4 for k in range(5)] if span else [times[0]]
    pattern = "%Y-%m-%d" if span >= 5 * 86_400_000 else "%m-%d %H:%M"
    labels = [fmt_time(t, pattern) for t in ticks]  # a tick repeating its left neighbour's date says nothing
    ticks = [t for i, t in enumerate(ticks) if i == 0 or labels[i] != labels[i - 1]]
    body += _x_axis(x, AXIS, ticks, lambda t: fmt_time(t, pattern), "audit run time (UTC)")
    chart = _svg("chart trend", "Findings per audit run", HEIGHT, body)
    legend = _legend([(label, "dot", colour) for _, label, colour, _ in TREND_SERIES])
    note = '<p class="note">Trends need more runs: only one audit run so far.</p>' if len(runs) == 1 else ""
    return _section("trend", "Trend", chart + legend + note)


# ---------------------------------------------------------------- page

# Findings first: the full partition list, mostly healthy rows, closes the page.
SECTIONS = (("summary", "Summary", _summary), ("validation", "Validation", _validation),
            ("timelines", "Timelines", _timelines), ("producers", "Producers", _producers), ("idle", "Idle times", _idle),
            ("transactions", "Transactions", _transactions), ("duplicates", "Record duplicates", _record_duplicates),
            ("trend", "Trend", _trend), ("partitions", "Partitions", _partitions))

# The palette reaches CSS as custom properties, so badges and cards use the same colours as the charts.
CSS = (f":root{{--ink:{INK};--muted:{MUTED};--grid:{GRID};"
       + "".join(f"--{name}:{colour};" for name, colour in SEVERITY_COLOURS.items()) + "}") + """
*{box-sizing:border-box}
body{margin:0;background:#f5f7fa;color:var(--ink);
font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
header{background:#fff;border-bottom:1px solid var(--grid);padding:18px 32px}
header h1{margin:0;font-size:22px;font-weight:600}
header p{margin:4px 0 0;color:var(--muted)}
nav{padding:8px 32px;background:#fff;border-bottom:1px solid var(--grid);position:sticky;top:0}
nav a{color:var(--muted);text-decoration:none;margin-right:16px}
main{max-width:1240px;margin:0 auto;padding:8px 32px 40px}
section{background:#fff;border:1px solid var(--grid);border-radius:6px;padding:16px 20px;margin:18px 0;
scroll-margin-top:48px}
h2{margin:0 0 12px;font-size:17px;font-weight:600}
h3{margin:14px 0 6px;font-size:13px;font-weight:600;color:var(--muted);
text-transform:uppercase;letter-spacing:.04em}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px}
.card{border:1px solid var(--grid);border-left:4px solid var(--ok);border-radius:4px;padding:10px 12px}
.card.sev-violation{border-left-color:var(--violation)}.card.sev-explained{border-left-color:var(--explained)}
.card-value{font-size:24px;font-weight:600}.card-label{font-weight:600}
.card-sub{color:var(--muted);font-size:12px}
.cols{display:grid;grid-template-columns:minmax(260px,1fr) 2fr;gap:24px}
table{border-collapse:collapse;width:100%;font-size:13px}
th{text-align:left;color:var(--muted);font-weight:600;border-bottom:2px solid var(--grid);padding:5px 8px}
td{border-bottom:1px solid var(--grid);padding:4px 8px;vertical-align:middle}
tr.zero td{color:#aab4bf}
.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.path{color:var(--muted);word-break:break-all}
.muted,.note{color:var(--muted)}.note{font-size:12px}
.nothing{color:var(--muted);font-style:italic}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;margin:0}dt{color:var(--muted)}dd{margin:0}
dd ul{margin:0;padding-left:16px}
.badge,.chip{display:inline-block;border-radius:10px;padding:1px 8px;font-size:12px;margin:1px 2px;
white-space:nowrap}
.chip{background:#eef1f5}
.badge{color:#fff}.badge.sev-ok{background:#6f8f7d}.badge.sev-info{background:var(--info)}
.badge.sev-explained{background:var(--explained)}.badge.sev-violation{background:var(--violation)}
details{border-top:1px solid var(--grid);padding:6px 0}summary{cursor:pointer;padding:4px 0}
svg.chart{display:block;margin:6px 0;background:#fff}
svg .lbl{font-size:11px;fill:var(--muted)}svg .cap{font-size:11px;fill:var(--ink)}
.legend{font-size:12px;color:var(--muted);margin:4px 0 8px}.legend span{margin-right:14px;white-space:nowrap}
.swatch{vertical-align:-2px;margin-right:4px}
footer{color:var(--muted);font-size:12px;text-align:center;padding:16px}
@media print{nav{display:none}body{background:#fff}section{break-inside:avoid-page}}
"""


def render(data: dict) -> str:
    """The whole report page for ``data`` (see the module docstring); never reads the clock."""
    data = _dict(data)
    summary = _dict(data.get("summary"))
    title = data.get("title") or "segaudit report"
    nav = "".join(f'<a href="#{sid}">{esc(label)}</a>' for sid, label, _ in SECTIONS)
    header = (f"<header><h1>{esc(title)}</h1><p>run {_span('mono', esc(summary.get('run_id') or '—'))}"
              f" · generated {esc(fmt_time(data.get('generated_at_ms')))}"
              f" · {_span('mono', esc(data.get('out') or ''))}</p></header>")
    body = "".join(build(data) for _, _, build in SECTIONS)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{header}<nav>{nav}</nav>"
            f"<main>{body}</main><footer>segaudit · self-contained report: no scripts, no external resources"
            f"</footer></body></html>\n")


def write_report(data: dict, path: str) -> str:
    """Write the page atomically (a reader never sees half a report): ``path.tmp``, then rename."""
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(render(data))
    os.replace(tmp, path)
    return path
