"""Publishing under OUT: each run writes a folder of its own and becomes visible through one commit
object created last; a reader resolves the latest commit, so it sees the previous complete outputs
or the new ones, never a mix, whenever a run is killed. Plain files, no Spark (the same mechanism in
a bucket: tests/test_object_store.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from analytics.contract import AUDIT, EXPORT, MANIFESTS, REPORT, VALIDATE
from analytics.contract.vocabulary import TABLES
from analytics.errors import StageMissing
from analytics.processes import identity
from analytics.publish import AsOf, Conflict, publication, published, read_manifest, unit
from analytics.publish import commits
from analytics.publish.commits import COMMITS, CURRENT, RUNS, VIEWS
from tests import stale_writer

ROOT = Path(__file__).resolve().parents[1]


def stage(out: str, name: str, tables: dict[str, str]) -> dict:
    """Publish ``tables`` (name -> the text of its one file) as stage ``name``; its manifest."""
    with publication(out, name) as run:
        write(run, tables)
        return run.publish({"tables": sorted(tables)})


def write(run, tables: dict[str, str]) -> None:
    """Each output as a folder holding ``part-0`` (its text); a table also as a Parquet file of one
    row, which its Delta table at ``OUT/<table>`` then shows."""
    for table, text in tables.items():
        Path(run.path(table)).mkdir(parents=True)
        Path(run.path(table, "part-0")).write_text(text)
        if table in TABLES:
            pq.write_table(pa.table({"text": [text]}), run.path(table, "part-0.parquet"))


def seen(out: str) -> dict[str, str]:
    """What a reader sees: every published output's one file, resolved through the latest commit."""
    view = published(out)
    names = sorted({n for e in view.snapshot.stages.values() for n in e["outputs"]})
    return {n: Path(view.path(n, "part-0")).read_text() for n in names}


def through_links(out: Path) -> dict[str, str]:
    """What another tool sees at ``OUT/<name>`` on a local disk: the row of a Delta table (an emptied
    one is no output), the file behind a link of any other output."""
    shown = {}
    for p in sorted(out.iterdir()):
        if p.name.startswith("_"):
            continue
        if (p / "_delta_log").is_dir():
            rows = DeltaTable(str(p)).to_pyarrow_table()
            shown |= {p.name: text for text in (rows.column("text").to_pylist() if "text" in rows.schema.names else [])}
        elif p.is_symlink() and p.is_dir():
            shown[p.name] = (p / "part-0").read_text()
    return shown


def test_a_stage_replaces_its_previous_outputs_whole(tmp_path):
    out = str(tmp_path / "out")
    stage(out, EXPORT, {"batches": "old", "records": "old"})
    manifest = stage(out, EXPORT, {"batches": "new"})
    assert read_manifest(out, EXPORT) == manifest
    # records, which the second run did not write, went with the first run
    assert seen(out) == {"batches": "new"} == through_links(tmp_path / "out")
    assert json.loads((tmp_path / "out" / MANIFESTS[EXPORT]).read_text()) == manifest
    assert commits.versions(commits.Store(out)) == [1, 2]


def test_a_stage_cannot_publish_another_stages_table(tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(ValueError, match="does not own batch_verdicts"):
        stage(out, EXPORT, {"batch_verdicts": "x"})
    assert not (tmp_path / "out").exists()  # nothing committed, and the OUT this run made is gone


@pytest.fixture
def two_sets(tmp_path):
    """OUT with a complete export and audit ("old"), and a function that commits a new set ("new")."""
    out = str(tmp_path / "out")
    stage(out, EXPORT, {"batches": "old", "records": "old"})
    stage(out, AUDIT, {"batch_verdicts": "old", "summary.json": "old"})
    before = seen(out)

    def commit_new():
        with unit(out) as u:
            stage(u.out, EXPORT, {"batches": "new", "segments": "new"})
            stage(u.out, AUDIT, {"batch_verdicts": "new"})
            return u.publish([EXPORT, AUDIT])

    return out, before, commit_new


def test_a_unit_commits_every_stage_at_once(two_sets, tmp_path):
    out, _before, commit_new = two_sets
    manifests = commit_new()
    assert seen(out) == {"batches": "new", "segments": "new", "batch_verdicts": "new"}
    assert through_links(tmp_path / "out") == seen(out)
    assert read_manifest(out, AUDIT) == manifests[AUDIT]
    assert manifests[AUDIT]["built_from"] == {EXPORT: manifests[EXPORT]["run_id"]}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()
                  if not p.is_symlink() and not (p / "_delta_log").is_dir()) == [COMMITS, RUNS, VIEWS]


