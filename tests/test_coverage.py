"""Coverage is a check: a file present that was not read never makes an audit cleaner. An unreadable
segment (the operating system refuses it, as Kafka's mode-0600 files refuse another user) and a
segment gone while the export read it are counted in ``summary.json`` and on stdout, and fail
``every_file_read`` (a vanished one is information when the log start shows retention deleted it).
Empty inputs are data: a log dir with no batch is a complete audit of zero batches, exit 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analytics.cli import main
from tests.commands import assert_own_lines
from tests.conftest import REPO
from tests.outs import table_dir

pytestmark = pytest.mark.spark
SAMPLE = REPO / "data" / "mixed"
CONFIG = str(REPO / "data" / "mixed.truth" / "audit.toml")
LOG_DIR_FILES = ("meta.properties", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "replication-offset-checkpoint", "cleaner-offset-checkpoint")


def log_dir(target: Path, partitions: tuple[str, ...]) -> Path:
    """A log dir with some of the sample's partition folders and its checkpoints."""
    target.mkdir(parents=True)
    for name in LOG_DIR_FILES:
        shutil.copy(SAMPLE / name, target / name)
    for name in partitions:
        shutil.copytree(SAMPLE / name, target / name)
    return target


def results(out: Path) -> dict[str, int]:
    """Offending rows by check id, from results.json."""
    doc = json.loads((out / "validation" / "results.json").read_text())
    return {c["id"]: c["unexpected_count"] for s in doc["suites"].values() for c in s["checks"]}


def unprivileged() -> list[str]:
    """The command prefix under which mode 000 refuses a read: root without its capabilities to
    bypass file permissions (as an auditor who is not the ``kafka`` user); nothing for another user."""
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="needs setpriv as root")
def test_unreadable_segments_fail_every_file_read_and_are_counted(tmp_path):
    """The last segment of a clean partition (no gap follows: nothing else would notice), the one
    segment of a partition with a planted sequence gap (the violation goes with it) and the middle
    segment of another clean partition (its producers' next batches seem to skip sequences) are
    unreadable: the run fails anyway, every_file_read names the three files, stdout says what was not
    read, and the gaps after the middle one are no violation: explained by the unread file."""
    logs = log_dir(tmp_path / "logs", ("clean-0", "clean-1", "lost-batch-0"))
    refused = [logs / "clean-0" / "00000000000000000032.log", logs / "lost-batch-0" / "00000000000000000000.log",
               logs / "clean-1" / "00000000000000000017.log"]
    for path in refused:
        path.chmod(0)
    out = tmp_path / "out"
    done = subprocess.run([*unprivileged(), sys.executable, "-m", "analytics", "run", str(logs), "--out", str(out),
                           "--config", CONFIG, "--no-history"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert_own_lines(done.stderr)
    assert done.returncode == 1, done.stderr
    found = results(out)
    assert found["every_file_read"] == 3 and found["no_unexplained_sequence_gap"] == 0  # the gap went unread
    assert found["unread_file_justified"] == 0
    sizes = sum(p.stat().st_size for p in refused)
    assert f"NOT READ: 3 files unreadable ({sizes:,} bytes)" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    coverage = summary["coverage"]
    assert coverage["not_read"] == {"unreadable": {"files": 3, "bytes": sizes}}
    assert coverage["files"] - coverage["files_read"] == 3 and coverage["bytes"] - coverage["bytes_read"] == sizes
    assert summary["severities"]["violation"] == 0  # the gaps after clean-1's middle segment are not judged
    gaps = pq.read_table(str(table_dir(out, "anomalies"))).to_pylist()
    after = [r for r in gaps if r["verdict"] == "SEQUENCE_GAP"]
    assert after and {(r["topic"], r["partition"], r["explained_by"]) for r in after} == {("clean", 1, "unread_file")}
    rows = json.loads((out / "validation" / "results.json").read_text())
    named = {r["file"] for s in rows["suites"].values() for c in s["checks"] if c["id"] == "every_file_read"
             for r in c["sample"]}
    assert named == {str(p) for p in refused}


@pytest.mark.parametrize(("log_start", "fails"), [(17, False), (0, True)])
def test_a_segment_gone_while_read_is_information_only_below_the_log_start(spark, tmp_path, monkeypatch, capsys,
                                                                          log_start, fails):
    """The first segment of clean-0 (offsets 0..16) disappears between the export's listing and its
    read. When the log start offset reached the next segment (17), retention deleted it: the check
    passes, and coverage still counts it. Below that, its data is simply missing: the check fails."""
    import analytics.kafka.logdir as logdir
    from analytics.export import export

    logs = log_dir(tmp_path / "logs", ("clean-0",))
    (logs / "log-start-offset-checkpoint").write_text(f"0\n1\nclean 0 {log_start}\n")
    doomed = logs / "clean-0" / "00000000000000000000.log"
    opened = logdir.open_file

    def deleted_meanwhile(path):
        if Path(str(path)) == doomed and doomed.exists():
            doomed.unlink()
        return opened(path)

    monkeypatch.setattr(logdir, "open_file", deleted_meanwhile)
    out = tmp_path / "out"
    export(None, [str(logs)], str(out))  # its tasks in this process, as segaudit runs a small export
    assert main(["audit", str(out), "--config", CONFIG, "--no-history"]) == 0
    printed, err = capsys.readouterr()
    assert "NOT READ: 1 file vanished" in printed
    code = main(["validate", str(out)])
    printed, err = capsys.readouterr()
    assert_own_lines(err)
    assert results(out)["every_file_read"] == (1 if fails else 0)
    assert code == (1 if fails else 0), printed
    assert json.loads((out / "summary.json").read_text())["coverage"]["not_read"] == {
        "vanished": {"files": 1, "bytes": 0}}


def test_empty_inputs_are_a_complete_audit_of_zero_batches(spark, tmp_path, capsys):
    """A broker's log dir with no partition yet, and a topic whose partitions hold one empty segment
    each beside a clean partition: complete audits, exit 0, never a Spark error."""
    bare = log_dir(tmp_path / "bare", ())
    code = main(["run", str(bare), "--out", str(tmp_path / "bare-out"), "--no-history"])
    printed, err = capsys.readouterr()
    assert_own_lines(err)
    assert code == 0, err
    summary = json.loads((tmp_path / "bare-out" / "summary.json").read_text())
    assert sum(summary["verdicts"].values()) == 0
    assert summary["coverage"]["files"] == summary["coverage"]["files_read"] == 4  # the log dir's checkpoints

    logs = log_dir(tmp_path / "logs", ("clean-0",))
    for p in (0, 1):
        (logs / f"empty-{p}").mkdir()
        (logs / f"empty-{p}" / "00000000000000000000.log").touch()
    code = main(["run", str(logs), "--out", str(tmp_path / "out"), "--config", CONFIG, "--no-history"])
    printed, err = capsys.readouterr()
    assert_own_lines(err)
    assert code == 0, printed + err
    segments = json.loads((tmp_path / "out" / "_export.json").read_text())["files"]
    assert segments == 5  # clean-0's three and the two empty ones
    assert "23/23 expectations passed" in printed
