"""The JVM's stderr, passed through a filter on its way to the terminal.

Spark's launcher starts every JVM with ``--add-modules=jdk.incubator.vector``, and the JVM then
prints a warning about incubator modules at every start: a line on stderr that says nothing to an
operator and breaks the rule that a failure is the only line there. The JVM started for a local
session writes its stderr into a pipe; a daemon thread forwards every line but that one. After an
interruption the forwarding stops (:func:`mute_jvm_stderr`): the JVM's shutdown noise is not news.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

NOISE = (b"WARNING: Using incubator modules",)
_muted = threading.Event()


def mute_jvm_stderr() -> None:
    _muted.set()


def _forward(read_fd: int, write_fd: int) -> None:
    with os.fdopen(read_fd, "rb", buffering=0) as pipe, os.fdopen(write_fd, "wb", buffering=0) as target:
        for line in iter(pipe.readline, b""):
            if not _muted.is_set() and not line.startswith(NOISE):
                try:
                    target.write(line)
                except OSError:
                    return


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
    """While the block runs, processes started from here inherit a filtered stderr."""
    try:
        read_fd, write_fd = os.pipe()
        original = os.dup(2)
    except OSError:  # no usable fd 2 (a daemon): nothing to filter
        yield
        return
    threading.Thread(target=_forward, args=(read_fd, os.dup(original)), name="jvm-stderr", daemon=True).start()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        os.dup2(original, 2)
        os.close(original)
