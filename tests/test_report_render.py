"""The HTML report renderer: pure Python, no Spark. A realistic aggregated dict in, one page out."""

from __future__ import annotations

import copy
import html
import re
from html.parser import HTMLParser

import pytest

from analytics.report.render import SECTIONS, render, write_report
from analytics.report.svg import Scale, nice_ticks
from analytics.report.values import esc, human_ms

EVIL_TOPIC = "<script>alert(1)</script>"
EVIL_EXPLANATION = '"><img src=x onerror=alert(1)>'
T0 = 1_763_700_000_000  # epoch ms
DAY_MS = 86_400_000
LOG_DIR = "/data/kafka-logs"
VERDICTS = ("OK", "EPOCH_BUMP", "NON_IDEMPOTENT", "CONTROL_MARKER", "DUPLICATE", "SEQUENCE_GAP",
            "SEQUENCE_REGRESSION", "EPOCH_BUMP_NONZERO", "FENCED_ZOMBIE_WRITE", "FIRST_SEEN_NONZERO",
            "INVALID_TXN_STATE", "MARKER_EPOCH_REGRESSION", "COORDINATOR_EPOCH_REGRESSION", "CORRUPT")
SECTION_IDS = ("summary", "findings", "verdicts", "validation", "parse-errors", "snapshots", "partitions", "timelines",
               "producers", "idle", "transactions", "trend", "configuration")
ZOMBIE_ROW = {"topic": "orders", "partition": 0, "offset": 27, "producer_id": 7000, "producer_epoch": 3,
              "verdict": "FENCED_ZOMBIE_WRITE", "explained_by": "producer_expiration", "explanation": "epoch 3 < 4"}
TORN_FILE = "/data/kafka-logs/orders-0/00000000000000000000.log"


def _point(offset: int, epoch: int, base: int, verdict: str = "OK", severity: str = "ok") -> dict:
    """One batch of 5 records of producer 1000 (sequence chart input)."""
    return {"base_offset": offset, "timestamp": T0 + 100 * offset, "epoch": epoch, "base_sequence": base,
            "last_sequence": base + 4, "verdict": verdict, "severity": severity}


def _mark(offset: int, verdict: str, severity: str, explained_by, explanation: str) -> dict:
    return {"offset": offset, "timestamp": T0 + 100 * offset, "verdict": verdict, "severity": severity,
            "producer_id": 1000, "explained_by": explained_by, "explanation": explanation}


def _bins(first: int, last: int, width: int, **extra) -> list[dict]:
    return [{"start": s, "end": min(s + width - 1, last), "ok": min(width, last - s + 1), "info": 0,
             "explained": 0, "violation": 0, **extra} for s in range(first, last + 1, width)]


def _partition(topic: str, partition: int, batches: int, severities: dict, verdicts: dict) -> dict:
    return {"log_dir": LOG_DIR, "topic": topic, "partition": partition, "batches": batches,
            "records": 40 * batches, "first_offset": 0, "last_offset": batches - 1, "first_timestamp": T0,
            "last_timestamp": T0 + 9000, "severities": severities, "verdicts": verdicts}


