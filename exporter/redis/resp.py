"""A small RESP2 client whose every step ends by one deadline and whose replies are bounded in size.

A general client bounds each socket read, so a node that trickles its reply keeps a
read going for as long as it likes, and it reads whatever a node announces into
memory. Here every step of a connection (name lookup, connect, TLS handshake,
AUTH, each command and each reply) is given the time left until one deadline,
and a reply is refused as soon as it announces or grows past ``max_reply_bytes``,
before it is read into memory. Error replies are returned in place as
:class:`ErrorReply`; anything that makes the connection unusable raises
:class:`RespFailure` with a short, stable ``kind``.
"""

from __future__ import annotations

import contextlib
import select
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from .addresses import ip_literal

if TYPE_CHECKING:
    import ssl

DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024  # INFO ALL of a busy node is 10-50 KiB; CLUSTER NODES of 500 nodes ~100 KiB
MAX_DEPTH = 8  # nested arrays: the deepest reply the exporter reads (SLOWLOG GET, COMMAND INFO) is 4 levels
_CHUNK = 65536
_MARKERS = frozenset(b"+-:$*")
_MAX_LOOKUPS_IN_FLIGHT = 32
_lookups = threading.BoundedSemaphore(_MAX_LOOKUPS_IN_FLIGHT)


class RespFailure(Exception):
    """The connection is unusable: ``kind`` is one of timeout, reply_too_large, protocol, connection,
    refused, dns, tls, auth."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class ErrorReply:
    """An error reply (``-ERR …``) in the place of its command's reply."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    @property
    def code(self) -> str:
        return self.message.split(" ", 1)[0]

    def __repr__(self) -> str:
        return f"ErrorReply({self.message[:80]!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ErrorReply) and other.message == self.message

    def __hash__(self) -> int:
        return hash(self.message)


