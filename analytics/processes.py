"""Whether a process of this host still runs: a publication's owner, a class-data archive's writer."""

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
