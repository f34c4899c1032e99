"""The Great Expectations suites: each fails on a scenario built to break it and passes on
``clean``; thresholds and warnings; results.json and the Data Docs site; exit codes through the CLI."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from analytics import cli
from analytics.contract import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION
from analytics.errors import UsageError
from expectations.suites import SUITE_TABLES, ValidationConfig
from expectations.validate import read_results, validate
from tests.commands import assert_own_lines
from tests.outs import copy_out, table_dir

pytestmark = pytest.mark.spark

# scenario -> the checks it must fail (every other check passes)
BREAKS = {
    "corrupt-crc": {"no_crc_failure"},
    "torn-tails": {"magic_and_framing_valid"},
    "missed-dedup": {"no_duplicate_batch", "no_duplicate_record"},  # its records repeat too
    "plain-retries": {"no_duplicate_record"},
    "lost-batch": {"no_unexplained_sequence_gap"},
    "fenced-zombie": {"no_zombie_write"},
    "transactions": {"no_hanging_transaction"},
}
SUITE_OF = {
    "no_crc_failure": "segment_integrity", "magic_and_framing_valid": "segment_integrity",
    "no_duplicate_batch": "zero_duplicates", "no_duplicate_record": "zero_duplicates",
    "no_unexplained_sequence_gap": "contiguous_sequences", "no_zombie_write": "eviction_gaps",
    "no_hanging_transaction": "transactions",
}


@pytest.fixture(scope="module")
def validated(spark, audited):
    return {name: validate(spark, audited[name][1]) for name in ("clean", "idle-expiration", "compacted", *BREAKS)}


@pytest.mark.parametrize("name", ["clean", "idle-expiration", "compacted"])
def test_every_suite_passes_on_sound_logs(validated, name):
    result = validated[name]
    assert result.success, [(c.id, c.sample) for c in result.checks if not c.success]
    assert {c.suite for c in result.checks} == set(SUITE_TABLES)


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_suite_fails_on_the_scenario_built_to_break_it(validated, name):
    result = validated[name]
    failed = {c.id for c in result.checks if not c.success}
    assert failed == BREAKS[name]
    assert not result.success
    for check in BREAKS[name]:
        assert not result.suite_success(SUITE_OF[check])
    assert {s for s in SUITE_TABLES if not result.suite_success(s)} == {SUITE_OF[c] for c in BREAKS[name]}


def test_a_failure_shows_the_offending_rows(validated, audited):
    [dup] = [c for c in validated["missed-dedup"].checks if c.id == "no_duplicate_batch"]
    assert dup.unexpected_count == 1
    [row] = dup.sample
    assert row["verdict"] == "DUPLICATE" and {"topic", "partition", "offset", "producer_id", "explanation"} <= set(row)
    # the same row is in the anomalies table, where the full set stays queryable
    import pyarrow.parquet as pq

    anomalies = pq.read_table(str(table_dir(audited["missed-dedup"][1], "anomalies"))).to_pylist()
    assert (row["topic"], row["partition"], row["offset"]) in {(a["topic"], a["partition"], a["base_offset"])
                                                             for a in anomalies if a["verdict"] == "DUPLICATE"}


def test_explained_gaps_are_checked_against_their_own_columns(spark, audited, tmp_path):
    """An explanation the row's columns do not support fails eviction_gaps."""
    from pyspark.sql import functions as F

    source = audited["idle-expiration"][1]
    out = tmp_path / "out"
    copy_out(source, out, without=("validate",))
    anomalies = spark.read.parquet(str(table_dir(out, "anomalies")))
    forged = anomalies.withColumn(
        "idle_ms", F.when(F.col("explained_by") == "producer_expiration", F.lit(5)).otherwise(F.col("idle_ms")))
    forged.write.parquet(str(tmp_path / "forged"))
    shutil.rmtree(table_dir(out, "anomalies"))
    shutil.move(tmp_path / "forged", table_dir(out, "anomalies"))
    result = validate(spark, str(out))
    assert {c.id for c in result.checks if not c.success} == {"producer_expiration_justified"}


def test_thresholds_and_warnings(spark, audited):
    _, out = audited["lost-batch"]
    allowed = validate(spark, out, ValidationConfig(allow={"no_unexplained_sequence_gap": 1}))
    assert allowed.success and all(c.success for c in allowed.checks)
    warned = validate(spark, out, ValidationConfig(warn=frozenset({"no_unexplained_sequence_gap"})))
    [gap] = [c for c in warned.checks if not c.success]
    assert warned.success and gap.severity == "warning" and gap.unexpected_count == 1
    with pytest.raises(UsageError, match="unknown check .no_such_check.; checks: "):
        validate(spark, out, ValidationConfig(warn=frozenset({"no_such_check"})))