def sample() -> dict:
    """What the report job would hand over for a small audit: two topics (one with a hostile name),
    findings on one partition, a producer across two epochs (a duplicate, then a gap after expiration),
    a hanging transaction, three audit runs."""
    points = [_point(10 * i, 0, 5 * i) for i in range(6)]
    points += [_point(10 * i, 1, 5 * (i - 6)) for i in range(6, 10)]
    points[3] = _point(30, 0, 10, "DUPLICATE", "violation")
    points[4] = _point(40, 0, 40, "SEQUENCE_GAP", "explained")
    points[6]["verdict"] = "EPOCH_BUMP"
    marks = [_mark(30, "DUPLICATE", "violation", None, "same epoch and sequences 10-14 as offset 20"),
             _mark(40, "SEQUENCE_GAP", "explained", "producer_expiration", EVIL_EXPLANATION)]
    verdicts = dict.fromkeys(VERDICTS, 0) | {"OK": 230, "EPOCH_BUMP": 1, "CONTROL_MARKER": 2, "DUPLICATE": 1,
                                             "SEQUENCE_GAP": 3}
    return {
        "title": "segaudit report",
        "out": "/data/out",
        "generated_at_ms": T0 + 60_000,
        "summary": {
            "run_id": "run-42", "export_run_id": "exp-41", "inputs": [LOG_DIR], "verdicts": verdicts,
            "severities": {"ok": 231, "info": 2, "explained": 1, "violation": 3},
            "transactions": {"COMMITTED": 1, "ABORTED": 0, "OPEN": 0, "HANGING": 1},
            "record_duplicates": 4,
            "snapshot_checks": {"match": 3, "mismatch": 1, "not_in_log": 0, "not_in_snapshot": 0},
            "configuration": {"producer_id_expiration_ms": 7 * DAY_MS, "transaction_max_timeout_ms": 900_000,
                              "profile": "2.7", "cleanup_policy": {"orders": "compact"},
                              "broker_restarts": [{"topic": "orders", "partition": 0, "offset": 26,
                                                   "time_ms": T0 - DAY_MS}]},
            "seconds": 12.3,
            "unknown_future_key": [1, 2],
        },
        "verdict_severities": {"OK": {"ok": 230}, "DUPLICATE": {"violation": 1},
                               "SEQUENCE_GAP": {"violation": 2, "explained": 1}},
        "violations": [
            {"log_dir": LOG_DIR, "topic": "orders", "partition": 0, "verdict": "DUPLICATE", "batches": 1,
             "first_offset": 30},
            {"log_dir": LOG_DIR, "topic": "orders", "partition": 0, "verdict": "SEQUENCE_GAP", "batches": 2,
             "first_offset": 44},
        ],
        "validation": {"success": False, "run_id": "val-43", "checks": [
            {"suite": "zero_duplicates", "check": "no_duplicate_batch", "description": "no DUPLICATE",
             "success": False, "unexpected": 1, "status": "fail",
             "rows": [{"topic": "orders", "partition": 0, "offset": 30, "producer_id": 1000, "verdict": "DUPLICATE",
                       "explained_by": None, "explanation": EVIL_EXPLANATION}]},
            {"suite": "sequences", "check": "no_unexplained_sequence_gap", "description": "gaps explained",
             "success": True, "unexpected": 0, "status": "pass", "rows": []},
            {"suite": "zombies", "check": "no_zombie_write", "description": "no fenced writes",
             "success": False, "unexpected": 2, "status": "warn", "rows": [ZOMBIE_ROW]},
        ]},
        "parse_errors": {"kinds": {"truncated": {"errors": 1, "bytes": 82}, "zero_filled": {"errors": 1, "bytes": 8192}},
                         "rows_total": 3, "rows": [
            {"topic": "orders", "partition": 0, "file": TORN_FILE, "file_position": 2375,
             "error_kind": "truncated", "message": "entry of 138 bytes runs 56 bytes past the end of the file",
             "bytes_affected": 82},
            {"topic": "orders", "partition": 1, "file": TORN_FILE.replace("-0/", "-1/"),
             "file_position": 2171, "error_kind": "zero_filled", "message": "the last 8192 bytes are zeros",
             "bytes_affected": 8192},
        ]},
        "snapshot_checks": {"counts": {"match": 3, "mismatch": 1, "not_in_log": 0, "not_in_snapshot": 0},
                            "rows_total": 1, "rows": [
            {"log_dir": LOG_DIR, "topic": "orders", "partition": 0, "snapshot_offset": 50, "producer_id": 13000,
             "status": "mismatch", "expected_epoch": 0, "replayed_epoch": 0, "expected_last_sequence": 48,
             "replayed_last_sequence": 46, "expected_last_offset": 49, "replayed_last_offset": 47},
        ]},
        "partitions": [
            _partition("orders", 0, 100, {"ok": 94, "info": 2, "explained": 1, "violation": 3},
                       {"OK": 94, "DUPLICATE": 1, "SEQUENCE_GAP": 3, "CONTROL_MARKER": 2}) | {"parse_errors": 1},
            _partition(EVIL_TOPIC, 1, 137, {"ok": 137, "info": 0, "explained": 0, "violation": 0},
                       {"OK": 137}),
        ],
        "partitions_total": 412,
        "timelines": [
            {"log_dir": LOG_DIR, "topic": "orders", "partition": 0, "first_offset": 0, "last_offset": 99,
             "bins": _bins(0, 99, 10), "marks": marks, "marks_total": 5},
            {"log_dir": LOG_DIR, "topic": EVIL_TOPIC, "partition": 1, "first_offset": 0, "last_offset": 136,
             "bins": _bins(0, 136, 137, explained=1), "marks": marks[1:], "marks_total": 1},
        ],
        "producers": [
            {"log_dir": LOG_DIR, "topic": "orders", "partition": 0, "producer_id": 1000, "points": points,
             "points_total": 1234, "epochs": [0, 1]},
            {"log_dir": LOG_DIR, "topic": "orders", "partition": 0, "producer_id": 1001,
             "points": [_point(5, 3, 7, "FIRST_SEEN_NONZERO", "explained")], "points_total": 1,
             "epochs": [3]},
        ],
        "idle": {"threshold_ms": 7 * DAY_MS, "points": [
            {"topic": "orders", "partition": 0, "producer_id": 1000, "offset": 40, "idle_ms": 8 * DAY_MS,
             "verdict": "SEQUENCE_GAP", "severity": "explained", "explained_by": "producer_expiration"},
            {"topic": EVIL_TOPIC, "partition": 1, "producer_id": 7, "offset": 12, "idle_ms": 90_000,
             "verdict": "OK", "severity": "ok", "explained_by": None},
        ]},
        "transactions": {"counts": {"COMMITTED": 1, "ABORTED": 0, "OPEN": 0, "HANGING": 1},
                         "rows_total": 5, "rows": [
            {"topic": "orders", "partition": 0, "producer_id": 7, "producer_epoch": 0, "first_offset": 10,
             "end_offset": None, "status": "HANGING", "last_timestamp": T0},
            {"topic": "orders", "partition": 0, "producer_id": 8, "producer_epoch": 0, "first_offset": 50,
             "end_offset": 60, "status": "COMMITTED", "last_timestamp": T0 + 5000},
        ]},
        "history": [
            {"run_time_ms": T0 + (k - 2) * DAY_MS, "run_id": f"run-{40 + k}", "batches": 200 + k,
             "records": 2000, "violation": 3 - k, "explained": 1, "duplicates": 1, "gaps": 3,
             "hanging": k % 2,
             "verdicts": {"SEQUENCE_GAP": 3}} for k in range(3)
        ],
    }


