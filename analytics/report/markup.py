"""HTML primitives of the page: sections, tables, badges, notes and collapsible blocks.

Arguments named ``inner`` or ``cells`` are HTML already built from ``values`` (escaped); labels
and headers are this package's own text and are escaped here all the same.
"""

from __future__ import annotations

from analytics.report.style import sev
from analytics.report.values import as_int, esc, fmt

OPEN_CHARTS = 3  # the first few per-partition/per-producer charts start expanded, the rest collapsed


def section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2>{body}</section>'


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Cells are HTML already built from ``fmt``/``esc``/badges; headers are this package's own text."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def badge(label, severity) -> str:
    return f'<span class="badge sev-{sev(severity)}">{esc(label)}</span>'


def span(cls: str, inner: str) -> str:
    """Wrap HTML that is already safe (built by ``fmt``/``esc``) in a styled span."""
    return f'<span class="{cls}">{inner}</span>'


def nothing(what: str) -> str:
    return f'<p class="nothing">Nothing to show: {esc(what)}.</p>'


def showing(shown: int, total, noun: str) -> str:
    """The note under a bounded list: how many of how many are shown; empty when all are."""
    total = as_int(total, shown)
    return f'<p class="note">showing {fmt(shown)} of {fmt(total)} {esc(noun)}</p>' if total > shown else ""


def details(index: int, summary: str, body: str, opened: bool = False) -> str:
    """The ``index``-th of a list of collapsible blocks; the first ``OPEN_CHARTS`` start open, and
    every one that is ``opened`` (evidence the reader came for)."""
    is_open = opened or index < OPEN_CHARTS
    return f"<details{' open' if is_open else ''}><summary>{summary}</summary>{body}</details>"