def test_results_json_and_data_docs(validated, audited):
    _, out = audited["fenced-zombie"]
    results = read_results(out)
    assert results["success"] is False
    assert set(results["suites"]) == set(SUITE_TABLES)
    assert results["suites"]["eviction_gaps"]["success"] is False
    assert results["suites"]["segment_integrity"]["success"] is True
    index = Path(out, "validation", "data_docs", "index.html")
    assert index.is_file()
    html = index.read_text()
    for suite in SUITE_TABLES:
        assert suite in html


def _validation_page(out: str, suite: str) -> Path:
    """The Data Docs page of one suite's validation (a fresh site holds one run)."""
    [page] = Path(out, "validation", "data_docs", "validations", suite).rglob("*.html")
    return page


def _rows_tables(page: Path) -> dict[str, tuple[list[str], list[list[str]]]]:
    """check id -> (header, body rows) of each table of offending rows on a page."""
    tables = {}
    for check, body in re.findall(r'<table class="[^"]*segaudit-rows" data-check="([^"]+)">(.*?)</table>',
                                  page.read_text(), re.DOTALL):
        [head] = re.findall(r"<thead><tr>(.*?)</tr></thead>", body)
        rows = re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1])
        tables[check] = (re.findall(r"<th[^>]*>(.*?)</th>", head), [re.findall(r"<td>(.*?)</td>", r) for r in rows])
    return tables


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_data_docs_show_the_rows_of_every_failed_check(validated, audited, name):
    """Under each failed check's description, its sample: every column, every row, escaped; the
    validation is named by its run id and its data asset by the suite's table."""
    _, out = audited[name]
    results = read_results(out)
    for suite in SUITE_TABLES:
        page = _validation_page(out, suite)
        assert page.relative_to(Path(out, "validation", "data_docs", "validations", suite)).parts[0] == results["run_id"]
        assert f"Data asset: {suite}:{SUITE_TABLES[suite]}<br>" in page.read_text()
        failed = {c.id: c for c in validated[name].checks if c.suite == suite and not c.success}
        tables = _rows_tables(page)
        assert set(tables) == set(failed)
        for check_id, (header, rows) in tables.items():
            sample = failed[check_id].sample
            assert sample and header == list(sample[0])
            assert rows == [[html.escape("null" if v is None else str(v)) for v in r.values()] for r in sample]


