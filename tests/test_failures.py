"""Every failure is one line on stderr and an exit code, never a traceback: a Spark analysis error,
a Great Expectations failure, an unwritable or full ``OUT``, an out-of-step ``OUT``, and SIGINT /
SIGTERM sent to a real ``segaudit`` process (exit 130 / 143, ``OUT`` byte-identical to the
previous complete run)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.cli import main
from tests.commands import assert_own_lines
from tests.outs import copy_out, edit_manifest, table_dir

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parent.parent


def one_line(err: str) -> str:
    """The failure line, checked to be the last line, the only one of its kind (the lines before it
    are progress), and free of a traceback or any other line not segaudit's own."""
    assert_own_lines(err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and "ERROR" not in err, err
    assert [line for line in lines if line.startswith("segaudit: ")] == lines[-1:], err
    return lines[-1]


def snapshot(out: str) -> dict[str, str]:
    """Every file under OUT (hidden ones too) with a hash of its bytes."""
    found = {}
    for root, _dirs, files in os.walk(out):
        for name in files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, out)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return found


@pytest.fixture
def one_audit(audited, tmp_path) -> str:
    """A copy of a complete audit (export, audit; no validation: another module may have validated it) of
    a small scenario."""
    _g, out = audited["clean"]
    copy = tmp_path / "out"
    return copy_out(out, copy, without=("validate", "report"))