def empty() -> dict:
    """A run over nothing: a summary of zeros, every other part missing or empty."""
    return {"summary": {"verdicts": {}, "severities": {"ok": 0, "info": 0, "explained": 0, "violation": 0}},
            "partitions": [], "timelines": [], "producers": [], "idle": None, "history": []}




class TagStack(HTMLParser):
    """Checks that svg, section and table open and close in proper nesting."""

    TRACKED = ("svg", "section", "table", "details", "title")

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.TRACKED:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.TRACKED:
            if not self.stack or self.stack[-1] != tag:
                self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            else:
                self.stack.pop()


def balanced(page: str) -> TagStack:
    parser = TagStack()
    parser.feed(page)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def page() -> str:
    return render(sample())


def _chart(page: str, kind: str, index: int = 0) -> str:
    return re.findall(rf'<svg class="chart {kind}".*?</svg>', page, re.DOTALL)[index]


def _section(page: str, sid: str) -> str:
    match = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.DOTALL)
    assert match, sid
    return match.group(1)


def test_every_section_present(page):
    for sid in SECTION_IDS:
        assert page.count(f'<section id="{sid}">') == 1, sid


def test_chart_counts(page):
    assert page.count('class="chart timeline"') == 2
    assert page.count('class="chart sequence"') == 2
    assert page.count('class="chart idle"') == 1
    assert page.count('class="chart trend"') == 1
    assert page.count('class="minibar"') == 2
    # every chart is an accessible, responsive svg with a title
    charts = re.findall(r'<svg class="chart [a-z]+"[^>]*>(<title>)?', page)
    assert len(charts) == 6 and all(charts)
    assert all('role="img"' in tag and 'width="100%"' in tag and "viewBox=" in tag
               for tag in re.findall(r'<svg class="chart[^>]*>', page))


def test_self_contained(page):
    lowered = page.lower()
    for needle in ("http://", "https://", "//cdn", "<script", "@import", "url("):
        assert needle not in lowered, needle


def test_hostile_strings_escaped(page):
    assert EVIL_TOPIC not in page
    assert EVIL_EXPLANATION not in page
    assert "<img" not in page
    assert esc(EVIL_TOPIC) in page
    assert esc(EVIL_EXPLANATION) in page
    # escaped in table cells, in chart attributes and inside svg <title> tooltips
    assert f'data-topic="{esc(EVIL_TOPIC)}"' in page
    assert f"<td>{esc(EVIL_TOPIC)}</td>" in page
    assert re.search(r"<title>[^<]*" + re.escape(esc(EVIL_EXPLANATION)), _chart(page, "timeline"))
    assert re.search(r"<title>[^<]*" + re.escape(esc(EVIL_TOPIC)), _chart(page, "idle"))


def _hostile(value, evil: str):
    """Every string of the data replaced by ``evil``, verdict names (keys of count maps) too."""
    if isinstance(value, dict):
        count_map = value and all(isinstance(v, int) for v in value.values())
        return {(f"{evil}{k}" if count_map else k): _hostile(v, evil) for k, v in value.items()}
    if isinstance(value, list):
        return [_hostile(v, evil) for v in value]
    return evil if isinstance(value, str) else value


