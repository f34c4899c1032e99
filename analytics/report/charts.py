"""The report's charts, each one function from its slice of the data to an inline SVG.

Timeline (severities along a partition's offsets), sequence progress (one producer's sequences
against offsets), idle times (pauses before each resumption, log scale) and the trend (findings
per audit run), plus the severity minibar of a partition row. Every chart titles both axes with
what they measure and in which unit; severity colours come from ``style``.
"""

from __future__ import annotations

from analytics.contract import (
    DUPLICATE, EPOCH_BUMP_NONZERO, FENCED_ZOMBIE_WRITE, FIRST_SEEN_NONZERO, SEQUENCE_GAP, SEQUENCE_REGRESSION,
    SEV_EXPLAINED, SEV_OK, SEV_VIOLATION, SEVERITIES,
)
from analytics.report.style import GRID, LINE, MUTED, SEVERITY_COLOURS, colour, sev
from analytics.report.svg import (
    LEFT, RIGHT, Scale, coord, duration_ticks, line, nice_ticks, shape, svg, text, tick, worst_last, x_axis,
    y_axis,
)
from analytics.report.values import (
    as_dict, as_int, as_list, esc, fmt_time, human_ms, is_num, partition_name,
)

# The tall charts (sequence, idle, trend) share one layout: y title above TOP, plot TOP..BOTTOM,
# x axis at AXIS with its tick labels and title below.
HEIGHT, TOP, BOTTOM, AXIS = 280, 32, 222, 238
# The timeline strip: severity bars, then a row of finding markers, then the offset axis.
STRIP_HEIGHT, BARS_TOP, BARS_BOTTOM, MARKS_Y, STRIP_AXIS = 196, 30, 116, 136, 156
# Marker shapes in the sequence chart, so a finding's kind reads without colour too.
SHAPES = {DUPLICATE: "ring", SEQUENCE_GAP: "triangle", SEQUENCE_REGRESSION: "cross",
          FENCED_ZOMBIE_WRITE: "cross", EPOCH_BUMP_NONZERO: "diamond", FIRST_SEEN_NONZERO: "diamond"}
SHAPE_NAMES = {"ring": "duplicate", "triangle": "gap", "cross": "regression / zombie",
               "diamond": "nonzero start", "square": "other finding"}
# Trend series (key in a history run, label, colour, dash, marker): violations and explained keep
# their severity colour; the others get neutral hues. Counts often coincide (a run with as many gaps
# as violations), so no two series share a dash pattern or a marker, each line is drawn narrower than
# the one under it (the lower one shows along both edges), and markers of equal values at a run stand
# side by side (``DODGE`` px apart) instead of on one spot.
TREND_SERIES = (
    (SEV_VIOLATION, "violations", SEVERITY_COLOURS[SEV_VIOLATION], "", "dot"),
    (SEV_EXPLAINED, "explained", SEVERITY_COLOURS[SEV_EXPLAINED], "9 4", "ring"),
    ("duplicates", "duplicates", "#7b61c9", "4 3", "triangle"),
    ("gaps", "sequence gaps", "#2a9d8f", "12 3 2 3", "diamond"),
    ("hanging", "hanging transactions", "#52606d", "2 3", "square"),
)
TREND_WIDTHS = (5, 4, 3, 2.2, 1.6)  # stroke widths, in the order of TREND_SERIES (drawn bottom up)
DODGE = 9
MINIBAR_WIDTH = 120


def minibar(counts: dict) -> str:
    """A partition's severities as one proportional bar; the exact counts are in its tooltip."""
    values = [(s, as_int(counts.get(s))) for s in SEVERITIES]
    total, x, rects = sum(v for _, v in values), 0.0, []
    for name, value in values:
        if value and total:
            w = MINIBAR_WIDTH * value / total
            rects.append(f'<rect x="{coord(x)}" y="0" width="{coord(max(w, 1))}" height="10"'
                         f' fill="{colour(name)}"/>')
            x += w
    tip = ", ".join(f"{name} {value:,}" for name, value in values)
    return (f'<svg class="minibar" role="img" viewBox="0 0 {MINIBAR_WIDTH} 10" width="{MINIBAR_WIDTH}"'
            f' height="10"><title>{esc(tip)}</title><rect width="{MINIBAR_WIDTH}" height="10" fill="{GRID}"/>'
            f'{"".join(rects)}</svg>')