def test_a_spark_analysis_error_is_one_line(spark, tmp_path, capsys):
    """An export whose batches table lacks the columns the audit reads: Spark's analysis error, one line, exit 2."""
    out = tmp_path / "forged"
    for table in ("batches", "log_start_offsets", "producer_snapshots"):
        (out / table).mkdir(parents=True)
        pq.write_table(pa.table({"topic": ["t"], "partition": pa.array([0], pa.int32())}), out / table / "part-0.parquet")
    (out / "_export.json").write_text(json.dumps({"run_id": "forged", "inputs": []}))
    assert main(["audit", str(out), "--no-history"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "Spark" in line and "file" in line  # the missing column is named
    assert not list(out.glob("_runs/*"))  # nothing half-published


def test_a_great_expectations_failure_is_one_line(one_audit, capsys):
    """The checks' queries cannot run over an anomalies table without its verdict columns."""
    anomalies = table_dir(one_audit, "anomalies")
    shutil.rmtree(anomalies)
    anomalies.mkdir()
    pq.write_table(pa.table({"topic": ["t"], "partition": pa.array([0], pa.int32())}), anomalies / "part-0.parquet")
    assert main(["validate", one_audit]) == 2
    line = one_line(capsys.readouterr().err)
    assert "Great Expectations" in line
    assert not Path(one_audit, "validation").exists()


def test_an_unwritable_out_is_one_line(capsys):
    """/sys is read-only, also for root."""
    assert main(["export", str(REPO / "data" / "mixed"), "--out", "/sys/segaudit-out"]) == 2
    assert "/sys/segaudit-out" in one_line(capsys.readouterr().err)


def test_a_full_disk_is_one_line(one_audit, tmp_path, capsys):
    """OUT on a 256 KiB tmpfs: the audit cannot write its tables; the previous audit stays."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        out = small / "out"
        out.mkdir()
        for name in ("_export.json", "batches", "segments", "log_start_offsets", "producer_snapshots", "leader_epochs"):
            source = table_dir(one_audit, name) if name != "_export.json" else Path(one_audit, name)
            (shutil.copytree if source.is_dir() else shutil.copy)(source, out / name)
        assert main(["audit", str(out), "--no-history"]) == 2
        line = one_line(capsys.readouterr().err)
        assert "No space left on device" in line
        assert not (out / "_audit.json").exists()
        assert not list(out.glob("_runs/*"))
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def test_a_stale_audit_is_refused(one_audit, capsys):
    """An audit built from another export than the one in OUT: readers refuse and say what to re-run."""
    edit_manifest(one_audit, "export", run_id="a-newer-export")
    assert main(["explain", one_audit, "--topic", "t", "--partition", "0", "--offset", "0"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "a-newer-export" in line and "segaudit audit" in line


def test_a_missing_out_says_it_is_missing(tmp_path, capsys):
    assert main(["explain", str(tmp_path / "nowhere"), "--topic", "t", "--partition", "0", "--offset", "0"]) == 2
    assert "no such directory" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize(("command", "sig", "code"), [
    ("export", signal.SIGINT, 130), ("audit", signal.SIGTERM, 143),
    ("validate", signal.SIGINT, 130), ("report", signal.SIGTERM, 143), ("run", signal.SIGINT, 130),
])
def test_a_signal_during_a_stage_leaves_the_previous_run(one_audit, command, sig, code, tmp_path):
    """A real process, a real signal once the stage has started staging: one line, exit 130/143,
    and every byte under OUT as it was. (``run`` of the small sample exports in its own process.)"""
    before, task_log = snapshot(one_audit), tmp_path / "tasks.jsonl"
    # the export in Spark (a small local one runs in the command's process, too fast to interrupt)
    args = {"export": ["export", str(REPO / "data" / "mixed"), "--out", one_audit, "--master", "local[2]"],
            "audit": ["audit", one_audit, "--no-history"],
            "run": ["run", str(REPO / "data" / "mixed"), "--out", one_audit, "--no-history"]}.get(
        command, [command, one_audit])
    process = subprocess.Popen([sys.executable, "-m", "analytics", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO,
                               env={**os.environ, "SEGAUDIT_TASK_LOG": str(task_log)})
    deadline = time.monotonic() + 180
    # run stages all four stages in one folder: its signal comes once the audit (the second) has started
    started = _started(one_audit, "_runs/*/_export.json" if command == "run" else "_runs/*/_owner.json")
    while not started():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(sig)
    _out, err = process.communicate(timeout=120)
    assert process.returncode == code, err
    line = one_line(err)
    assert "interrupted" in line and command in line and "previous complete run" in line
    assert snapshot(one_audit) == before
    if command == "run":  # every segment was read before the audit started, by the command's own process
        reads = [json.loads(line) for line in task_log.read_text().splitlines()]
        assert len([r for r in reads if r["table"] == "export-segments"]) == len(list((REPO / "data" / "mixed").rglob("*.log")))
        assert {r["pid"] for r in reads} == {process.pid}


def test_a_signal_whose_exception_python_drops_still_publishes_nothing(tmp_path, capsys):
    """SIGTERM handled inside a weakref callback, where Python drops the handler's exception (Py4J
    releases Java objects in them): the stage runs on, but publishes nothing, and the command says
    it was interrupted in one line."""
    import logging
    import weakref

    from analytics.cli.main import guarded
    from analytics.publish import publication

    out = tmp_path / "out"
    ran_on = []

    def stage():
        with publication(str(out), "export", built_from={}) as run:
            Path(run.path("segments")).mkdir()
            Path(run.path("segments"), "part-0.parquet").write_bytes(b"new")

            class JavaObjectLike:
                pass

            released = JavaObjectLike()
            weakref.finalize(released, signal.raise_signal, signal.SIGTERM)
            del released  # the handler runs in the finalizer: its Interrupted goes nowhere
            ran_on.append(True)
            run.publish({})
        return 0

    try:
        code = guarded(stage, "export")
    finally:
        logging.disable(logging.NOTSET)  # the handler silenced logging for the rest of this process
    err = capsys.readouterr().err
    assert ran_on and code == 143, err
    line = one_line(err)
    assert "interrupted (SIGTERM)" in line and "export" in line and "Exception ignored" not in err
    assert not out.exists()  # neither the outputs nor a manifest nor the staging, nor the OUT the stage made


def _started(out: str, pattern: str):
    """A test of whether a new run has begun writing: a file matching ``pattern`` that was not there before."""
    before = set(Path(out).glob(pattern))
    return lambda: bool(set(Path(out).glob(pattern)) - before)


def _verdict_rows(out: str) -> list:
    table = pq.read_table(str(table_dir(out, "batch_verdicts")))
    return sorted(table.select(sorted(table.column_names)).to_pylist(), key=repr)


def test_a_killed_incremental_run_leaves_the_previous_run_and_the_next_one_continues(audited, one_audit, capsys):
    """SIGINT once the incremental audit has started staging: exit 130 and OUT as it was; the next
    incremental run continues the same previous audit, every partition from its state."""
    g, _ = audited["clean"]
    args = [sys.executable, "-m", "analytics", "run", str(g.log_dir), "--out", one_audit,
            "--config", str(g.truth_dir / "audit.toml"), "--incremental", "--no-history"]
    before, verdicts = snapshot(one_audit), _verdict_rows(one_audit)
    previous = json.loads(Path(one_audit, "_audit.json").read_text())["run_id"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.monotonic() + 180
    started = _started(one_audit, "_runs/*/_export.json")
    while not started():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert_own_lines(err)
    assert snapshot(one_audit) == before
    capsys.readouterr()
    assert main(args[3:]) in (0, 1)  # the next night's run, in this process's Spark
    assert_own_lines(capsys.readouterr().err)
    incremental = json.loads(Path(one_audit, "summary.json").read_text())["incremental"]
    partitions = pq.read_table(str(table_dir(one_audit, "partition_state"))).num_rows
    # the run's export reads every segment again (it adds records, which the first export lacked), so
    # the audit scans every one, and every partition still continues
    export = json.loads(Path(one_audit, "_export.json").read_text())
    assert export["incremental"] is None
    assert incremental == {"continued_audit": previous, "continued_histories": partitions,
                           "files_read": len(export["segment_files"])}
    assert _verdict_rows(one_audit) == verdicts


@pytest.mark.slow
def test_a_stale_audit_after_1_2_3_and_10_exports_exits_2_and_loses_nothing(audited, tmp_path):
    """Four real ``segaudit audit`` processes, each stopped (SIGSTOP) once it has read its OUT, while 1,
    2, 3 and 10 ``segaudit export --incremental`` processes commit a new export into that OUT; then
    continued. Each audit was of an export no longer there: one line, exit 2. Each OUT shows the last
    export with the previous audit, every link resolves, and no commit's name was created twice."""
    g, out = audited["clean"]
    outs = {n: copy_out(out, tmp_path / f"out-{n}", without=("validate", "report")) for n in (1, 2, 3, 10)}
    audits = {n: json.loads(Path(o, "_audit.json").read_text())["run_id"] for n, o in outs.items()}
    stale = {}
    for n, o in outs.items():
        started = _started(o, "_runs/*/_owner.json")
        stale[n] = subprocess.Popen([sys.executable, "-m", "analytics", "audit", o, "--no-history"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        deadline = time.monotonic() + 180
        while not started():
            assert stale[n].poll() is None and time.monotonic() < deadline, stale[n].communicate()
            time.sleep(0.02)
        stale[n].send_signal(signal.SIGSTOP)
    def exports(n: int, o: str) -> None:
        for _ in range(n):
            done = subprocess.run([sys.executable, "-m", "analytics", "export", str(g.log_dir), "--out", o,
                                   "--incremental"], capture_output=True, text=True, cwd=REPO, timeout=300)
            assert done.returncode == 0, done.stderr

    try:
        with ThreadPoolExecutor(len(outs)) as each:  # one after the other into each OUT, the OUTs at once
            for future in [each.submit(exports, n, o) for n, o in outs.items()]:
                future.result()
    finally:
        for process in stale.values():
            process.send_signal(signal.SIGCONT)
    for n, o in outs.items():
        _out, err = stale[n].communicate(timeout=300)
        assert stale[n].returncode == 2, err
        assert "published by another run" in one_line(err)
        versions = sorted(int(p.stem) for p in Path(o, "_commits").glob("*.json"))
        assert versions == list(range(versions[0], versions[0] + len(versions)))
        assert json.loads(Path(o, "_audit.json").read_text())["run_id"] == audits[n]
        assert [p.name for p in Path(o).iterdir() if p.is_symlink() and not p.exists()] == []
        assert pq.read_table(str(table_dir(o, "batch_verdicts"))).num_rows > 0
