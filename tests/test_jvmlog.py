"""Where a local JVM writes: its own log file, chosen once per process, the newest kept."""

from __future__ import annotations

import os
import time

from analytics.spark import jvmlog


def test_a_new_log_file_is_opened_in_the_cache_and_old_ones_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setenv("SEGAUDIT_CACHE", str(tmp_path))
    monkeypatch.delenv(jvmlog.SWITCH, raising=False)
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(jvmlog.KEEP + 5):
        old = logs / f"old-{i:02d}.log"
        old.write_text("x")
        os.utime(old, (time.time() - 1000 + i, time.time() - 1000 + i))
    kwargs = jvmlog.popen_kwargs()
    try:
        assert kwargs["stdout"] is kwargs["stderr"]
        kwargs["stderr"].write(b"hello\n")
        assert jvmlog.current().parent == logs and jvmlog.current().read_bytes() == b"hello\n"
        kept = sorted(p.name for p in logs.glob("*.log"))
        assert len(kept) == jvmlog.KEEP and "old-00.log" not in kept and f"old-{jvmlog.KEEP + 4:02d}.log" in kept
    finally:
        kwargs["stderr"].close()


def test_the_terminal_when_asked(monkeypatch):
    monkeypatch.setenv(jvmlog.SWITCH, "-")
    assert jvmlog.to_terminal() and jvmlog.popen_kwargs() == {}


def test_the_reason_a_jvm_gave_is_its_last_line_that_says_something(tmp_path):
    log = tmp_path / "jvm.log"
    log.write_text("WARNING: Using incubator modules: jdk.incubator.vector\nInvalid maximum heap size: -Xmxabc\n"
                   "Error: Could not create the Java Virtual Machine.\n"
                   "Error: A fatal exception has occurred. Program will exit.\n")
    assert jvmlog.last_line(log) == "Invalid maximum heap size: -Xmxabc"
    trace = tmp_path / "trace.log"
    trace.write_text("java.lang.IllegalStateException: gone\n\tat a.b.C.d(C.java:1)\n\t... 3 more\n")
    assert jvmlog.last_line(trace) == "java.lang.IllegalStateException: gone"
    assert jvmlog.last_line(tmp_path / "none.log") is None


def test_debug_shows_the_jvm_on_the_terminal_for_its_command_only(monkeypatch, capsys):
    from analytics.cli.main import guarded

    monkeypatch.delenv(jvmlog.SWITCH, raising=False)
    seen = []
    assert guarded(lambda: seen.append(jvmlog.to_terminal()) or 0, "export", debug=True) == 0
    assert seen == [True]
    assert not jvmlog.to_terminal() and jvmlog.SWITCH not in os.environ  # nor in what its children inherit
