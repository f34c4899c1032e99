"""OUT in a bucket of a real S3 server (versitygw on loopback): the sample's `segaudit run` with its
input and OUT in the bucket equals a local run, an incremental second night equals a full run, the
forensic commands answer from the bucket, credentials are nowhere, and the commit holds when runs
are killed or race. Commands run as a user runs them: processes with the standard AWS environment."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.dataset as ds
import pytest

from analytics.contract import AUDIT, EXPORT, MANIFESTS
from analytics.publish import AsOf, Conflict, publication, published, unit
from analytics.publish import commits
from analytics.contract.vocabulary import TABLES
from tests import outside, stale_writer
from tests.commands import assert_own_lines, no_network
from tests.outs import published_table
from tests.s3_server import SECRET_KEY

pytestmark = [pytest.mark.s3, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "mixed"
CONFIG = str(REPO / "data" / "mixed.truth" / "audit.toml")
HELD_BACK = "clean-0"  # the partition whose last segment arrives on the second night


def segaudit(*argv: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "analytics", *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=600, env=env)
    assert_own_lines(done.stderr)
    assert SECRET_KEY not in done.stdout + done.stderr
    if check:
        assert done.returncode in (0, 1), done.stderr
    return done


def rows(out: str, name: str) -> list:
    """Every row of a published table (its Hive folders' columns too), sorted: from a bucket or a disk."""
    if name.endswith(".json"):
        return [json.loads(published(out).read_text(name))]
    table = published_table(out, name)
    return sorted((tuple(sorted((k, repr(v)) for k, v in r.items() if k not in VOLATILE)) for r in table.to_pylist()))


VOLATILE = ("read_by", "run_id")  # the run that read a file: another run id in every run


def outputs(out: str) -> set[str]:
    return {n for e in published(out).snapshot.stages.values() for n in e["outputs"]}


@pytest.fixture(scope="module")
def bucket(s3_server):
    """The sample in a bucket, one segment held back for the second night; the bucket's URI."""
    uri = s3_server.make_bucket("audit")
    s3_server.upload(SAMPLE, f"{uri}/logs/mixed")
    held = sorted((SAMPLE / HELD_BACK).glob("*.log"))[-1]
    s3_server.client().delete_object(Bucket="audit", Key=f"logs/mixed/{HELD_BACK}/{held.name}")
    return uri, held


@pytest.fixture(scope="module")
def nights(bucket, s3_server, tmp_path_factory):
    """Night one in the bucket; then night two (the held-back segment arrived) incremental in the
    bucket, and a full run of night two on a local disk, from the same input in the bucket. After an
    install (the S3 connector fetched, as ``scripts/setup.sh`` does), the runs go with no network:
    HTTPS and HTTP proxies pointed at a closed port, the S3 server on loopback reached directly."""
    uri, held = bucket
    local = str(tmp_path_factory.mktemp("local") / "out")
    logs = f"{uri}/logs/mixed"
    assert subprocess.run([sys.executable, "-m", "analytics.spark.objectstore"], cwd=REPO, capture_output=True,
                          check=True).returncode == 0  # the install's fetch
    offline = os.environ | no_network()
    run = partial(segaudit, env=offline)
    first = run("run", logs, "--out", f"{uri}/out/mixed", "--config", CONFIG)
    before = published(f"{uri}/out/mixed").manifest(EXPORT)["run_id"]
    s3_server.client().upload_file(str(held), "audit", f"logs/mixed/{HELD_BACK}/{held.name}")
    with ThreadPoolExecutor(2) as both:  # two processes at once: each mostly waits on its own JVM
        second = both.submit(run, "run", logs, "--out", f"{uri}/out/mixed", "--config", CONFIG, "--incremental")
        alone = both.submit(run, "run", logs, "--out", local, "--config", CONFIG, "--no-history")
        second, _ = second.result(), alone.result()
    return {"first": first, "second": second, "local": local, "bucket": f"{uri}/out/mixed", "first_export": before}


def test_a_run_in_the_bucket_equals_a_local_run_row_for_row(nights):
    """Night two in the bucket (incremental, continuing night one there) against a full run of the
    same input on a local disk: every table row for row, and the Data Docs and report complete."""
    uri, local = nights["bucket"], nights["local"]
    assert outputs(uri) == outputs(local)
    assert not Path(f"{local}.history").exists()  # run with --no-history: no metrics history kept
    for name in sorted(outputs(uri) - {"validation", "report", "summary.json"}):
        assert rows(uri, name) == rows(local, name), name
    bucket_summary, local_summary = rows(uri, "summary.json")[0], rows(local, "summary.json")[0]
    for key in ("verdicts", "severities", "batches", "record_duplicates"):
        assert bucket_summary.get(key) == local_summary.get(key), key
    # the Data Docs and the report are in the bucket too, complete
    view = published(uri)
    assert "</html>" in view.read_text("report/index.html")
    assert "suite" in view.read_text("validation/data_docs/index.html")
    assert json.loads(view.read_text("validation/results.json"))["suites"]


def test_an_incremental_second_night_in_the_bucket_equals_a_full_run(nights):
    bucket, full = nights["bucket"], nights["local"]
    summary = rows(bucket, "summary.json")[0]
    assert summary["incremental"] and summary["incremental"]["continued_audit"]
    assert rows(full, "summary.json")[0]["incremental"] is None
    for name in ("batch_verdicts", "anomalies", "producer_sessions", "transactions", "producer_state",
                 "partition_state", "snapshot_checks", "batches", "segments"):
        assert rows(bucket, name) == rows(full, name), name


def test_outside_readers_open_every_table_at_its_stable_path(nights):
    """DuckDB's delta_scan and deltalake open every table at ``OUT/<table>`` in the bucket and on the
    disk, knowing nothing of segaudit, and find the rows segaudit's own commit resolves; the verdicts
    are the batches summary.json counts."""
    con = outside.duckdb_connection()
    for out in (nights["bucket"], nights["local"]):
        tables = sorted(outputs(out) & set(TABLES))
        assert len(tables) >= 20
        for name in tables:
            path = f"{out}/{name}"
            assert outside.duckdb_rows(con, path) == outside.deltalake_rows(path) == len(rows(out, name)), (out, name)
        assert outside.duckdb_rows(con, f"{out}/batch_verdicts") == sum(rows(out, "summary.json")[0]["verdicts"].values())


def test_spark_reads_every_table_as_delta_at_its_stable_path(nights):
    """A user's own Spark, with Delta's connector from Maven Central (``spark.jars.packages``), loads every
    table with ``spark.read.format("delta")`` in the bucket and on the disk, and counts what segaudit's
    commit resolves. Where Delta Lake builds no connector for the suite's Spark, the newest Spark it
    builds one for reads (``outside.DELTA_READER_RELEASE``)."""
    import pyspark

    expected = {f"{out}/{name}": len(rows(out, name))
                for out in (nights["bucket"], nights["local"]) for name in sorted(outputs(out) & set(TABLES))}
    version, counts = outside.spark_rows(sorted(expected))
    assert counts == expected
    assert version == (pyspark.__version__ if outside.delta_spark() else outside.DELTA_READER_RELEASE)


def test_the_dashboards_recipe_runs_against_the_bucket(nights):
    """The queries of docs/dashboards.md, as written but for OUT's name, with DuckDB against the bucket:
    two nights charted from the history, and the latest findings."""
    text = (REPO / "docs" / "dashboards.md").read_text()
    queries = re.findall(r"```sql dashboard\n(.*?)```", text, re.S)
    assert len(queries) == 5
    con = outside.duckdb_connection()
    nightly, grown, findings, hanging, coverage = (
        con.execute(q.replace("s3://audits/out/mixed", nights["bucket"])).fetchall() for q in queries)
    assert len(nightly) == 2 and all(row[2] > 0 for row in nightly)  # two nights, violations in both
    assert grown == []  # the second night found no violation the first had not
    assert {(severity, verdict) for severity, verdict, *_ in findings} >= {("violation", "SEQUENCE_GAP"),
                                                                          ("explained", "DUPLICATE")}
    assert len(hanging) == 2 and coverage[0][0] == 37


def test_the_metrics_history_is_kept_beside_out_in_the_bucket(nights):
    """Two nights into s3://audit/out/mixed: their metrics in s3://audit/out/mixed.history."""
    view = published("s3://audit/out/mixed")
    history = ds.dataset("audit/out/mixed.history", filesystem=view.fs, format="parquet", partitioning="hive")
    assert len(set(history.to_table().column("run_id").to_pylist())) == 2


def test_forensic_commands_answer_from_the_bucket(nights):
    uri, local = nights["bucket"], nights["local"]
    for argv in (["explain", "--topic", "clean", "--partition", "0", "--offset", "3"],
                 ["sql", "SELECT verdict, count(*) AS n FROM batch_verdicts GROUP BY verdict ORDER BY verdict"]):
        from_bucket = segaudit(argv[0], uri, *argv[1:])
        from_disk = segaudit(argv[0], local, *argv[1:])
        assert from_bucket.returncode == from_disk.returncode == 0, from_bucket.stderr
        assert from_bucket.stdout == from_disk.stdout.replace(local, uri)
    producer = json.loads(segaudit("explain", uri, "--topic", "clean", "--partition", "0", "--offset", "3",
                                   "--format", "json").stdout)
    pid = producer.get("producer_id") or producer.get("batch", {}).get("producer_id")
    if pid is not None:
        assert segaudit("producer", uri, "--producer-id", str(pid)).returncode == 0


def test_no_credential_reaches_the_bucket_or_a_log(nights, s3_server):
    for path in s3_server.data_dir.rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert SECRET_KEY.encode() not in path.read_bytes(), path
    logs = Path(os.environ.get("SEGAUDIT_CACHE") or Path.home() / ".cache" / "segaudit") / "logs"
    for log in logs.glob("*.log"):
        assert SECRET_KEY not in log.read_text(errors="replace"), log


def write(run, tables: dict[str, str]) -> None:
    for table, text in tables.items():
        run.store.write_text(f"{run.folder}/{table}/part-0", text)


def seen(out: str) -> dict[str, str]:
    view = published(out)
    return {n: view.read_text(f"{n}/part-0") for n in sorted(outputs(out))}


def stage(out: str, name: str, tables: dict[str, str]) -> dict:
    with publication(out, name) as run:
        write(run, tables)
        return run.publish({})


@pytest.fixture
def two_sets(bucket, request):
    out = f"s3://audit/publish/{request.node.name.replace('[', '-').rstrip(']')}-{time.monotonic_ns()}"
    stage(out, EXPORT, {"batches": "old"})
    stage(out, AUDIT, {"batch_verdicts": "old"})
    return out


CHILD = textwrap.dedent("""
    import os, signal, sys
    from analytics.contract import AUDIT, EXPORT
    from analytics.publish import commits, publication, unit
    from analytics.publish import store as stores

    out, when = sys.argv[1], sys.argv[2]
    root = out.removeprefix("s3://")

    def dying(real, is_top):
        def call(*args, **kwargs):
            if is_top(*args):
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return call

    if when == "before":
        commits.commit = dying(commits.commit, lambda store, *_: store.root == root)
    elif when == "during":    # the conditional PUT of the commit object sent, not answered
        stores._s3_create = dying(stores._s3_create, lambda scheme, path, text: path.startswith(root + "/_commits/"))
    elif when == "after":
        commits.collect = dying(commits.collect, lambda store, *_: store.root == root and commits.versions(store)[-1] > 2)

    def stage(o, name, tables):
        with publication(o, name) as run:
            for table, text in tables.items():
                run.store.write_text(f"{run.folder}/{table}/part-0", text)
            run.publish({})

    with unit(out) as u:
        stage(u.out, EXPORT, {"batches": "new", "segments": "new"})
        stage(u.out, AUDIT, {"batch_verdicts": "new"})
        u.publish([EXPORT, AUDIT])
""")


@pytest.mark.parametrize("when", ["before", "during", "after"])
def test_a_run_killed_around_its_commit_in_the_bucket_shows_the_old_set_or_the_new_one(two_sets, when):
    out = two_sets
    done = subprocess.run([sys.executable, "-c", CHILD, out, when], cwd=REPO, capture_output=True, text=True,
                          env=os.environ.copy())
    assert done.returncode == -signal.SIGKILL, done.stderr
    new = {"batches": "new", "segments": "new", "batch_verdicts": "new"}
    assert seen(out) == ({"batches": "old", "batch_verdicts": "old"} if when != "after" else new)
    with unit(out) as u:  # the next run
        stage(u.out, EXPORT, {"batches": "next"})
        stage(u.out, AUDIT, {"batch_verdicts": "next"})
        u.publish([EXPORT, AUDIT])
    assert seen(out) == {"batches": "next", "batch_verdicts": "next"}
    store = commits.Store(out)
    latest = published(out).snapshot
    held = latest.runs() | set(latest.retired)  # named, or retired within retention
    assert {f"_runs/{n}" for n in store.names("_runs")} == held  # the killed run's objects are gone


def test_of_two_runs_into_one_bucket_one_commits(two_sets):
    out = two_sets
    with pytest.raises(Conflict), unit(out) as late:
        stage(late.out, EXPORT, {"batches": "late"})
        stage(late.out, AUDIT, {"batch_verdicts": "late"})
        with unit(out) as first:
            stage(first.out, EXPORT, {"batches": "first"})
            stage(first.out, AUDIT, {"batch_verdicts": "first"})
            first.publish([EXPORT, AUDIT])
        late.publish([EXPORT, AUDIT])
    assert seen(out) == {"batches": "first", "batch_verdicts": "first"}
    assert not commits.Store(out).names(f"_runs/{late.run_id}")


@pytest.mark.parametrize("between", [1, 3, 10])
def test_a_stale_writer_in_the_bucket_publishes_on_top_or_nothing(two_sets, between, monkeypatch):
    """A validation that read the audit, then ``between`` audits committed by other processes (the
    audit it read is gone: exit 2) or reports (nothing it read changed: it commits on top of the
    newest). Retention by count alone, so the commits' runs are collected meanwhile; no commit object
    is ever created twice, and OUT shows a whole set."""
    monkeypatch.setenv("SEGAUDIT_RETENTION_HOURS", "0")
    out = two_sets
    store = commits.Store(out)
    for others, table, code in (("report", "report", 0), (AUDIT, "batch_verdicts", 2)):
        stale = subprocess.Popen([*stale_writer.COMMAND, out, "validate", "validation", others], cwd=REPO,
                                 text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert stale.stdout.readline().strip() == "ready"
        for n in range(between):
            stage(out, others, {table: str(n)})
        before = commits.versions(store)[-1]
        _out, err = stale.communicate("go\n", timeout=120)
        assert stale.returncode == code, err
        found = commits.versions(store)
        assert found == list(range(1, len(found) + 1)) and found[-1] == before + (code == 0)
        assert [json.loads(store.read_text(commits.commit_name(v)))["version"] for v in found] == found
        assert seen(out)[table] == str(between - 1)
        assert (seen(out).get("validation") == others) == (code == 0)
        assert {f"_runs/{n}" for n in store.names("_runs")} >= published(out).snapshot.runs()


def test_explain_as_of_the_previous_night_answers_as_that_night(nights, bucket):
    """The held-back segment arrived on night two: its first offset was beyond the log on night one.
    ``explain --as-of`` night one's version (and its time) answers as night one did, from the bucket."""
    uri = nights["bucket"]
    held = bucket[1]
    offset = str(int(held.stem))
    argv = ["explain", uri, "--topic", "clean", "--partition", "0", "--offset", offset]
    now = segaudit(*argv)
    assert now.returncode == 0, now.stderr
    store = commits.Store(uri)
    first = next(v for v in commits.versions(store)
                 if (commits.read(store, v).manifest(EXPORT) or {}).get("run_id") == nights["first_export"])
    then_ms = commits.read(store, first).committed_at_ms
    for as_of in (str(first), time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(then_ms / 1000 + 0.999))):
        then = segaudit(*argv, "--as-of", as_of, check=False)
        assert then.returncode == 4, then.stderr  # no batch held the offset then
        assert f"offset {offset}" in then.stdout and then.stdout != now.stdout
    gone = segaudit(*argv, "--as-of", "99999", check=False)
    assert gone.returncode == 2 and "no version 99999" in gone.stderr


def test_report_as_of_the_previous_night_is_that_nights_page(nights, tmp_path):
    """``report --as-of`` night one's version writes night one's page to a local file (its audit, its
    history up to then: one run), and leaves the bucket's own report, night two's, as it was."""
    uri = nights["bucket"]
    store = commits.Store(uri)
    first = next(v for v in commits.versions(store)
                 if (commits.read(store, v).manifest(EXPORT) or {}).get("run_id") == nights["first_export"])
    then_id = json.loads(published(uri, AsOf(version=first)).read_text("summary.json"))["run_id"]
    now_id = rows(uri, "summary.json")[0]["run_id"]
    published_before = published(uri).read_text("report/index.html")
    done = segaudit("report", uri, "--as-of", str(first), "--output", str(tmp_path / "then.html"))
    assert done.returncode == 0 and done.stdout.strip() == str(tmp_path / "then.html"), done.stderr
    page = (tmp_path / "then.html").read_text()
    assert then_id in page and now_id not in page and f"as of version {first}" in page
    assert "only one audit run so far" in page  # night two's history row is after that version
    assert published(uri).read_text("report/index.html") == published_before


def test_two_racing_commands_one_exits_2_with_one_line(nights):
    """Two `segaudit audit` of the same export, started together: both run, one commits, the other
    says so in one line and exits 2; the audit in the bucket is the winner's, whole."""
    out = nights["bucket"]
    audit_before = published(out).manifest(AUDIT)["run_id"]
    racers = [subprocess.Popen([sys.executable, "-m", "analytics", "audit", out, "--config", CONFIG, "--no-history"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO) for _ in range(2)]
    finished = [(p.wait(timeout=600), p.communicate()) for p in racers]
    codes = sorted(code for code, _ in finished)
    assert codes[0] in (0, 1) and codes[1] == 2, finished  # started together, both read the same commit
    for code, (_out, err) in finished:
        assert_own_lines(err)
        if code == 2:
            lines = [line for line in err.splitlines() if line.startswith("segaudit:")]
            assert len(lines) == 1 and "published by another run" in lines[0], err
    assert published(out).manifest(AUDIT)["built_from"][EXPORT] == published(out).manifest(EXPORT)["run_id"]
    assert published(out).manifest(AUDIT)["run_id"] != audit_before
    assert MANIFESTS[AUDIT]


def test_sigint_during_a_run_in_the_bucket_leaves_it_as_it_was(nights, s3_server):
    out = nights["bucket"]
    store = commits.Store(out)
    before = (commits.versions(store), store.names("_runs"))
    process = subprocess.Popen([sys.executable, "-m", "analytics", "run", "s3://audit/logs/mixed", "--out", out,
                                "--config", CONFIG, "--no-history"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=REPO)
    deadline = time.monotonic() + 180
    while not set(store.names("_runs")) - set(before[1]):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.1)
    time.sleep(2.0)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert_own_lines(err)
    assert (commits.versions(store), store.names("_runs")) == before


def test_open_copies_the_report_out_of_the_bucket_with_working_links(nights, tmp_path):
    """``segaudit open`` of the bucket: a local page whose link to the Data Docs, and the Data Docs' link
    back, land on files copied beside it; of a local OUT, OUT/report/index.html itself. No JVM, no
    browser without a terminal: the file URL on stdout."""
    done = segaudit("open", nights["bucket"], "--into", str(tmp_path / "copy"))
    assert done.returncode == 0, done.stderr
    page = Path(urlparse(done.stdout.strip()).path)
    assert page == tmp_path / "copy" / "report" / "index.html"
    assert page.read_text() == published(nights["bucket"]).read_text("report/index.html")  # the latest report
    docs = resolved_links(page, "data_docs/index.html")
    assert docs and all(p.is_file() for p in docs), docs
    back = resolved_links(docs[0], "report/index.html")
    assert back == [page]
    local = segaudit("open", nights["local"])
    assert local.returncode == 0 and local.stdout.strip() == Path(nights["local"], "report", "index.html").as_uri()
    assert resolved_links(Path(nights["local"], "report", "index.html"), "data_docs/index.html")[0].is_file()


def test_the_latest_report_and_data_docs_are_where_they_always_are_in_the_bucket(nights, s3_server, tmp_path):
    """After night two, ``OUT/report/`` and ``OUT/validation/`` in the bucket hold the latest commit's
    report and Data Docs, file for file (night one's copies replaced, none left over), and their
    links to each other resolve to objects there."""
    from analytics.publish.store import Store

    view, store = published(nights["bucket"]), Store(nights["bucket"])
    for name in ("report", "validation"):
        source = view.resolve(name)
        assert store.read_text(f"{name}/_copied_from") == source
        assert store.files(name) - {"_copied_from"} == store.files(source)
    assert store.read_text("report/index.html") == view.read_text("report/index.html")
    bucket, _, prefix = nights["bucket"].removeprefix("s3://").partition("/")
    client, folder = s3_server.client(), tmp_path / "bucket"
    for name in ("report", "validation"):
        for listed in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/{name}/"):
            for key in (o["Key"] for o in listed.get("Contents", [])):
                (folder / key).parent.mkdir(parents=True, exist_ok=True)
                client.download_file(bucket, key, str(folder / key))
    page = folder / prefix / "report" / "index.html"
    docs = resolved_links(page, "data_docs/index.html")
    assert docs and all(p.is_file() for p in docs), docs
    assert resolved_links(docs[0], "report/index.html") == [page]


def resolved_links(page: Path, ending: str) -> list[Path]:
    """The relative links of a page that end with ``ending``, as the files they point at: resolved as a
    browser resolves them, by their path (a link ``OUT/report`` is not followed before ``..``)."""
    hrefs = re.findall(r'href="([^"#?]+)"', page.read_text())
    return sorted({Path(os.path.normpath(page.parent / h)) for h in hrefs if h.endswith(ending) and "://" not in h})
