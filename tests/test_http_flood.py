"""A connection flood with churn against the real app and HTTP front end: afterwards the exporter serves as before."""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator

from helpers import make_app, parse_samples, sample
from servers import wait_until

from exporter.service.server import make_http_server

FLOOD_SECONDS = 30.0
MAX_CONNECTIONS = 64


def _get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset instead of a FIN, as a client killed mid-request does."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Flood:
    """Clients that misbehave in turn until ``until``; each loop bounded by the clock and by its count."""

    def __init__(self, port: int, until: float) -> None:
        self.port = port
        self.until = until
        self.counts: dict[str, int] = {}
        self.probe_failures: list[str] = []
        self.probes = 0

    def _connect(self) -> socket.socket | None:
        try:
            return socket.create_connection(("127.0.0.1", self.port), timeout=2)
        except OSError:
            return None

    def _turns(self) -> Iterator[int]:
        """A client's loop: until the flood's end, and never more than 100,000 turns."""
        for turn in range(100_000):
            if time.monotonic() > self.until:
                return
            yield turn

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def hoard(self) -> None:
        """Idle connections past the bound, dropped and opened again in batches."""
        held: list[socket.socket] = []
        for _ in self._turns():
            sock = self._connect()
            if sock is not None:
                held.append(sock)
                self._count("hoarded")
            if len(held) >= 2 * MAX_CONNECTIONS:
                for old in held[:MAX_CONNECTIONS]:
                    old.close()
                del held[:MAX_CONNECTIONS]
            time.sleep(0.005)
        for sock in held:
            sock.close()

    def slow_heads(self) -> None:
        """Heads sent a few bytes at a time, never finished."""
        for _ in self._turns():
            sock = self._connect()
            if sock is None:
                continue
            with contextlib.suppress(OSError):
                for part in (b"GET /metr", b"ics HTTP/1.1\r\n", b"X-Slow: 1"):
                    sock.sendall(part)
                    time.sleep(0.05)
            self._count("slow head")
            sock.close()

    def cut_replies(self) -> None:
        """Scrapes closed mid-reply with a reset, and requests reset before any reply."""
        for i in self._turns():
            sock = self._connect()
            if sock is None:
                continue
            with contextlib.suppress(OSError):
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
                if i % 2:
                    sock.recv(100)  # the start of the reply, then gone
            _reset(sock)
            self._count("reset")

    def keep_alive_scrapes(self) -> None:
        for _ in self._turns():
            sock = self._connect()
            if sock is None:
                continue
            with contextlib.suppress(OSError), sock:
                for _ in range(5):
                    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
                    if not sock.recv(65536):
                        break
                    self._count("scrape")

    def probe_health(self) -> None:
        """A health check every 0.1 s; each must answer 200 within three tries (a fresh connection may be the one a
        flood at the bound evicts before its head is read)."""
        for _ in self._turns():
            self.probes += 1
            for attempt in range(3):
                try:
                    if _get(self.port, "/-/healthy", timeout=2)[0] == 200:
                        break
                except OSError as err:
                    if attempt == 2:
                        self.probe_failures.append(str(err))
            time.sleep(0.1)


def test_a_flood_with_churn_leaves_the_exporter_as_it_was(plain_redis, caplog):
    caplog.set_level(logging.INFO)
    uncaught: list[str] = []
    previous_hook = threading.excepthook
    threading.excepthook = lambda args: uncaught.append(f"{args.thread.name}: {args.exc_type.__name__}")
    app = make_app({"redis": {"addr": plain_redis.addr}})
    server = make_http_server(app, "127.0.0.1:0")
    server._answering.linger = 1.0  # answering threads started by the flood end soon after it
    port = server.server_address[1]
    loop = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="http-loop", daemon=True)
    loop.start()
    try:
        assert _get(port, "/metrics")[0] == 200
        wait_until(lambda: server.worker_threads == 0, timeout=10, what="the warm-up's answering thread to end")
        threads_before = threading.active_count()
        server.max_connections = MAX_CONNECTIONS
        flood = Flood(port, time.monotonic() + FLOOD_SECONDS)
        clients = [
            threading.Thread(target=work, name=f"flood-{i}", daemon=True)
            for i, work in enumerate(
                [flood.hoard, flood.hoard, flood.slow_heads, flood.cut_replies, flood.cut_replies, flood.keep_alive_scrapes, flood.probe_health]
            )
        ]
        for client in clients:
            client.start()
        for client in clients:
            client.join(timeout=FLOOD_SECONDS + 30)
        assert not any(client.is_alive() for client in clients)
        assert flood.probes > 100
        assert flood.probe_failures == []
        assert all(flood.counts.get(what, 0) > 10 for what in ("hoarded", "slow head", "reset", "scrape")), flood.counts
        assert server.evicted > 0
        status, body = _get(port, "/metrics")
        assert status == 200
        assert sample(parse_samples(body.decode()), "redis_up", instance=plain_redis.addr.removeprefix("redis://")) == 1
        wait_until(lambda: threading.active_count() <= threads_before, timeout=10, what="the thread count as it was")
        wait_until(lambda: server.open_connections == 0, timeout=15, what="the flood's connections closed")
        assert server.busy_workers == 0
        assert loop.is_alive()
    finally:
        threading.excepthook = previous_hook
        server.shutdown()
        loop.join(timeout=10)
        server.server_close()
        app.close()
    assert uncaught == []
    assert [record.getMessage() for record in caplog.records if record.exc_info or record.levelno >= logging.ERROR] == []