@pytest.mark.parametrize("evil", [EVIL_TOPIC, EVIL_EXPLANATION, "'><svg onload=alert(1)>", "</title><b>x"])
def test_no_data_string_reaches_the_page_raw(evil):
    page = render(_hostile(sample(), evil))
    assert evil not in page
    assert esc(evil) in page
    for tag in ("<script", "<img", "<svg onload", "<b>x"):  # (the page has its own <b> headings)
        assert tag not in page
    parser = balanced(page)
    assert parser.errors == [] and parser.stack == []


def test_timeline_marks_have_tooltips(page):
    timeline = _chart(page, "timeline")  # the first: orders-0
    assert 'data-partition="0"' in timeline
    assert "DUPLICATE at offset 30 (violation)" in timeline
    assert "explained by producer_expiration" in timeline
    assert timeline.count("<circle") == 2
    assert "showing 2 of 5 findings" in _section(page, "timelines")


def test_summary_numbers(page):
    summary = _section(page, "summary")
    labels = re.findall(r'card-label">([^<]+)<', summary)
    values = dict(zip(labels, re.findall(r'card-value">([^<]+)<', summary), strict=True))
    assert values == {"batches": "237", "violations": "3", "explained": "1", "duplicates": "1",
                      "sequence gaps": "3", "zombie writes": "0", "failed checks": "1", "hanging transactions": "1",
                      "record duplicates": "4", "parse errors": "3", "snapshot mismatches": "1",
                      "files not read": "—"}  # the summary of this page predates coverage
    tones = {label: tone for tone, label in re.findall(
        r'<div class="card ([^"]*)"><div class="card-value">[^<]*</div><div class="card-label">([^<]+)<', summary)}
    assert tones["sequence gaps"] == "sev-violation"  # 2 of its 3 batches are unexplained
    assert "SEQUENCE_GAP batches: 2 violation, 1 explained" in summary
    assert "of 3 checks, 1 more warned" in summary and "8,274 bytes affected" in summary
    verdicts, configuration = _section(page, "verdicts"), _section(page, "configuration")
    assert '<tr class="zero"><td class="mono">CORRUPT</td>' in verdicts
    assert "7 d" in configuration and "15 min" in configuration
    assert "run-42" in verdicts and "exp-41" in verdicts and "12.3 s" in verdicts
    assert "/<wbr>data/<wbr>kafka-logs" in verdicts


def _config_cells(page: str) -> dict[str, str]:
    """The configuration table: setting -> value cell (HTML)."""
    rows = re.findall(r'<tr><td><span class="mono">([^<]+)</span></td><td>(.*?)</td></tr>', _section(page, "configuration"))
    return dict(rows)


def test_configuration_values_are_readable(page):
    cells = _config_cells(page)
    assert cells["producer_id_expiration_ms"] == '604,800,000 ms <span class="muted">(7 d)</span>'
    assert cells["transaction_max_timeout_ms"] == '900,000 ms <span class="muted">(15 min)</span>'
    assert cells["profile"] == "2.7"
    assert cells["cleanup_policy"] == "orders = compact"
    assert cells["broker_restarts"] == ('topic = orders, partition = 0, offset = 26, time_ms = 1,763,613,600,000 '
                                        '<span class="muted">(2025-11-20 04:40:00 UTC)</span>')
    assert "{&quot;" not in _section(page, "configuration") and "&quot;:" not in _section(page, "configuration")


def test_configuration_lists_and_nested_tables():
    data = sample()
    data["summary"]["configuration"] = {
        "topics": ["orders", "payments"], "log_start_offsets": {"orders:0": 5, "orders:1": 7},
        "broker_restarts": [{"offset": 26}, {"offset": 31}], "flags": {"on": True, "limits": {"retry_ms": 250}},
        "export_time_ms": T0, "empty": {}}
    cells = _config_cells(render(data))
    assert cells["topics"] == "orders, payments"
    assert cells["log_start_offsets"] == "orders:0 = 5<br>orders:1 = 7"
    assert cells["broker_restarts"] == "offset = 26<br>offset = 31"
    assert cells["flags"] == "on = true<br>limits = {retry_ms = 250 ms}"
    assert cells["export_time_ms"] == '1,763,700,000,000 <span class="muted">(2025-11-21 04:40:00 UTC)</span>'
    assert cells["empty"] == "—"


AXIS_TITLES = {"timeline": ("offset", "batches per bin"), "sequence": ("base offset", "sequence number"),
               "idle": ("resumption (numbered by topic, partition, offset)", "idle time before resuming (log scale)"),
               "trend": ("audit run time (UTC)", "batches")}


