"""Chart primitives: scales, ticks, and the SVG pieces every chart is built from.

Coordinates are SVG user units on a canvas ``WIDTH`` wide that scales to the page width; the plot
runs from ``LEFT`` to ``RIGHT``, the y axis' tick labels sit left of it. Text reaches the SVG
through ``esc`` only; colours and class names are constants of this package.
"""

from __future__ import annotations

import math

from analytics.contract import SEVERITIES
from analytics.report.style import GRID, LINE, SEVERITY_COLOURS, sev
from analytics.report.values import esc

WIDTH, LEFT, RIGHT = 900, 70, 880
# Durations people know, for the ticks of a log-scaled duration axis: 1 ms ... 1 s, 10 s, 1 min,
# 10 min, 1 h, 6 h, 1 d, 7 d, 30 d, 365 d.
KNOWN_DURATIONS_MS = (1, 10, 100, 1_000, 10_000, 60_000, 600_000, 3_600_000, 21_600_000, 86_400_000,
                      604_800_000, 2_592_000_000, 31_536_000_000)


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
    return [t for t in KNOWN_DURATIONS_MS if lo <= t <= hi]


def tick(v: float) -> str:
    """Compact axis label: offsets reach billions, and a long label would collide with its neighbour."""
    for suffix, size in (("G", 1e9), ("M", 1e6), ("k", 1e4)):
        if abs(v) >= size:
            size = 1e3 if suffix == "k" else size
            return f"{v / size:.3g}{suffix}"
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.3g}"


def coord(x: float) -> str:
    """SVG coordinate with one decimal; ``+ 0.0`` turns -0.0 into 0 so output stays stable."""
    text = f"{round(x, 1) + 0.0:.1f}"
    return text.removesuffix(".0")


def worst_last(row: dict) -> int:
    """Sort key drawing ok first and violations last, so the worst markers end up on top."""
    return SEVERITIES.index(sev(row.get("severity")))


def svg(cls: str, title: str, height: int, body: list[str], attrs: str = "") -> str:
    """A chart: a responsive, accessible ``<svg>`` whose ``<title>`` names what it shows."""
    return (f'<svg class="{cls}" role="img" viewBox="0 0 {WIDTH} {height}" width="100%"{attrs}>'
            f"<title>{esc(title)}</title>{''.join(body)}</svg>")


def text(x: float, y: float, label, anchor: str = "start", cls: str = "lbl") -> str:
    return f'<text x="{coord(x)}" y="{coord(y)}" text-anchor="{anchor}" class="{cls}">{esc(label)}</text>'


def line(x1, y1, x2, y2, colour: str = GRID, dash: str = "", cls: str = "", width: float = 1) -> str:
    extra = (f' stroke-dasharray="{dash}"' if dash else "") + (f' class="{cls}"' if cls else "")
    return (f'<line x1="{coord(x1)}" y1="{coord(y1)}" x2="{coord(x2)}" y2="{coord(y2)}" stroke="{colour}"'
            f' stroke-width="{coord(width)}"{extra}/>')


def x_axis(scale: Scale, y: float, ticks, label_of, title: str) -> list[str]:
    """The axis line at ``y``, a labelled tick per value of ``ticks``, and the axis title (what the
    axis measures, with its unit) under the right end."""
    parts = [line(scale.p0, y, scale.p1, y, LINE)]
    for t in ticks:
        x = scale(t)
        parts += [line(x, y, x, y + 4, LINE), text(x, y + 16, label_of(t), "middle")]
    return parts + [text(scale.p1, y + 30, title, "end", "cap x-title")]


def y_axis(scale: Scale, ticks, label_of, title: str) -> list[str]:
    """The axis line at ``LEFT``, a grid line and label per tick, and the axis title above the top."""
    parts = [line(LEFT, scale.p0, LEFT, scale.p1, LINE),
             text(8, scale.p1 - 14, title, "start", "cap y-title")]
    for t in ticks:
        y = scale(t)
        parts += [line(LEFT, y, RIGHT, y), text(LEFT - 6, y + 4, label_of(t), "end")]
    return parts


def shape(kind: str, x: float, y: float, colour: str, tip: str) -> str:
    """One marker with its tooltip; the tooltip is a ``<title>`` child so it works without JavaScript."""
    title, at = f"<title>{esc(tip)}</title>", f'cx="{coord(x)}" cy="{coord(y)}"'
    if kind == "ring":
        return f'<circle {at} r="5" fill="none" stroke="{colour}" stroke-width="2">{title}</circle>'
    if kind == "dot":
        return f'<circle {at} r="3.5" fill="{colour}" fill-opacity="0.85">{title}</circle>'
    if kind == "cross":
        d = "".join(f"M{coord(x - 5)} {coord(y - dy)}L{coord(x + 5)} {coord(y + dy)}" for dy in (5, -5))
        return f'<path d="{d}" stroke="{colour}" stroke-width="2.5" fill="none">{title}</path>'
    corners = {"triangle": ((0, -6), (5.5, 4), (-5.5, 4)), "diamond": ((0, -6), (5, 0), (0, 6), (-5, 0)),
               "square": ((-4, -4), (4, -4), (4, 4), (-4, 4))}[kind]
    points = " ".join(f"{coord(x + dx)},{coord(y + dy)}" for dx, dy in corners)
    return f'<polygon points="{points}" fill="{colour}">{title}</polygon>'


def swatch(kind: str, colour: str) -> str:
    """A legend entry's symbol: the chart's own marker in a tiny svg (class "swatch", not a chart)."""
    if kind == "bar":
        inner = f'<rect x="2" y="4" width="12" height="8" fill="{colour}"/>'
    else:
        inner = shape(kind, 8, 8, colour, kind)
    return f'<svg class="swatch" viewBox="0 0 16 16" width="14" height="14" aria-hidden="true">{inner}</svg>'


def legend(items: list[tuple[str, str, str]]) -> str:
    """HTML legend under a chart: (label, marker kind, colour); wraps with the page, prints well."""
    return '<div class="legend">' + "".join(
        f"<span>{swatch(kind, colour)}{esc(label)}</span>" for label, kind, colour in items) + "</div>"


SEVERITY_LEGEND = [(s, "bar", SEVERITY_COLOURS[s]) for s in SEVERITIES]