def test_outs_links_switch_to_the_next_commit_at_once(two_sets, tmp_path):
    """Every link of OUT goes through one link, ``_current``, which the commit's view replaces whole:
    a reader never finds the outputs of two commits mixed. Two views stay: the shown one and the one before."""
    out, before, commit_new = two_sets
    root = tmp_path / "out"
    names = [MANIFESTS[EXPORT], MANIFESTS[AUDIT]]  # the tables are Delta tables
    assert {n: os.readlink(root / n) for n in names} == {n: f"{CURRENT}/{n}" for n in names}
    shown = os.readlink(root / CURRENT)
    commit_new()
    assert {n: os.readlink(root / n) for n in names} == {n: f"{CURRENT}/{n}" for n in names}
    assert os.readlink(root / CURRENT) != shown and through_links(root) == seen(out)
    commit_new()
    assert sorted(os.listdir(root / VIEWS)) == ["3", "4"] and "records" not in through_links(root)
    commits.refresh_views(commits.Store(out), commits.read(commits.Store(out), 3))  # a late, older refresh
    assert os.readlink(root / CURRENT) == f"{VIEWS}/4"  # never shows an older commit over a newer one


def test_a_unit_left_early_leaves_the_previous_set(two_sets, tmp_path):
    out, before, _commit = two_sets
    runs = sorted(os.listdir(tmp_path / "out" / RUNS))
    with pytest.raises(RuntimeError), unit(out) as u:
        stage(u.out, EXPORT, {"batches": "new"})
        raise RuntimeError("the audit failed")
    assert seen(out) == before
    assert sorted(os.listdir(tmp_path / "out" / RUNS)) == runs  # its folder went with it


CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import pyarrow as pa
    import pyarrow.parquet as pq
    from analytics.contract import AUDIT, EXPORT
    from analytics.publish import commits, publication, unit
    from analytics.publish import store as stores

    out, when = sys.argv[1], sys.argv[2]
    top = os.path.join(out, "_commits")  # the unit's own commit, not those of its stages inside it

    def dying(real, is_top):
        def call(*args, **kwargs):
            if is_top(*args):
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return call

    if when == "before":      # every output written, the commit object not begun
        commits.commit = dying(commits.commit, lambda store, *_: store.root == out)
    elif when == "during":    # the commit object's bytes written, not yet under its name
        stores.os.link = dying(os.link, lambda src, dst: dst.startswith(top))
    elif when == "after":     # the commit object created; OUT's links and the garbage not yet done
        commits.refresh_views = dying(commits.refresh_views, lambda store, snap: store.root == out and snap.version > 2)
    elif when in ("placed", "delta"):  # committed; the first table's files placed but not in its Delta
        import deltalake                # table yet, or the first table's Delta commit made and not the next
        calls = []
        deltalake.DeltaTable.create_write_transaction = dying(
            deltalake.DeltaTable.create_write_transaction,
            lambda *_: calls.append(1) or len(calls) == (1 if when == "placed" else 2))

    def stage(o, name, tables):
        with publication(o, name) as run:
            for table, text in tables.items():
                Path(run.path(table)).mkdir(parents=True)
                Path(run.path(table, "part-0")).write_text(text)
                pq.write_table(pa.table({"text": [text]}), run.path(table, "part-0.parquet"))
            run.publish({})

    with unit(out) as u:
        stage(u.out, EXPORT, {"batches": "new", "segments": "new"})
        stage(u.out, AUDIT, {"batch_verdicts": "new"})
        u.publish([EXPORT, AUDIT])