@pytest.mark.parametrize("kind", AXIS_TITLES)
def test_every_chart_labels_both_axes(page, kind):
    chart = _chart(page, kind)
    x_title, y_title = AXIS_TITLES[kind]
    assert re.findall(r'class="cap x-title">([^<]*)<', chart) == [x_title]
    assert re.findall(r'class="cap y-title">([^<]*)<', chart) == [y_title]
    x_ticks = re.findall(r'text-anchor="middle" class="lbl">([^<]*)<', chart)
    y_ticks = re.findall(r'text-anchor="end" class="lbl">([^<]*)<', chart)
    assert x_ticks and y_ticks, kind


def test_idle_chart_numbers_the_resumptions(page):
    idle = _chart(page, "idle")
    assert re.findall(r'text-anchor="middle" class="lbl">([^<]*)<', idle) == ["1", "2"]
    assert re.findall(r'text-anchor="end" class="lbl">([^<]*)<', idle) == ["1 min", "10 min", "1 h", "6 h", "1 d",
                                                                          "7 d"]


def test_long_paths_wrap_at_separators():
    data = sample()
    deep = "/mnt/broker-7/" + "/".join(f"very-long-folder-name-{i}" for i in range(8)) + "/kafka-logs"
    for part in (data["partitions"][0], data["timelines"][0], data["producers"][0], *data["violations"],
                 *data["snapshot_checks"]["rows"]):
        part["log_dir"] = deep
    data["summary"]["inputs"] = [deep]
    page = render(data)
    wrapped = esc(deep).replace("/", "/<wbr>")
    assert deep not in page
    for sid in ("verdicts", "partitions", "timelines", "producers", "findings"):
        assert wrapped in _section(page, sid), sid
    assert "break-all" not in page  # a path breaks between folders, not inside a folder's name


def test_validation_badges(page):
    validation = _section(page, "validation")
    assert 'sev-violation">fail<' in validation
    assert 'sev-ok">pass<' in validation
    assert 'sev-explained">warn<' in validation
    assert "expectations failed" in validation


def test_partitions_truncation_note(page):
    assert "showing 2 of 412 partitions" in _section(page, "partitions")
    assert 'sev-violation">parse errors 1<' in _section(page, "partitions")


def test_the_two_questions_are_named_with_what_answers_them(page):
    summary, validation = _section(page, "summary"), _section(page, "validation")
    broker, data = summary.index("Did the broker keep its rules?"), summary.index("Is the data sound?")
    # the severity cards under the broker's question, the checks' card under the data's
    assert broker < summary.index('card-label">violations<') < data < summary.index('card-label">failed checks<')
    for text in (summary[broker:data], summary[data:], validation):
        assert "an explained duplicate or zombie write" in text
    assert "Is the data sound?" in validation
    # the verdict table splits each verdict by the broker's answer
    assert re.search(r'SEQUENCE_GAP</td><td class="num">3</td><td class="num">1</td><td class="num">2</td>',
                     _section(page, "verdicts"))


