"""Whether a process of this host still runs: a publication's owner (told apart across hosts,
containers and reused pids: :func:`identity`), a class-data archive's writer;
whether any process of a group does (a command timed until its JVM is gone, in ``bench/``)."""

from __future__ import annotations

import os
import socket
import uuid


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


def identity() -> dict:
    """Who this process is, in a form another process can check (:func:`still_running`): the host's
    name, the kernel's boot id and pid namespace (containers of one host share its name and its boot
    id, never a pid namespace), the pid and the tick it started at (a pid is reused; its start tick is
    not), and a random token, so two owners are never the same by accident."""
    return {"host": socket.gethostname(), "boot_id": _read("/proc/sys/kernel/random/boot_id"),
            "pid_ns": _pid_namespace(), "pid": os.getpid(), "start_tick": _start_tick(os.getpid()),
            "token": uuid.uuid4().hex}


def still_running(owner: dict) -> bool | None:
    """Whether the process ``owner`` (:func:`identity`) names runs still: True or False when it is a
    process this one can see (the same boot and pid namespace), None when it cannot tell (another host,
    container or boot). An owner written with the host and pid alone (an older segaudit) is checked by
    them as before."""
    pid = int(owner.get("pid") or 0)
    if owner.get("host") != socket.gethostname() or pid <= 0:
        return None
    if "boot_id" not in owner:  # an older owner file: its host and pid are all there is
        return alive(pid)
    if not owner["boot_id"] or owner["boot_id"] != _read("/proc/sys/kernel/random/boot_id") \
            or owner.get("pid_ns") != _pid_namespace():
        return None
    return alive(pid) and (owner.get("start_tick") is None or _start_tick(pid) == owner["start_tick"])


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def _pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _start_tick(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat``'s 22nd field)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # the fields after the command's name, from the 3rd
