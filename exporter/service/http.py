"""HTTP/1.1 with keep-alive, bounded whatever clients do.

One loop thread (the caller of :meth:`HttpServer.serve_forever`) owns every connection: it alone accepts, reads
request heads, closes, evicts and sweeps, and it alone changes the connection table and a connection's ``busy`` mark.
A complete request goes to a bounded pool of answering threads; an answering thread writes the reply on the socket it
was handed and gives the connection back to the loop through a queue, and never touches the table. So slow or idle
clients cost a file descriptor and a small buffer, never a thread, and no state is shared but through that queue.

``http.server`` is not used: its imports (``email``, ``html``, ``socketserver``, ``mimetypes`` and what they load)
cost about 7 MiB of RSS against an idle exporter of about 17 MiB, and its thread per connection is unbounded.

Bounds: ``max_connections`` open connections (at the bound, the connection idle longest, or still sending its head
longest, is closed to make room), a request head of at most 16 KiB that must arrive within ``head_timeout``, idle
keep-alive connections closed after ``idle_timeout``, a reply write that must finish within ``write_timeout``, at
most ``workers`` answering threads (an idle one ends after ``worker_linger`` seconds).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from exporter.common.workers import Workers

from .http_request import MAX_BODY_BYTES, MAX_HEAD_BYTES, BadRequest, Request, body_length, parse_head
from .poller import Poller

if TYPE_CHECKING:
    import ssl

log = logging.getLogger(__name__)

SWEEP_INTERVAL = 0.1  # seconds between looks for connections past their head or idle timeout
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class _Connection:
    __slots__ = ("address", "buffer", "busy", "certificate_free", "fd", "handshaken", "head_started", "last_active", "loopback", "sock")

    def __init__(self, sock: socket.socket, address: Any, handshaken: bool) -> None:
        self.sock = sock
        self.fd = sock.fileno()  # kept: a closed socket's fileno() is -1, and the table is keyed by the number it had
        self.address = address
        self.buffer = bytearray()
        self.handshaken = handshaken
        self.busy = False  # an answering thread holds it: the loop neither reads, closes nor evicts it meanwhile
        self.last_active = time.monotonic()
        self.head_started: float | None = None  # when the first byte of the current request arrived
        self.loopback = False  # TLS of the loopback context: a client certificate checked only where given
        self.certificate_free = False  # a loopback connection that gave none: answered on the certificate-free path alone


LARGE_BODY = 1 << 20  # a body this large is sent after its head, not copied behind it
Handler = Callable[[Request, Any], tuple[int, list[tuple[str, str]], bytes | bytearray]]


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
        worker_linger: float = 60.0,
        server_name: str = "",
        extra_headers: list[tuple[str, str]] | None = None,
        peer_check: Callable[[ssl.SSLSocket], bool] | None = None,
        loopback_ssl_context: ssl.SSLContext | None = None,
        certificate_free_path: str = "",
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
        self.head_timeout = head_timeout
        self.idle_timeout = idle_timeout
        self.write_timeout = write_timeout
        self._server_name = server_name
        self._extra_headers = list(extra_headers or [])
        self._peer_check = peer_check
        # where the TLS context requires a client certificate: loopback peers may come without one, for this path only
        self._loopback_ssl_context = loopback_ssl_context
        self._certificate_free_path = certificate_free_path
        self._would_block: tuple[type[BaseException], ...] = (BlockingIOError, InterruptedError)
        if ssl_context is not None:
            import ssl

            self._would_block += (ssl.SSLWantReadError, ssl.SSLWantWriteError)
        # owned by the loop thread: the table, the poller's registrations, the counters below
        self._poller = Poller()
        self._connections: dict[int, _Connection] = {}  # every open connection, by file descriptor
        self.evicted = 0
        self.timed_out = 0
        self._swept = time.monotonic()
        # the hand-offs between the loop and the answering threads
        self._answering: Workers[tuple[_Connection, Request]] = Workers("http", workers, self._answer, linger=worker_linger)
        self._returned: queue.SimpleQueue[tuple[_Connection, bool]] = queue.SimpleQueue()  # connections given back
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.app: Any = None  # what the handler serves; the owner may swap it (configuration reload)

    # --- state for /-/ready and the self-metrics (read from any thread) ------------

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    @property
    def busy_workers(self) -> int:
        return self._answering.busy

    @property
    def worker_threads(self) -> int:
        return self._answering.threads

    # --- the loop: accepting, reading heads, closing, sweeping --------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Run the loop in the calling thread until :meth:`shutdown`; requests are answered by the pool, so a slow
        target never holds the loop (nor, in the main thread, a signal's handling)."""
        listener_fd, wake_fd = self._listener.fileno(), self._wake_r.fileno()
        self._poller.watch(listener_fd, always=True)
        self._poller.watch(wake_fd, always=True)
        try:
            while not self._stop.is_set():
                for fd in self._poller.ready(poll_interval):
                    if fd == listener_fd:
                        self._accept()
                    elif fd == wake_fd:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    elif (conn := self._connections.get(fd)) is not None and not conn.busy:
                        self._readable(conn)
                self._take_back()
                if time.monotonic() - self._swept >= SWEEP_INTERVAL:  # timeouts are seconds long: not a walk per event
                    self._swept = time.monotonic()
                    self._sweep()
        finally:
            self._answering.close()

    def shutdown(self) -> None:
        self._stop.set()
        self._wake()

    def server_close(self) -> None:
        """After :meth:`serve_forever` returned: close every connection, the listener and the poller."""
        for conn in list(self._connections.values()):
            with contextlib.suppress(OSError):
                conn.sock.close()
        self._connections.clear()
        self._listener.close()
        self._poller.close()
        self._wake_r.close()
        self._wake_w.close()

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
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            handshaken = True
            loopback = self._loopback_ssl_context is not None and self._is_loopback(address)
            if self._ssl_context is not None:
                context = self._loopback_ssl_context if loopback else self._ssl_context
                try:
                    sock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)  # type: ignore[union-attr]
                except (OSError, ValueError):
                    sock.close()
                    continue
                handshaken = False
            conn = _Connection(sock, address, handshaken)
            conn.loopback = loopback
            conn.head_started = conn.last_active  # the head (or handshake) is due within head_timeout of connecting
            self._connections[conn.fd] = conn
            self._poller.watch(conn.fd)

    @staticmethod
    def _is_loopback(address: Any) -> bool:
        from .webconfig import is_loopback  # only with TLS that requires a client certificate

        return isinstance(address, tuple) and is_loopback(str(address[0]))

    def _evict_one(self) -> bool:
        """Make room: close the connection (not one being answered) that has waited longest."""
        idle = [conn for conn in self._connections.values() if not conn.busy]
        if not idle:
            return False
        self._close(min(idle, key=lambda conn: conn.last_active))
        self.evicted += 1
        return True

    def _close(self, conn: _Connection) -> None:
        if self._connections.get(conn.fd) is conn:
            del self._connections[conn.fd]
            self._poller.quiet(conn.fd)
        with contextlib.suppress(OSError):
            conn.sock.close()

    def _readable(self, conn: _Connection) -> None:
        try:
            if not conn.handshaken:
                conn.sock.do_handshake()  # type: ignore[attr-defined]
                conn.handshaken = True
                conn.certificate_free = conn.loopback and not conn.sock.getpeercert()  # type: ignore[attr-defined]
                if not conn.certificate_free and self._peer_check is not None and not self._peer_check(conn.sock):  # type: ignore[arg-type]
                    self._close(conn)
                    return
            while True:
                data = conn.sock.recv(8192)
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
        """A complete request goes to an answering thread; else the connection is watched for the rest."""
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
        if conn.certificate_free and request.path != self._certificate_free_path:
            self._reject(conn, 403, "a client certificate is required")
            return
        request.body = bytes(conn.buffer[end + 4 : end + 4 + length])
        del conn.buffer[: end + 4 + length]
        self._poller.quiet(conn.fd)
        conn.busy = True
        self._answering.put((conn, request))

    def _watch_again(self, conn: _Connection) -> None:
        try:
            self._poller.rearm(conn.fd)
        except (OSError, ValueError, KeyError):
            self._close(conn)

    def _take_back(self) -> None:
        """Connections the answering threads are done with: kept alive (the next request may already be in the buffer,
        pipelined), or closed."""
        while True:
            try:
                conn, keep = self._returned.get_nowait()
            except queue.Empty:
                return
            conn.busy = False
            if not keep or self._stop.is_set():
                self._close(conn)
                continue
            conn.last_active = time.monotonic()
            if conn.buffer:
                conn.head_started = conn.last_active
                self._dispatch_if_complete(conn)
            else:
                conn.head_started = None
                self._watch_again(conn)

    def _reject(self, conn: _Connection, status: int, text: str) -> None:
        with contextlib.suppress(OSError, *self._would_block):
            conn.sock.send(self._reply_bytes(status, [("Content-Type", "text/plain; charset=utf-8")], text.encode() + b"\n", False, False))
        self._close(conn)

    def _sweep(self) -> None:
        now = time.monotonic()
        for conn in list(self._connections.values()):
            if conn.busy:
                continue
            if conn.head_started is not None and now - conn.head_started > self.head_timeout:
                self.timed_out += 1
                self._close(conn)  # a slow or stalled head: no reply is owed to a client that never finished asking
            elif conn.head_started is None and now - conn.last_active > self.idle_timeout:
                self._close(conn)

    # --- answering (the pool's threads) ------------------------------------------------

    def _answer(self, item: tuple[_Connection, Request]) -> Callable[[], None]:
        """Answer one request; the connection goes back to the loop, whatever happened, once this thread is idle
        again (a kept-alive client's next request, read by the loop at once, then finds it free)."""
        conn, request = item
        keep = False
        try:
            keep = self._respond(conn, request)
        except OSError:
            log.debug("request from %s: the connection failed", conn.address, exc_info=True)
        except Exception:
            log.exception("request %s %s from %s failed; its connection is closed", request.method, request.path, conn.address)
        except BaseException:
            self._give_back(conn, False)  # the thread ends: the loop still gets its connection, to close it
            raise
        return functools.partial(self._give_back, conn, keep)

    def _give_back(self, conn: _Connection, keep: bool) -> None:
        self._returned.put((conn, keep))
        self._wake()

    def _respond(self, conn: _Connection, request: Request) -> bool:
        status, headers, body = self._handler(request, conn.address)
        keep = request.keep_alive and not self._stop.is_set()
        if len(body) < LARGE_BODY or request.method == "HEAD":
            self._send(conn, self._reply_bytes(status, headers, body, keep, request.method == "HEAD"))
        else:  # the head, then the body as it is: a fleet's body is not copied behind its head
            self._send(conn, self._reply_bytes(status, headers, body, keep, True))
            self._send(conn, body)
        return keep

    def _send(self, conn: _Connection, data: bytes | bytearray) -> None:
        try:
            sent = conn.sock.send(data)
        except self._would_block:
            sent = 0
        if sent < len(data):  # the socket's buffer is full: the rest in blocking mode, bounded by write_timeout
            conn.sock.settimeout(self.write_timeout)  # sendall keeps one deadline for the whole write
            conn.sock.sendall(memoryview(data)[sent:])
            conn.sock.setblocking(False)

    def _reply_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes | bytearray, keep: bool, head_only: bool) -> bytes:
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        if self._server_name:
            lines.append(f"Server: {self._server_name}")
        lines += [f"{name}: {value}" for name, value in [*headers, *self._extra_headers] if name.lower() not in ("content-length", "connection")]
        lines.append(f"Content-Length: {len(body)}")
        lines.append("Connection: " + ("keep-alive" if keep else "close"))
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if head_only else head + body