def _rows_of(block: str) -> list[list[str]]:
    """The body rows of the tables in ``block``, each a list of cell HTML."""
    return [cells for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", block) if (cells := re.findall(r"<td>(.*?)</td>", tr))]


def test_every_failed_or_warned_check_lists_its_offending_rows(page):
    validation = _section(page, "validation")
    blocks = re.findall(r'<details id="check-\d+" open><summary>(.*?)</summary>(.*?)</details>', validation, re.DOTALL)
    assert [re.search(r'class="mono">([a-z_]+)<', head).group(1) for head, _ in blocks] == [
        "no_duplicate_batch", "no_zombie_write"]
    duplicate, zombie = (body for _, body in blocks)
    assert _rows_of(duplicate)[0][:5] == ["orders", '<span class="num">0</span>', '<span class="num">30</span>',
                                          '<span class="num">1000</span>', '<span class="mono">DUPLICATE</span>']
    assert esc(EVIL_EXPLANATION) in duplicate and "showing" not in duplicate
    [row] = _rows_of(zombie)
    assert 'FENCED_ZOMBIE_WRITE' in row[5] and 'sev-explained">producer_expiration<' in row[6]
    assert "showing 1 of 2 offending rows" in zombie  # a sample: the first rows and the total
    assert "val-43" in validation


def test_parse_errors_and_torn_tails_are_listed_per_file(page):
    errors = _section(page, "parse-errors")
    rows = _rows_of(errors)
    assert [r[0] for r in rows] == ["orders", "orders"]
    assert esc(TORN_FILE).replace("/", "/<wbr>") in rows[0][2] and '<span class="num">2,375</span>' == rows[0][3]
    assert 'sev-violation">truncated<' in rows[0][4] and "torn tail" in rows[0][4]
    assert 'sev-info">zero_filled<' in rows[1][4]
    assert rows[0][5] == '<span class="num">82</span>' and "runs 56 bytes past the end" in rows[0][6]
    assert "showing 2 of 3 parse errors" in errors and "truncated 1 (82 bytes)" in errors


def test_snapshot_disagreements_show_expected_and_replayed_state(page):
    snapshots = _section(page, "snapshots")
    [row] = _rows_of(snapshots)
    assert row[:5] == ["orders", "0", '<span class="num">50</span>', "13000",
                       '<span class="badge sev-violation">mismatch</span>']
    assert row[5:] == ['<span class="num">0</span>', '<span class="num">0</span>', '<span class="num">48</span>',
                       '<span class="num diff">46</span>', '<span class="num">49</span>',
                       '<span class="num diff">47</span>']
    assert 'sev-violation">mismatch 1<' in snapshots


def test_idle_threshold_line(page):
    idle = _chart(page, "idle")
    assert "producer.id.expiration.ms = 604,800,000 (7 d)" in idle
    assert 'class="threshold"' in idle
    assert idle.count("<circle") == 2


def test_epoch_change_marked(page):
    two_epochs, one_epoch = _chart(page, "sequence", 0), _chart(page, "sequence", 1)
    assert two_epochs.count('class="epoch-change"') == 1
    assert ">epoch 1</text>" in two_epochs
    assert one_epoch.count('class="epoch-change"') == 0
    assert "<polygon" in two_epochs  # the gap's triangle
    assert 'fill="none" stroke="#d64545"' in two_epochs  # the duplicate's ring, in the violation colour
    assert "<b>producer 1000</b>" in _section(page, "producers")  # ids without thousands separators


def test_transactions_and_trend(page):
    txn = _section(page, "transactions")
    assert "showing 2 of 5 transactions" in txn and 'sev-violation">HANGING<' in txn
    trend = _section(page, "trend")
    assert trend.count("<polyline") == 5
    assert "Trends need more runs" not in trend
    assert "equal on every run: duplicates" not in trend  # duplicates (1) and explained (1) are equal, gaps (3) not
    assert "equal on every run: explained = duplicates" in trend


def test_single_run_trend_draws_points():
    data = sample()
    data["history"] = data["history"][:1]
    trend = _section(render(data), "trend")
    assert 'class="chart trend"' in trend and "<polyline" not in trend
    chart = _chart(trend, "trend")
    assert chart.count("<circle") + chart.count("<polygon") == 5  # one point per series
    assert "Trends need more runs" in trend


def test_tags_balance(page):
    parser = balanced(page)
    assert parser.errors == [] and parser.stack == []
    broken = balanced(page.replace("</table>", "", 1))  # the check itself can fail
    assert broken.errors or broken.stack


def test_empty_data_renders():
    page = render(empty())
    for sid in SECTION_IDS:
        assert f'<section id="{sid}">' in page
    assert page.count("Nothing to show") >= 7
    assert 'class="chart' not in page
    parser = balanced(page)
    assert parser.errors == [] and parser.stack == []
    assert render({}).count("Nothing to show") >= 7  # not even a summary


def test_malformed_values_do_not_crash():
    data = sample()
    data["partitions"][0].update(batches=None, severities=None, verdicts={"OK": "many"})
    data["timelines"][0]["bins"].append({"start": None, "end": "x"})
    data["producers"][0]["points"].append({"base_offset": 200, "epoch": None, "base_sequence": -1,
                                           "last_sequence": -1, "verdict": ["?"], "severity": "bogus"})
    data["idle"]["points"].append({"idle_ms": 0, "severity": None})
    data["transactions"]["rows"].append({"status": {"odd": 1}})
    data["history"].append({"run_time_ms": "yesterday"})
    page = render(data)
    assert balanced(page).errors == []


def test_deterministic():
    first = render(sample())
    assert first == render(copy.deepcopy(sample()))
    assert "generated 2025-11-21 04:41:00 UTC" in first  # the data's time, not the clock's
    assert render(empty()) == render(empty())


def test_write_report_atomic(tmp_path):
    target = tmp_path / "out" / "report" / "index.html"
    assert write_report(sample(), str(target)) == str(target)
    assert target.read_text(encoding="utf-8") == render(sample())
    assert [p.name for p in target.parent.iterdir()] == ["index.html"]


@pytest.mark.parametrize("ms, text", [(7 * DAY_MS, "7 d"), (900_000, "15 min"), (DAY_MS, "1 d"),
                                      (90_000_000, "25 h"), (5_400_000, "90 min"), (0, "0 ms"),
                                      (250, "250 ms")])
def test_human_ms(ms, text):
    assert human_ms(ms) == text


def test_scales_and_ticks():
    assert nice_ticks(0, 99, 5) == [0, 20, 40, 60, 80]
    assert nice_ticks(0, 3, 5) == [0, 1, 2, 3]
    s = Scale(5, 5, 0, 100)  # one value: the middle
    assert s(5) == 50
    assert Scale(0, 10, 0, 100)(50) == 100  # clamped inside the chart
    assert Scale(1, 1000, 0, 30, log=True)(100) == pytest.approx(20)


def findings_rows(page: str) -> list[dict]:
    """The Findings table as text, a dict per row: partition and log dir (a group's, on each of its
    rows), found, count, first offsets, evidence, and the link targets of the offsets and the evidence."""
    def text(cell: str) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", cell))

    rows, where = [], ["", ""]
    for tr in re.findall(r'<tr class="[^"]*">(.*?)</tr>', _section(page, "findings"), re.DOTALL):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.DOTALL)
        if len(cells) == 6:
            where, cells = [text(c) for c in cells[:2]], cells[2:]
        found, count, offsets, evidence = cells
        rows.append({"partition": where[0], "log_dir": where[1], "found": text(found), "count": text(count),
                     "offsets": text(offsets), "evidence": text(evidence),
                     "links": re.findall(r'href="#([^"]+)"', offsets),
                     "evidence_link": "".join(re.findall(r'href="#([^"]+)"', evidence))})
    return rows


