"""A RESP server on loopback that misbehaves on purpose, one way per instance.

Behaviours: ``trickle`` (a valid INFO reply, a few bytes at a time), ``silent`` (reads, never answers),
``huge_bulk`` (announces a bulk of 2 GB and sends it, endlessly), ``endless_line`` (bytes without CRLF,
endlessly), ``ok`` (+OK to everything), ``error`` (an error to everything), ``garbage`` (binary noise),
``reset`` (accepts, then resets the connection), ``deep`` (arrays nested without end). It stops by itself
after ``lifetime`` seconds and never sends more than ``max_bytes`` on one connection.
"""

from __future__ import annotations

import os
import socket
import struct
import time

from fake_resp import LoopbackServer, bulk

INFO_TEXT = b"# Server\r\nredis_version:7.0.0\r\nuptime_in_seconds:5\r\n" + b"".join(b"field_%d:%d\r\n" % (i, i) for i in range(200))

BEHAVIOURS = ("trickle", "silent", "huge_bulk", "endless_line", "ok", "error", "garbage", "reset", "deep")


class HostileServer(LoopbackServer):
    backlog = 64

    def __init__(self, behaviour: str, lifetime: float = 120.0, max_bytes: int = 256 * 1024 * 1024) -> None:
        assert behaviour in BEHAVIOURS
        self.behaviour = behaviour
        self.max_bytes = max_bytes
        self.deadline = time.monotonic() + lifetime
        super().__init__()

    def _running(self) -> bool:
        return super()._running() and time.monotonic() < self.deadline

    def _serve(self, conn: socket.socket) -> None:
        sent = 0
        conn.settimeout(0.5)
        try:
            if self.behaviour == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            while self._running() and sent < self.max_bytes:
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    data = b"..."  # keep sending whatever the client does
                if not data:
                    return
                sent += self._answer(conn, data, sent)
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, data: bytes, sent: int) -> int:
        """The behaviour's answer to what came in: the bytes it counts against max_bytes."""
        if self.behaviour == "ok":
            conn.sendall(b"+OK\r\n" * max(1, data.count(b"*")))
        elif self.behaviour == "error":
            conn.sendall(b"-ERR no\r\n" * max(1, data.count(b"*")))
        elif self.behaviour == "garbage":
            conn.sendall(b"\x00" + os.urandom(511))  # never a RESP type byte first
            return 512
        elif self.behaviour == "trickle":
            reply = bulk(INFO_TEXT)
            for i in range(0, len(reply), 4):
                if not self._running():
                    return 0
                conn.sendall(reply[i : i + 4])
                time.sleep(0.05)  # the behaviour itself: a reply four bytes at a time
        elif self.behaviour in ("huge_bulk", "endless_line", "deep"):
            conn.sendall({"huge_bulk": b"$2000000000\r\n", "endless_line": b"+", "deep": b""}[self.behaviour])
            chunk = b"*1\r\n" * 16384 if self.behaviour == "deep" else b"x" * 65536
            streamed = 0
            while self._running() and sent + streamed < self.max_bytes:
                conn.sendall(chunk)
                streamed += len(chunk)
            return streamed
        return 0  # silent: reads and never answers
