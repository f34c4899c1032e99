"""What a segaudit command may print on stderr: its own lines, and nothing of the JVM or Python underneath.

Every test that runs a command checks its stderr with :func:`assert_own_lines`.
"""

from __future__ import annotations

import contextlib
import io
import re
import threading
from dataclasses import dataclass

# A Java or Python stack trace, a log4j or SLF4J record, a Python warning: never a segaudit line.
FOREIGN = re.compile(
    r"^\s+at [\w.$<>]+\(.*\)$"                      # a Java stack frame
    r"|^Caused by: |^\s*Suppressed: "               # a Java cause
    r"|Traceback \(most recent call last\)"         # a Python traceback
    r"|^\s*File \".*\", line \d+"                   # a Python frame
    r"|^\d\d:\d\d:\d\d (ERROR|WARN|INFO)\b"         # segaudit's log4j layout
    r"|^\d{2,4}[-/]\d\d[-/]\d\d \d\d:\d\d:\d\d"    # Spark's default log4j layout
    r"|\b(ERROR|WARN) [\w.$]+: "                    # any log4j layout
    r"|^SLF4J|^log4j|^WARNING: |^OpenJDK .*VM warning"
    r"|Warning: |^\[Stage \d+"                      # a Python warning, Spark's console progress bar
    r"|^\w+(\.\w+)*(Exception|Error): ",            # an exception's own line
    re.M,
)


def foreign_lines(stderr: str) -> list[str]:
    """The lines of ``stderr`` that are not segaudit's own."""
    return [line for line in stderr.splitlines() if FOREIGN.search(line)]


def assert_own_lines(stderr: str) -> None:
    """``stderr`` holds segaudit's lines only: no stack trace, log record or warning of what runs beneath."""
    foreign = foreign_lines(stderr)
    assert not foreign, "not segaudit's own lines on stderr:\n" + "\n".join(foreign[:20]) + "\n--- whole stderr:\n" + stderr[-3000:]


# The JVM's own line for the module Spark's launcher always adds (JavaModuleOptions), printed as a
# submitted driver's JVM starts, before any code of Spark or segaudit runs: the one line not theirs.
LAUNCHER_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector\n"


def assert_submitted_lines(stderr: str) -> None:
    """The stderr of a ``spark-submit``: the launcher's warning at most once, else segaudit's lines only."""
    assert stderr.count(LAUNCHER_WARNING) <= 1
    assert_own_lines(stderr.replace(LAUNCHER_WARNING, ""))


def no_network() -> dict[str, str]:
    """An environment in which nothing leaves the machine: the HTTPS and HTTP proxies pointed at a
    closed port of loopback, which itself is reached directly (the S3 server and brokers of the
    tests live there). A command that still needs the network fails under it."""
    import socket

    with socket.socket() as probe:  # a port just closed: a connection to it is refused at once
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    proxies = {name: closed for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY")}
    return proxies | {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


@dataclass
class Ran:
    """A command run in this process: what ``subprocess.run`` would tell of it."""

    returncode: int
    stdout: str
    stderr: str


_ONE_COMMAND = threading.Lock()  # stdout and stderr are redirected process-wide: one command at a time


def segaudit_here(*args: str) -> Ran:
    """``segaudit ARGS`` in this process, on the tests' Spark session (no JVM of its own to start): its
    exit code and what it printed; its stderr holds segaudit's own lines only. A test that asserts what
    a command's own process prints (the JVM's output, an interrupt) runs it as a process instead."""
    from analytics import cli

    stdout, stderr = io.StringIO(), io.StringIO()
    with _ONE_COMMAND, contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(list(args))
    assert_own_lines(stderr.getvalue())
    return Ran(code, stdout.getvalue(), stderr.getvalue())