""")


@pytest.mark.parametrize("when", ["before", "during", "after", "placed", "delta"])
def test_a_run_killed_around_its_commit_shows_the_old_set_or_the_new_one(two_sets, tmp_path, when):
    """kill -9 before, during and after the commit object is created, and between it and the Delta
    tables' commits: a reader of the commit sees the old set or the new one whole, an outside reader
    of each Delta table its old rows or its new ones; the next run removes the killed run's leftovers
    and puts OUT's links and tables right."""
    out, before, commit_new = two_sets
    root = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", CHILD, out, when], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    new = {"batches": "new", "segments": "new", "batch_verdicts": "new"}
    assert seen(out) == (before if when in ("before", "during") else new)
    if when in ("placed", "delta"):
        tables = {n: v for n, v in through_links(root).items() if n in TABLES}
        assert all(tables.get(n) in (before.get(n), new.get(n)) for n in {*before, *new} & set(TABLES))
        # the audit's tables are committed first (the stages in the commit's order), then the export's
        assert tables["batch_verdicts"] == ("old" if when == "placed" else "new") and tables["batches"] == "old"
    leftovers = [p for p in (root / COMMITS).iterdir() if ".tmp-" in p.name]
    assert len(leftovers) == (1 if when == "during" else 0)  # never under a commit's name, never read
    commit_new()  # the next run: the killed one's folder is garbage (its process is gone)
    assert seen(out) == new == through_links(root)
    latest = published(out).snapshot
    assert {f"{RUNS}/{n}" for n in os.listdir(root / RUNS)} == latest.runs() | set(latest.retired)


def test_of_two_runs_of_the_same_stages_one_commits(two_sets, tmp_path):
    out, _before, commit_new = two_sets
    with pytest.raises(Conflict, match="published by another run") as failed, unit(out) as late:
        stage(late.out, EXPORT, {"batches": "late"})
        stage(late.out, AUDIT, {"batch_verdicts": "late"})
        first = commit_new()  # another run commits meanwhile
        late.publish([EXPORT, AUDIT])
    assert first[EXPORT]["run_id"] in str(failed.value)
    assert seen(out) == {"batches": "new", "segments": "new", "batch_verdicts": "new"}  # nothing mixed
    assert not (tmp_path / "out" / RUNS / late.run_id).exists()


def test_runs_of_independent_stages_both_commit(two_sets):
    """A validation and a report of the same audit, at once: neither changes what the other reads."""
    out, _before, _commit = two_sets
    with publication(out, VALIDATE) as validation, publication(out, REPORT) as report:
        write(validation, {"validation": "v"})
        write(report, {"report": "r"})
        report.publish({})
        validation.publish({})
    assert seen(out)["validation"] == "v" and seen(out)["report"] == "r"


def test_a_stage_whose_input_changed_meanwhile_does_not_commit(two_sets):
    out, _before, _commit = two_sets
    with pytest.raises(Conflict, match="audit"), publication(out, VALIDATE) as validation:
        write(validation, {"validation": "v"})
        stage(out, AUDIT, {"batch_verdicts": "newer"})  # the audit it validated is replaced meanwhile
        validation.publish({})
    assert not published(out).has("validation")


