"""The plans (``analytics.export_plan``, ``analytics.audit.audit_plan``): each decision on both sides of its
threshold, the CLI's plan and a library caller's the same, and every threshold in ``analytics.tuning``
alone. No JVM starts: the decisions are functions of a few numbers."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from analytics import export_plan as plans
from analytics import tuning
from analytics.audit.audit_plan import CONTINUED, FULL, LINKED, audit_decision
from analytics.cli.options import planned_export as cli_export_plan
from analytics.cli.parser import parser
from tests.conftest import REPO

SAMPLE = REPO / "data" / "mixed"


@pytest.fixture
def alone(monkeypatch):
    """No spark-submit, no Spark Connect, no active session: a command of its own."""
    from pyspark.sql import SparkSession

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))


def test_export_decision_on_both_sides_of_the_in_process_threshold():
    limit = tuning.IN_PROCESS_BYTES
    assert plans.export_decision(limit, None)[0] is True
    assert plans.export_decision(limit + 1, None)[0] is False
    assert plans.export_decision(0, None)[0] is True
    assert plans.export_decision(None, None) == (False, "in Spark: the input's size is unknown (a bucket, or inputs not found)")
    assert plans.export_decision(10, "under spark-submit") == (False, "in Spark: under spark-submit")


def test_where_spark_runs(alone, monkeypatch):
    class Local:
        class sparkContext:  # noqa: N801 - a session's attribute
            master = "local[2]"

    class Standalone:
        class sparkContext:  # noqa: N801
            master = "spark://host:7077"

    class Connect:
        @property
        def sparkContext(self):  # noqa: N802
            raise NotImplementedError("Spark Connect")

    assert plans.spark_elsewhere(plans.STARTED_HERE) is None
    assert plans.spark_elsewhere(lambda: None) is None  # run's session, starting beside the export
    assert plans.spark_elsewhere(Local()) is None
    assert plans.spark_elsewhere(Standalone()) == "master spark://host:7077"
    assert plans.spark_elsewhere(Connect()) == "a Spark Connect session"
    assert plans.spark_elsewhere("sc://host:15002") == "sc://host:15002 named"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    assert plans.spark_elsewhere(Local()) == "under spark-submit"


def test_export_modes(alone, tmp_path):
    size = plans.input_bytes([str(SAMPLE)], None)
    assert 0 < size <= tuning.IN_PROCESS_BYTES
    full = plans.export_plan([str(SAMPLE)], str(tmp_path / "out"), session=plans.STARTED_HERE)
    assert (full.mode, full.incremental, full.in_process, full.input_bytes) == (plans.FULL, False, True, size)
    assert full.reason.startswith("in this process")
    out = tmp_path / "out"
    out.mkdir()
    # an export in OUT that read every segment as it is now: nothing new to read
    logs = sorted(str(p.resolve()) for p in SAMPLE.rglob("*.log"))
    (out / "_export.json").write_text(json.dumps({"run_id": "r1", "input_bytes": size, "segment_files": {
        p: {"size": Path(p).stat().st_size, "read_by": "r1"} for p in logs}}))
    continued = plans.export_plan([str(SAMPLE)], str(out), incremental=True, session=plans.STARTED_HERE)
    assert (continued.mode, continued.incremental, continued.input_bytes) == (plans.CONTINUED, True, 0)
    live = plans.export_plan(["kafka://localhost:9092"], str(out), session=plans.STARTED_HERE)
    assert (live.mode, live.in_process) == (plans.CLUSTER, False)
    assert plans.export_plan([str(SAMPLE)], str(out), session="spark://host:7077").in_process is False
    # no Spark given: in this process whatever the size
    assert plans.export_plan(["/nowhere"], str(out), session=None).in_process is True


def test_the_cli_and_a_library_call_make_the_same_export_plan(alone, tmp_path):
    out = str(tmp_path / "out")
    for extra in ([], ["--incremental"]):
        args = parser().parse_args(["run", str(SAMPLE), "--out", out, *extra])
        library = plans.export_plan([str(SAMPLE)], out, incremental=bool(extra), session=lambda: None)
        assert cli_export_plan(args) == library
        assert library.in_process is True
    args = parser().parse_args(["export", str(SAMPLE), "--out", out, "--master", "local[2]"])
    assert cli_export_plan(args).in_process is False  # a master named: the export runs in it


def test_audit_modes_on_both_sides_of_few_batches():
    few = tuning.FEW_BATCHES
    assert audit_decision(continuing=False)[:3] == (FULL, False, False)
    linked = dict(continuing=True, every=True, can_link=True)
    assert audit_decision(**linked, since_batches=few)[:3] == (LINKED, True, True)
    assert audit_decision(**linked, since_batches=few + 1)[:3] == (LINKED, False, False)
    assert audit_decision(**linked, since_batches=None)[:3] == (LINKED, False, False)  # every file scanned
    # not every history continues (or OUT is a bucket): the earlier verdicts are written again
    assert audit_decision(continuing=True, every=False, since_batches=10)[:3] == (CONTINUED, False, False)
    assert audit_decision(continuing=True, every=True, can_link=False, since_batches=10)[:3] == (CONTINUED, False, False)
    # the earlier verdicts read again, records many, replicas compared
    assert audit_decision(**linked, since_batches=10, look_back=True)[:3] == (LINKED, False, False)
    assert audit_decision(**linked, since_batches=10, record_rows=few)[:3] == (LINKED, True, True)
    assert audit_decision(**linked, since_batches=10, record_rows=few + 1)[:3] == (LINKED, False, False)
    assert audit_decision(**linked, since_batches=10, replicated=True)[:3] == (LINKED, True, False)
    assert all(audit_decision(**linked, since_batches=n)[3] for n in (None, 10, few + 1))


def test_every_threshold_lives_in_tuning():
    """No module of segaudit assigns a name of ``analytics.tuning`` at its top level: it imports it."""
    names = {n for n in vars(tuning) if n.isupper()}
    found = []
    for path in (REPO / "analytics").rglob("*.py"):
        if path.name == "tuning.py":
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            found += [(str(path), t.id) for t in targets if isinstance(t, ast.Name) and t.id in names]
    assert found == []


def test_ranges_are_as_long_as_a_tasks_memory_holds():
    from analytics.audit.audit_plan import range_decision

    floor, row = tuning.DEFAULT_RANGE_BATCHES, tuning.RANGE_ROW_BYTES
    assert range_decision(None)[0] == floor  # Spark Connect, or executors of unknown cores
    assert range_decision(floor * row - 1)[0] == floor  # less memory than the smallest range needs
    assert range_decision(floor * row * 4)[0] == floor * 4
    # this machine's local session (half of 24 GiB, 2 cores): 4M batches in 4 partitions are not cut
    assert range_decision(int((12 * 1024 - 300) * 2**20 * 0.6 / 2))[0] > 1_000_000
