"""A tiny RESP server on loopback that answers from a table: for what no real redis-server here can
be made to do (an old version's replies, malformed replies)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

Reply = bytes | Callable[[], bytes]


def bulk(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return b"$%d\r\n%s\r\n" % (len(data), data)


def error(text: str) -> bytes:
    return b"-" + text.encode() + b"\r\n"


class LoopbackServer:
    """A listener on a free loopback port that serves each connection on its own thread until closed."""

    backlog = 8

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(self.backlog)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def addr(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _running(self) -> bool:
        return not self._stop.is_set()

    def _accept(self) -> None:
        while self._running():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class FakeRespServer(LoopbackServer):
    def __init__(
        self,
        replies: dict[tuple[str, ...], Reply],
        default: bytes = b"-ERR unknown command\r\n",
        answer: Callable[[tuple[str, ...]], bytes | None] | None = None,
    ) -> None:
        """``replies`` by the command upper-cased; ``answer`` is asked first for commands a table cannot hold."""
        self.replies = replies
        self.default = default
        self.answer = answer
        self.received: list[tuple[str, ...]] = []
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            while not self._stop.is_set():
                command = self._read_command(reader)
                if command is None:
                    return
                self.received.append(command)
                reply = self.answer(command) if self.answer is not None else None
                if reply is None:
                    reply = self.replies.get(tuple(part.upper() for part in command), self.default)
                conn.sendall(reply() if callable(reply) else reply)
        except OSError:
            return
        finally:
            conn.close()

    @staticmethod
    def _read_command(reader) -> tuple[str, ...] | None:
        line = reader.readline()
        if not line.startswith(b"*"):
            return None
        parts = []
        for _ in range(int(line[1:])):
            length = int(reader.readline()[1:])
            parts.append(reader.read(length + 2)[:-2].decode())
        return tuple(parts)
