"""Where the JVM of a local session writes: a log file of its own, never the terminal.

A command's stderr holds segaudit's own lines only. The JVM a local session starts (and the Python
workers it starts in turn) says much more: Spark's log4j output (an error a listener logs for a
query segaudit expected to fail, every task a Ctrl-C cancels), HotSpot's warnings, a worker's
traceback. All of it goes to one file per command, opened before the JVM starts and handed to it
as its stdout and stderr, so nothing of it reaches the terminal or the command's data on stdout
whatever threads are doing meanwhile. A failure the command reports names the file.

``SEGAUDIT_JVM_LOG`` chooses: a file path, or ``-`` for the terminal's stderr (as ``--debug``
does). By default the file is ``<cache>/logs/<time>-<pid>.log`` (``SEGAUDIT_CACHE``, else
``~/.cache/segaudit``); the newest ``KEEP`` files stay, older ones go when a new one is made.
Under ``spark-submit`` or over Spark Connect no JVM is started here: its logging is the cluster's.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

SWITCH = "SEGAUDIT_JVM_LOG"
TERMINAL = "-"
KEEP = 20
_opened: list[Path] = []


def folder() -> Path:
    return Path(os.environ.get("SEGAUDIT_CACHE") or Path.home() / ".cache" / "segaudit") / "logs"


_terminal = threading.Event()


def to_terminal() -> bool:
    """Whether the JVM writes to the terminal's stderr (``--debug``, or ``SEGAUDIT_JVM_LOG=-``)."""
    return _terminal.is_set() or os.environ.get(SWITCH, "").strip() == TERMINAL


def show_on_terminal(on: bool = True) -> None:
    """Whether a JVM this process starts from now on writes to the terminal (``--debug``); the
    process's environment, which its children inherit, is left alone."""
    if on:
        _terminal.set()
    else:
        _terminal.clear()


def current() -> Path | None:
    """The log file of the JVM this process started, if it started one."""
    return _opened[-1] if _opened else None


def popen_kwargs() -> dict:
    """The ``Popen`` arguments that give a new JVM its output: this process's log file, opened now
    (appended to), or nothing when the JVM writes to the terminal."""
    if to_terminal():
        return {}
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    log = open(path, "ab", buffering=0)  # noqa: SIM115 - the JVM holds it for its life; closed at exit
    _opened.append(path)
    return {"stdout": log, "stderr": log}


def _path() -> Path:
    chosen = os.environ.get(SWITCH, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    logs = folder()
    _prune(logs)
    return logs / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"


def _prune(logs: Path, keep: int = KEEP - 1) -> None:
    """Remove all but the newest ``keep`` logs of ``logs`` (a new one is about to be made)."""
    try:
        files = sorted((p for p in logs.glob("*.log") if p.is_file()), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for old in files[: max(len(files) - keep, 0)]:
        try:
            old.unlink()
        except OSError:
            pass


# Lines that say nothing of why: a harmless warning at every start, and HotSpot's own last words
# after the reason it gives first ("Invalid maximum heap size: -Xmxabc").
SAY_NOTHING = ("WARNING: Using incubator modules", "Error: Could not create the Java Virtual Machine",
               "Error: A fatal exception has occurred")


def last_line(path: Path | None = None, *, skip: tuple[str, ...] = SAY_NOTHING) -> str | None:
    """The last line of the log that says something (not a stack frame nor a line of ``skip``): why a
    JVM that exited at start did."""
    path = path or current()
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - 64 * 1024, 0))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith(("at ", "...", "Caused by", "Suppressed")) and not text.startswith(skip):
            return text
    return None
