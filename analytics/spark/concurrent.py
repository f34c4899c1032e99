"""Independent Spark actions run at once.

A stage that writes several tables from the same inputs (the audit's derived tables, the report's
sections) would run them one after the other, and with small inputs each of their jobs is one task
on one core while the driver plans the next: most of the time goes to fixed per-job costs, with
the other cores idle. Submitted from several threads, Spark runs their jobs side by side (each
Python thread has its own JVM thread) and the planning of one overlaps the tasks of another. The
work is the same; on inputs large enough to fill the cluster, the jobs share it.

A failure (or a signal) in one stops all: the others' jobs are interrupted, and :func:`concurrently`
returns only when no action of it runs any more, so nothing writes into a staging folder that the
caller is about to remove.

:func:`once` shares a piece of work among some of the actions (the first to need it runs it, the
others wait), so the actions that do not need it start at once. :func:`beside` starts one piece of
work on a thread of its own, for the caller to wait for later: a session whose JVM starts while
``run`` exports a small input in its own process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any, Generic, TypeVar

from analytics.tuning import MAX_THREADS

T = TypeVar("T")


def concurrently(spark, actions: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run ``actions`` (name -> function of no arguments) at once; their results by name.

    The first exception (of an action, or a signal in the calling thread) interrupts the session's
    running jobs, waits for every action to end, and is raised."""
    if not actions:
        return {}
    pool = ThreadPoolExecutor(max_workers=min(MAX_THREADS, len(actions)), thread_name_prefix="segaudit")
    futures: dict[str, Future] = {}
    try:
        futures = {name: pool.submit(action) for name, action in actions.items()}
        done, _ = wait(futures.values(), return_when=FIRST_EXCEPTION)
        for future in done:
            future.result()  # the first failure, raised here
        return {name: future.result() for name, future in futures.items()}
    except BaseException:
        _stop(spark, pool, futures.values())
        raise
    finally:
        pool.shutdown(wait=True)


def _stop(spark, pool: ThreadPoolExecutor, futures) -> None:
    """Cancel what has not started and interrupt the jobs of what has, until every action ended."""
    pool.shutdown(wait=False, cancel_futures=True)
    pending = [f for f in futures if not f.done()]
    while pending:
        try:
            spark.interruptAll()
        except Exception:  # noqa: BLE001 - a session already stopped has nothing left to interrupt
            pass
        _, not_done = wait(pending, timeout=0.5)
        pending = list(not_done)


def once(work: Callable[[], T]) -> Callable[[], T]:
    """``work`` for actions of :func:`concurrently` that share it: the first to call the function
    returned runs it, the others wait for its result (an error is raised to the caller that ran it,
    and a later call runs it again).

    >>> runs = []
    >>> shared = once(lambda: runs.append(1) or len(runs))
    >>> shared(), shared(), runs
    (1, 1, [1])
    """
    lock, result = threading.Lock(), []

    def get() -> T:
        with lock:
            if not result:
                result.append(work())
            return result[0]
    return get


class Starting(Generic[T]):
    """What :func:`beside` started: :meth:`result` waits for it, then returns its result or raises
    what it raised (e.g. a Spark session still starting, which a stage asks for when it needs it)."""

    def __init__(self, future: Future):
        self._future = future

    def result(self) -> T:
        return self._future.result()


def beside(work: Callable[[], T], name: str) -> Starting[T]:
    """Start ``work`` on a thread of its own now; the handle returned waits for it. For work that
    mostly waits on another process (a JVM starting) while the calling thread goes on with its own.

    >>> ready = beside(lambda: 6 * 7, "answer")
    >>> ready.result()
    42
    """
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # noqa: BLE001 - raised again by the caller's wait
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return Starting(future)
