"""Ports for the servers the tests start (Kafka brokers, versitygw, Trino, Spark Connect).

Each is below Linux's ephemeral range (32768-60999), where no outgoing connection of another process
takes it between its choice here and the server's bind, in a block of its own per pytest-xdist worker,
handed out in turn.
"""

from __future__ import annotations

import itertools
import os
import socket

PORTS_FROM, PORTS_PER_WORKER = 20000, 3000
_handed = itertools.count()


def free_port() -> int:
    """A port of this process's block that nothing listens on or holds."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    first = PORTS_FROM + PORTS_PER_WORKER * (int(worker[2:]) if worker[2:].isdigit() else 0)
    for _ in range(PORTS_PER_WORKER):
        port = first + next(_handed) % PORTS_PER_WORKER
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {first}-{first + PORTS_PER_WORKER - 1}")
