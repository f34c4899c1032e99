"""How far a step that runs Spark jobs got, from Spark's status tracker (:class:`analytics.progress.Ticker`).

A line names the step, its seconds, and the Spark stages running: each stage's tasks done of its
total, the widest first. Over Spark Connect the client has no status tracker: the line says the
seconds alone.
"""

from __future__ import annotations

from collections.abc import Callable

from analytics.progress import Ticker


def watching(spark, say: Callable[[str], None] | None, step: str, *, every: float | None = None) -> Ticker:
    """A :class:`~analytics.progress.Ticker` saying how far ``step`` (e.g. "auditing 670 batches")
    got while its ``with`` block runs Spark jobs on ``spark``."""
    tracker = _tracker(spark)

    def describe(seconds: float) -> str:
        line = f"  {step}: {seconds:.0f} s"
        stages = _running(tracker) if tracker is not None else []
        if stages:
            shown = ", ".join(f"stage {sid} {done}/{total} tasks" for sid, done, total in stages[:2])
            more = f" and {len(stages) - 2} more" if len(stages) > 2 else ""
            line += f", Spark {shown}{more}"
        return line

    return Ticker(describe, say, every=every)


def _tracker(spark):
    try:
        return spark.sparkContext.statusTracker()
    except Exception:  # noqa: BLE001 - a Spark Connect client has no context
        return None


def _running(tracker) -> list[tuple[int, int, int]]:
    """(stage id, tasks done, tasks) of the stages running now, the widest first."""
    stages = []
    for sid in tracker.getActiveStageIds():
        info = tracker.getStageInfo(sid)
        if info is not None:
            stages.append((sid, info.numCompletedTasks, info.numTasks))
    return sorted(stages, key=lambda s: (-s[2], s[0]))
