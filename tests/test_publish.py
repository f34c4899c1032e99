"""Publishing under OUT: a stage's outputs replace the previous ones whole, a set of stages commits
as one unit, and a swap cut short at any step is finished by the next command, so a reader sees the
previous complete outputs or the new ones, never a mix. Plain files, no Spark."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.contract import AUDIT, EXPORT, MANIFESTS
from analytics.errors import StageMissing
from analytics.publish import JOURNAL, Store, publication, read_manifest, unit


def stage(out: str, name: str, tables: dict[str, str]) -> dict:
    """Publish ``tables`` (name -> the text of its one file) as stage ``name``; its manifest."""
    with publication(out, name) as run:
        for table, text in tables.items():
            Path(run.path(table)).mkdir(parents=True)
            Path(run.path(table, "part-0")).write_text(text)
        return run.publish({"tables": sorted(tables)})


def contents(out: Path) -> dict[str, str]:
    """Every file under OUT by relative path (hidden ones too), with its text."""
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_stage_replaces_its_previous_outputs_whole(tmp_path):
    out = str(tmp_path / "out")
    stage(out, EXPORT, {"batches": "old", "records": "old"})
    manifest = stage(out, EXPORT, {"batches": "new"})
    assert read_manifest(out, EXPORT) == manifest
    # records, which the second run did not write, went with the first run
    assert contents(tmp_path / "out") == {"_export.json": (tmp_path / "out" / "_export.json").read_text(),
                                          "batches/part-0": "new"}


def test_a_stage_cannot_publish_another_stages_table(tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(ValueError, match="does not own batch_verdicts"):
        stage(out, EXPORT, {"batch_verdicts": "x"})
    assert not (tmp_path / "out" / "batch_verdicts").exists() and not (tmp_path / "out" / JOURNAL).exists()


@pytest.fixture
def two_sets(tmp_path):
    """OUT with a complete export and audit ("old"), and a function that commits a new set ("new")."""
    out = str(tmp_path / "out")
    stage(out, EXPORT, {"batches": "old", "records": "old"})
    stage(out, AUDIT, {"batch_verdicts": "old", "summary.json": "old"})
    before = contents(tmp_path / "out")

    def commit_new():
        with unit(out) as u:
            stage(u.out, EXPORT, {"batches": "new", "segments": "new"})
            stage(u.out, AUDIT, {"batch_verdicts": "new"})
            return u.publish([EXPORT, AUDIT])

    return out, before, commit_new


def new_set(out: Path) -> dict[str, str]:
    return {k: v for k, v in contents(out).items() if not k.startswith("_")}


def test_a_unit_commits_every_stage_at_once(two_sets, tmp_path):
    out, _before, commit_new = two_sets
    manifests = commit_new()
    assert new_set(tmp_path / "out") == {"batches/part-0": "new", "segments/part-0": "new",
                                         "batch_verdicts/part-0": "new"}
    assert read_manifest(out, AUDIT) == manifests[AUDIT]
    assert manifests[AUDIT]["built_from"] == {EXPORT: manifests[EXPORT]["run_id"]}
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.name.startswith((".", "_"))) == \
        sorted([MANIFESTS[EXPORT], MANIFESTS[AUDIT]])


def test_a_unit_left_early_leaves_the_previous_set(two_sets, tmp_path):
    out, before, _commit = two_sets
    with pytest.raises(RuntimeError), unit(out) as u:
        stage(u.out, EXPORT, {"batches": "new"})
        raise RuntimeError("the audit failed")
    assert contents(tmp_path / "out") == before


def test_a_swap_cut_short_at_any_step_is_finished_by_the_next_reader(two_sets, tmp_path, monkeypatch):
    """The process dies at the n-th rename of the commit: before the journal, OUT is the old set;
    after it, the next reader completes the new set. Every n up to the last rename."""
    out, before, commit_new = two_sets
    real_move, n = Store.move, 0
    while True:
        n += 1
        moves = 0

        def dying_move(self, src, dst, _n=n):
            nonlocal moves
            moves += 1
            if moves == _n:
                raise OSError("killed")
            return real_move(self, src, dst)

        work = tmp_path / f"cut{n}"
        shutil.copytree(tmp_path / "out", work)
        monkeypatch.setattr(Store, "move", dying_move)
        try:
            with unit(str(work)) as u:
                monkeypatch.setattr(Store, "move", real_move)
                stage(u.out, EXPORT, {"batches": "new", "segments": "new"})
                stage(u.out, AUDIT, {"batch_verdicts": "new"})
                monkeypatch.setattr(Store, "move", dying_move)
                u.publish([EXPORT, AUDIT])
            finished = True
        except OSError:
            finished = False
        monkeypatch.setattr(Store, "move", real_move)
        committed = (work / JOURNAL).exists() or finished
        read_manifest(str(work), EXPORT)  # a reader settles OUT first
        got = {k: v for k, v in contents(work).items() if not k.startswith("_")}
        if committed:
            assert got == {"batches/part-0": "new", "segments/part-0": "new", "batch_verdicts/part-0": "new"}, n
            assert not [p for p in work.iterdir() if p.name.startswith((".", JOURNAL))], n
        else:
            assert got == {k: v for k, v in before.items() if not k.startswith("_")}, n
            assert json.loads((work / "_audit.json").read_text()) == json.loads((tmp_path / "out" / "_audit.json").read_text())
        if finished:
            break
    assert n > 5  # the journal, the old outputs to trash, the new ones in, the manifests


def test_a_swap_in_progress_elsewhere_is_not_read(two_sets, tmp_path):
    """A journal left by a live process (here: a sleeping child) means a swap is under way."""
    out, _before, _commit = two_sets
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "out" / JOURNAL).write_text(json.dumps({
            "staging": ".staging-run-x", "run_id": "x", "outputs": [], "manifests": {},
            "host": socket.gethostname(), "pid": child.pid}))
        with pytest.raises(StageMissing, match="being published by run x"):
            read_manifest(out, EXPORT)
    finally:
        child.kill()
        child.wait()
    # once that process is gone, its journal is finished by the next reader
    assert read_manifest(out, EXPORT)["stage"] == EXPORT
    assert not (tmp_path / "out" / JOURNAL).exists()
