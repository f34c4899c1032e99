"""``segaudit report``, the metrics history and the Prometheus textfile, on the bundled sample; every
finding with its rows (failed checks, parse errors, snapshot disagreements) and the two questions named;
the Findings table against the sample's planted anomalies; record keys made of HTML reach the page as
text; the page renders in headless Chromium with its charts, fits a 1024 px window and shows the
findings before the configuration; the Data Docs index names the failed checks and links to the report."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from analytics import cli
from analytics.audit.config import load_config
from analytics.contract import EXIT_OK, EXIT_USAGE
from analytics.export import export
from analytics.pipeline import audit
from analytics.pipeline import report as write_report
from analytics.report.history import read_history
from analytics.report.summary import BROKER_QUESTION, DATA_QUESTION
from expectations.suites import STRUCTURAL_ERRORS
from expectations.validate import read_results, validate
from tests.conftest import REPO
from tests.test_report_render import findings_rows, row_with_id
from tests.outs import table_dir

pytestmark = pytest.mark.spark
SAMPLE = REPO / "data" / "mixed"
CONFIG = REPO / "data" / "mixed.truth" / "audit.toml"
TRUTH = REPO / "data" / "mixed.truth"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = {width: REPO / "docs" / f"report_{width}.png" for width in (1024, 1400)}
DATA_DOCS_SCREENSHOT = REPO / "docs" / "data_docs.png"


@pytest.fixture(scope="module")
def reported(spark, tmp_path_factory):
    """The sample exported, audited twice into a history, with a Prometheus file, validated and reported."""
    root = tmp_path_factory.mktemp("report")
    out, history, prom = str(root / "out"), str(root / "history"), str(root / "textfile" / "segaudit.prom")
    export(None, [str(SAMPLE)], out, records=True)
    config = load_config(CONFIG)
    first = audit(spark, out, config, history=history)
    second = audit(spark, out, config, history=history, prometheus_file=prom)
    validate(spark, out)
    page = write_report(spark, out, history)
    return out, history, prom, (first, second), Path(page).read_text()


def _verdicts(out: str) -> list[dict]:
    return ds.dataset(str(table_dir(out, "batch_verdicts")), format="parquet", partitioning="hive").to_table(
        columns=["topic", "partition", "verdict", "severity", "record_count", "is_control"]).to_pylist()


def test_the_report_is_one_offline_page_with_every_section(reported):
    out, _, _, _, page = reported
    assert Path(out, "report", "index.html").is_file() and not Path(out, "report", "index.html.tmp").exists()
    for section in ("summary", "validation", "parse-errors", "snapshots", "partitions", "timelines", "producers",
                    "idle", "transactions", "duplicates", "trend"):
        assert f'<section id="{section}">' in page
    assert not re.search(r"https?://|<script|<link|@import|url\(", page)


def _section(page: str, sid: str) -> str:
    return re.search(rf'<section id="{sid}">(.*?)</section>', page, re.DOTALL).group(1)


def _text_rows(block: str) -> list[str]:
    """The body rows of the tables in ``block`` as plain text, cells separated by ``|``."""
    rows = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", block, re.DOTALL):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.DOTALL)
        if cells:
            rows.append("|".join(html.unescape(re.sub(r"<[^>]+>", "", c)) for c in cells))
    return rows


def _table(out: str, name: str) -> list[dict]:
    return ds.dataset(str(table_dir(out, name)), format="parquet", partitioning="hive").to_table().to_pylist()


def test_every_failed_check_lists_its_rows(reported):
    """Each failed check of the sample, with the rows results.json sampled: where (topic, partition,
    offset or file position), whose (producer) and what (verdict, explanation or error)."""
    out, _, _, _, page = reported
    checks = [c for suite in read_results(out)["suites"].values() for c in suite["checks"]]
    failed = {c["id"]: c for c in checks if not c["success"]}
    assert {"magic_and_framing_valid", "no_zombie_write", "no_duplicate_record"} <= set(failed)
    blocks = dict(re.findall(r'<details id="check-\d+" open><summary>.*?<span class="mono">([a-z_]+)</span>.*?</summary>'
                             r"(.*?)</details>", _section(page, "validation"), re.DOTALL))
    assert set(blocks) == set(failed)
    for check_id, check in failed.items():
        rows = _text_rows(blocks[check_id])
        assert len(rows) == len(check["sample"]) > 0, check_id
        for text, row in zip(rows, check["sample"], strict=True):
            cells = text.split("|")
            assert cells[:2] == [row["topic"], str(row["partition"])], check_id
            where = next(row[k] for k in ("offset", "file_position", "first_offset", "size_bytes") if k in row)
            assert f"{where:,}" in cells or str(where) in cells, check_id
    assert "FENCED_ZOMBIE_WRITE" in blocks["no_zombie_write"] and "producer_expiration" in blocks["no_zombie_write"]
    if failed["no_duplicate_record"]["unexpected_count"] > len(failed["no_duplicate_record"]["sample"]):
        assert "showing" in blocks["no_duplicate_record"]


def test_parse_errors_and_torn_tails_are_in_the_report(reported):
    out, _, _, _, page = reported
    errors = _section(page, "parse-errors")
    rows = _text_rows(errors)
    expected = sorted(_table(out, "parse_errors"), key=lambda e: (e["file"], e["file_position"]))
    assert expected and len(rows) == len(expected)
    for text, e in zip(rows, expected, strict=True):
        assert text.split("|")[:4] == [e["topic"], str(e["partition"]), e["file"], f"{e['file_position']:,}"]
        assert e["error_kind"] in text and e["message"] in text
    assert any("truncated" in r and "torn tail" in r for r in rows)
    # the torn partition no longer reads as healthy in the partition table
    torn = next(r for r in _text_rows(_section(page, "partitions")) if r.startswith("torn-tails|0|"))
    assert "parse errors 1" in torn


def test_snapshot_disagreements_are_in_the_report(reported):
    out, _, _, _, page = reported
    rows = _text_rows(_section(page, "snapshots"))
    disagreeing = [c for c in _table(out, "snapshot_checks") if c["status"] != "match"]
    assert any(c["status"] == "mismatch" for c in disagreeing) and len(rows) == len(disagreeing)
    for c in disagreeing:
        assert any(r.split("|")[:5] == [c["topic"], str(c["partition"]), f"{c['snapshot_offset']:,}",
                                        str(c["producer_id"]), c["status"]] for r in rows), c
    [mismatch] = [r for r in rows if "|mismatch|" in r]
    expected, replayed = mismatch.split("|")[7:9]  # the last sequences differ
    assert expected != replayed


def test_the_two_questions_are_named(reported):
    _, _, _, _, page = reported
    summary = _section(page, "summary")
    assert summary.index(BROKER_QUESTION) < summary.index(DATA_QUESTION)
    assert DATA_QUESTION in _section(page, "validation")
    failed = sum(1 for suite in read_results(reported[0])["suites"].values() for c in suite["checks"] if not c["success"])
    assert re.search(rf'card-value">{failed}</div><div class="card-label">failed checks<', summary)


def test_timelines_are_drawn_for_the_partitions_with_findings_only(reported):
    out, _, _, _, page = reported
    found = {(r["topic"], r["partition"]) for r in _verdicts(out) if r["severity"] in ("explained", "violation")}
    drawn = set(re.findall(r'class="chart timeline"[^>]*data-topic="([^"]*)" data-partition="(\d+)"', page))
    assert {(html.unescape(t), int(p)) for t, p in drawn} == found
    assert page.count('class="chart sequence"') >= 1 and 'class="chart idle"' in page


def test_each_audit_appends_one_run_to_the_history(spark, reported):
    out, history, _, (first, second), page = reported
    rows = read_history(spark, history)
    runs = {r["run_id"] for r in rows.select("run_id").distinct().collect()}
    assert len(runs) == 2
    partitions = {(r["topic"], r["partition"]) for r in _verdicts(out)}
    assert rows.count() == 2 * len(partitions)
    # the counts of a run are the audit's: batches and every verdict, summed over partitions
    last = json.loads(Path(out, "summary.json").read_text())
    mine = rows.where(rows.run_id == last["run_id"]).groupBy().sum("batches", "sequence_gap", "duplicate").first()
    assert mine[0] == sum(last["verdicts"].values())
    assert (mine[1], mine[2]) == (last["verdicts"]["SEQUENCE_GAP"], last["verdicts"]["DUPLICATE"])
    # the trend chart has a point per run
    trend = page[page.index('class="chart trend"'):]
    assert trend[:trend.index("</svg>")].count("<circle") >= 2


def test_appending_a_run_twice_keeps_one_copy(spark, reported):
    from analytics.report.history import append_history, partition_metrics

    out, history, _, _, _ = reported
    run_id = json.loads(Path(out, "summary.json").read_text())["run_id"]
    before = read_history(spark, history).count()
    assert append_history(spark, partition_metrics(spark, out, run_id, 0), history) is False
    assert read_history(spark, history).count() == before


def test_the_prometheus_file_holds_the_audit_counts(reported):
    out, _, prom, _, _ = reported
    text = Path(prom).read_text()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert line.startswith(("# HELP segaudit_", "# TYPE segaudit_"))
            continue
        name_labels, value = line.rsplit(" ", 1)
        samples[name_labels] = float(value)
    rows = _verdicts(out)
    batches = Counter((r["topic"], r["partition"]) for r in rows)
    records = Counter()
    for r in rows:
        if not r["is_control"]:
            records[(r["topic"], r["partition"])] += r["record_count"]
    gaps = Counter((r["topic"], r["partition"]) for r in rows if r["verdict"] == "SEQUENCE_GAP")
    log_dir = str(SAMPLE.resolve())
    for (topic, partition), n in batches.items():
        labels = f'log_dir="{log_dir}",topic="{topic}",partition="{partition}"'
        assert samples[f"segaudit_batches{{{labels}}}"] == n
        assert samples[f"segaudit_records{{{labels}}}"] == records[(topic, partition)]
        assert samples[f'segaudit_verdict_batches{{{labels},verdict="SEQUENCE_GAP"}}'] == gaps[(topic, partition)]
    assert sum(v for k, v in samples.items() if k.startswith("segaudit_hanging_transactions")) == 2
    assert not list(Path(prom).parent.glob(".*tmp"))


HOSTILE = (b"<script>alert(1)</script>", b'"><img src=x onerror=alert(1)>', b"</td></tr></table><h1>x")


def test_keys_made_of_html_reach_the_page_as_text(spark, tmp_path):
    """Record keys are arbitrary producer bytes: duplicated ones are listed in the report, escaped."""
    from analytics.kafka.writer import RecordSpec, build_batch, segment_file_name, write_file

    part = tmp_path / "logs" / "orders-0"
    part.mkdir(parents=True)
    batches, offset = [], 0
    for seq, key in enumerate(HOSTILE * 2):  # every key twice, as a retry writes it: three record duplicates
        stamp = 1_700_000_000_000 + seq % len(HOSTILE)
        batches.append(build_batch(offset, [RecordSpec(key=key, value=b"v", timestamp=stamp)],
                                   producer_id=5, producer_epoch=0, base_sequence=seq))
        offset += 1
    write_file(part / segment_file_name(0), batches)
    out = str(tmp_path / "out")
    export(None, [str(tmp_path / "logs")], out, records=True)
    audit(spark, out, load_config(None))
    page = Path(write_report(spark, out, str(tmp_path / "history"))).read_text()
    for key in HOSTILE:
        text = key.decode()
        assert text not in page
        assert html.escape(text, quote=True) in page
    assert "<h1>x" not in page and page.count("<table") == page.count("</table>")


def test_cli_report_and_run_write_the_page(spark, reported, tmp_path, capsys):
    out, history, _, _, _ = reported
    assert cli.main(["report", out, "--history", history]) == EXIT_OK
    assert capsys.readouterr().out.strip() == os.path.join(out, "report", "index.html")
    assert cli.main(["report", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err  # one line naming the stage to run first
    assert "holds no complete" in err and len(err.strip().splitlines()) == 1


def test_the_findings_table_lists_where_the_sample_s_anomalies_are(reported):
    """The Findings table against the generator's ground truth of the sample: every partition with a
    planted anomaly that breaks a rule or fails a check, and no other but the snapshot's; each violating
    verdict with its count and first offsets; each failed check with its rows there, linked to them."""
    out, _, _, _, page = reported
    rows = findings_rows(page)
    truth = {name: ds.dataset(TRUTH / f"{name}.parquet").to_table().to_pylist()
             for name in ("batches", "transactions", "record_duplicates", "parse_errors")}

    def name(r: dict) -> str:
        return f"{r['topic']}-{r['partition']}"

    planted = ({name(b) for b in truth["batches"]
                if b["severity"] == "violation" or b["verdict"] in ("DUPLICATE", "FENCED_ZOMBIE_WRITE", "CORRUPT")}
               | {name(t) for t in truth["transactions"] if t["status"] == "HANGING"}
               | {name(d) for d in truth["record_duplicates"]}
               | {name(e) for e in truth["parse_errors"] if e["error_kind"] in STRUCTURAL_ERRORS})
    snapshots = {name(c) for c in _table(out, "snapshot_checks") if c["status"] == "mismatch"}
    assert {r["partition"] for r in rows} == planted | snapshots
    assert {r["log_dir"] for r in rows} == {str(SAMPLE.resolve())}

    def offsets(values) -> str:
        values = sorted(set(values))
        return ", ".join(f"{v:,}" for v in values[:3]) + (" …" if len(values) > 3 else "")

    violating: dict[tuple, list[int]] = {}
    for b in truth["batches"]:
        if b["severity"] == "violation":
            violating.setdefault((name(b), b["verdict"]), []).append(b["base_offset"])
    shown = {(r["partition"], r["found"]): r for r in rows}
    assert {k for k in shown if k[1] in {verdict for _, verdict in violating}} == set(violating)
    for key, found in violating.items():
        assert (shown[key]["count"], shown[key]["offsets"]) == (
            f"{len(found)} batch{'es' if len(found) > 1 else ''}", offsets(found)), key
    # the partitions with violating batches lead the table
    first = [r["partition"] for r in rows]
    assert max(first.index(p) for p, _ in violating) < min(first.index(p) for p in {r["partition"] for r in rows}
                                                          - {p for p, _ in violating})
    for check in (c for suite in read_results(out)["suites"].values() for c in suite["checks"] if not c["success"]):
        assert len(check["sample"]) == check["unexpected_count"]  # the sample is whole: counts are exact
        per_partition: dict[str, list[dict]] = {}
        for row in check["sample"]:
            per_partition.setdefault(name(row), []).append(row)
        for partition, mine in per_partition.items():
            r = shown[(partition, f"fail {check['id']}")]
            where = [row.get("offset", row.get("first_offset", row.get("file_position"))) for row in mine]
            unit = "" if {"offset", "first_offset"} & set(mine[0]) else "byte "  # a parse error has no offset
            assert r["count"] == f"{len(mine)} row{'s' if len(mine) > 1 else ''}", (partition, check["id"])
            assert r["offsets"] == ", ".join(unit + o for o in offsets(where).split(", ")), (partition, check["id"])
            for target, value in zip(r["links"], sorted(set(where)), strict=False):  # each offset links to its row
                cells = row_with_id(page, target)
                assert cells[:2] == [mine[0]["topic"], str(mine[0]["partition"])] and f"{value:,}" in cells


def test_every_link_of_the_report_reaches_one_element(reported):
    page = reported[4]
    ids = re.findall(r' id="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    targets = set(re.findall(r'href="#([^"]+)"', page))
    assert len(targets) > 20 and targets <= set(ids)
    docs = re.findall(r'href="(\.\./[^"]+)"', page)  # the one link out of the page: the Data Docs beside it
    # resolved as a browser resolves it, by the URL's path (OUT/report is a link into the run's folder)
    assert docs and all(Path(os.path.normpath(Path(reported[0], "report", d))).is_file() for d in docs)


# Injected into a copy of the page (the report itself has no script): what the browser laid out.
MEASURE = """<script>
(function () {
  const doc = document.documentElement, width = doc.clientWidth;
  const top = (sel) => document.querySelector(sel).getBoundingClientRect().top + window.scrollY;
  const outside = [...document.querySelectorAll("body *")]
    .filter(e => !e.parentElement.closest(".scroll") && e.getBoundingClientRect().right > width + 0.5)
    .map(e => e.tagName + "." + e.className);
  const spilling = [...document.querySelectorAll(".cols > div")].filter(b => b.scrollWidth > b.clientWidth + 1)
    .map(b => b.textContent.slice(0, 40));
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify({width: width, scrollWidth: doc.scrollWidth, outside: outside, spilling: spilling,
    findings: top("#findings"), firstFinding: top("table.findings tbody tr"), configuration: top("#configuration")});
  document.body.appendChild(pre);
})();
</script>"""


def _measured(page: Path, width: int, tmp_path: Path) -> dict:
    from tests.test_validate import _chromium

    copy = tmp_path / f"measure_{width}.html"
    copy.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    dom = _chromium(f"--window-size={width},2400", "--dump-dom", copy.as_uri(), tmp_path=tmp_path).stdout
    return json.loads(html.unescape(re.search(r'<pre id="measured">(.*?)</pre>', dom, re.DOTALL).group(1)))


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_report_renders_in_a_browser_with_its_charts(reported, tmp_path):
    """In headless Chromium at 1024 and 1400 px: the charts drawn, nothing wider than the window (a
    wide table scrolls in its own box), the verdicts beside the run facts without running into them,
    the Findings table on the first screens and before the configuration; a screenshot of each width."""
    from tests.test_validate import _chromium

    out, _, _, _, _ = reported
    index = Path(out, "report", "index.html")
    dom = _chromium("--dump-dom", index.as_uri(), tmp_path=tmp_path).stdout
    for chart in ("timeline", "sequence", "idle", "trend"):
        assert f'class="chart {chart}"' in dom, chart
    assert dom.count("<rect") > 100 and dom.count("<circle") > 10  # bars and marks were drawn
    for width, screenshot in SCREENSHOTS.items():
        laid_out = _measured(index, width, tmp_path)
        assert laid_out["scrollWidth"] <= laid_out["width"] <= width, laid_out  # no sideways scroll
        assert laid_out["outside"] == [] and laid_out["spilling"] == [], laid_out
        assert laid_out["findings"] < laid_out["firstFinding"] < laid_out["configuration"], laid_out
        assert laid_out["firstFinding"] < 1200, laid_out  # where first: on the first screen and a bit
        shot = tmp_path / screenshot.name
        _chromium(f"--screenshot={shot}", f"--window-size={width},2400", "--hide-scrollbars", index.as_uri(),
                  tmp_path=tmp_path)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
        if os.environ.get("SEGAUDIT_UPDATE_SCREENSHOT"):
            shutil.copyfile(shot, screenshot)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_data_docs_index_names_the_failed_checks_and_links_the_report(reported, tmp_path):
    """The sample's Data Docs index in headless Chromium (scripts run): how many checks failed and
    which, each with its suite's page, above GX's table of suites, and a link to the report that resolves."""
    from tests.test_validate import _chromium

    out = reported[0]
    index = Path(out, "validation", "data_docs", "index.html")
    failed = [c for suite in read_results(out)["suites"].values() for c in suite["checks"] if not c["success"]]
    total = sum(len(suite["checks"]) for suite in read_results(out)["suites"].values())
    dom = _chromium("--dump-dom", "--virtual-time-budget=5000", index.as_uri(), tmp_path=tmp_path).stdout
    summary = dom[dom.index('class="col-12 segaudit-summary"'):dom.index("ge-index-page-tabs-container")]
    assert f"{len(failed)} of {total} checks failed" in summary and len(failed) == 7
    listed = re.findall(r'<code class="segaudit-check">([a-z_]+)</code> \(<a href="([^"]+)">([a-z_]+)</a>\)', summary)
    assert [check for check, _, _ in listed] == [c["id"] for c in failed]
    for _, page, suite in listed:
        assert Path(index.parent, page).is_file() and f"/{suite}/" in page
    [report] = re.findall(r'<a class="segaudit-report" href="([^"]+)">', summary)
    assert Path(os.path.normpath(Path(index.parent, report))) == Path(out, "report", "index.html")
    assert "Showing 1 to 5 of 5 rows" in dom  # GX's own table still built below it
    shot = tmp_path / DATA_DOCS_SCREENSHOT.name
    _chromium(f"--screenshot={shot}", "--window-size=1400,900", "--hide-scrollbars", "--virtual-time-budget=5000",
              index.as_uri(), tmp_path=tmp_path)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    if os.environ.get("SEGAUDIT_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, DATA_DOCS_SCREENSHOT)