def test_cli_exit_codes(spark, audited, capsys):
    assert cli.main(["validate", audited["clean"][1]]) == EXIT_OK
    out, err = capsys.readouterr()
    assert_own_lines(err)
    assert "expectations passed" in out
    assert cli.main(["validate", audited["lost-batch"][1]]) == EXIT_VIOLATION
    out, err = capsys.readouterr()
    assert_own_lines(err)
    assert "no_unexplained_sequence_gap" in out and "FAIL" in out
    assert cli.main(["validate", audited["lost-batch"][1], "--warn", "no_unexplained_sequence_gap"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert_own_lines(err)
    assert "WARN" in out


def test_validate_refuses_a_folder_without_an_audit(tmp_path, capsys):
    assert cli.main(["validate", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "no complete audit" in err


def test_run_is_export_audit_and_validate(spark, tmp_path, capsys):
    from analytics.generate import generate

    g = generate(tmp_path / "logs", "missed-dedup", seed=3)
    config = g.truth_dir / "audit.toml"
    code = cli.main(["run", str(g.log_dir), "--out", str(tmp_path / "out"), "--config", str(config)])
    captured = capsys.readouterr()
    assert_own_lines(captured.err)
    assert code == EXIT_VIOLATION
    assert "DUPLICATE" in captured.out and "expectations passed" in captured.out
    assert "validating" in captured.err
    results = json.loads((tmp_path / "out" / "validation" / "results.json").read_text())
    assert results["suites"]["zero_duplicates"]["success"] is False
    assert (tmp_path / "out" / "records").is_dir()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROWS_SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "data_docs_rows.png"


def _chromium(*args: str, tmp_path: Path) -> "subprocess.CompletedProcess":
    import subprocess

    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", *args],
        capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_data_docs_render_in_a_browser(validated, audited, tmp_path):
    """The Data Docs index, rendered by headless Chromium (scripts run): every suite is listed
    with its result, and the failed one is marked as failed."""
    _, out = audited["fenced-zombie"]
    index = Path(out, "validation", "data_docs", "index.html")
    dom = _chromium("--dump-dom", "--virtual-time-budget=5000", index.as_uri(), tmp_path=tmp_path).stdout
    # the results table is built by bootstrap-table in the browser, from the vendored copy: these
    # lines exist only if the scripts ran with no network
    assert "Showing 1 to 5 of 5 rows" in dom
    for suite in SUITE_TABLES:
        assert f'<option value="{suite}">{suite}</option>' in dom  # the filter bootstrap-table built
    assert dom.count("text-danger") >= 1  # the failed suite's status icon
    assert "https://" not in "".join(line for line in dom.splitlines() if "<script" in line or "stylesheet" in line)
    shot = tmp_path / "data_docs.png"
    _chromium(f"--screenshot={shot}", "--window-size=1400,900", "--hide-scrollbars", index.as_uri(),
              tmp_path=tmp_path)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    # docs/data_docs.png is the sample's index, which tests/test_report.py renders


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_data_docs_show_a_failed_checks_rows_in_a_browser(validated, audited, tmp_path):
    """The failed check's page after its scripts ran: the zombie write's row under its description."""
    _, out = audited["fenced-zombie"]
    [zombie] = [c for c in validated["fenced-zombie"].checks if c.id == "no_zombie_write"]
    page = _validation_page(out, "eviction_gaps")
    dom = _chromium("--dump-dom", "--virtual-time-budget=5000", page.as_uri(), tmp_path=tmp_path).stdout
    table = dom[dom.index('data-check="no_zombie_write"'):]
    table = table[:table.index("</table>")]
    assert "FENCED_ZOMBIE_WRITE" in table and f"<td>{zombie.sample[0]['offset']}</td>" in table
    assert "1 offending row" in dom
    shot = tmp_path / "data_docs_rows.png"
    _chromium(f"--screenshot={shot}", "--window-size=1400,1000", "--hide-scrollbars", page.as_uri(), tmp_path=tmp_path)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    if os.environ.get("SEGAUDIT_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, ROWS_SCREENSHOT)


def test_repeats_after_an_expiration_are_justified_by_their_expiry_point(spark):
    """producer_expiration_justified accepts a repeat of sequences written before an expiration from
    its columns (the batch at expired_offset was idle past the threshold with no transaction open,
    conflict_offset lies before it, the previous batch's state takes it in sequence), and rejects
    one whose columns do not show that."""
    from pyspark.sql import functions as F

    from analytics.audit.config import AuditConfig
    from analytics.audit.rules import classify
    from expectations.suites import suites
    from tests.test_audit_differential import EXPIRY_CASES, _spark_schema, _timed_rows

    config = AuditConfig(producer_id_expiration_ms=3000)
    rows = [r for t in ("rewind-then-repeats", "zombie-then-repeats", "jump-then-wrap")
            for r in _timed_rows(t, EXPIRY_CASES[t][0])]
    verdicts = classify(spark.createDataFrame(rows, schema=_spark_schema()), config).cache()
    [check] = [c for c in suites(config, has_records=False)["eviction_gaps"] if c.id == "producer_expiration_justified"]
    verdicts.createOrReplaceTempView("batch_verdicts")
    try:
        def offending(anomalies):
            anomalies.createOrReplaceTempView("forged_anomalies")
            return {(r["topic"], r["offset"]) for r in spark.sql(check.query.replace("{batch}", "forged_anomalies")).collect()}

        anomalies = verdicts.where(F.col("severity") != "ok")
        repeats = {(r["topic"], r["base_offset"]) for r in anomalies.where(
            (F.col("explained_by") == "producer_expiration") & (F.col("idle_ms") < 3000)).collect()}
        assert repeats == {("rewind-then-repeats", 10), ("rewind-then-repeats", 12), ("zombie-then-repeats", 3),
                           ("zombie-then-repeats", 4), ("jump-then-wrap", 3)}
        assert offending(anomalies) == set()
        is_repeat = (F.col("explained_by") == "producer_expiration") & (F.col("idle_ms") < 3000)
        # the original after the expiry point; out of sequence with the previous batch's state
        assert offending(anomalies.withColumn("conflict_offset", F.when(is_repeat, F.col("expired_offset"))
                                              .otherwise(F.col("conflict_offset")))) == repeats
        assert offending(anomalies.withColumn("base_sequence", F.when(is_repeat, F.pmod(F.col("base_sequence").cast("long") + 5, F.lit(2**31)).cast("int"))
                                              .otherwise(F.col("base_sequence")))) == repeats
        # expiry points with a transaction open
        points = [r["expired_offset"] for r in anomalies.where(is_repeat).collect()]
        verdicts.withColumn("txn_open", F.col("txn_open") | F.col("base_offset").isin(points)) \
            .createOrReplaceTempView("batch_verdicts")
        assert offending(anomalies) == repeats
    finally:
        spark.catalog.dropTempView("batch_verdicts")
        spark.catalog.dropTempView("forged_anomalies")
