"""The command line through its real entry point: output on stdout, errors as one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from analytics.cli import main
from tests.commands import assert_own_lines
from tests.conftest import REPO

SAMPLE = REPO / "data" / "mixed"


def test_inspect_prints_a_table_and_the_parse_errors(capsys):
    assert main(["inspect", str(SAMPLE)]) == 0
    out, err = capsys.readouterr()
    assert_own_lines(err)
    assert "26 partitions, 37 segments" in out and "zero_filled" in out and "torn-tails-0/00000000000000000000.log" in out


def test_inspect_json_is_machine_readable(capsys):
    assert main(["inspect", str(SAMPLE), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert_own_lines(err)
    doc = json.loads(out)
    assert doc["total"]["partitions"] == 26
    assert sorted(e["error_kind"] for e in doc["parse_errors"]) == ["crc_mismatch", "crc_mismatch", "truncated", "zero_filled"]


def test_missing_input_is_exit_2_with_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "analytics", "inspect", str(tmp_path / "nope")], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 2
    assert_own_lines(proc.stderr)
    assert proc.stderr.strip().count("\n") == 0 and "no such file or directory" in proc.stderr
    assert proc.stdout == ""


def test_a_folder_without_kafka_files_is_exit_2(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "no Kafka partition folders" in err


def test_bad_usage_is_exit_2_with_one_line_and_no_usage_block():
    proc = subprocess.run([sys.executable, "-m", "analytics", "inspect"], capture_output=True, text=True, cwd=REPO)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert_own_lines(proc.stderr)
    assert proc.stderr == "segaudit inspect: missing LOGDIR; see segaudit inspect --help\n"


def test_inspect_text_and_table_are_the_same(capsys):
    assert main(["inspect", str(SAMPLE / "clean-0")]) == 0
    text = capsys.readouterr()
    assert_own_lines(text.err)
    assert main(["inspect", str(SAMPLE / "clean-0"), "--format", "table"]) == 0
    assert capsys.readouterr() == text and text.err == "" and text.out.startswith("topic ")


def test_generate_writes_a_log_and_refuses_to_overwrite(tmp_path, capsys):
    assert main(["generate", str(tmp_path / "g"), "--scenario", "lost-batch"]) == 0
    out, err = capsys.readouterr()
    assert_own_lines(err)
    assert "SEQUENCE_GAP" in out and (tmp_path / "g.truth" / "batches.parquet").is_file()
    assert main(["generate", str(tmp_path / "g"), "--scenario", "lost-batch"]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "not empty" in err


def test_generate_rejects_unknown_scenario_and_profile(tmp_path, capsys):
    assert main(["generate", str(tmp_path / "g"), "--scenario", "nope"]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "unknown scenario 'nope'" in err
    assert main(["generate", str(tmp_path / "g"), "--scenario", "clean", "--profile", "9.9"]) == 2
    err = capsys.readouterr().err
    assert_own_lines(err)
    assert "unknown profile '9.9'" in err


def test_inspect_keeps_the_log_dirs_of_a_partition_apart(tmp_path, capsys):
    """The same topic-partition in two log dirs (two brokers) is two rows, as the audit keeps two histories."""
    import shutil

    first, second = tmp_path / "broker-1", tmp_path / "broker-2"
    shutil.copytree(SAMPLE / "clean-0", first / "clean-0")
    shutil.copytree(SAMPLE / "clean-0", second / "clean-0")
    (second / "clean-0" / "00000000000000000000.log").unlink()  # the second replica lost its first segment
    assert main(["inspect", str(first), str(second), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert_own_lines(err)
    rows = json.loads(out)["partitions"]
    assert [(r["topic"], r["partition"], r["log_dir"]) for r in rows] == [
        ("clean", 0, str(first)), ("clean", 0, str(second))]
    assert rows[0]["segments"] == rows[1]["segments"] + 1
    assert main(["inspect", str(first), str(second)]) == 0
    out, err = capsys.readouterr()
    assert_own_lines(err)
    assert "log_dir" in out.splitlines()[0]


def test_a_cluster_nobody_answers_at_is_exit_2_with_one_line_before_spark_starts(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "client.properties"
    config.write_text("default.api.timeout.ms=1500\nsasl.jaas.config=unused password=\"hunter2\"\n")
    proc = subprocess.run([sys.executable, "-m", "analytics", "export", f"kafka://127.0.0.1:{port}", "--out",
                           str(tmp_path / "out"), "--client-config", str(config)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert_own_lines(proc.stderr)
    assert proc.stderr.strip().count("\n") == 0 and f"cannot use kafka://127.0.0.1:{port}: no broker answered" in proc.stderr
    assert "hunter2" not in proc.stderr and not (tmp_path / "out").exists()
    bad = subprocess.run([sys.executable, "-m", "analytics", "export", "kafka://nohost", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "a cluster is kafka://HOST:PORT" in bad.stderr
    assert_own_lines(bad.stderr)


def test_the_input_size_picks_the_compiler_of_a_new_local_jvm(tmp_path):
    """A small input starts the JVM with the quick compiler alone; a large or unknown one keeps C2."""
    import argparse

    from analytics.cli.options import input_bytes
    from analytics.spark.session import (
        INTERPRETED_BYTES,
        INTERPRETED_CONF,
        JIT_OPTIONS,
        QUICK_START_BYTES,
        QUICK_START_OPTIONS,
        evaluation_conf,
        jit_options,
        single_plan_conf,
    )

    sample = REPO / "data" / "mixed"
    size = sum(f.stat().st_size for f in sample.rglob("*") if f.is_file())
    assert input_bytes(argparse.Namespace(logdirs=[str(sample)], out="unused")) == size
    one = next(sample.rglob("*.log"))
    assert input_bytes(argparse.Namespace(logdirs=[str(one)], out=None)) == one.stat().st_size
    assert input_bytes(argparse.Namespace(logdirs=["kafka://localhost:9092"], out=None)) is None
    assert input_bytes(argparse.Namespace(logdirs=[str(tmp_path / "nothing")], out=None)) is None
    (tmp_path / "_export.json").write_text(json.dumps({"input_bytes": 12345}))
    assert input_bytes(argparse.Namespace(out=str(tmp_path))) == 12345
    assert input_bytes(argparse.Namespace(out=str(tmp_path / "no-export"))) is None
    # incremental: what is new since the export in OUT
    logs = tmp_path / "logs"
    (logs / "t-0").mkdir(parents=True)
    for name, size in (("0.log", 100), ("7.log", 40), ("7.index", 10 * 1024 * 1024), ("7.timeindex", 10)):
        (logs / "t-0" / name).write_bytes(b"x" * size)
    old, grown = str((logs / "t-0" / "0.log").resolve()), str((logs / "t-0" / "7.log").resolve())
    out = tmp_path / "out"
    out.mkdir()
    (out / "_export.json").write_text(json.dumps({"input_bytes": 130, "run_id": "r2", "segment_files": {
        old: {"size": 100, "read_by": "r1"}, grown: {"size": 30, "read_by": "r2"}}}))
    # the grown segment: only its 10 new bytes are read (the export reads on from where it stopped)
    assert input_bytes(argparse.Namespace(logdirs=[str(logs)], out=str(out), incremental=True)) == 10
    assert input_bytes(argparse.Namespace(logdirs=[str(logs)], out=str(out), incremental=False)) == 140
    assert input_bytes(argparse.Namespace(out=str(out), incremental=True)) == 30
    assert input_bytes(argparse.Namespace(out=str(out), incremental=False)) == 130
    (logs / "t-0" / "9.log").write_bytes(b"x" * 5)  # a new segment: read whole
    assert input_bytes(argparse.Namespace(logdirs=[str(logs)], out=str(out), incremental=True)) == 15
    # the audit after an export that read on in a grown segment: the bytes read since its head
    (out / "_export.json").write_text(json.dumps({"input_bytes": 130, "run_id": "r2", "segment_files": {
        old: {"size": 100, "read_by": "r1"}, grown: {"size": 30, "read_by": "r2", "parts": [
            {"name": "a", "read_by": "r1", "size": 12}, {"name": "a+12", "read_by": "r2", "size": 30}]}}}))
    assert input_bytes(argparse.Namespace(out=str(out), incremental=True)) == 18
    assert jit_options(size) == jit_options(QUICK_START_BYTES) == QUICK_START_OPTIONS
    assert jit_options(QUICK_START_BYTES + 1) == jit_options(None) == JIT_OPTIONS

    # the options reach the JVM: a fresh process's session over the sample runs C1 alone, with the
    # code cache of C1 and C2 (C1's own, 48 MiB, fills up in a whole run, and then HotSpot stops compiling)
    probe = ("import argparse, sys\n"
             "from analytics.cli.options import spark_session\n"
             "args = argparse.Namespace(logdirs=[sys.argv[1]], out=None, master=None, remote=None, conf=[])\n"
             "factory = spark_session(args).sparkContext._jvm.java.lang.management.ManagementFactory\n"
             "print(' '.join(factory.getRuntimeMXBean().getInputArguments()))\n"
             "print(sum(p.getUsage().getMax() for p in factory.getMemoryPoolMXBeans() if 'Code' in p.getName()))\n"
             "from pyspark.sql import SparkSession\n"
             "conf = SparkSession.getActiveSession().conf\n"
             "print(conf.get('spark.sql.codegen.factoryMode'), conf.get('spark.sql.adaptive.enabled'),"
             " conf.get('spark.sql.shuffle.partitions'), conf.get('spark.sql.files.minPartitionNum'))\n"
             "from pyspark.errors.utils import is_debugging_enabled\n"
             "print(is_debugging_enabled())\n")
    proc = subprocess.run([sys.executable, "-c", probe, str(sample)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    arguments, code_cache, factory_mode, call_sites = proc.stdout.splitlines()[-4:]
    assert set(QUICK_START_OPTIONS.split()) <= set(arguments.split()) and JIT_OPTIONS not in arguments.split()
    assert int(code_cache) >= 240 * 1024 * 1024
    # the sample is tiny: no generated code, and each query planned once with a scan task and a shuffle
    # partition per core
    interpreted = INTERPRETED_CONF["spark.sql.codegen.factoryMode"]
    assert factory_mode.split() == [interpreted, "false", str(os.cpu_count()), str(os.cpu_count())]
    assert call_sites == "False"  # PySpark records no call site per DataFrame function (session.NO_CALL_SITES)
    assert evaluation_conf(INTERPRETED_BYTES, 3) == INTERPRETED_CONF | single_plan_conf(3)
    assert evaluation_conf(INTERPRETED_BYTES + 1, 3) == {}


def test_a_run_whose_session_cannot_start_while_it_exports_is_one_line_and_leaves_nothing(tmp_path):
    # a small local input is exported in this process while the JVM starts on a thread of its own:
    # a session that cannot start (no Java) still ends the run with one line, and no staging is left
    java = subprocess.run(["bash", "-c", "command -v java"], capture_output=True, text=True).stdout.strip()
    hidden = {os.path.dirname(java), os.path.dirname(os.path.realpath(java))} if java else set()
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p not in hidden)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-m", "analytics", "run", str(SAMPLE), "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PATH": path, "JAVA_HOME": str(tmp_path / "no-java")}, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert_own_lines(proc.stderr)
    assert proc.stderr.startswith("exporting ") and "exported 37 files" in proc.stderr  # the export ran meanwhile
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("segaudit: JAVA_HOME is ") and "holds no bin/java" in last
    assert [line for line in proc.stderr.splitlines() if line.startswith("segaudit:")] == [last]
    assert os.listdir(out) == []
