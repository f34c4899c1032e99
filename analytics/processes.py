"""Whether a process of this host still runs: a publication's owner, a class-data archive's writer;
whether any process of a group does (a command timed until its JVM is gone, in ``bench/``)."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists (one of another user counts; pid 0 or less: no)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """Whether some process of process group ``pgid`` still exists (a session leader's group: a
    command started with ``start_new_session``, its JVM and workers)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