def row_with_id(page: str, target: str) -> list[str]:
    """The cells (as text) of the table row whose id is ``target``."""
    tr = re.search(rf'<tr id="{re.escape(target)}">(.*?)</tr>', page, re.DOTALL)
    assert tr, target
    return [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr.group(1))]


def test_findings_come_right_after_the_cards_and_the_configuration_last(page):
    order = re.findall(r'<section id="([a-z-]+)">', page)
    assert order == [sid for sid, _, _ in SECTIONS]
    assert order[:3] == ["summary", "findings", "verdicts"] and order[-2:] == ["partitions", "configuration"]
    # the summary is the cards alone: no table (the verdicts, the configuration) stands between them and the findings
    assert "<table" not in _section(page, "summary")
    assert "broker_restarts" in _section(page, "configuration") and "broker_restarts" not in page[:page.index(
        '<section id="configuration">')]


def test_the_findings_table_says_where_each_finding_is(page):
    rows = findings_rows(page)
    assert [(r["partition"], r["log_dir"], r["found"], r["count"], r["offsets"], r["evidence"]) for r in rows] == [
        ("orders-0", LOG_DIR, "DUPLICATE", "1 batch", "30", "timeline"),
        ("orders-0", LOG_DIR, "SEQUENCE_GAP", "2 batches", "44 …", "timeline"),  # one offset known of two
        ("orders-0", LOG_DIR, "fail no_duplicate_batch", "1 row", "30", "offending rows"),
        ("orders-0", LOG_DIR, "warn no_zombie_write", "\u22651 row", "27", "offending rows"),  # a sample of 1 of 2 rows
        ("orders-0", LOG_DIR, "snapshot mismatch", "1 producer", "snapshot at offset 50", "snapshot row"),
    ]
    duplicate, gap, check, zombie, snapshot = rows
    # each offset links to the row that holds it; a verdict's offset to a check's row there, if one has it
    assert duplicate["links"] == check["links"] == ["check-0-0"] and gap["links"] == []
    assert row_with_id(page, "check-0-0")[:3] == ["orders", "0", "30"]
    assert row_with_id(page, zombie["links"][0])[:3] == ["orders", "0", "27"]
    assert row_with_id(page, snapshot["links"][0])[:5] == ["orders", "0", "50", "13000", "mismatch"]
    assert duplicate["evidence_link"] == "timeline-0" and 'id="timeline-0" open' in _section(page, "timelines")
    assert re.search(r'<a href="#partition-0"><span class="mono">orders-0</span></a>', _section(page, "findings"))
    assert row_with_id(page, "partition-0")[:2] == ["orders", "0"]
    assert "&ge; marks a count from a sample" in _section(page, "findings")


def test_every_link_of_the_page_reaches_one_element():
    for data in (sample(), _several_log_dirs()):
        page = render(data)
        ids = re.findall(r' id="([^"]+)"', page)
        assert len(ids) == len(set(ids))
        targets = set(re.findall(r'href="#([^"]+)"', page))
        assert targets and targets <= set(ids), targets - set(ids)


