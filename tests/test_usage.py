"""The command line as its first ten minutes meet it: every mistake one line naming the command, with
the closest option or a pointer to --help, exit 2, answered before a JVM starts; a Kafka log
directory given for OUT answered with the command that audits it; --help lists every option's
meaning and the exit codes the documentation lists; --format json prints one document on stdout."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.cli import main
from analytics.cli.arguments import kafka_data
from analytics.cli.parser import EXIT_CODES, parser
from analytics.contract import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, EXIT_VIOLATION, VERDICTS, vocabulary
from tests.commands import assert_own_lines
from tests.conftest import REPO

SAMPLE = REPO / "data" / "mixed"
PARTITION = SAMPLE / "clean-0"
SEGMENT = PARTITION / "00000000000000000000.log"
JSON_OUTPUT = (REPO / "docs" / "reference" / "json-output.md").read_text()


@pytest.fixture
def no_spark(monkeypatch):
    """A command that would start a session fails the test instead: its mistakes are answered before."""
    from analytics.cli import commands

    def refuse(*args, **kwargs):
        raise AssertionError("a Spark session was asked for")

    monkeypatch.setattr(commands, "spark_session", refuse)


def usage(argv: list, capsys) -> str:
    """The one line a usage error prints, checked: exit 2, nothing on stdout, one line on stderr."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert_own_lines(err)
    assert (code, out) == (EXIT_USAGE, ""), err
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err.rstrip("\n")


# -- usage errors: one line, the command named, the closest option or a pointer to --help ------------------

@pytest.mark.parametrize("argv, line", [
    (["run", SAMPLE], "segaudit run: missing --out; see segaudit run --help"),
    (["run", SAMPLE, "--outt", "x"], "segaudit run: unknown option --outt (did you mean --out?)"),
    (["audit", "x", "--confg=a.toml"], "segaudit audit: unknown option --confg (did you mean --config or --conf?)"),
    (["inspect", SAMPLE, "--verbose"], "segaudit inspect: unknown option --verbose; see segaudit inspect --help"),
    (["adit", "x"], "segaudit: unknown command 'adit' (did you mean audit?)"),
    ([], "segaudit: missing COMMAND; see segaudit --help"),
    (["inspect"], "segaudit inspect: missing LOGDIR; see segaudit inspect --help"),
    (["inspect", SAMPLE, "--format", "jsn"], "segaudit inspect: --format: 'jsn' is not one of text, table, json "
                                             "(did you mean json?)"),
    (["explain", "x", "--topic", "t", "--partition", "0", "--offset", "-3"],
     "segaudit explain: --offset: '-3' is negative; give 0 or more"),
    (["explain", "x", "--topic", "t", "--partition", "-1", "--offset", "3"],
     "segaudit explain: --partition: '-1' is negative; give 0 or more"),
    (["explain", "x", "--topic", "t", "--partition", "0", "--offset", "3", "--context", "-1"],
     "segaudit explain: --context: '-1' is negative; give 0 or more"),
    (["explain", "x", "--topic", "t", "--partition", "zero", "--offset", "3"],
     "segaudit explain: --partition: 'zero' is not an integer; see segaudit explain --help"),
    (["explain", "x", "--topic", "t", "--partition", "0", "--offset", "3", "extra"],
     "segaudit explain: unexpected argument 'extra'; see segaudit explain --help"),
    (["producer", "x", "--producer-id", "1", "--limit", "-5"], "segaudit producer: --limit: '-5' is negative; give 0 or more"),
    (["sql", "x", "SELECT 1", "--limit", "-1"], "segaudit sql: --limit: '-1' is negative; give 0 or more"),
    (["generate", "x", "--scenario", "clean", "--scale", "0"], "segaudit generate: --scale: '0' is not positive; give 1 or more"),
    (["validate", "x", "--allow", "no_crc_failure=abc"],
     "segaudit validate: --allow: 'no_crc_failure=abc': give CHECK=N, N the offending rows tolerated (0 or more)"),
    (["validate", "x", "--allow", "no_crc_failure=-1"],
     "segaudit validate: --allow: 'no_crc_failure=-1': give CHECK=N, N the offending rows tolerated (0 or more)"),
    (["validate", "x", "--allow", "no_crc_falure=3"],
     "segaudit validate: --allow: unknown check 'no_crc_falure' (did you mean 'no_crc_failure'?)"),
    (["run", SAMPLE, "--out", "x", "--warn", "no_zombie_writes"],
     "segaudit run: --warn: unknown check 'no_zombie_writes' (did you mean 'no_zombie_write'?)"),
    (["reconcile", "x", "--bucket", "0"], "segaudit reconcile: --bucket: '0': the size must be positive; "
                                          "see segaudit reconcile --help"),
    (["reconcile", "x", "--bucket", "soon"], "segaudit reconcile: --bucket: 'soon': a size such as 600000, 30s, 10m, "
                                             "1h or 1d; see segaudit reconcile --help"),
    (["audit", "x", "--log-start", "orders=5"], "segaudit audit: --log-start: 'orders=5': give TOPIC:PARTITION=OFFSET"),
    (["audit", "x", "--range-batches", "0"], "segaudit audit: --range-batches: '0' is not positive; give 1 or more"),
    (["export", SAMPLE, "--out", "x", "--from-time", "yesterday"],
     "segaudit export: --from-time: 'yesterday' is neither milliseconds since the epoch nor an ISO 8601 time; "
     "see segaudit export --help"),
    (["export", SAMPLE, "--out", "x", "--max-fetches-per-broker", "0"],
     "segaudit export: --max-fetches-per-broker: '0' is not positive; give 1 or more"),
    (["producer", "x"], "segaudit producer: one of the arguments --producer-id --transactional-id is required; "
                        "see segaudit producer --help"),
])
def test_a_usage_error_is_one_line_naming_the_command(argv, line, capsys, no_spark):
    assert usage(argv, capsys) == line


