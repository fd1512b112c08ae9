"""HTTP/1.1 with keep-alive, bounded whatever clients do.

Leader and followers: of at most ``workers`` threads, one at a time (the leader) waits
for readiness and owns every connection while it is idle or still sending its request
head, so slow or idle clients cost a file descriptor and a small buffer, never a thread.
The leader that completes a request gives the lead to a follower and answers it itself,
then hands the connection back: a request is never passed to another thread to be
answered, which would put that thread's wake-up (tens of microseconds) in its latency.
Bounds: ``max_connections`` open connections (at the bound, the connection idle
longest, or still sending its head longest, is closed to make room), a request
head of at most 16 KiB that must arrive within ``head_timeout``, idle keep-alive
connections closed after ``idle_timeout``, a reply write that must finish within
``write_timeout``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .http_request import MAX_BODY_BYTES, MAX_HEAD_BYTES, BadRequest, Request, body_length, parse_head
from .poller import Poller

if TYPE_CHECKING:
    import ssl

log = logging.getLogger(__name__)

SWEEP_INTERVAL = 0.1  # seconds between looks for connections past their head or idle timeout
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
           413: "Content Too Large", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}  # fmt: skip


class _Connection:
    __slots__ = ("address", "body_needed", "buffer", "handshaken", "head_started", "last_active", "sock")

    def __init__(self, sock: socket.socket, address: Any, handshaken: bool) -> None:
        self.sock = sock
        self.address = address
        self.buffer = bytearray()
        self.handshaken = handshaken
        self.last_active = time.monotonic()
        self.head_started: float | None = None  # when the first byte of the current request arrived
        self.body_needed = 0


Handler = Callable[[Request, Any], tuple[int, list[tuple[str, str]], bytes]]


class HttpServer:
    """Serve ``handler(request, peer) -> (status, headers, body)``; ``serve_forever`` in one thread, ``shutdown`` from any."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: Handler,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = 512,
        workers: int = 32,
        head_timeout: float = 10.0,
        idle_timeout: float = 120.0,
        write_timeout: float = 30.0,
        server_name: str = "",
        extra_headers: list[tuple[str, str]] | None = None,
        peer_check: Callable[[ssl.SSLSocket], bool] | None = None,
    ) -> None:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(address)
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.server_address = self._listener.getsockname()
        self._handler = handler
        self._ssl_context = ssl_context
        self.max_connections = max_connections
        self.max_workers = workers
        self.head_timeout = head_timeout
        self.idle_timeout = idle_timeout
        self.write_timeout = write_timeout
        self._server_name = server_name
        self._extra_headers = list(extra_headers or [])
        self._peer_check = peer_check
        self._would_block: tuple[type[BaseException], ...] = (BlockingIOError, InterruptedError)
        # a plain socket stays in blocking mode and each read and write is told not to wait (setting the mode is a
        # system call per connection); a TLS socket takes no flags and is made non-blocking
        self._dont_wait = socket.MSG_DONTWAIT if ssl_context is None and hasattr(socket, "MSG_DONTWAIT") else 0
        if ssl_context is not None:
            import ssl

            self._would_block += (ssl.SSLWantReadError, ssl.SSLWantWriteError)
        self._poller = Poller()
        self._connections: dict[int, _Connection] = {}  # every open connection, by file descriptor
        self._busy: set[int] = set()  # those a thread is answering
        self._ready: deque[tuple[_Connection, Request]] = deque()  # complete requests no thread has taken yet
        self._lead = threading.Lock()  # held by the thread that waits for readiness
        self._counts = threading.Lock()
        self._threads = 0  # serving (the caller of serve_forever only waits)
        self._following = 0  # of them, waiting for the lead
        self._answering = 0
        self._poll_interval = 0.5
        self._swept = time.monotonic()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.evicted = 0
        self.timed_out = 0
        self.app: Any = None  # what the handler serves; the owner may swap it (configuration reload)

    # --- state for /-/ready and the self-metrics ---------------------------------

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    @property
    def busy_workers(self) -> int:
        return self._answering

    # --- leading: waiting for readiness, accepting, reading heads ---------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve with as many threads as requests need (at most ``workers``) until :meth:`shutdown`. The caller only
        waits: its thread (the main one, which takes signals) never answers a request, so a stop is never held up
        by a slow target."""
        self._poll_interval = poll_interval
        self._listener_fd, self._wake_fd = self._listener.fileno(), self._wake_r.fileno()
        self._poller.watch(self._listener_fd, always=True)
        self._poller.watch(self._wake_fd, always=True)
        self._keep_a_follower()
        while not self._stop.wait(poll_interval):
            pass

    def _serve(self) -> None:
        while not self._stop.is_set():
            with self._counts:
                self._following += 1
            self._lead.acquire()
            with self._counts:
                self._following -= 1
            try:
                while not self._ready and not self._stop.is_set():  # the lead is kept until there is a request to answer
                    self._wait_and_read()
                item = self._ready.popleft() if self._ready else None
            finally:
                self._lead.release()
            if item is not None:
                self._keep_a_follower()
                with self._counts:
                    self._answering += 1
                try:
                    self._work(item)
                finally:
                    with self._counts:
                        self._answering -= 1
        with self._counts:
            self._threads -= 1

    def _keep_a_follower(self) -> None:
        """Someone must take the lead while this thread answers: a new thread if none is waiting for it."""
        with self._counts:
            if self._following or self._threads >= self.max_workers:
                return
            self._threads += 1
        threading.Thread(target=self._serve, name=f"http-{self._threads}", daemon=True).start()

    def _wait_and_read(self) -> None:
        """The leader's turn: accept, read heads, queue the complete requests; now and then the timeout sweep."""
        for fd in self._poller.ready(self._poll_interval):
            if fd == self._listener_fd:
                self._accept()
            elif fd == self._wake_fd:
                with contextlib.suppress(OSError):
                    self._wake_r.recv(4096)
            elif (conn := self._connections.get(fd)) is not None:
                self._readable(conn)
        if time.monotonic() - self._swept >= SWEEP_INTERVAL:  # timeouts are seconds long: not a walk of every connection per event
            self._swept = time.monotonic()
            self._sweep()

    def shutdown(self) -> None:
        self._stop.set()
        self._wake()

    def server_close(self) -> None:
        for conn in list(self._connections.values()):
            with contextlib.suppress(OSError):
                conn.sock.close()
        self._connections.clear()
        self._listener.close()
        self._poller.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _accept(self) -> None:
        for _ in range(64):
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:  # EMFILE and the like: the next loop tries again
                log.warning("accept failed: %s", err)
                return
            if len(self._connections) >= self.max_connections and not self._evict_one():
                sock.close()
                continue
            if not self._dont_wait:
                sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            handshaken = True
            if self._ssl_context is not None:
                try:
                    sock = self._ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                except (OSError, ValueError):
                    sock.close()
                    continue
                handshaken = False
            conn = _Connection(sock, address, handshaken)
            conn.head_started = conn.last_active  # the head (or handshake) is due within head_timeout of connecting
            self._connections[sock.fileno()] = conn
            self._poller.watch(sock.fileno())

    def _evict_one(self) -> bool:
        """Make room: close the connection (not one a worker holds) that has waited longest."""
        candidates = [c for fd, c in self._connections.items() if fd not in self._busy]
        if not candidates:
            return False
        self._close(min(candidates, key=lambda c: c.last_active))
        self.evicted += 1
        return True

    def _close(self, conn: _Connection) -> None:
        fd = conn.sock.fileno()
        if fd >= 0:
            self._poller.quiet(fd)
            self._connections.pop(fd, None)
        with contextlib.suppress(OSError):
            conn.sock.close()

    def _readable(self, conn: _Connection) -> None:
        try:
            if not conn.handshaken:
                conn.sock.do_handshake()  # type: ignore[attr-defined]
                conn.handshaken = True
                if self._peer_check is not None and not self._peer_check(conn.sock):  # type: ignore[arg-type]
                    self._close(conn)
                    return
            while True:
                data = conn.sock.recv(8192, self._dont_wait)
                if not data:
                    self._close(conn)
                    return
                if conn.head_started is None:
                    conn.head_started = time.monotonic()
                conn.buffer += data
                if len(conn.buffer) > MAX_HEAD_BYTES + MAX_BODY_BYTES:
                    break
                if self._ssl_context is None:
                    if len(data) < 8192:  # what the socket held is read: no second call only to hear it would block
                        break
                elif not conn.sock.pending():  # type: ignore[attr-defined]  # TLS may hold decrypted bytes epoll cannot see
                    break
        except self._would_block:
            pass
        except (OSError, ValueError):
            self._close(conn)
            return
        conn.last_active = time.monotonic()
        self._dispatch_if_complete(conn)

    def _dispatch_if_complete(self, conn: _Connection) -> None:
        end = conn.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(conn.buffer) > MAX_HEAD_BYTES:
                self._reject(conn, 431, "request head too large")
            else:
                self._watch_again(conn)  # the rest of the head is still coming
            return
        try:
            request = parse_head(bytes(conn.buffer[:end]))
            length = body_length(request)
        except BadRequest as err:
            self._reject(conn, err.status, str(err))
            return
        if len(conn.buffer) - (end + 4) < length:
            self._watch_again(conn)  # the body is still coming
            return
        request.body = bytes(conn.buffer[end + 4 : end + 4 + length])
        del conn.buffer[: end + 4 + length]
        self._poller.quiet(conn.sock.fileno())
        self._busy.add(conn.sock.fileno())
        self._ready.append((conn, request))

    def _watch_again(self, conn: _Connection) -> None:
        try:
            self._poller.rearm(conn.sock.fileno())
        except (OSError, ValueError, KeyError):
            self._close(conn)

    def _reject(self, conn: _Connection, status: int, text: str) -> None:
        with contextlib.suppress(OSError):
            _send_now(conn.sock, self._reply_bytes(status, [("Content-Type", "text/plain; charset=utf-8")], text.encode() + b"\n", False, False),
                      self._would_block, self._dont_wait)  # fmt: skip
        self._close(conn)

    def _sweep(self) -> None:
        now = time.monotonic()
        for fd, conn in list(self._connections.items()):
            if fd in self._busy:
                continue
            if conn.head_started is not None and now - conn.head_started > self.head_timeout:
                self.timed_out += 1
                self._close(conn)  # a slow or stalled head: no reply is owed to a client that never finished asking
            elif conn.head_started is None and now - conn.last_active > self.idle_timeout:
                self._close(conn)

    # --- answering ------------------------------------------------------------------

    def _work(self, item: tuple[_Connection, Request]) -> None:
        conn, request = item
        keep = False
        try:
            keep = self._respond(conn, request)
        except Exception:  # a broken client must not end the thread
            log.debug("request from %s failed", conn.address, exc_info=True)
        fd = conn.sock.fileno()
        if keep and not self._stop.is_set():
            if not conn.buffer:
                if self._rearm(conn):
                    return
            else:  # a pipelined request arrived with the last one
                conn.last_active = conn.head_started = time.monotonic()
                self._busy.discard(fd)
                self._dispatch_if_complete(conn)
                if self._ready:
                    self._wake()  # the leader waits for readiness, not for the queue: it is told there is a request
                return
        self._close(conn)  # off the connections first, then off the busy set: a sweep never sees it half closed
        self._busy.discard(fd)

    def _rearm(self, conn: _Connection) -> bool:
        """Hand a kept-alive connection back to the leader. Taken off ``_busy`` before it is watched again: once
        watched, the leader may read its next request at once. False: it is to be closed."""
        conn.last_active = time.monotonic()
        conn.head_started = None
        fd = conn.sock.fileno()
        self._busy.discard(fd)
        try:
            self._poller.rearm(fd)
        except (OSError, ValueError, KeyError):
            # closed by the leader (evicted once it left _busy): nothing is left to do; else it is to be closed
            return conn.sock.fileno() < 0
        return True

    def _respond(self, conn: _Connection, request: Request) -> bool:
        status, headers, body = self._handler(request, conn.address)
        keep = request.keep_alive and not self._stop.is_set()
        data = self._reply_bytes(status, headers, body, keep, request.method == "HEAD")
        try:
            sent = _send_now(conn.sock, data, self._would_block, self._dont_wait)
            if sent < len(data):  # the socket's buffer is full: the rest in blocking mode, bounded by write_timeout
                conn.sock.settimeout(self.write_timeout)  # sendall keeps one deadline for the whole write
                conn.sock.sendall(memoryview(data)[sent:])
                conn.sock.setblocking(False)
        except OSError:
            return False
        return keep

    def _reply_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, keep: bool, head_only: bool) -> bytes:
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        if self._server_name:
            lines.append(f"Server: {self._server_name}")
        lines += [f"{name}: {value}" for name, value in [*headers, *self._extra_headers] if name.lower() not in ("content-length", "connection")]
        lines.append(f"Content-Length: {len(body)}")
        lines.append("Connection: " + ("keep-alive" if keep else "close"))
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if head_only else head + body


def _send_now(sock: socket.socket, data: bytes, would_block: tuple[type[BaseException], ...], flags: int) -> int:
    """As much of ``data`` as the socket takes now, without waiting (a reply usually fits its buffer whole)."""
    try:
        return sock.send(data, flags) if flags else sock.send(data)
    except would_block:
        return 0
