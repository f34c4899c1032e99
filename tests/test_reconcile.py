"""``segaudit reconcile``: records per time bucket against what the producers say they sent."""

from __future__ import annotations

import collections
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.reconcile import parse_bucket
from tests.commands import assert_own_lines
from tests.outs import table_dir

pytestmark = pytest.mark.spark
BUCKET_MS = 100


def _sent(g, target) -> collections.Counter:
    """What the producers of a generated log meant to send, per (topic, partition, bucket): the log's
    data records less the copies the generator's ground truth says it wrote."""
    copies = {(r["topic"], r["partition"], r["offset"]) for r in pq.read_table(g.truth_dir / "record_duplicates.parquet").to_pylist()}
    records = pq.read_table(str(table_dir(target, "records"))).to_pylist()
    return collections.Counter((r["topic"], r["partition"], r["timestamp"] // BUCKET_MS * BUCKET_MS) for r in records
                               if not r["is_control"] and (r["topic"], r["partition"], r["offset"]) not in copies)


def _table(out) -> list[dict]:
    rows = pq.read_table(str(table_dir(out, "reconciliation"))).to_pylist()
    for r in rows:
        r["bucket_start"] = int(r["bucket_start"].timestamp() * 1000)
    return rows


def test_copies_land_in_their_buckets_and_nothing_is_missing(audited, tmp_path, capsys):
    from analytics import cli

    g, target = audited["plain-retries"]
    sent = _sent(g, target)
    assert len(sent) > 1  # several buckets
    expected = tmp_path / "expected.csv"
    lines = ["topic,partition,bucket_start,expected", *(f"{t},{p},{b},{n}" for (t, p, b), n in sorted(sent.items()))]
    # and a bucket the producers sent to that the log has nothing of
    empty = max(b for _, _, b in sent) + 10 * BUCKET_MS
    lines.append(f"plain-retries,0,{empty},7")
    lines.append(f"plain-retries,5,{empty},4")  # a partition the export does not hold
    expected.write_text("\n".join(lines) + "\n")
    code = cli.main(["reconcile", target, "--expected", str(expected), "--bucket", f"{BUCKET_MS}ms"])
    assert code == 1  # copies and a missing bucket
    printed, err = capsys.readouterr()
    assert_own_lines(err)
    assert "expected" in printed and "missing 11" in printed

    truth = collections.Counter()
    for r in pq.read_table(g.truth_dir / "record_duplicates.parquet").to_pylist():
        stamp = next(x["timestamp"] for x in pq.read_table(str(table_dir(target, "records"))).to_pylist()
                     if x["topic"] == r["topic"] and x["offset"] == r["offset"])
        truth[(r["topic"], r["partition"], stamp // BUCKET_MS * BUCKET_MS)] += 1
    rows = _table(target)
    by_bucket = {(r["topic"], r["partition"], r["bucket_start"]): r for r in rows}
    for key, n in sent.items():
        row = by_bucket[key]
        assert (row["expected"], row["distinct"], row["missing"], row["surplus"]) == (n, n, 0, 0), key
        assert row["duplicated"] == truth.get(key, 0) and row["records"] == n + truth.get(key, 0)
    assert sum(truth.values()) == 3 and sum(r["duplicated"] for r in rows) == 3
    gone = by_bucket[("plain-retries", 0, empty)]
    assert (gone["records"], gone["expected"], gone["missing"]) == (0, 7, 7)
    unheld = by_bucket[("plain-retries", 5, empty)]
    assert (unheld["log_dir"], unheld["records"], unheld["expected"], unheld["missing"]) == (None, 0, 4, 4)
    assert {r["level"] for r in rows} == {"partition"}


def test_without_expected_counts_and_per_topic(audited, tmp_path, capsys):
    from analytics import cli

    g, target = audited["plain-retries"]
    assert cli.main(["reconcile", target, "--bucket", "1h"]) == 1  # the copies alone fail it
    assert_own_lines(capsys.readouterr().err)
    rows = _table(target)
    assert all(r["expected"] is None and r["missing"] is None for r in rows)
    assert sum(r["records"] for r in rows) == sum(1 for r in pq.read_table(str(table_dir(target, "records"))).to_pylist()
                                                  if not r["is_control"])
    assert all(r["bucket_start"] % 3_600_000 == 0 for r in rows)
    # counts per topic, in Parquet, timestamps as timestamps: the log's counts are summed to the topic
    total = sum(r["distinct"] for r in rows)
    first = min(r["bucket_start"] for r in rows)
    pq.write_table(pa.table({"topic": ["plain-retries"], "bucket_start": pa.array([first * 1000], pa.timestamp("us")),
                             "expected": [total + 2]}), tmp_path / "per-topic.parquet")
    assert cli.main(["reconcile", target, "--expected", str(tmp_path / "per-topic.parquet"), "--bucket", "1h"]) == 1
    assert_own_lines(capsys.readouterr().err)
    (row,) = _table(target)
    assert (row["level"], row["partition"], row["expected"], row["distinct"], row["missing"]) == (
        "topic", None, total + 2, total, 2)


def test_bad_expected_counts_are_one_line(audited, tmp_path, capsys):
    from analytics import cli

    _, target = audited["plain-retries"]
    bad = tmp_path / "bad.csv"
    bad.write_text("topic,bucket_start,expected\nplain-retries,1234,5\n")
    assert cli.main(["reconcile", target, "--expected", str(bad)]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "is not a bucket of 600000 ms" in err
    bad.write_text("topic,when,count\nplain-retries,0,5\n")
    assert cli.main(["reconcile", target, "--expected", str(bad)]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "needs the columns bucket_start and expected" in err
    assert cli.main(["reconcile", target, "--expected", str(tmp_path / "none.csv")]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "no such file" in err
    _, no_records = audited["clean"]
    assert cli.main(["reconcile", no_records]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "export with --records" in err


@pytest.mark.parametrize("text, ms", [("600000", 600000), ("10m", 600000), ("30s", 30000), ("1h", 3600000),
                                      ("1d", 86400000), ("250ms", 250), ("1.5s", 1500)])
def test_bucket_sizes(text, ms):
    assert parse_bucket(text) == ms


@pytest.mark.parametrize("text", ["", "ten", "0", "-5m"])
def test_bad_bucket_sizes(text):
    from analytics.errors import UsageError

    with pytest.raises(UsageError):
        parse_bucket(text)