def timeline_chart(t: dict) -> str:
    """Offsets on x; per bin a stacked bar of severities; below it one marker per finding.

    Findings are rare among thousands of ok batches, so a non-zero non-ok segment is drawn at least
    2 px high (the bar may then exceed its scaled height slightly); exact counts are in the tooltips."""
    bins, marks = [as_dict(b) for b in as_list(t.get("bins"))], [as_dict(m) for m in as_list(t.get("marks"))]
    starts = [b["start"] for b in bins if is_num(b.get("start"))]
    starts += [m["offset"] for m in marks if is_num(m.get("offset"))]
    ends = [b["end"] for b in bins if is_num(b.get("end"))] + starts
    lo = t["first_offset"] if is_num(t.get("first_offset")) else min(starts, default=0)
    hi = t["last_offset"] if is_num(t.get("last_offset")) else max(ends, default=0)
    x = Scale(lo, hi + 1, LEFT, RIGHT)
    peak = max((sum(as_int(b.get(s)) for s in SEVERITIES) for b in bins), default=0)
    y = Scale(0, max(peak, 1), BARS_BOTTOM, BARS_TOP)
    body = y_axis(y, nice_ticks(0, max(peak, 1), 3), tick, "batches per bin")
    for b in bins:
        if not (is_num(b.get("start")) and is_num(b.get("end"))):
            continue
        x0, width = x(b["start"]), max(x(b["end"] + 1) - x(b["start"]) - 0.6, 0.8)  # a hair between bars
        counts = [(s, as_int(b.get(s))) for s in SEVERITIES]
        total, base, height = sum(c for _, c in counts), y(0), y(0) - y(sum(c for _, c in counts))
        tip = f"offsets {b['start']:,}–{b['end']:,}: " + ", ".join(f"{s} {c:,}" for s, c in counts)
        rects = []
        for name, count in counts:
            if count:
                h = max(height * count / total, 2 if name != SEV_OK else 0)
                rects.append(f'<rect x="{coord(x0)}" y="{coord(base - h)}" width="{coord(width)}"'
                             f' height="{coord(h)}" fill="{colour(name)}"/>')
                base -= h
        body.append(f"<g><title>{esc(tip)}</title>{''.join(rects)}</g>")
    body += [line(LEFT, MARKS_Y, RIGHT, MARKS_Y), text(LEFT - 6, MARKS_Y + 4, "findings", "end", "cap")]
    for m in sorted(marks, key=worst_last):
        if is_num(m.get("offset")):
            explained = f"\nexplained by {m['explained_by']}" if m.get("explained_by") else ""
            tip = (f"{m.get('verdict', '?')} at offset {m['offset']:,} ({sev(m.get('severity'))})\n"
                   f"producer {m.get('producer_id', '?')} · {fmt_time(m.get('timestamp'))}{explained}\n"
                   f"{m.get('explanation') or ''}").rstrip()
            body.append(shape("dot", x(m["offset"] + 0.5), MARKS_Y, colour(m.get("severity")), tip))
    body += x_axis(x, STRIP_AXIS, nice_ticks(lo, hi, 6), tick, "offset")
    attrs = f' data-topic="{esc(t.get("topic", ""))}" data-partition="{esc(t.get("partition", ""))}"'
    title = f"Findings along the offsets of {partition_name(t)}"
    return svg("chart timeline", title, STRIP_HEIGHT, body, attrs)


def _has_sequence(q: dict) -> bool:
    """Data batches carry sequences; control markers and non-idempotent batches have -1 (none)."""
    return is_num(q.get("base_sequence")) and is_num(q.get("last_sequence")) and q["base_sequence"] >= 0


