"""``explain``, ``producer`` and ``sql`` on generator scenarios, against golden outputs
(``tests/golden/``; ``SEGAUDIT_UPDATE_GOLDEN=1`` rewrites them), plus the facts behind each answer."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analytics import cli
from analytics.contract import EXIT_OK, EXIT_USAGE
from analytics.errors import UsageError
from analytics.forensics import explain, producer_history
from analytics.forensics.reasoning import evidence
from tests.commands import assert_own_lines
from tests.outs import table_dir

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(args)
    captured = capsys.readouterr()
    assert_own_lines(captured.err)
    return code, captured.out, captured.err


def _golden(name: str, text: str, audited_entry) -> None:
    g, out = audited_entry
    text = text.replace(str(g.log_dir), "<LOGS>").replace(out, "<OUT>")
    path = GOLDEN / name
    if os.environ.get("SEGAUDIT_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from its golden output"


def test_explain_a_sequence_gap(audited, capsys):
    code, out, _ = _cli(["explain", audited["lost-batch"][1], "--topic", "lost-batch", "--partition", "0",
                         "--offset", "26"], capsys)
    assert code == EXIT_OK
    _golden("explain_lost_batch.txt", out, audited["lost-batch"])
    # the reasoning names what the broker expected and what it saw, and the idle time against the threshold
    assert "The broker expected sequence 26 but saw 29." in out
    assert "below producer.id.expiration.ms = 86,400,000 ms" in out
    assert "a violation" in out


def test_explain_a_duplicate_finds_the_first_copy(audited):
    e = explain(audited["missed-dedup"][1], "missed-dedup", 0, 41)  # inside the batch 40..42
    (batch,) = e.batches
    assert (batch["base_offset"], batch["verdict"]) == (40, "DUPLICATE")
    first = e.earlier_copy
    assert first["base_offset"] < 40
    assert (first["producer_epoch"], first["base_sequence"], first["last_sequence"]) == (
        batch["producer_epoch"], batch["base_sequence"], batch["last_sequence"])
    assert [b["base_offset"] for b in e.before] == sorted(b["base_offset"] for b in e.before)
    assert all(b["base_offset"] < 40 for b in e.before) and all(b["base_offset"] > 40 for b in e.after)
    assert len(e.before) == len(e.after) == 3
    assert all(b["producer_id"] == batch["producer_id"] for b in e.before + e.after)


def test_explain_an_explained_gap_states_its_evidence(audited):
    e = explain(audited["idle-expiration"][1], "idle-expiration", 0, 71)
    (batch,) = e.batches
    assert batch["explained_by"] == "producer_expiration"
    assert batch["idle_ms"] >= 86_400_000
    assert any(line.startswith("Explained by producer expiration") for line in e.reasoning)
    assert not any("a violation" in line for line in e.reasoning)


def test_explain_an_offset_no_batch_holds(spark, audited, capsys):
    _, out = audited["compacted"]
    holes = spark.read.parquet(str(table_dir(out, "batch_verdicts"))).selectExpr("min(base_offset)").first()[0]
    e = explain(out, "compacted", 0, holes - 1)  # below the first batch the cleaner left
    assert e.batches == [] and e.nearest["below"] is None and e.nearest["above"]["base_offset"] == holes
    assert e.reasoning[0] == f"No batch of the export holds offset {holes - 1}."
    code, _, err = _cli(["explain", out, "--topic", "compacted", "--partition", "7", "--offset", "0"], capsys)
    assert code == EXIT_USAGE and "compacted-7 has no batches" in err


def test_explain_reads_only_its_topic(audited, tmp_path):
    """The other topics' folders of batch_verdicts are never opened: removing them changes nothing."""
    g, out = audited["fenced-zombie"]
    copy = tmp_path / "out"
    shutil.copytree(out, copy, symlinks=True)
    before = explain(str(copy), "fenced-zombie", 0, 25)
    for folder in (copy / "batch_verdicts").iterdir():
        if folder.name.startswith("topic=") and folder.name != "topic=fenced-zombie":
            shutil.rmtree(folder)
    (copy / "batch_verdicts" / "topic=other").mkdir()
    (copy / "batch_verdicts" / "topic=other" / "part-0.parquet").write_bytes(b"not parquet")
    after = explain(str(copy), "fenced-zombie", 0, 25)
    assert after == before


