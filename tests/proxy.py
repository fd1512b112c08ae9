"""A TCP proxy on loopback whose forwarding the test can stall and resume, as a network stall looks; it keeps the bytes
clients sent, so a test can read exactly which commands went to the server."""

from __future__ import annotations

import contextlib
import socket
import threading


class StallableProxy:
    def __init__(self, upstream_port: int, stall_on: bytes | None = None) -> None:
        """``stall_on``: stall as soon as a client sends these bytes (a node that hangs on one command)."""
        self.upstream_port = upstream_port
        self.stall_on = stall_on
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.sent = bytearray()  # every byte clients sent upstream, in order
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self._sockets += [client, upstream]
                closed = self._stop.is_set()
            if closed:  # close() ran meanwhile: these two were not in its list
                self._shut(client, upstream)
                return
            threading.Thread(target=self._pump, args=(client, upstream, self.stall_on, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source: socket.socket, destination: socket.socket, stall_on: bytes | None = None, keep: bool = False) -> None:
        with contextlib.suppress(OSError):
            while not self._stop.is_set():
                self._flowing.wait()  # while stalled, bytes wait in the kernel's buffers
                data = source.recv(65536)
                if not data:
                    break
                if keep:
                    self.sent += data
                if stall_on is not None and stall_on in data:
                    self._flowing.clear()
                self._flowing.wait()
                destination.sendall(data)
        with contextlib.suppress(OSError):
            destination.shutdown(socket.SHUT_WR)

    def commands(self) -> list[tuple[str, ...]]:
        """The RESP commands clients sent, and clears them."""
        data, self.sent = bytes(self.sent), bytearray()
        commands, at = [], 0
        while at < len(data):
            end = data.index(b"\r\n", at)
            count, at, words = int(data[at + 1 : end]), end + 2, []
            for _ in range(count):
                end = data.index(b"\r\n", at)
                length = int(data[at + 1 : end])
                words.append(data[end + 2 : end + 2 + length].decode())
                at = end + 4 + length
            commands.append(tuple(words))
        return commands

    def close(self) -> None:
        """Every connection ends now: shut down first, as closing a socket another thread is blocked reading does not wake
        that thread on Linux, and the connection to the server would stay open into the next test."""
        with self._lock:
            self._stop.set()
            sockets = [self.sock, *self._sockets]
        self._flowing.set()
        self._shut(*sockets)

    @staticmethod
    def _shut(*sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