def sequence_chart(p: dict) -> tuple[str, list[str]]:
    """Sequence against offset: each batch a vertical segment base..last sequence, joined in offset
    order, so a gap is a jump and a regression a drop. Batches without a sequence (markers, -1) sit on
    the bottom edge. Returns the svg and the marker kinds used (for the legend)."""
    pts = [q for q in map(as_dict, as_list(p.get("points"))) if is_num(q.get("base_offset"))]
    has_seq = [q for q in pts if _has_sequence(q)]
    offsets = [q["base_offset"] for q in pts]
    seqs = [q["base_sequence"] for q in has_seq] + [q["last_sequence"] for q in has_seq]
    x = Scale(min(offsets, default=0), max(offsets, default=0), LEFT, RIGHT)
    lo, hi = min(seqs, default=0), max(seqs, default=1)
    pad = max((hi - lo) * 0.05, 0.5)  # markers at the extremes stay clear of the frame
    y = Scale(lo - pad, hi + pad, BOTTOM, TOP)
    body = y_axis(y, nice_ticks(y.lo, y.hi, 4), tick, "sequence number")
    if has_seq:
        d = "".join(f"{'M' if i == 0 else 'L'}{coord(x(q['base_offset']))} {coord(y(q['base_sequence']))}"
                    f"L{coord(x(q['base_offset']))} {coord(y(q['last_sequence']))}"
                    for i, q in enumerate(has_seq))
        body.append(f'<path d="{d}" fill="none" stroke="{LINE}" stroke-width="1.5" stroke-linejoin="round"/>')
    epoch = None
    for q in pts:
        if epoch is not None and q.get("epoch") != epoch:
            px = x(q["base_offset"])
            body += [line(px, TOP - 12, px, BOTTOM, MUTED, "4 3", "epoch-change"),
                     text(px + 4, TOP - 4, f"epoch {q.get('epoch')}", "start", "cap")]
        epoch = q.get("epoch")
    if pts:
        body.append(text(LEFT + 4, TOP - 4, f"epoch {pts[0].get('epoch')}", "start", "cap"))
    kinds = []
    for q in sorted(pts, key=worst_last):
        if q.get("severity") == SEV_OK:
            continue
        kind = SHAPES.get(str(q.get("verdict")), "square")
        kinds.append(kind)
        py = y(q["last_sequence"]) if _has_sequence(q) else BOTTOM
        tip = (f"{q.get('verdict', '?')} at offset {q['base_offset']:,} ({sev(q.get('severity'))})\n"
               f"epoch {q.get('epoch')}, sequences {q.get('base_sequence')}–{q.get('last_sequence')}\n"
               f"{fmt_time(q.get('timestamp'))}")
        body.append(shape(kind, x(q["base_offset"]), py, colour(q.get("severity")), tip))
    body += x_axis(x, AXIS, nice_ticks(x.lo, x.hi, 6), tick, "base offset")
    title = f"Sequence progress of producer {p.get('producer_id', '?')} in {partition_name(p)}"
    return svg("chart sequence", title, HEIGHT, body), kinds


def idle_chart(points: list[dict], threshold) -> str:
    """Idle time before each resumption on a log scale, one dot per resumption numbered 1..n in the
    order given; expirations sit above the ``threshold`` line (producer.id.expiration.ms, if known)."""
    values = [max(q["idle_ms"], 1) for q in points] + ([threshold] if threshold else [])
    lo, hi = min(values) / 2, max(values) * 2
    x, y = Scale(1, len(points), LEFT + 6, RIGHT - 6), Scale(lo, hi, BOTTOM, TOP, log=True)
    body = y_axis(y, duration_ticks(lo, hi) or [min(values), max(values)], human_ms,
                  "idle time before resuming (log scale)")
    if threshold:
        label = f"producer.id.expiration.ms = {threshold:,} ({human_ms(threshold)})"
        ty = y(threshold)
        body += [line(LEFT, ty, RIGHT, ty, colour(SEV_EXPLAINED), "6 4", "threshold"),
                 text(LEFT + 6, ty - 5, label, "start", "cap")]
    for n, q in sorted(enumerate(points, start=1), key=lambda nq: worst_last(nq[1])):
        explained = f", explained by {q['explained_by']}" if q.get("explained_by") else ""
        tip = (f"{q.get('topic', '?')}-{q.get('partition', '?')} offset {q.get('offset', '?')}, producer "
               f"{q.get('producer_id', '?')}\nidle {human_ms(q['idle_ms'])}: {q.get('verdict', '?')} "
               f"({sev(q.get('severity'))}{explained})")
        body.append(shape("dot", x(n), y(max(q["idle_ms"], 1)), colour(q.get("severity")), tip))
    body += x_axis(x, AXIS, nice_ticks(1, len(points), 6), tick,
                   "resumption (numbered by topic, partition, offset)")
    return svg("chart idle", "Producer idle time before each resumption", HEIGHT, body)


