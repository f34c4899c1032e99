"""The spark-submit jobs (``jobs/*.py``) are their commands: every option of ``run``, ``audit``,
``export`` and ``validate``, walked from the CLI's parser, reaches the pipeline (and the session,
the progress lines, the output) from the job exactly as from ``segaudit COMMAND``. The pipeline
functions and the session getter are recorders here: no JVM starts."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from analytics import pipeline
from analytics.audit.job import AuditResult
from analytics.cli import commands
from analytics.cli.main import main as segaudit
from analytics.cli import options as options_module
from analytics.cli.parser import parser
from analytics.errors import UsageError
from analytics.export import ExportResult
from expectations.suites import check_ids
from expectations.validate import CheckResult, ValidationResult
from analytics.spark.concurrent import Starting
from jobs import audit as audit_job
from jobs import export as export_job
from jobs import run as run_job
from jobs import validate as validate_job
from tests.commands import assert_own_lines
from tests.conftest import REPO

SAMPLE = str(REPO / "data" / "mixed")
JOBS = {"run": run_job, "audit": audit_job, "export": export_job, "validate": validate_job}
CHECK = check_ids()[0]


@dataclass(frozen=True)
class Session:
    """What the command asked ``spark_session`` for, standing for the session it would get."""

    master: str | None
    remote: str | None
    conf: tuple
    incremental: bool
    size: object


def _export_result(out: str) -> ExportResult:
    return ExportResult(out, "run-e", 37, 1000, {"batches": 670, "segments": 37}, 1.5)


def _audit_result(out: str) -> AuditResult:
    return AuditResult(out, "run-a", {"VALID": 600, "DUPLICATE": 70}, {"ok": 600, "critical": 70}, {"committed": 3},
                       None, {}, 2.5, 1767490225662)


def _validation_result(out: str) -> ValidationResult:
    return ValidationResult(out, [CheckResult("batches", CHECK, "a check", False, "critical", 7, 0, []),
                                  CheckResult("batches", "no_crc_failure", "another", True, "critical", 0, 0, [])],
                            3.5, f"{out}/validation/data_docs/index.html")


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    """``record(argv, entry)``: what ``entry(argv)`` did, as recorded: the progress setting, the
    sessions asked for, each pipeline call with its arguments, stdout, stderr and the exit code."""
    calls: list = []

    def spark_session(args, plan=None):
        incremental = plan.incremental if plan is not None else getattr(args, "incremental", False)
        session = Session(args.master, args.remote, tuple(args.conf), incremental,
                          None if plan is None else plan.input_bytes)
        calls.append(("spark_session", session))
        return session

    def recorder(name, result):
        def call(*args, **kwargs):
            session, *rest = args
            if isinstance(session, Starting):  # run's session, started beside an export in the command's process
                session = session.result()
            calls.append((f"pipeline.{name}", session, tuple(rest), kwargs))
            return result(rest[1] if name in ("export", "run") else rest[0])  # OUT
        return call

    def run_result(out):
        return pipeline.RunResult(_export_result(out), _audit_result(out), _validation_result(out),
                                  f"{out}/report/index.html", 12, 34, 9.5)

    monkeypatch.setattr(commands, "spark_session", spark_session)
    monkeypatch.setattr("analytics.progress.configure", lambda on: calls.append(("progress", on)))
    monkeypatch.setattr(pipeline, "require", lambda out, *stages: {})
    monkeypatch.setattr(commands, "_summary", lambda out: {"verdicts": {"VALID": 600, "DUPLICATE": 70}})
    for name, result in (("export", _export_result), ("audit", _audit_result), ("validate", _validation_result),
                         ("run", run_result)):
        monkeypatch.setattr(pipeline, name, recorder(name, result))

    def record(argv, entry, capsys) -> list:
        calls.clear()
        code = entry(argv)
        out, err = capsys.readouterr()
        assert_own_lines(err)
        return [*calls, ("stdout", out), ("stderr", err), ("exit", code)]

    return record


@pytest.fixture
def places(tmp_path):
    """The positional arguments of each command, and the files option values name."""
    out = tmp_path / "audited"
    out.mkdir()
    config = tmp_path / "audit.toml"
    config.write_text(f'profile = "3.9"\n\n[validation]\nwarn = ["{CHECK}"]\n')
    client = tmp_path / "client.properties"
    client.write_text("security.protocol=PLAINTEXT\n")
    server = tmp_path / "server.properties"
    server.write_text("producer.id.expiration.ms=3000\n")
    new = str(tmp_path / "new")
    base = {"run": [SAMPLE, "--out", new], "export": [SAMPLE, "--out", new], "audit": [str(out)],
            "validate": [str(out)]}
    values = {
        "--input-format": ["dump-log"], "--topics": ["orders-.*"], "--client-config": [str(client)],
        "--from-offset": ["5"], "--from-time": ["2026-01-01T00:00:00Z"], "--until-time": ["1767490225662"],
        "--max-bytes-per-second": ["1000000"], "--max-fetches-per-broker": ["3"],
        "--config": [str(config)], "--profile": ["3.9"], "--producer-id-expiration-ms": ["1000"],
        "--transaction-max-timeout-ms": ["2000"], "--export-time-ms": ["5"], "--dedup-key": ["header:id"],
        "--cleanup-policy": ["compacted=compact"], "--message-timestamp-type": ["orders=LogAppendTime"],
        "--server-properties": [str(server)], "--log-start": ["orders:0=5"], "--restart": ["orders:1@offset=7"],
        "--range-batches": ["10"], "--history": [str(tmp_path / "metrics")],
        "--prometheus-file": [str(tmp_path / "segaudit.prom")], "--warn": [CHECK], "--allow": [f"{CHECK}=3"],
        "--format": ["json"], "--master": ["local[2]"], "--remote": ["sc://localhost:15002"],
        "--conf": ["spark.sql.shuffle.partitions=3"],
    }
    return base, values


def options(command: str) -> list[argparse.Action]:
    """The command's options, from the CLI's parser (its positionals and the required ``--out`` are
    in every call)."""
    return [a for a in parser().commands[command]._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction) and "--out" not in a.option_strings]


def cases() -> list:
    return [pytest.param(command, flag, id=f"{command} {flag}")
            for command in JOBS for action in options(command) for flag in action.option_strings]


@pytest.mark.parametrize("submitted", [False, True], ids=["alone", "submitted"])
@pytest.mark.parametrize("command,flag", cases())
def test_every_option_reaches_the_pipeline_from_the_job_as_from_the_cli(command, flag, submitted, recorded, places,
                                                                        capsys, monkeypatch):
    """Alone, and as under spark-submit (PYSPARK_GATEWAY_PORT set: a session even for an export
    small enough to read in the command's own process, which has no use for --conf)."""
    base, values = places
    if submitted:
        monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    if flag not in values and parser().commands[command]._option_string_actions[flag].nargs != 0:
        pytest.fail(f"{command} {flag}: no sample value here for an option the parser has (add one to `places`)")
    argv = [*base[command], flag, *values.get(flag, [])]
    from_cli = recorded([command, *argv], segaudit, capsys)
    from_job = recorded(argv, JOBS[command].main, capsys)
    assert from_cli[-1] == ("exit", from_cli[-1][1]) and from_cli[-1][1] in (0, 1), from_cli
    assert any(c[0] == f"pipeline.{command}" for c in from_cli), from_cli
    assert from_job == from_cli
    # the recorders see the option (unless it only says the default again: run --records)
    parsed, default = (parser().parse_args([command, *a]) for a in (argv, base[command]))
    if submitted and vars(parsed) != vars(default):
        assert from_cli != recorded([command, *base[command]], segaudit, capsys), f"{flag} changed nothing recorded"


@pytest.mark.parametrize("command", ["run", "audit", "export"])
def test_incremental_reaches_the_pipeline_from_the_job(command, recorded, places, capsys):
    base, _ = places
    calls = recorded([*base[command], "--incremental"], JOBS[command].main, capsys)
    [(_, session, _, kwargs)] = [c for c in calls if c[0] == f"pipeline.{command}"]
    # one name, read once: audit takes it; run and export take the export's plan, which carries it
    carried = {"run": lambda: kwargs["planned"].incremental, "export": lambda: kwargs["plan"].incremental,
               "audit": lambda: kwargs["incremental"]}[command]()
    assert carried is True
    assert "incremental" not in kwargs or command == "audit"  # not a second copy beside the plan
    assert session is None or session.incremental  # the session is sized for what is new


@pytest.mark.parametrize("command", ["run", "export"])
def test_under_spark_submit_the_job_reads_in_the_submitted_session(command, recorded, places, capsys, monkeypatch):
    """spark-submit sets PYSPARK_GATEWAY_PORT: the session is the submitted one (no master of the
    job's own), and a small local input is exported in Spark, not in the command's process. Alone,
    the command finds no active session (the suite's own Spark, when a module before this one on the
    worker started it, would be one: the export would then run in it, rightly)."""
    from pyspark.sql import SparkSession

    base, _ = places
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    asked = []
    monkeypatch.setattr("analytics.spark.session.get_spark",
                        lambda master=None, **kw: asked.append((master, kw.get("remote"))) or "the session")
    monkeypatch.setattr(commands, "spark_session", options_module.spark_session)
    alone = recorded([command, *base[command]], segaudit, capsys)  # a command with no master: in its own process
    [(_, session, _, kwargs)] = [c for c in alone if c[0] == f"pipeline.{command}"]
    planned = "planned" if command == "run" else "plan"  # the export's plan (analytics.export_plan)
    assert (session, kwargs[planned].in_process) == (("the session", True) if command == "run" else (None, True))

    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    asked.clear()
    submitted = recorded(base[command], JOBS[command].main, capsys)
    [(_, session, _, kwargs)] = [c for c in submitted if c[0] == f"pipeline.{command}"]
    assert session == "the session" and asked == [(None, None)]
    assert kwargs[planned].in_process is False


def test_the_export_job_names_the_run_it_published(recorded, places, capsys):
    base, _ = places
    calls = recorded(base["export"], export_job.main, capsys)
    assert ("exit", 0) in calls
    stdout = dict(c for c in calls if c[0] == "stdout")["stdout"]
    assert "batches" in stdout and f"export run run-e in {base['export'][-1]}" in stdout


def test_a_job_fails_in_one_line_with_its_exit_code(recorded, places, capsys, monkeypatch):
    base, _ = places

    def refuse(*args, **kwargs):
        raise UsageError("no export in OUT")

    monkeypatch.setattr(pipeline, "audit", refuse)
    assert audit_job.main(base["audit"]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert err == "segaudit: no export in OUT\n"
    assert audit_job.main(["--debug", *base["audit"]]) == 2  # --debug: the traceback too
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("segaudit: no export in OUT\n")
    assert validate_job.main([*base["validate"], "--bogus"]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "unknown option --bogus" in err


@pytest.mark.parametrize("old, command", [("run_audit", "run"), ("audit_sequences", "audit"),
                                          ("export_segments", "export"), ("validate_expectations", "validate")])
def test_a_jobs_former_name_runs_the_job_after_one_warning_line(old, command, recorded, places, capsys):
    """Schedules written for a job's former name keep running: the same pipeline call, one line more."""
    import importlib

    base, _ = places
    former = recorded(base[command], importlib.import_module(f"jobs.{old}").main, capsys)
    now = recorded(base[command], JOBS[command].main, capsys)
    assert [c for c in former if c[0] != "stderr"] == [c for c in now if c[0] != "stderr"]
    stderr = dict(c for c in former if c[0] == "stderr")["stderr"]
    assert f"segaudit: warning: jobs/{old}.py is now jobs/{command}.py" in stderr