@pytest.mark.parametrize("option, command", [("--expected", ["reconcile", "{out}"]),
                                             ("--config", ["audit", "{out}"]),
                                             ("--config", ["validate", "{out}"]),
                                             ("--config", ["run", SAMPLE, "--out", "{out}"]),
                                             ("--client-config", ["export", "kafka://localhost:9092", "--out", "{out}"])])
def test_a_missing_input_file_is_answered_before_spark(option, command, tmp_path, capsys, no_spark):
    out = tmp_path / "out"
    missing = tmp_path / "missing.csv"
    argv = [str(a).format(out=out) for a in command] + [option, str(missing)]
    assert usage(argv, capsys) == f"segaudit {command[0]}: {option}: no such file: {missing}; see segaudit {command[0]} --help"


def test_a_folder_given_for_a_file_is_refused(tmp_path, capsys, no_spark):
    assert usage(["audit", tmp_path, "--config", tmp_path], capsys) == (
        f"segaudit audit: --config: {tmp_path} is a folder, not a file; see segaudit audit --help")


def test_the_real_entry_point_says_a_usage_error_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "analytics", "run", str(SAMPLE)], capture_output=True, text=True,
                          cwd=REPO)
    assert_own_lines(proc.stderr)
    assert (proc.returncode, proc.stdout, proc.stderr) == (EXIT_USAGE, "", "segaudit run: missing --out; see segaudit run --help\n")


# -- a Kafka log directory where an export is expected --------------------------------------------------------

READERS = [["audit"], ["validate"], ["report"], ["reconcile"], ["explain", "--topic", "clean", "--partition", "0",
           "--offset", "1"], ["producer", "--producer-id", "1"], ["sql", "SELECT 1"]]


@pytest.mark.parametrize("command", READERS, ids=[c[0] for c in READERS])
@pytest.mark.parametrize("given, what", [(SAMPLE, "a Kafka log directory"), (PARTITION, "a Kafka partition folder"),
                                         (SEGMENT, "a Kafka segment file")], ids=["log-dir", "partition", "segment"])
def test_a_kafka_log_dir_given_for_out_is_answered_with_the_run_that_audits_it(command, given, what, capsys, no_spark):
    name, *rest = command
    assert usage([name, given, *rest], capsys) == (
        f"segaudit {name}: OUT: {given} is {what}, not an export; to audit it, run `segaudit run {given} --out OUT` "
        f"with OUT a new folder outside {SAMPLE}")


