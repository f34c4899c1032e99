"""The ``segaudit`` process's entry: the console script and ``python -m analytics`` call :func:`command`.

Loading the command line's modules takes a few tenths of a second (pyarrow alone most of it). A
SIGINT or SIGTERM that comes meanwhile ends the process with the one line and the exit code of an
interruption: nothing has started yet. From the command's start on, :mod:`analytics.cli.signals`
handles them.
"""

from __future__ import annotations

import os
import signal
import sys


def _before_start(signum, _frame) -> None:
    try:
        print(f"segaudit: interrupted ({signal.Signals(signum).name}) before it started: nothing was done",
              file=sys.stderr, flush=True)
    finally:
        os._exit(128 + signum)


def command() -> int:
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _before_start)
    from analytics.cli.main import command as segaudit

    return segaudit()
