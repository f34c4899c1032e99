"""The summary segaudit puts atop the Data Docs index (``expectations.validate.show_failures``): pure
Python on a stand-in of GX's index page, no Spark. The sample's real index is checked in a browser by
``tests/test_report.py``."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from expectations.validate import INDEX_TABS, REPORT_LINK, CheckResult, show_failures

PAGES = {"zero_duplicates": "validations/zero_duplicates/run-1/20260101T000000Z/batch.html",
         "eviction_gaps": "validations/eviction_gaps/run-1/20260101T000000Z/batch.html"}


def _check(suite: str, check_id: str, success: bool, severity: str = "critical", unexpected: int = 0,
           allowed: int = 0) -> CheckResult:
    return CheckResult(suite=suite, id=check_id, description="d", success=success, severity=severity,
                       unexpected_count=unexpected, allowed=allowed, sample=[])


def _index(tmp_path: Path, checks: list[CheckResult]) -> str:
    index = tmp_path / "index.html"
    index.write_text(f"<html><body><nav>GX</nav><div class='row'>{INDEX_TABS}>tabs</div></div></body></html>")
    show_failures(index, checks, PAGES, "run-1")
    return index.read_text()


def test_the_index_names_each_failed_and_warned_check_above_the_tabs(tmp_path):
    text = _index(tmp_path, [
        _check("zero_duplicates", "no_duplicate_batch", False, unexpected=3),
        _check("zero_duplicates", "no_duplicate_record", True),
        _check("eviction_gaps", "no_zombie_write", False, "warning", unexpected=1),
        _check("eviction_gaps", "no_epoch_regression", False, unexpected=12, allowed=10),
    ])
    summary = text[:text.index(INDEX_TABS)]
    assert "<strong class=\"segaudit-failed\">2 of 4 checks failed, 1 warned</strong>" in summary
    assert "alert-danger" in summary and "validation run run-1" in summary
    failed = summary[summary.index('segaudit-failed-checks'):summary.index("segaudit-warned-checks")]
    assert re.findall(r'<code class="segaudit-check">([a-z_]+)</code> \(<a href="([^"]+)">', failed) == [
        ("no_duplicate_batch", PAGES["zero_duplicates"]), ("no_epoch_regression", PAGES["eviction_gaps"])]
    assert "3 offending rows" in failed and "12 offending rows, 10 tolerated" in failed
    warned = summary[summary.index("segaudit-warned-checks"):]
    assert "no_zombie_write" in warned and "1 offending row<" in warned and "no_duplicate_record" not in summary
    assert text.count(INDEX_TABS) == 1 and text.endswith("tabs</div></div></body></html>")


def test_the_index_links_the_report_under_out(tmp_path):
    text = _index(tmp_path, [_check("zero_duplicates", "no_duplicate_batch", True)])
    assert "all 1 checks passed" in text and "alert-success" in text
    [link] = re.findall(r'<a class="segaudit-report" href="([^"]+)">', text)
    # from OUT/validation/data_docs/index.html to OUT/report/index.html
    assert link == REPORT_LINK == "../../report/index.html"
    assert posixpath.normpath(posixpath.join("OUT/validation/data_docs", link)) == "OUT/report/index.html"


def test_an_index_without_gx_tabs_gets_the_summary_at_the_top_of_its_body(tmp_path):
    index = tmp_path / "index.html"
    index.write_text("<html><body class='x'><p>GX</p></body></html>")
    show_failures(index, [_check("zero_duplicates", "no_duplicate_batch", False, unexpected=1)], {}, "run-1")
    text = index.read_text()
    assert text.startswith("<html><body class='x'><div class=\"col-12 segaudit-summary\">")
    assert "no_duplicate_batch</code> (zero_duplicates): 1 offending row" in text  # no page: no link
