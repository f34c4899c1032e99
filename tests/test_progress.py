"""Progress while a long step runs: a line at most every few seconds, only when wanted, and from
Spark's status tracker the stage's tasks done of its total."""

from __future__ import annotations

import re
import threading
import time

import pytest

from analytics import progress
from analytics.progress import Ticker


@pytest.fixture
def ticking():
    progress.configure(True)
    yield
    progress.configure(False)


def test_a_ticker_says_each_new_line_once_while_the_block_runs(ticking):
    lines: list[str] = []
    count = iter(range(1000))
    with Ticker(lambda s: f"step {next(count) // 2}", lines.append, every=0.02):
        time.sleep(0.3)
    said = len(lines)
    time.sleep(0.1)
    assert len(lines) == said  # nothing after the block
    assert said >= 3
    assert len(set(lines)) == len(lines)  # a line equal to the last one is not said again
    assert lines[:2] == ["step 0", "step 1"]


def test_a_ticker_is_silent_unless_progress_lines_are_wanted():
    progress.configure(False)
    lines: list[str] = []
    with Ticker(lambda s: f"{s}", lines.append, every=0.01):
        time.sleep(0.1)
    assert lines == []


def test_a_failing_description_ends_the_ticking_not_the_work(ticking):
    calls = []

    def describe(_s):
        calls.append(1)
        raise RuntimeError("gone")

    with Ticker(describe, calls.append, every=0.01):
        time.sleep(0.1)
    assert calls == [1]


def test_the_generator_says_how_far_it_got(ticking, tmp_path, monkeypatch):
    from analytics.generate import generate

    monkeypatch.setattr(progress, "EVERY", 0.01)
    lines: list[str] = []
    generate(tmp_path / "log", "mixed", scale=5, progress=lines.append)
    assert lines, "no progress line"
    assert all(re.fullmatch(r"  generating: \d+ s, (scenario \d+/\d+|writing the files), [\d,]+ batches", line)
               for line in lines), lines


@pytest.mark.spark
def test_a_spark_step_says_its_stage_and_tasks(spark, ticking):
    from analytics.spark.progress import watching

    lines: list[str] = []
    done = threading.Event()

    def slow(_rows):
        time.sleep(0.4)

    with watching(spark, lines.append, "auditing 4 batches", every=0.1):
        spark.sparkContext.parallelize(range(4), 4).foreachPartition(slow)
        done.set()
    assert any(re.fullmatch(r"  auditing 4 batches: \d+ s, Spark stage \d+ [0-4]/4 tasks", line) for line in lines), lines