def _several_log_dirs() -> dict:
    """A partition exported from two log dirs (replicas), a check row naming its file, one naming
    neither log dir nor file, and a check row in a partition only the partition list places."""
    data = sample()
    gap = {"topic": "t", "partition": 0, "offset": 5, "verdict": "SEQUENCE_GAP"}
    data["violations"] = [
        {"log_dir": "/a", "topic": "t", "partition": 0, "verdict": "SEQUENCE_GAP", "batches": 1, "first_offset": 5},
        {"log_dir": "/b", "topic": "t", "partition": 0, "verdict": "CORRUPT", "batches": 4, "first_offset": 7},
    ]
    data["timelines"] = []
    data["partitions"] = [_partition("u", 3, 10, {"ok": 10}, {"OK": 10}) | {"log_dir": "/c"}]
    data["snapshot_checks"] = None
    data["validation"]["checks"] = [
        {"suite": "s", "check": "no_unexplained_sequence_gap", "description": "d", "success": False, "unexpected": 1,
         "status": "fail", "rows": [gap]},
        {"suite": "s", "check": "magic_and_framing_valid", "description": "d", "success": False, "unexpected": 2,
         "status": "fail", "rows": [{"topic": "t", "partition": 1, "file": "/a/t-1/00000000000000000000.log",
                                     "file_position": 2375, "error_kind": "truncated"},
                                    {"topic": "u", "partition": 3, "offset": 9}]},
    ]
    return data


def test_findings_name_the_log_dir_a_row_does_not():
    rows = findings_rows(render(_several_log_dirs()))
    assert [(r["partition"], r["log_dir"], r["found"], r["count"], r["offsets"]) for r in rows] == [
        ("t-0", "/b", "CORRUPT", "4 batches", "7 …"),  # the most violating batches first
        ("t-0", "/a", "SEQUENCE_GAP", "1 batch", "5"),
        ("t-0", "\u2014", "fail no_unexplained_sequence_gap", "1 row", "5"),  # two log dirs hold t-0: not guessed
        ("t-1", "/a", "fail magic_and_framing_valid", "1 row", "byte 2,375"),  # from the row's file
        ("u-3", "/c", "fail magic_and_framing_valid", "1 row", "9"),  # the one log dir the page knows
    ]


def test_no_findings_says_so():
    data = sample()
    data["violations"], data["snapshot_checks"] = [], None
    data["validation"]["checks"] = [c for c in data["validation"]["checks"] if c["status"] == "pass"]
    findings = _section(render(data), "findings")
    assert "Nothing to show: no violating batch, failed check or snapshot mismatch" in findings
    assert "not validated" in _section(render(empty()), "findings")


def test_the_snapshot_card_says_what_each_number_counts():
    data = sample()
    data["summary"]["snapshot_checks"] = {"match": 70, "mismatch": 1, "not_in_log": 6, "not_in_snapshot": 1}
    summary = _section(render(data), "summary")
    card = re.search(r'card-value">1</div><div class="card-label">snapshot mismatches</div>'
                     r'<div class="card-sub">([^<]*)</div>', summary)
    assert card and card.group(1) == ("producers whose snapshot state differs from the replay; not compared: "
                                      "6 only in a snapshot, 1 only in the log")


def test_equal_trend_series_stay_apart():
    """Equal counts on every run (explained and duplicates, 1 each): each series its own dash pattern
    and marker, the lower line wider, the markers of equal values side by side, the legend saying so."""
    chart = _chart(render(sample()), "trend")
    lines = re.findall(r'<polyline class="series" points="([^"]*)"[^>]*stroke-width="([^"]*)"'
                       r'(?: stroke-dasharray="([^"]*)")?/>', chart)
    assert len(lines) == 5 and len({dash for _, _, dash in lines}) == 5
    (explained, width_e, _), (duplicates, width_d, _) = lines[1], lines[2]
    assert explained == duplicates and float(width_e) > float(width_d)  # the same spot: the lower one shows at its edges
    at, shapes = {}, {}
    for element, label in re.findall(r"<((?:circle|polygon)[^>]*)><title>([a-z ]+): \d", chart):
        if element.startswith("circle"):
            at.setdefault(label, []).append(float(re.search(r'cx="([\d.]+)"', element).group(1)))
            shapes[label] = re.search(r'r="[^"]*" fill="[^"]*"', element).group(0)  # a dot or a ring
        else:
            points = [tuple(map(float, p.split(","))) for p in re.search(r'points="([^"]*)"', element).group(1).split()]
            at.setdefault(label, []).append(points[0][0])
            shapes[label] = tuple((round(x - points[0][0], 1), round(y - points[0][1], 1)) for x, y in points)
    assert set(at) == {"violations", "explained", "duplicates", "sequence gaps", "hanging transactions"}
    assert len(set(shapes.values())) == 5  # a marker of its own per series
    assert all(abs(a - b) >= 6 for a, b in zip(at["explained"], at["duplicates"], strict=True))
    assert "equal on every run: explained = duplicates" in _section(render(sample()), "trend")


def test_every_table_scrolls_in_its_own_box(page):
    assert page.count("<table") == page.count('<div class="scroll"><table') > 5
