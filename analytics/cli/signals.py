"""SIGINT and SIGTERM during a command: stop the running Spark jobs, then unwind.

The handler cancels the session's jobs from a helper thread (Py4J gives each Python thread its own
connection; the main thread's may be in the middle of a call) and waits until none runs, so no task
writes into a staging folder after the stage removed it. It then raises
:class:`~analytics.errors.Interrupted` in the main thread: the running stage's ``with
publication`` block removes its staging on the way out, and ``OUT`` keeps the previous complete run.
From then on every log record is dropped: what is left to say is one line.

The exception can land where Python drops it: in a finalizer or a weakref callback (Py4J
releases Java objects in them). Then the stage runs on, but no commit happens after a signal
(:func:`analytics.publish.refuse_commits`): the stage fails there, or earlier on its cancelled
jobs, and either way the command reports the interruption. Such a dropped ``Interrupted`` is not
printed (``sys.unraisablehook``): the one line says it.

Creating a SparkContext installs PySpark's own SIGINT handler (which cancels from inside the
handler, on the main thread's busy connection): :func:`install` runs again once the session exists.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time

from analytics import publish
from analytics.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[str] = []
_original: dict = {}


def install() -> None:
    """Handle SIGINT and SIGTERM from here on (in the main thread; elsewhere signals are left alone)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in SIGNALS:
        previous = signal.signal(s, _handler)
        _original.setdefault(s, previous)
    if sys.unraisablehook is not _unraisable:
        _original.setdefault("unraisablehook", sys.unraisablehook)
        sys.unraisablehook = _unraisable


def restore() -> None:
    """Put back the handlers that were there before the first :func:`install`."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s, handler in _original.items():
        if s == "unraisablehook":
            sys.unraisablehook = handler
        else:
            signal.signal(s, handler)
    _original.clear()
    _received.clear()
    publish.refuse_commits(None)


def received() -> str | None:
    """The name of the signal that interrupted the command, if one did."""
    return _received[0] if _received else None


def _handler(signum, _frame) -> None:
    if _received:  # a second signal while the first unwinds
        return
    name = signal.Signals(signum).name
    _received.append(name)
    publish.refuse_commits(Interrupted(name))
    logging.disable(logging.CRITICAL)
    canceller = threading.Thread(target=cancel_spark_jobs, name="cancel-spark-jobs", daemon=True)
    canceller.start()
    canceller.join(timeout=20)
    raise Interrupted(name)


def _unraisable(unraisable) -> None:
    """Drop an ``Interrupted`` that Python could not raise (see the module's note); pass on the rest."""
    if isinstance(unraisable.exc_value, Interrupted):
        return
    _original.get("unraisablehook", sys.__unraisablehook__)(unraisable)


def cancel_spark_jobs(wait_s: float = 15.0) -> None:
    """Cancel every running job of the active Spark session, if there is one, and wait (at most
    ``wait_s``) until none runs."""
    # Nothing is imported here: the main thread, which waits for this one, may hold the import lock
    # of the very module (a session starting: pyspark's); a module not loaded yet has no jobs.
    context_module, session_module = sys.modules.get("pyspark.core.context"), sys.modules.get("analytics.spark.session")
    try:
        if session_module is not None:
            session_module.interrupt_remote()
        context = getattr(getattr(context_module, "SparkContext", None), "_active_spark_context", None)
        if context is None:
            return
        context.cancelAllJobs()
        deadline = time.monotonic() + wait_s
        while context.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
            time.sleep(0.1)
    except Exception:  # noqa: BLE001 - the interruption itself is what gets reported
        pass
