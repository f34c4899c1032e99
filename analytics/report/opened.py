"""``segaudit open OUT``: the published report as a local page whose links work.

On a local disk the latest report is ``OUT/report/index.html`` itself (a link through ``_current``),
and its link to the Data Docs is ``OUT/validation/data_docs/index.html``. In a bucket (whose
``OUT/report/`` holds copies of the latest pages, :func:`analytics.publish.commits.refresh_views`),
or for a past version (``--as-of``), the report and the Data Docs of that commit, read from the run
folders its commit names, are copied into a new local folder laid out as ``OUT`` is, so the page
and the Data Docs link to each other there too.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from analytics.contract import REPORT, REPORT_DIR, VALIDATION_DIR
from analytics.publish import AsOf, published

DATA_DOCS = f"{VALIDATION_DIR}/data_docs"


def local_report(out: str, as_of: AsOf | None = None, into: str | None = None) -> Path:
    """The report page of ``out`` (at ``as_of``) as a local file; copied into ``into`` (default: a new
    temporary folder) when it is not on a local disk already."""
    view = published(out, as_of)
    view.manifest(REPORT)  # StageMissing, naming the command to run, when there is no report
    if not view.store.remote and not view.pinned:
        return Path(view.store.path(REPORT_DIR, "index.html"))
    folder = Path(into or tempfile.mkdtemp(prefix="segaudit-report-"))
    view.store.download(view.resolve(REPORT_DIR), str(folder / REPORT_DIR))
    if view.is_dir(DATA_DOCS):  # a validation is published, with its Data Docs
        view.store.download(view.resolve(DATA_DOCS), str(folder / DATA_DOCS))
    return folder / REPORT_DIR / "index.html"


def open_in_browser(page: Path) -> bool:
    """Open the page in the user's browser when there is a terminal and a browser to open; whether it did."""
    import webbrowser

    if not os.isatty(1):
        return False
    try:
        return webbrowser.open(page.as_uri())
    except webbrowser.Error:
        return False