@pytest.mark.parametrize("command", ["run", "export"])
@pytest.mark.parametrize("out, words", [(SAMPLE, "is a Kafka log directory"), (PARTITION, "is a Kafka partition folder"),
                                        (SAMPLE / "audit", "is in a Kafka log directory"),
                                        (PARTITION / "audit", "is in a Kafka partition folder")],
                         ids=["log-dir", "partition", "in-log-dir", "in-partition"])
def test_out_is_never_written_into_a_kafka_log_dir(command, out, words, capsys, no_spark):
    assert usage([command, SAMPLE, "--out", out], capsys) == (
        f"segaudit {command}: --out: {out} {words}: the tables would be written among the broker's files; "
        f"give a new folder outside {SAMPLE}")
    assert not (SAMPLE / "audit").exists() and not (PARTITION / "audit").exists()


def test_what_is_a_kafka_log_dir(tmp_path):
    copied = tmp_path / "backup" / "broker-1"
    shutil.copytree(PARTITION, copied / "kafka-logs" / "clean-0")
    assert kafka_data(str(copied / "kafka-logs")) == str(copied / "kafka-logs")
    assert kafka_data(str(copied)) == str(copied)  # a copied tree holding a log dir
    assert kafka_data(str(copied / "kafka-logs" / "clean-0")) == str(copied / "kafka-logs")
    assert kafka_data(str(copied / "kafka-logs" / "clean-0" / "00000000000000000000.log")) == str(copied / "kafka-logs")
    assert kafka_data(str(tmp_path / "backup")) is None  # partitions three levels down: not looked for
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "_export.json").write_text("{}")
    shutil.copytree(PARTITION, tmp_path / "export" / "clean-0")
    assert kafka_data(str(tmp_path / "export")) is None  # an export is an export
    (tmp_path / "orders-3").mkdir()  # a folder named like a partition, without a partition's files
    (tmp_path / "orders-3" / "notes.txt").write_text("")
    assert kafka_data(str(tmp_path / "orders-3")) is None
    assert kafka_data(str(tmp_path / "orders-3" / "notes.txt")) is None
    assert kafka_data("s3://bucket/kafka-logs") is None


# -- --help: every option explained, the exit codes listed -------------------------------------------------------

def commands() -> dict[str, argparse.ArgumentParser]:
    [sub] = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_option_of_every_command_has_help():
    top = parser()
    missing = [f"segaudit {' '.join(a.option_strings) or a.dest}" for a in top._actions
               if not a.help or a.help == argparse.SUPPRESS]
    for name, p in commands().items():
        missing += [f"segaudit {name} {' '.join(a.option_strings) or a.metavar or a.dest}" for a in p._actions
                    if not a.help or a.help == argparse.SUPPRESS]
    assert missing == []


def help_exit_codes(argv: list[str], capsys) -> dict[int, str]:
    assert main([*argv, "--help"]) == EXIT_OK
    text, err = capsys.readouterr()
    assert_own_lines(err)
    listed = text[text.index("\nexit codes:\n"):]
    return {int(code): meaning for code, meaning in re.findall(r"^  (\d+) +(.+)$", listed, re.M)}


def test_help_lists_every_exit_code_of_the_contract(capsys):
    contract = {v for k, v in vars(vocabulary).items() if k.startswith("EXIT_")}
    assert set(help_exit_codes([], capsys)) == contract == {code for code, _, _ in EXIT_CODES}


@pytest.mark.parametrize("command, own", [("run", {EXIT_VIOLATION}), ("validate", {EXIT_VIOLATION}),
                                          ("reconcile", {EXIT_VIOLATION}), ("explain", {EXIT_NOT_FOUND}),
                                          ("inspect", set()), ("sql", set())])
def test_each_commands_help_lists_its_exit_codes(command, own, capsys):
    every = help_exit_codes([], capsys)
    codes = help_exit_codes([command], capsys)
    assert set(codes) == {c for c, _, commands in EXIT_CODES if commands is None} | own
    assert all(every[c] == meaning for c, meaning in codes.items())


def test_the_documentation_lists_the_exit_codes_help_lists(capsys):
    """The table of docs/reference/exit-codes.md, as the site's build hook generates it."""
    from tests.docs_site import reference_hook

    page = (REPO / "docs" / "reference" / "exit-codes.md").read_text()
    assert "<!-- segaudit:exit-codes -->" in page
    generated = reference_hook().generate(page)
    table = generated[generated.index("| exit code | meaning |"):]
    table = table[:table.index("\n\n")]
    rows = {int(code): meaning.replace("`", "") for code, meaning in re.findall(r"^\| `(\d+)` \| (.+) \|$", table, re.M)}
    assert rows == help_exit_codes([], capsys)


