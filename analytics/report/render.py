"""Render the audit report: a small, already aggregated ``data`` dict -> one self-contained HTML page.

Standard library only, no Spark: the caller (``build``) aggregates in Spark and hands over lists of
at most a few thousand items. The page must open offline years later (an audit is evidence), so
there is no JavaScript, no CDN, no external font, image or URL: charts are inline SVG (``charts``),
styling is one ``<style>`` block (``style``), collapsible parts are ``<details>``. Inline SVG in
HTML5 needs no ``xmlns``; the page's links lead to its own parts (``#`` anchors) and, relatively,
to the Data Docs beside it under OUT (``sections.DATA_DOCS``).

Layout: the page fits a 1024 px window. Text wraps, charts scale with the page, and a table too
wide for it scrolls sideways inside its own box (``markup.table``), never the page.

Safety: every value from ``data`` reaches the page only through ``values`` (``esc``, ``fmt_path``,
``fmt``). Tags, class names and colours come from this package's constants only, never from data.
Output is deterministic: same data, byte-identical page (no clock, no sets).

The package's modules, bottom up: ``values`` (data values as text), ``style`` (palette, CSS),
``svg`` (scales and chart primitives), ``markup`` (HTML primitives), ``charts``, ``summary`` and
``findings``, ``summary`` and ``sections`` (the page's parts), and this one, which puts them in
order and writes the file.
"""

from __future__ import annotations

import os

from analytics.report import sections
from analytics.report.findings import findings
from analytics.report.markup import span
from analytics.report.style import CSS
from analytics.report.summary import configuration, summary, verdicts
from analytics.report.values import DASH, as_dict, esc, fmt_path, fmt_time

__all__ = ["SECTIONS", "render", "write_report"]

# (id, navigation label, builder), in page order. Where first: the cards, then every partition with
# findings linked to its rows below; the full partition list, mostly healthy rows, and the
# configuration close the page.
SECTIONS = (
    ("summary", "Summary", summary),
    ("findings", "Findings", findings),
    ("verdicts", "Verdicts", verdicts),
    ("validation", "Validation", sections.validation),
    ("parse-errors", "Parse errors", sections.parse_errors),
    ("snapshots", "Snapshots", sections.snapshot_checks),
    ("timelines", "Timelines", sections.timelines),
    ("producers", "Producers", sections.producers),
    ("idle", "Idle times", sections.idle),
    ("transactions", "Transactions", sections.transactions),
    ("duplicates", "Record duplicates", sections.record_duplicates),
    ("replicas", "Replicas", sections.replicas),
    ("trend", "Trend", sections.trend),
    ("partitions", "Partitions", sections.partitions),
    ("configuration", "Configuration", configuration),
)


def render(data: dict) -> str:
    """The whole report page for ``data`` (see the module docstring); never reads the clock."""
    data = as_dict(data)
    title = data.get("title") or "segaudit report"
    run_id = as_dict(data.get("summary")).get("run_id") or DASH
    nav = "".join(f'<a href="#{sid}">{esc(label)}</a>' for sid, label, _ in SECTIONS)
    as_of = as_dict(data.get("as_of"))
    past = (f" · as of version {esc(as_of.get('version'))}, committed {esc(fmt_time(as_of.get('committed_at_ms')))}"
            if as_of else "")
    header = (f"<header><h1>{esc(title)}</h1><p>run {span('mono', esc(run_id))}{past}"
              f" · generated {esc(fmt_time(data.get('generated_at_ms')))}"
              f" · {span('mono path', fmt_path(data.get('out') or ''))}</p></header>")
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