def pack(commands: list[tuple[str, ...]]) -> bytes:
    parts: list[bytes] = []
    for command in commands:
        parts.append(b"*%d\r\n" % len(command))
        for arg in command:
            data = arg.encode() if isinstance(arg, str) else bytes(arg)
            parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _remaining(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise RespFailure("timeout", f"deadline passed {what}")
    return left


def resolve(host: str, port: int, deadline: float) -> list[tuple[Any, ...]]:
    """getaddrinfo bounded by the deadline: IP literals need no lookup; a name is looked up in a helper
    thread (the resolver's own timeout ends it), at most a fixed number at once. An ASCII name is passed as
    bytes: for a str, getaddrinfo loads the IDNA codec and the Unicode database (about 1 MiB of RSS)."""
    if host.isascii():
        host_arg: str | bytes = host.encode("ascii")
    else:
        host_arg = host
    try:
        ip_literal(host)
        return socket.getaddrinfo(host_arg, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except ValueError:
        pass
    if not _lookups.acquire(timeout=_remaining(deadline, "before the name lookup")):
        raise RespFailure("dns", "too many name lookups in flight")
    outcome: dict[str, Any] = {}

    def lookup() -> None:
        try:
            outcome["value"] = socket.getaddrinfo(host_arg, port, type=socket.SOCK_STREAM)
        except OSError as err:
            outcome["error"] = err
        finally:
            _lookups.release()

    thread = threading.Thread(target=lookup, name="dns", daemon=True)
    thread.start()
    thread.join(_remaining(deadline, "before the name lookup"))
    if thread.is_alive():
        raise RespFailure("timeout", f"looking up {host} did not finish before the deadline")
    if "error" in outcome:
        raise RespFailure("dns", f"cannot resolve {host}: {outcome['error']}")
    return outcome["value"]


class RespConnection:
    """One socket to a node. Not thread-safe: its owner serialises calls.

    The socket is non-blocking and every wait is a ``poll`` given the time left: a socket timeout would bound each
    read as well, but setting it is a system call that lets go of the GIL, and under concurrent scrapes each one is a
    hand-off to another thread."""

    def __init__(self, sock: socket.socket, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> None:
        self._sock = sock
        self._buf = bytearray()
        self._pos = 0
        self.max_reply_bytes = max_reply_bytes
        self.closed = False
        sock.setblocking(False)
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)
        self._polling = select.POLLIN
        ssl = sys.modules.get("ssl")  # loaded already where a socket is TLS
        self._tls = ssl is not None and isinstance(sock, ssl.SSLSocket)
        # what a non-blocking send or recv raises when it must wait to write, or to read; TLS can need either for both
        self._tls_wants_read: tuple[type[BaseException], ...] = ()
        self._tls_wants_write: tuple[type[BaseException], ...] = ()
        if ssl is not None and self._tls:
            self._tls_wants_read, self._tls_wants_write = (ssl.SSLWantReadError,), (ssl.SSLWantWriteError,)
        self._blocked_write = (BlockingIOError, InterruptedError, *self._tls_wants_write)
        self._blocked_read = (BlockingIOError, InterruptedError, *self._tls_wants_read)

    @classmethod
    def open(
        cls,
        host: str,
        port: int,
        deadline: float,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_name: str | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> RespConnection:
        refused, last = False, ""  # what the last address said: kept as text, as the error would hold this frame in a cycle
        for family, kind, proto, _, address in resolve(host, port, deadline):
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(_remaining(deadline, "before connecting"))
                sock.connect(address)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if ssl_context is not None:
                    sock = _handshake(sock, ssl_context, server_name or host, deadline)
                return cls(sock, max_reply_bytes)
            except RespFailure:
                sock.close()
                raise
            except TimeoutError as err:
                sock.close()
                raise RespFailure("timeout", f"connecting to {host}:{port} did not finish before the deadline") from err
            except OSError as err:
                sock.close()
                refused, last = isinstance(err, ConnectionRefusedError), str(err)
        if refused:
            raise RespFailure("refused", f"connection to {host}:{port} refused")
        raise RespFailure("connection", f"cannot connect to {host}:{port}: {last}")

    def close(self) -> None:
        self._buf = bytearray()  # a refused reply's bytes go now, not when the last reference to us does
        self._pos = 0
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self._sock.close()

    # --- commands -----------------------------------------------------------------

    def call(self, commands: list[tuple[str, ...]], deadline: float) -> list[Any]:
        """Send every command in one write and read one reply each, all by ``deadline``."""
        if self.closed:
            raise RespFailure("connection", "the connection is closed")
        _remaining(deadline, "before sending")
        try:
            self._send(pack(commands), deadline)
            return [self._read_reply(deadline) for _ in commands]
        except RespFailure:
            self.close()
            raise
        except TimeoutError as err:
            self.close()
            raise RespFailure("timeout", "the node did not answer before the deadline") from err
        except OSError as err:
            self.close()
            if is_ssl_error(err):
                raise RespFailure("tls", f"TLS error: {err}") from err
            raise RespFailure("connection", f"connection lost: {err}") from err

    # --- waiting, writing and reading ---------------------------------------------

    def _wait(self, events: int, deadline: float, what: str) -> None:
        if events != self._polling:
            self._poller.modify(self._sock, events)
            self._polling = events
        if not self._poller.poll(_remaining(deadline, what) * 1000.0):
            raise RespFailure("timeout", f"the node did not answer before the deadline ({what})")

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self._sock.send(view)
            except self._blocked_write:  # the send buffer is full
                self._wait(select.POLLOUT, deadline, "while sending")
                continue
            except self._tls_wants_read:
                self._wait(select.POLLIN, deadline, "while sending")
                continue
            view = view[sent:]

    def _fill(self, deadline: float) -> None:
        """Read what the socket has, waiting at most until the deadline (each wait gets only the time left).
        The buffer is compacted only between replies, so offsets within a reply stay valid."""
        if not (self._tls and self._sock.pending()):  # type: ignore[attr-defined]
            self._wait(select.POLLIN, deadline, "while reading a reply")
        while True:
            try:
                data = self._sock.recv(_CHUNK)
            except self._blocked_read:  # TLS: a record only partly arrived
                self._wait(select.POLLIN, deadline, "while reading a reply")
                continue
            except self._tls_wants_write:
                self._wait(select.POLLOUT, deadline, "while reading a reply")
                continue
            break
        if not data:
            raise RespFailure("connection", "the node closed the connection")
        self._buf += data

    def _line(self, deadline: float, start: int) -> bytes:
        """The next line without CRLF; ``start`` is where the current reply began, for the size bound."""
        scan = self._pos
        while True:
            end = self._buf.find(b"\r\n", scan)
            if end >= 0:
                line = bytes(self._buf[self._pos : end])
                self._pos = end + 2
                return line
            if len(self._buf) - start > self.max_reply_bytes:
                raise RespFailure("reply_too_large", f"a line grew past {self.max_reply_bytes} bytes without CRLF")
            scan = max(self._pos, len(self._buf) - 1)  # only new bytes (and a CR left at the end) are searched again
            self._fill(deadline)

    def _read_reply(self, deadline: float) -> Any:  # noqa: C901, PLR0912 - the per-item fast path, inlined: it reads every reply byte
        if self._pos:  # what earlier replies used is dropped: the buffer holds at most one reply and a chunk
            del self._buf[: self._pos]
            self._pos = 0
        start = self._pos
        # Iterative, so a hostile nesting cannot reach Python's recursion limit: a stack of open arrays.
        stack: list[tuple[list[Any], int]] = []
        buf = self._buf  # the same object while this reply is read: filling extends it in place
        limit = self.max_reply_bytes
        while True:
            # the common items whole in the buffer, read here: an integer (LATENCY HISTOGRAM is mostly integers), a
            # bulk string, an array's start; anything else, or anything cut short, by _read_item
            pos = self._pos
            marker = buf[pos] if pos < len(buf) else 0
            end = buf.find(b"\r\n", pos, pos + 22) if marker in _FAST else -1
            digits = buf[pos + 1 : end] if end > pos + 1 else b""
            value: Any = _SLOW
            if digits.isdigit():
                number = int(digits)
                if marker == _COLON:
                    self._pos = end + 2
                    value = number
                elif marker == _DOLLAR:
                    stop = end + 2 + number
                    if stop + 2 <= len(buf) and stop + 2 - start <= limit and buf[stop : stop + 2] == b"\r\n":
                        self._pos = stop + 2
                        value = bytes(buf[end + 2 : stop])
                elif len(stack) < MAX_DEPTH and (end + 2 - start) + 3 * number <= limit:  # an array, within the bounds
                    self._pos = end + 2
                    if number:
                        stack.append(([], number))
                        continue
                    value = []
            if value is _SLOW:
                value = self._read_item(deadline, start, len(stack))
                if value.__class__ is _ArrayStart:
                    if value.count > 0:
                        stack.append(([], value.count))
                        continue
                    value = []
            while True:
                if not stack:
                    return value
                items, count = stack[-1]
                items.append(value)
                if len(items) < count:
                    break
                stack.pop()
                value = items

    def _read_item(self, deadline: float, start: int, depth: int) -> Any:
        while len(self._buf) <= self._pos:
            self._fill(deadline)
        if self._buf[self._pos] not in _MARKERS:  # noise fails at its first byte, not when a CRLF happens to come
            raise RespFailure("protocol", f"not a RESP2 reply (starts with {bytes(self._buf[self._pos : self._pos + 1])!r})")
        line = self._line(deadline, start)
        if not line:
            raise RespFailure("protocol", "an empty line where a reply belongs")
        marker, rest = line[:1], line[1:]
        if marker == b"+":
            return rest
        if marker == b"-":
            return ErrorReply(rest.decode("utf-8", errors="replace"))
        if marker == b":":
            return _integer(rest)
        if marker == b"$":
            return self._read_bulk(deadline, start, _integer(rest))
        if marker == b"*":
            count = _integer(rest)
            if count < 0:
                return None
            if depth >= MAX_DEPTH:
                raise RespFailure("protocol", f"arrays nested deeper than {MAX_DEPTH}")
            if (self._pos - start) + 3 * count > self.max_reply_bytes:  # every element takes at least 3 bytes
                raise RespFailure("reply_too_large", f"an array of {count} elements is larger than the limit of {self.max_reply_bytes} bytes")
            return _ArrayStart(count)
        raise RespFailure("protocol", f"not a RESP2 reply (starts with {line[:1]!r})")

    def _read_bulk(self, deadline: float, start: int, length: int) -> bytes | None:
        """A bulk string's ``length`` bytes and CRLF, once its header is read (None for the null bulk, -1)."""
        if length < 0:
            return None
        if self._pos - start + length + 2 > self.max_reply_bytes:
            raise RespFailure("reply_too_large", f"a reply of {length} bytes is larger than the limit of {self.max_reply_bytes}")
        while len(self._buf) - self._pos < length + 2:
            self._fill(deadline)
        data = bytes(self._buf[self._pos : self._pos + length])
        if self._buf[self._pos + length : self._pos + length + 2] != b"\r\n":
            raise RespFailure("protocol", "a bulk reply not ended by CRLF")
        self._pos += length + 2
        return data


_COLON, _DOLLAR, _STAR = ord(":"), ord("$"), ord("*")
_FAST = frozenset((_COLON, _DOLLAR, _STAR))
_SLOW = object()


class _ArrayStart:
    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        self.count = count


def _integer(text: bytes) -> int:
    if not text or len(text) > 20 or not text.lstrip(b"-").isdigit():
        raise RespFailure("protocol", f"not an integer: {text[:24]!r}")
    return int(text)


def is_ssl_error(err: BaseException) -> bool:
    """An error of the ssl module, which is loaded only when some target uses TLS."""
    module = sys.modules.get("ssl")
    return module is not None and isinstance(err, module.SSLError | module.CertificateError)


def _handshake(sock: socket.socket, context: ssl.SSLContext, server_name: str, deadline: float) -> ssl.SSLSocket:
    import ssl

    try:
        tls = context.wrap_socket(sock, server_hostname=server_name, do_handshake_on_connect=False)
        tls.settimeout(_remaining(deadline, "before the TLS handshake"))
        tls.do_handshake()  # the timeout bounds the whole handshake, not each read
        return tls
    except TimeoutError as err:
        raise RespFailure("timeout", "the TLS handshake did not finish before the deadline") from err
    except (ssl.SSLError, ssl.CertificateError) as err:
        raise RespFailure("tls", f"TLS handshake failed: {err}") from err
    except OSError as err:
        raise RespFailure("tls", f"TLS handshake failed: {err}") from err