def test_the_documentation_documents_every_key_of_the_json_documents():
    from analytics.cli.render import outcome

    doc = outcome("run", 0, "OUT", {}, paths={}, validated=None)
    section = JSON_OUTPUT[JSON_OUTPUT.index("# JSON output"):]
    for key in [*doc, *doc["summary"], "exit_code", "checks", "offending_rows", "result", "results", "data_docs",
                "report", "history", "prometheus_file", "bucket_ms", "totals", "buckets", "reconciliation"]:
        assert f"`{key}`" in section, key


# -- --format json and explain's exit code 4 (an audited scenario: Spark) ------------------------------------------

@pytest.mark.spark
def test_explain_of_an_offset_no_batch_holds_exits_4_in_text_and_json(audited, capsys):
    _, out = audited["retention-head"]
    before = ["explain", out, "--topic", "retention-head", "--partition", "0", "--offset", "0"]
    assert main(before) == EXIT_NOT_FOUND
    text, err = capsys.readouterr()
    assert_own_lines(err)
    assert err == "" and "No batch of the export holds offset 0." in text and "the log start offset is" in text
    assert main([*before, "--format", "json"]) == EXIT_NOT_FOUND
    text, err = capsys.readouterr()
    assert_own_lines(err)
    doc = json.loads(text)
    assert err == "" and doc["exit_code"] == EXIT_NOT_FOUND and doc["batches"] == [] and doc["nearest"]["above"]
    beyond = ["explain", out, "--topic", "retention-head", "--partition", "0", "--offset", str(10**12), "--format", "json"]
    assert main(beyond) == EXIT_NOT_FOUND
    text, err = capsys.readouterr()
    assert_own_lines(err)
    assert err == "" and json.loads(text)["nearest"]["above"] is None
    held = doc["nearest"]["above"]["base_offset"]
    assert main([*before[:-1], str(held), "--format", "json"]) == EXIT_OK
    text, err = capsys.readouterr()
    assert_own_lines(err)
    assert err == "" and json.loads(text)["exit_code"] == EXIT_OK and json.loads(text)["batches"]


def scenario_copy(audited, name: str, tmp_path) -> tuple:
    """A scenario's audited OUT copied for this test to write into, and its generated log."""
    g, out = audited[name]
    shutil.copytree(out, tmp_path / "out", symlinks=True)
    return g, str(tmp_path / "out")


def json_of(code: int, capsys) -> dict:
    """The one JSON document on stdout (nothing else: it parses whole), stderr free of failures."""
    text, err = capsys.readouterr()
    assert_own_lines(err)
    assert "Traceback" not in err and not [line for line in err.splitlines() if line.startswith("segaudit")], err
    doc = json.loads(text)
    assert doc["exit_code"] == code
    return doc


@pytest.mark.spark
@pytest.mark.slow
def test_audit_and_validate_print_one_json_document(audited, tmp_path, capsys):
    g, out = scenario_copy(audited, "missed-dedup", tmp_path)
    code = main(["audit", out, "--config", str(g.truth_dir / "audit.toml"), "--no-history", "--format", "json"])
    doc = json_of(code, capsys)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (code, doc["command"], doc["checks"], doc["expectations"]) == (EXIT_OK, "audit", None, None)
    assert list(doc["summary"]["verdicts"]) == list(VERDICTS)
    assert {v: n for v, n in doc["summary"]["verdicts"].items() if n} == {v: n for v, n in summary["verdicts"].items() if n}
    assert doc["summary"]["batches"] == sum(summary["verdicts"].values()) == g.batches
    assert doc["summary"]["severities"] == {s: summary["severities"].get(s, 0) for s in doc["summary"]["severities"]}
    assert doc["paths"]["summary"] == str(tmp_path / "out" / "summary.json") and doc["paths"]["results"] is None

    code = main(["validate", out, "--format", "json"])
    doc = json_of(code, capsys)
    results = json.loads((tmp_path / "out" / "validation" / "results.json").read_text())
    checks = [c for suite in results["suites"].values() for c in suite["checks"]]
    assert code == (EXIT_OK if results["success"] else EXIT_VIOLATION) == EXIT_VIOLATION  # a missed deduplication
    assert [(c["check"], c["result"] != "pass", c["offending_rows"]) for c in doc["checks"]] == [
        (c["id"], not c["success"], c["unexpected_count"]) for c in checks]
    assert doc["expectations"]["failed"] == sum(not c["success"] for c in checks) > 0
    assert doc["paths"]["results"] == str(tmp_path / "out" / "validation" / "results.json")

    code = main(["validate", out, "--format", "json", "--warn", "no_duplicate_record", "--warn", "no_duplicate_batch",
                 "--allow", "no_unexplained_sequence_regression=100"])
    doc = json_of(code, capsys)
    warned = {c["check"] for c in doc["checks"] if c["result"] == "warn"}
    assert warned and warned <= {"no_duplicate_record", "no_duplicate_batch"}
    assert code == (EXIT_VIOLATION if doc["expectations"]["failed"] else EXIT_OK)