def _dodged(run: dict) -> dict[str, float]:
    """Each series' marker shift at one run: series with the same value there spread around it."""
    equal: dict[int, list[str]] = {}
    for key, *_ in TREND_SERIES:
        equal.setdefault(as_int(run.get(key)), []).append(key)
    return {key: (k - (len(keys) - 1) / 2) * DODGE for keys in equal.values() for k, key in enumerate(keys)}


def same_series(runs: list[dict]) -> list[list[str]]:
    """The labels of series equal on every run (each group of two or more), for the legend to say so.

    >>> same_series([{"violation": 2, "gaps": 2, "explained": 1}, {"violation": 0, "gaps": 0}])
    [['violations', 'sequence gaps'], ['duplicates', 'hanging transactions']]
    """
    groups: dict[tuple, list[str]] = {}
    for key, label, *_ in TREND_SERIES:
        groups.setdefault(tuple(as_int(r.get(key)) for r in runs), []).append(label)
    return [labels for labels in groups.values() if len(labels) > 1]


def trend_legend(runs: list[dict]) -> str:
    """The trend's legend: each series' line (its dash) and marker, and which series coincide."""
    items = []
    for _, label, hue, dash, marker in TREND_SERIES:
        items.append(f'<span><svg class="swatch" viewBox="0 0 34 16" width="34" height="14" aria-hidden="true">'
                     f"{line(1, 8, 33, 8, hue, dash, width=2)}{shape(marker, 17, 8, hue, label)}</svg>"
                     f"{esc(label)}</span>")
    items = "".join(items)
    same = "; ".join(" = ".join(labels) for labels in same_series(runs))
    note = f'<span class="same">equal on every run: {esc(same)}</span>' if same else ""
    return f'<div class="legend">{items}{note}</div>'


def trend_chart(runs: list[dict]) -> str:
    """One line per ``TREND_SERIES`` over the audit runs (each with a numeric ``run_time_ms``)."""
    times = [r["run_time_ms"] for r in runs]
    peak = max((as_int(r.get(key)) for r in runs for key, *_ in TREND_SERIES), default=0)
    x, y = Scale(min(times), max(times), LEFT + 30, RIGHT - 30), Scale(0, max(peak, 1), BOTTOM, TOP)
    body = y_axis(y, nice_ticks(0, max(peak, 1), 4), tick, "batches")
    shifts, markers = [_dodged(r) for r in runs], []
    for (key, label, hue, dash, marker), width in zip(TREND_SERIES, TREND_WIDTHS, strict=True):
        coords = [(x(r["run_time_ms"]), y(as_int(r.get(key)))) for r in runs]
        if len(coords) > 1:
            pts = " ".join(f"{coord(a)},{coord(b)}" for a, b in coords)
            extra = f' stroke-dasharray="{dash}"' if dash else ""
            body.append(f'<polyline class="series" points="{pts}" fill="none" stroke="{hue}" stroke-width="{width}"'
                        f"{extra}/>")
        for r, (a, b), shift in zip(runs, coords, shifts, strict=True):
            tip = (f"{label}: {as_int(r.get(key)):,}\n"
                   f"run {r.get('run_id', '?')} at {fmt_time(r['run_time_ms'])}")
            markers.append(shape(marker, a + shift[key], b, hue, tip))
    body += markers  # above every line
    span = max(times) - min(times)
    ticks = [min(times) + span * k / 4 for k in range(5)] if span else [times[0]]
    pattern = "%Y-%m-%d" if span >= 5 * 86_400_000 else "%m-%d %H:%M"
    labels = [fmt_time(t, pattern) for t in ticks]  # a tick repeating its left neighbour's date says nothing
    ticks = [t for i, t in enumerate(ticks) if i == 0 or labels[i] != labels[i - 1]]
    body += x_axis(x, AXIS, ticks, lambda t: fmt_time(t, pattern), "audit run time (UTC)")
    return svg("chart trend", "Findings per audit run", HEIGHT, body)