def test_explain_and_producer_start_no_spark(audited):
    """The forensic answers read Parquet with pyarrow: a process that asks them never imports PySpark."""
    out = audited["fenced-zombie"][1]
    script = f"""
import sys
from analytics import cli
from analytics.forensics import explain, producer_history
assert explain({out!r}, "fenced-zombie", 0, 25).batches
assert producer_history({out!r}, 7000).sessions
for args in (["explain", {out!r}, "--topic", "fenced-zombie", "--partition", "0", "--offset", "25"],
             ["producer", {out!r}, "--producer-id", "7000"],
             ["explain", {out!r}, "--topic", "nope", "--partition", "0", "--offset", "25"],
             ["validate", {out!r}, "--warn", "no_unexplained_sequnce_gap"],
             ["run", {out!r}, "--out", {out!r} + ".new", "--allow", "no_zombie_writes=1"],
             ["sql", {out!r}, "SELECT count(*) FROM batch_verdict"],
             ["explain", {out!r} + ".nowhere", "--topic", "nope", "--partition", "0", "--offset", "25"]):
    assert cli.main(args) == (0 if args[0] != "validate" and "nope" not in args and "sql" not in args
                              and "run" not in args else 2), args
assert "pyspark" not in sys.modules, "pyspark was imported"
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert_own_lines(done.stderr)
    assert "fenced-zombie-0 offset 25" in done.stdout and "producer 7000:" in done.stdout
    assert "unknown topic 'nope'" in done.stderr
    # the mistakes of every command are answered before any Spark: the closest names, then all of them
    assert "unknown check 'no_unexplained_sequnce_gap' (did you mean 'no_unexplained_sequence_gap'" \
        in done.stderr
    assert "unknown check 'no_zombie_writes' (did you mean 'no_zombie_write'?)" in done.stderr
    assert "unknown table 'batch_verdict' (did you mean 'batch_verdicts'" in done.stderr and "; tables: " in done.stderr
    assert ".nowhere: no such directory" in done.stderr


def test_unknown_names_are_one_line_listing_the_closest(audited, capsys):
    _, out = audited["fenced-zombie"]
    code, _, err = _cli(["explain", out, "--topic", "fenced-zombi", "--partition", "0", "--offset", "25"], capsys)
    assert code == EXIT_USAGE
    assert err == "segaudit: unknown topic 'fenced-zombi' (did you mean 'fenced-zombie'?); topics: fenced-zombie\n"
    with pytest.raises(UsageError, match="^unknown topic 'zombie' \\(did you mean 'fenced-zombie'\\?\\)"):
        explain(out, "zombie", 0, 25)
    code, _, err = _cli(["explain", out, "--topic", "fenced-zombie", "--partition", "0", "--offset", "25",
                         "--log-dir", "elsewhere"], capsys)
    assert code == EXIT_USAGE and "no log dir of fenced-zombie-0 matches 'elsewhere'; its log dirs: " in err
    code, _, err = _cli(["producer", out, "--producer-id", "7000", "--topic", "fenced-zombi"], capsys)
    assert code == EXIT_USAGE and len(err.strip().splitlines()) == 1
    assert "producer 7000 wrote no batch on topic fenced-zombi" in err and "did you mean 'fenced-zombie'?" in err


def test_producer_history_of_a_fenced_zombie(audited, capsys):
    code, out, _ = _cli(["producer", audited["fenced-zombie"][1], "--producer-id", "7000"], capsys)
    assert code == EXIT_OK
    _golden("producer_fenced_zombie.txt", out, audited["fenced-zombie"])


def test_producer_history_facts(audited):
    h = producer_history(audited["fenced-zombie"][1], 7000)
    # epochs 3 -> 4 (a marker), 4 -> 5 (a bump at 0), then 5 -> 3: the zombie writes after two days idle
    assert [(c["from_epoch"], c["to_epoch"], c["verdict"]) for c in h.epoch_changes] == [
        (3, 4, "CONTROL_MARKER"), (4, 5, "EPOCH_BUMP"), (5, 3, "FENCED_ZOMBIE_WRITE")]
    assert [(f["base_offset"], f["verdict"]) for f in h.findings] == [(25, "FENCED_ZOMBIE_WRITE")]
    assert h.transactions[0]["status"] in ("HANGING", "OPEN")  # unfinished first
    longest = max(h.idle, key=lambda i: i["idle_ms"])
    assert longest["base_offset"] == 25 and longest["idle_ms"] >= h.expiration_ms


def test_producer_with_a_hanging_transaction_and_an_unknown_one(spark, audited, capsys):
    _, out = audited["transactions"]
    hanging = spark.read.parquet(str(table_dir(out, "transactions"))).where("status = 'HANGING'").collect()
    assert hanging
    pid = hanging[0]["producer_id"]
    h = producer_history(out, pid)
    assert h.transactions[0]["status"] == "HANGING"
    code, _, err = _cli(["producer", out, "--producer-id", "123456789"], capsys)
    assert code == EXIT_USAGE and "producer 123456789 wrote no batch" in err
    code, _, err = _cli(["producer", out, "--producer-id", str(pid), "--topic", "elsewhere"], capsys)
    assert code == EXIT_USAGE and "on topic elsewhere" in err


def test_sql_formats(audited, capsys):
    _, out = audited["missed-dedup"]
    query = "SELECT verdict, count(*) AS n FROM batch_verdicts GROUP BY verdict ORDER BY verdict"
    code, table, _ = _cli(["sql", out, query], capsys)
    assert code == EXIT_OK
    _golden("sql_missed_dedup.txt", table, audited["missed-dedup"])
    _, text, _ = _cli(["sql", out, query, "--format", "csv"], capsys)
    assert list(csv.reader(io.StringIO(text))) == [["verdict", "n"], ["DUPLICATE", "1"], ["OK", "30"]]
    _, text, _ = _cli(["sql", out, "SELECT offset, key FROM records ORDER BY offset LIMIT 2", "--format", "json"], capsys)
    rows = [json.loads(line) for line in text.splitlines()]
    assert [r["offset"] for r in rows] == [0, 1] and all(isinstance(r["key"], str) for r in rows)  # bytes as hex
    bytes.fromhex(rows[0]["key"])


def test_sql_sees_every_table_and_reports_bad_queries_in_one_line(audited, capsys):
    _, out = audited["transactions"]
    union = " UNION ALL ".join(f"SELECT '{t}' AS t, count(*) AS n FROM {t}" for t in (
        "batches", "records", "segments", "parse_errors", "producer_snapshots", "log_start_offsets",
        "batch_verdicts", "anomalies", "producer_sessions", "transactions", "record_duplicates", "snapshot_checks"))
    code, text, _ = _cli(["sql", out, union, "--format", "csv"], capsys)
    assert code == EXIT_OK and len(text.splitlines()) == 13
    code, _, err = _cli(["sql", out, "SELECT * FROM nope"], capsys)
    assert code == EXIT_USAGE and len(err.strip().splitlines()) == 1
    assert err.startswith("segaudit: unknown table 'nope'; tables: batches, ")
    # a name the check before Spark does not see (after a comma) is named the same way by Spark's error
    code, _, err = _cli(["sql", out, "SELECT count(*) FROM batches, batch_verdict"], capsys)
    assert code == EXIT_USAGE and len(err.strip().splitlines()) == 1
    assert err.startswith("segaudit: unknown table 'batch_verdict' (did you mean 'batch_verdicts'"), err
    code, text, err = _cli(["sql", out, "SELECT * FROM batch_verdicts", "--limit", "3"], capsys)
    assert code == EXIT_OK and len(text.splitlines()) == 5 and "first 3 rows" in err


def test_explain_one_log_dir_of_a_partition_on_two_brokers(spark, tmp_path, capsys):
    """The same partition exported from two brokers' log dirs is two logs: explain answers from one,
    names the other, and never mixes their batches (an offset held by both is not a repeated offset)."""
    from analytics.audit.config import load_config
    from analytics.audit.job import audit
    from analytics.export import export
    from analytics.forensics import NotFound
    from analytics.generate import generate

    g = generate(tmp_path / "gen", "lost-batch", seed=1)
    brokers = [tmp_path / "brokers" / name for name in ("b1", "b2")]
    for b in brokers:
        shutil.copytree(g.log_dir, b)
    # broker 2's log start moved past the first records (DeleteRecords): the start explain quotes is per log dir
    (brokers[1] / "log-start-offset-checkpoint").write_text("0\n1\nlost-batch 0 3\n")
    out = str(tmp_path / "out")
    export(None, [str(b) for b in brokers], out)
    audit(spark, out, load_config(g.truth_dir / "audit.toml"))
    b1, b2 = (str(b) for b in brokers)

    e = explain(out, "lost-batch", 0, 26)
    assert (e.log_dir, e.log_dirs) == (b1, [b1, b2])
    (batch,) = e.batches  # one log's batch, not one per broker
    assert batch["file"].startswith(b1 + "/") and batch["verdict"] == "SEQUENCE_GAP"
    neighbours = [b["base_offset"] for b in e.before + e.after]
    assert neighbours == sorted(set(neighbours)) and len(neighbours) == 6
    assert all(b["file"].startswith(b1 + "/") for b in e.before + e.after)
    assert not any("repeats offsets" in line for line in e.reasoning)
    assert any(line.startswith(f"{b2} holds the same batch {batch['base_offset']}..{batch['last_offset']} (CRC 0x")
               for line in e.reasoning)
    assert [(r["log_dir"], r["same"], r["divergence"]) for r in e.replicas] == [(b2, True, None)]

    other = explain(out, "lost-batch", 0, 26, log_dir="b2")
    assert other.log_dir == b2 and other.batches[0]["file"].startswith(b2 + "/")
    assert [b["base_offset"] for b in other.before] == [b["base_offset"] for b in e.before]
    with pytest.raises(NotFound, match="no log dir of lost-batch-0 matches 'b3'"):
        explain(out, "lost-batch", 0, 26, log_dir="b3")

    # below the first batch: each log dir quotes its own checkpoint's log start
    assert "the log start offset is 0." in explain(out, "lost-batch", 0, -1, log_dir=b1).reasoning[1]
    assert "the log start offset is 3." in explain(out, "lost-batch", 0, -1, log_dir=b2).reasoning[1]

    code, text, _ = _cli(["explain", out, "--topic", "lost-batch", "--partition", "0", "--offset", "26",
                          "--log-dir", "b2"], capsys)
    assert code == EXIT_OK
    from analytics.generate.files import topic_id

    assert text.splitlines()[0] == f"lost-batch-0 offset 26 in {b2} (topic id {topic_id('lost-batch')})"
    assert f"in {b2}/lost-batch-0/" in text and f"{b1}/" not in text.split("\n\n")[0]

    # producer: a session per log dir, shown apart; the header counts one log dir's batches
    pid = batch["producer_id"]
    single = {s["producer_epoch"]: s["batches"] for s in producer_history(out, pid).sessions
              if s["log_dir"] == b1}
    code, text, _ = _cli(["producer", out, "--producer-id", str(pid)], capsys)
    assert code == EXIT_OK
    assert f"batches {sum(single.values()):,}," in text.splitlines()[0] and "log dirs 2" in text.splitlines()[0]
    assert text.count(b1) >= len(single) and text.count(b2) >= len(single)
    # its gap is a finding in each log dir, each row naming its own
    findings = text.split("findings (")[1].split("\n\n")[0]
    assert sum(b1 in line for line in findings.splitlines()) == sum(b2 in line for line in findings.splitlines()) >= 1


def test_a_repeat_after_an_expiration_is_explained_in_words():
    """The sentence for a batch explained by an expiration before it, not by its own idle time."""
    row = {"explained_by": "producer_expiration", "verdict": "DUPLICATE", "idle_ms": 2, "base_offset": 10,
           "expired_offset": 8, "conflict_offset": 4}
    [says] = evidence(row, {"producer_id_expiration_ms": 3000}, {"base_offset": 8, "idle_ms": 4000})
    assert says == ("Explained by producer expiration: the producer was idle 4,000 ms (4 s) before offset 8 (at least "
                    "producer.id.expiration.ms 3,000 ms (3 s), no open transaction), after its original batch at "
                    "offset 4: the broker had forgotten it and took this batch in sequence with what the producer "
                    "wrote since.")


def test_inspect_an_export_answers_what_inspecting_its_log_dir_does(audited, capsys):
    """``inspect OUT`` reads the export's tables instead of every segment: the same summary, the
    same parse errors, the same output."""
    from analytics.inventory import inventory_of_export, take_inventory

    for name in ("fenced-zombie", "corrupt-crc", "torn-tails"):
        g, out = audited[name]
        assert inventory_of_export(out) == take_inventory([str(g.log_dir)]), name
    g, out = audited["corrupt-crc"]
    assert _cli(["inspect", out], capsys)[:2] == _cli(["inspect", str(g.log_dir)], capsys)[:2]