@pytest.mark.spark
@pytest.mark.slow
def test_reconcile_prints_one_json_document(audited, tmp_path, capsys):
    _, out = scenario_copy(audited, "missed-dedup", tmp_path)
    code = main(["reconcile", out, "--format", "json", "--bucket", "1h", "--limit", "2"])
    doc = json_of(code, capsys)
    assert (doc["command"], doc["bucket_ms"]) == ("reconcile", 3_600_000)
    assert code == EXIT_VIOLATION and doc["totals"]["duplicated"] > 0  # the copies a missed deduplication left
    assert 0 < len(doc["buckets"]) <= 2 and doc["buckets"][0]["duplicated"] > 0
    assert doc["paths"]["reconciliation"] == str(tmp_path / "out" / "reconciliation")


@pytest.mark.spark
@pytest.mark.slow
def test_run_prints_one_json_document(audited, tmp_path, capsys):
    g, _ = audited["lost-batch"]
    out = tmp_path / "run"
    code = main(["run", str(g.log_dir), "--out", str(out), "--config", str(g.truth_dir / "audit.toml"),
                 "--no-history", "--format", "json"])
    doc = json_of(code, capsys)
    assert (code, doc["command"], doc["out"]) == (EXIT_VIOLATION, "run", str(out))  # the lost batch: a gap
    gap = next(c for c in doc["checks"] if c["check"] == "no_unexplained_sequence_gap")
    assert (gap["suite"], gap["result"], gap["offending_rows"]) == ("contiguous_sequences", "fail", 1)
    assert doc["summary"]["verdicts"]["SEQUENCE_GAP"] == 1 and doc["summary"]["severities"]["violation"] >= 1
    assert doc["summary"]["partitions"] >= 1 and doc["summary"]["producers"] >= 1
    assert doc["summary"]["batches"] == g.batches
    for key in ("summary", "results", "data_docs", "report"):
        assert doc["paths"][key].startswith(f"{out}/") and Path(doc["paths"][key]).is_file(), key
    assert doc["paths"]["history"] is None


@pytest.mark.parametrize("argv", [
    ["run", SAMPLE, "--out", "hdfs://nn/out/mixed"],
    ["export", SAMPLE, "--out", "gs://audit/out/mixed"],
    ["audit", "gs://audit/out/mixed"],
    ["validate", "abfs://c@a.dfs.core.windows.net/out"],
    ["explain", "gs://audit/out/mixed", "--topic", "t", "--partition", "0", "--offset", "1"],
], ids=lambda a: f"{a[0]}-{str(a[-1] if a[0] in ('run', 'export') else a[1]).partition(':')[0]}")
def test_out_on_a_store_without_commits_is_refused_before_any_work(argv, capsys, no_spark):
    """OUT may be a local folder or an s3:// bucket (tests/test_object_store.py); other URIs have no
    conditional create wired for the commit yet."""
    line = usage(argv, capsys)
    assert re.fullmatch(rf"segaudit {argv[0]}: (--out|OUT): (\w+)://\S+: OUT on \2:// is not supported yet; "
                        r"give a local folder or an s3:// bucket .*", line), line
