"""A fault-injecting Kafka proxy for the tests: loopback only, deterministic.

Clients connect to the proxy (the broker advertises the proxy's port, so every client's path goes
through it); the proxy forwards every request to the broker unchanged and reads the responses. With
probability ``drop_rate`` (a seeded ``random.Random``, drawn once per Produce response, in the order
the responses arrive) it drops a Produce response and closes the client's connection: the broker
has appended the batch, the client never hears so and retries it. ``delay_ms`` holds Produce
responses (again with ``delay_rate``) past the client's request timeout instead.

Kafka's framing: every request and response is a 4-byte big-endian size and that many bytes; a
request header starts with api_key (int16), api_version (int16) and correlation_id (int32), a
response header with the correlation_id. Responses come back in request order on a connection.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

PRODUCE = 0


@dataclass
class ProxyStats:
    produce_requests: int = 0
    produce_responses_dropped: int = 0
    produce_responses_delayed: int = 0
    connections: int = 0


@dataclass
class FaultProxy:
    upstream_port: int
    drop_rate: float = 0.0
    delay_rate: float = 0.0
    delay_ms: int = 0
    seed: int = 0
    port: int = 0  # 0: a free port, chosen at start
    stats: ProxyStats = field(default_factory=ProxyStats)

    def __post_init__(self):
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self.port = self._server.getsockname()[1]
        self._closed = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)

    def start(self) -> "FaultProxy":
        self._thread.start()
        return self

    def set_faults(self, drop_rate: float = 0.0, delay_rate: float = 0.0, delay_ms: int = 0, seed: int | None = None):
        with self._lock:
            self.drop_rate, self.delay_rate, self.delay_ms = drop_rate, delay_rate, delay_ms
            if seed is not None:
                self._rng = random.Random(seed)
            self.stats = ProxyStats()

    def close(self) -> None:
        self._closed.set()
        self._server.close()
        with self._lock:
            for s in list(self._sockets):
                _close(s)

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
                broker.settimeout(None)
            except OSError:
                _close(client)
                continue
            for s in (client, broker):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.stats.connections += 1
                self._sockets.update((client, broker))
            pending: list[int] = []  # api keys of the requests in flight, in order
            cond = threading.Condition()
            threading.Thread(target=self._requests, args=(client, broker, pending, cond), daemon=True).start()
            threading.Thread(target=self._responses, args=(client, broker, pending, cond), daemon=True).start()

    def _requests(self, client, broker, pending, cond) -> None:
        try:
            while True:
                frame = _read_frame(client)
                if frame is None:
                    break
                api_key = struct.unpack_from(">h", frame, 4)[0]
                acks_zero = api_key == PRODUCE and _produce_acks(frame) == 0
                if api_key == PRODUCE:
                    with self._lock:
                        self.stats.produce_requests += 1
                if not acks_zero:  # acks=0 has no response
                    with cond:
                        pending.append(api_key)
                broker.sendall(frame)
        except OSError:
            pass
        self._hang_up(client, broker)

    def _responses(self, client, broker, pending, cond) -> None:
        try:
            while True:
                frame = _read_frame(broker)
                if frame is None:
                    break
                with cond:
                    api_key = pending.pop(0) if pending else None
                if api_key == PRODUCE:
                    with self._lock:
                        drop = self._rng.random() < self.drop_rate
                        delay = not drop and self.delay_ms > 0 and self._rng.random() < self.delay_rate
                        if drop:
                            self.stats.produce_responses_dropped += 1
                        if delay:
                            self.stats.produce_responses_delayed += 1
                    if drop:  # the broker has the batch; the client never hears so
                        break
                    if delay:
                        time.sleep(self.delay_ms / 1000)
                client.sendall(frame)
        except OSError:
            pass
        self._hang_up(client, broker)

    def _hang_up(self, client, broker) -> None:
        with self._lock:
            self._sockets.discard(client)
            self._sockets.discard(broker)
        _close(client)
        _close(broker)


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, prefix included, or None at the end of the stream."""
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


def _produce_acks(frame: bytes) -> int | None:
    """The acks of a Produce request (v3+: after the header and the transactional id), or None."""
    try:
        version = struct.unpack_from(">h", frame, 6)[0]
        pos = 4 + 8
        (client_len,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + max(client_len, 0)
        if version >= 9:  # flexible: tagged fields after the header, compact strings
            pos += 1  # an empty tagged-field section (what every client sends)
            n, pos = _uvarint(frame, pos)
            pos += max(n - 1, 0)
        elif version >= 3:
            (n,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + max(n, 0)
        return struct.unpack_from(">h", frame, pos)[0]
    except struct.error:
        return None


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
