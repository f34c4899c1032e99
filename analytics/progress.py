"""Progress while long work runs: the lines a command says on stderr as it goes.

A command says each step as it starts ("auditing 670 batches ..."). While a step runs, a
:class:`Ticker` adds a line at most every ``EVERY`` seconds saying how far it got (files read, a
Spark stage's tasks), and only when such lines are wanted (:func:`ticking`): stderr is a terminal,
or the command was given ``--progress`` (a scheduler keeping the log of a night's run). The command
line decides once per command (:func:`configure`); a library caller that wants them says so the
same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

EVERY = 5.0  # seconds between two lines of a step, at most
_periodic = threading.Event()


def configure(periodic: bool) -> None:
    """Whether steps say how far they got while they run (see the module's note)."""
    if periodic:
        _periodic.set()
    else:
        _periodic.clear()


def ticking() -> bool:
    return _periodic.is_set()


class Ticker:
    """While the ``with`` block runs, every ``every`` seconds: ``say(describe(seconds))`` when
    :func:`ticking` and there is a ``say``, the line is not None and differs from the last one said. ``describe`` gets the
    seconds since the block started; an exception it raises ends the ticking, not the work."""

    def __init__(self, describe: Callable[[float], str | None], say: Callable[[str], None] | None, *,
                 every: float | None = None):
        self.describe = describe
        self.say = say
        self.every = EVERY if every is None else every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="progress", daemon=True)

    def __enter__(self):
        if self.say is not None and ticking():  # no one to tell: no thread
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()

    def _run(self) -> None:
        started = time.monotonic()
        last = None
        while not self.stop.wait(self.every):
            try:
                line = self.describe(time.monotonic() - started)
            except Exception:  # noqa: BLE001 - progress is a courtesy: the work goes on without it
                return
            if line is not None and line != last and not self.stop.is_set():
                last = line
                self.say(line)
