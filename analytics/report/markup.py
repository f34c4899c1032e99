"""HTML primitives of the page: sections, tables, badges, notes, collapsible blocks and anchors.

Arguments named ``inner`` or ``cells`` are HTML already built from ``values`` (escaped); labels
and headers are this package's own text and are escaped here all the same. An element id is never
made of data: ``anchor`` builds it from one of this package's kinds and list positions, so the
Findings table and the section it points into compute the same id from the same list.
"""

from __future__ import annotations

from analytics.report.style import sev
from analytics.report.values import as_int, esc, fmt

OPEN_CHARTS = 3  # the first few per-partition/per-producer charts start expanded, the rest collapsed


# The kinds of anchor a link of the Findings table reaches: a failed check's block of offending rows
# and each of its rows, a partition's timeline, a snapshot disagreement, a row of the partition table.
CHECK, TIMELINE, SNAPSHOT, PARTITION = "check", "timeline", "snapshot", "partition"


def anchor(kind: str, *positions: int) -> str:
    """The id of the element at ``positions`` (indexes into the data's lists) of a ``kind``.

    >>> anchor(CHECK, 3, 0)
    'check-3-0'
    """
    return "-".join([kind, *(str(int(p)) for p in positions)])


def link(target: str, inner: str) -> str:
    """A link to an element of the page (``target`` from ``anchor``), around HTML already built."""
    return f'<a href="#{target}">{inner}</a>'


def section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2>{body}</section>'


def table(headers: list[str], rows: list[list[str]], ids: list[str | None] | None = None, cls: str = "") -> str:
    """Cells are HTML already built from ``fmt``/``esc``/badges; headers are this package's own text;
    ``ids``: an ``anchor`` per row, or None. The table scrolls sideways inside its own box when its
    columns cannot wrap to the page's width, so the page itself never does."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    ids = ids or [None] * len(rows)
    body = "".join((f'<tr id="{i}">' if i else "<tr>") + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>"
                   for row, i in zip(rows, ids, strict=True))
    attrs = f' class="{cls}"' if cls else ""
    return f'<div class="scroll"><table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


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


def details(index: int, summary: str, body: str, opened: bool = False, target: str = "") -> str:
    """The ``index``-th of a list of collapsible blocks; the first ``OPEN_CHARTS`` start open, and
    every one that is ``opened`` (evidence the reader came for); ``target``: its ``anchor``."""
    is_open = opened or index < OPEN_CHARTS
    attrs = (f' id="{target}"' if target else "") + (" open" if is_open else "")
    return f"<details{attrs}><summary>{summary}</summary>{body}</details>"

