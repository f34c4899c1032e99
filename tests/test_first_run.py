"""A new user's first commands, in a fresh home: the main job into a new OUT, a run on a folder with
no segments, Ctrl-C at any moment. stderr holds segaudit's lines only, and the exit codes are the
documented ones."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analytics.contract import EXIT_SIGINT, EXIT_USAGE, EXIT_VIOLATION
from tests.commands import assert_own_lines

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "mixed"
CONFIG = REPO / "data" / "mixed.truth" / "audit.toml"

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("home")


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEGAUDIT_", "PYSPARK_", "SPARK_"))}
    # a fresh home: no cache, no logs, no metrics history. The class-data archive's writer (a detached
    # process with no output of its own) is left out, so it does not outlive the test.
    return env | {"HOME": str(home), "SEGAUDIT_JVM_ARCHIVE": "off"}


def segaudit(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analytics", *args], capture_output=True, text=True, cwd=REPO,
                          env=_env(home), timeout=timeout)


def test_the_main_job_into_a_new_out_says_only_its_own_lines(home, tmp_path):
    """The first command of a fresh home (its cache empty): the main job, metrics history kept (a run
    with ``--no-history`` keeps none: ``test_object_store``'s local run)."""
    out = tmp_path / "out" / "mixed"
    done = segaudit(home, "run", str(SAMPLE), "--out", str(out), "--config", str(CONFIG))
    assert done.returncode == EXIT_VIOLATION, done.stderr[-3000:]  # the sample's planted anomalies
    assert_own_lines(done.stderr)
    # an empty cache: segaudit's jar ships with the package
    lines = done.stderr.splitlines()
    assert lines[0].startswith("exporting 37 files")  # nothing fetched or compiled before the export
    assert (out / "report" / "index.html").is_file() and (out / "validation" / "results.json").is_file()
    assert (tmp_path / "out" / "mixed.history").is_dir()
    logs = list((home / ".cache" / "segaudit" / "logs").glob("*.log"))
    assert logs and any(log.stat().st_size for log in logs)  # what the JVM said went to its log


@pytest.mark.parametrize("history", [[], ["--no-history"]], ids=["history", "no-history"])
@pytest.mark.parametrize("content", ["empty", "junk"])
def test_a_run_on_a_folder_without_segments_says_so_in_one_line(home, tmp_path, content, history):
    folder = tmp_path / content
    folder.mkdir()
    if content == "junk":
        (folder / "notes.txt").write_text("not a Kafka log\n")
        (folder / "orders-x").mkdir()
    out = tmp_path / "out"
    done = segaudit(home, "run", str(folder), "--out", str(out), *history)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr == f"segaudit: no Kafka segments found in {folder}\n"
    assert done.stdout == ""
    assert not out.exists()  # a run that published nothing leaves no OUT it made


def _interrupt(home: Path, out: Path, when) -> tuple[int, str]:
    """``segaudit run`` of the sample into ``out``, sent SIGINT once ``when()`` is true."""
    process = subprocess.Popen([sys.executable, "-m", "analytics", "run", str(SAMPLE), "--out", str(out),
                                "--config", str(CONFIG)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=REPO, env=_env(home))
    deadline = time.monotonic() + 240
    while not when() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


def _after(seconds: float):
    start = time.monotonic()
    return lambda: time.monotonic() - start >= seconds


def _writing_verdicts(out: Path):
    """True once the audit has started writing its verdicts in the run's folder."""
    return lambda: any(out.glob("_runs/*/_runs/*/batch_verdicts"))


@pytest.mark.parametrize("moment", ["0.5 s", "2 s", "the audit's write"])
def test_ctrl_c_at_any_moment_is_one_line_and_leaves_no_out(home, tmp_path, moment):
    out = tmp_path / "out"
    when = {"0.5 s": _after(0.5), "2 s": _after(2.0), "the audit's write": _writing_verdicts(out)}[moment]
    code, stderr = _interrupt(home, out, when)
    assert code == EXIT_SIGINT, stderr
    assert_own_lines(stderr)
    # in the first tenths of a second the command line may still be loading: nothing has started then
    assert re.match(r"segaudit: interrupted \(SIGINT\) (during run|before it started)", stderr.splitlines()[-1]), stderr
    assert [line for line in stderr.splitlines() if line.startswith("segaudit:")] == [stderr.splitlines()[-1]]
    assert not out.exists() or not any(out.iterdir()), sorted(out.iterdir())


def test_a_jvm_that_cannot_start_is_one_line_with_its_reason(home, tmp_path):
    out = tmp_path / "out"
    done = segaudit(home, "export", str(SAMPLE), "--out", str(out), "--master", "local[1]",
                    "--conf", "spark.driver.memory=lots")
    assert done.returncode == EXIT_USAGE, done.stderr
    assert_own_lines(done.stderr)
    [line] = [x for x in done.stderr.splitlines() if x.startswith("segaudit:")]
    assert line.startswith("segaudit: Spark: the JVM exited as it started: Invalid maximum heap size: -Xmxlots "
                           "(the JVM's log: "), line
    assert not out.exists()