def test_old_runs_are_kept_by_time_and_by_count_and_no_commit_is_deleted(tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    store = commits.Store(out)
    for n in range(5):
        stage(out, EXPORT, {"batches": str(n)})
    assert commits.versions(store) == [1, 2, 3, 4, 5]
    assert len(os.listdir(tmp_path / "out" / RUNS)) == 5  # retired less than 7 days ago: all kept
    monkeypatch.setenv("SEGAUDIT_RETENTION_HOURS", "0")  # by count alone: the latest commit and the one before
    stage(out, EXPORT, {"batches": "5"})
    assert len(os.listdir(tmp_path / "out" / RUNS)) == 2
    monkeypatch.setenv("SEGAUDIT_KEEP_COMMITS", "3")
    stage(out, EXPORT, {"batches": "6"})
    stage(out, EXPORT, {"batches": "7"})
    assert commits.versions(store) == list(range(1, 9)) and len(os.listdir(tmp_path / "out" / RUNS)) == 3
    assert seen(out) == {"batches": "7"}
    monkeypatch.setenv("SEGAUDIT_KEEP_COMMITS", "2")
    monkeypatch.setenv("SEGAUDIT_RETENTION_HOURS", str(1 / 3600))  # one second: by time once past the count
    time.sleep(1.1)
    stage(out, EXPORT, {"batches": "8"})
    assert len(os.listdir(tmp_path / "out" / RUNS)) == 2  # the runs retired over 1 s ago, out of the count: gone
    stage(out, EXPORT, {"batches": "9"})
    assert len(os.listdir(tmp_path / "out" / RUNS)) == 3  # out of the count, but retired under 1 s ago: kept
    time.sleep(1.1)
    stage(out, EXPORT, {"batches": "10"})
    assert len(os.listdir(tmp_path / "out" / RUNS)) == 2


def test_a_reader_keeps_every_file_it_resolved_through_later_commits(tmp_path, monkeypatch):
    """A reader that resolved OUT, then reads its files while 5 more commits land and collect garbage."""
    out = str(tmp_path / "out")
    stage(out, EXPORT, {"batches": "old", "segments": "old"})
    stage(out, AUDIT, {"batch_verdicts": "old"})
    view = published(out)
    files = [view.path(name, "part-0") for name in ("batches", "segments", "batch_verdicts")]
    for n in range(5):
        stage(out, EXPORT if n % 2 else AUDIT, {"batches": str(n)} if n % 2 else {"batch_verdicts": str(n)})
    assert [Path(f).read_text() for f in files] == ["old", "old", "old"]
    monkeypatch.setenv("SEGAUDIT_RETENTION_HOURS", "0")  # the same with retention by count alone: gone
    stage(out, EXPORT, {"batches": "last"})
    assert not any(Path(f).exists() for f in files)


def test_a_past_version_reads_as_it_was(tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    stage(out, EXPORT, {"batches": "monday"})
    monday = published(out).snapshot.committed_at_ms
    time.sleep(0.01)
    stage(out, EXPORT, {"batches": "tuesday"})
    assert Path(published(out, AsOf(version=1)).path("batches", "part-0")).read_text() == "monday"
    assert Path(published(out, AsOf(timestamp_ms=monday)).path("batches", "part-0")).read_text() == "monday"
    assert Path(published(out, AsOf(timestamp_ms=monday + 5)).path("batches", "part-0")).read_text() == "monday"
    assert Path(published(out, AsOf(timestamp_ms=2**62)).path("batches", "part-0")).read_text() == "tuesday"
    assert published(out, AsOf(version=1)).shown("batches") != published(out).shown("batches")  # not OUT's link
    with pytest.raises(StageMissing, match="not yet published"):
        published(out, AsOf(timestamp_ms=monday - 60_000))
    with pytest.raises(StageMissing, match="no version 7"):
        published(out, AsOf(version=7))
    monkeypatch.setenv("SEGAUDIT_RETENTION_HOURS", "0")
    stage(out, EXPORT, {"batches": "wednesday"})
    stage(out, EXPORT, {"batches": "thursday"})
    with pytest.raises(StageMissing, match="past retention"):
        published(out, AsOf(version=1))


OTHER = textwrap.dedent("""
    import sys
    from pathlib import Path
    import pyarrow as pa
    import pyarrow.parquet as pq
    from analytics.publish import publication

    out, stage, table, text = sys.argv[1:5]
    with publication(out, stage) as run:
        Path(run.path(table)).mkdir(parents=True)
        Path(run.path(table, "part-0")).write_text(text)
        if table == "batch_verdicts":
            pq.write_table(pa.table({"text": [text]}), run.path(table, "part-0.parquet"))
        run.publish({})
""")


TABLE = {REPORT: "report", AUDIT: "batch_verdicts"}


def dangling(out: Path) -> list[str]:
    return [p.name for p in out.iterdir() if p.is_symlink() and not p.exists()]


@pytest.mark.parametrize("between", [1, 2, 3, 10])
@pytest.mark.parametrize("others", [REPORT, AUDIT])
def test_a_stale_writer_moves_onto_the_newest_commit_or_publishes_nothing(two_sets, tmp_path, between, others,
                                                                          monkeypatch):
    """A validation that read the audit, then ``between`` commits of other processes: of reports (they
    change nothing it reads: it commits on top of the newest) or of audits (it validated an audit no
    longer there: exit 2). Either way OUT shows a whole set afterwards, every link resolves, and no
    commit's name was created twice, with retention by count alone (the commits' runs collected)."""
    monkeypatch.setenv("SEGAUDIT_RETENTION_HOURS", "0")
    out, _before, _commit = two_sets
    stale = subprocess.Popen([*stale_writer.COMMAND, out, VALIDATE, "validation", "stale"], cwd=ROOT, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert stale.stdout.readline().strip() == "ready"
    for n in range(between):
        other = subprocess.run([sys.executable, "-c", OTHER, out, others, TABLE[others], str(n)], cwd=ROOT, capture_output=True,
                               text=True)
        assert other.returncode == 0, other.stderr
    _out, err = stale.communicate("go\n", timeout=60)
    store = commits.Store(out)
    found = commits.versions(store)
    assert found == list(range(1, len(found) + 1))
    assert [json.loads((tmp_path / "out" / COMMITS / f"{v:020d}.json").read_text())["version"] for v in found] == found
    if others == REPORT:
        assert stale.returncode == 0, err
        assert len(found) == 2 + between + 1  # on top of the newest, never in place of one
        assert seen(out)["validation"] == "stale" and seen(out)["report"] == str(between - 1)
    else:
        assert stale.returncode == 2 and "published by another run" in err
        assert len(found) == 2 + between and "validation" not in seen(out)
        assert seen(out)["batch_verdicts"] == str(between - 1)
    assert dangling(tmp_path / "out") == []
    assert through_links(tmp_path / "out") == seen(out)
    assert {f"{RUNS}/{n}" for n in os.listdir(tmp_path / "out" / RUNS)} >= published(out).snapshot.runs()


def test_a_commit_in_flight_is_waited_for_with_growing_pauses(two_sets, monkeypatch):
    """The next version taken but not readable yet (S3's 409 for a conditional PUT in flight): tried
    again after pauses that grow, then committed; given up with Conflict after the patience."""
    out, _before, _commit = two_sets
    pauses, refusals = [], iter([False, False, False])
    create = commits.Store.create_text
    monkeypatch.setattr(commits.time, "sleep", pauses.append)
    monkeypatch.setattr(commits.Store, "create_text",
                        lambda self, name, text: next(refusals, None) is None and create(self, name, text))
    stage(out, REPORT, {"report": "r"})
    assert len(pauses) == 3 and pauses[0] < pauses[2] and seen(out)["report"] == "r"
    monkeypatch.setattr(commits.Store, "create_text", lambda self, name, text: False)
    monkeypatch.setattr(commits, "COMMIT_PATIENCE_S", 0.0)
    with pytest.raises(Conflict, match="stayed taken"):
        stage(out, REPORT, {"report": "never"})
    assert seen(out)["report"] == "r"


@pytest.mark.parametrize("where", [{"host": "other-host"}, {"pid_ns": 1}, {"boot_id": "another-boot"}])
def test_a_folder_of_a_run_elsewhere_is_kept_until_it_is_old(two_sets, tmp_path, where):
    """Another host, or this host's name in another container (pid namespace) or boot: its pid says
    nothing here (pid 1 runs here too), so the folder stays until it is a day old."""
    out, _before, commit_new = two_sets
    elsewhere = tmp_path / "out" / RUNS / "20260101T000000-elsewhere"
    elsewhere.mkdir()
    owner = {**identity(), "pid": 1, "start_tick": None, **where}
    (elsewhere / "_owner.json").write_text(json.dumps({**owner, "started_at_ms": int(time.time() * 1000)}))
    commit_new()
    assert elsewhere.exists()  # perhaps still running there
    (elsewhere / "_owner.json").write_text(json.dumps({**owner, "started_at_ms": 0}))
    commit_new()
    assert not elsewhere.exists()


def test_a_folder_whose_pid_was_reused_is_garbage(two_sets, tmp_path):
    """The owner's pid runs again, as another process (it started at another tick): the run is dead."""
    out, _before, commit_new = two_sets
    mine = identity()
    for name, start_tick in (("reused", mine["start_tick"] + 1), ("live", mine["start_tick"])):
        folder = tmp_path / "out" / RUNS / f"20260101T000000-{name}"
        folder.mkdir()
        (folder / "_owner.json").write_text(json.dumps({**mine, "start_tick": start_tick, "started_at_ms": 0}))
    commit_new()
    assert sorted(p.name.split("-")[-1] for p in (tmp_path / "out" / RUNS).iterdir() if "20260101" in p.name) == ["live"]


def test_an_out_of_an_older_segaudit_is_read_and_then_converted(tmp_path):
    """Outputs at OUT's root with manifests beside them (before commits): read as they are; the next
    run moves them into run folders and commits them first, so nothing is lost."""
    out = tmp_path / "out"
    (out / "batches").mkdir(parents=True)
    (out / "batches" / "part-0").write_text("legacy")
    pq.write_table(pa.table({"text": ["legacy"]}), out / "batches" / "part-0.parquet")
    (out / MANIFESTS[EXPORT]).write_text(json.dumps({"run_id": "r0", "stage": EXPORT}))
    assert seen(str(out)) == {"batches": "legacy"} and read_manifest(str(out), EXPORT)["run_id"] == "r0"
    stage(str(out), AUDIT, {"batch_verdicts": "a"})
    assert seen(str(out)) == {"batches": "legacy", "batch_verdicts": "a"} == through_links(out)
    assert read_manifest(str(out), AUDIT)["built_from"] == {EXPORT: "r0"}


def test_a_missing_out_or_stage_is_one_line(tmp_path):
    with pytest.raises(StageMissing, match="no such directory"):
        read_manifest(str(tmp_path / "nothing"), EXPORT)
    stage(str(tmp_path / "out"), EXPORT, {"batches": "x"})
    with pytest.raises(StageMissing, match="segaudit audit"):
        read_manifest(str(tmp_path / "out"), AUDIT)


def test_a_commit_is_created_once(tmp_path):
    store = commits.Store(str(tmp_path))
    assert store.create_text("_commits/x.json", "first")
    assert not store.create_text("_commits/x.json", "second")
    assert (tmp_path / "_commits" / "x.json").read_text() == "first"
    assert [p.name for p in (tmp_path / "_commits").iterdir()] == ["x.json"]


def test_a_file_in_place_of_a_link_is_never_replaced(two_sets, tmp_path):
    """A user's own folder where a link would go is left alone (never delete what segaudit did not make)."""
    out, _before, commit_new = two_sets
    shutil.rmtree(tmp_path / "out" / "batches")
    (tmp_path / "out" / "batches").mkdir()
    (tmp_path / "out" / "batches" / "mine").write_text("keep")
    commit_new()
    assert (tmp_path / "out" / "batches" / "mine").read_text() == "keep"
    assert os.listdir(tmp_path / "out" / "batches") == ["mine"]  # not made a Delta table either
    assert seen(out)["batches"] == "new"  # readers resolve the commit, not the folder
    assert socket.gethostname()
