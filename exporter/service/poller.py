"""Which of the HTTP server's sockets are readable: the listener, the wake-up pipe and the connections.

With epoll a connection is watched one-shot: once reported it stays quiet until :meth:`Poller.rearm`, so handing it
to a worker takes no system call, and closing it none either (the kernel drops a closed socket from the set). Every
system call lets go of the GIL, and under concurrent requests each one is a hand-off to another thread. Where there is
no epoll, ``selectors`` stands in: a connection handed to a worker is unregistered and registered again after.
"""

from __future__ import annotations

import contextlib
import select
import selectors


class Poller:
    def __init__(self) -> None:
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._selector = selectors.DefaultSelector() if self._epoll is None else None

    def watch(self, fd: int, *, always: bool = False) -> None:
        """Report ``fd`` when readable: once (then :meth:`rearm`), or ``always`` (the listener, the wake-up pipe)."""
        if self._epoll is not None:
            self._epoll.register(fd, select.EPOLLIN if always else select.EPOLLIN | select.EPOLLONESHOT)
        else:
            self._selector.register(fd, selectors.EVENT_READ)  # type: ignore[union-attr]

    def rearm(self, fd: int) -> None:
        """Report a connection once more; raises OSError or ValueError for a socket closed meanwhile."""
        if self._epoll is not None:
            self._epoll.modify(fd, select.EPOLLIN | select.EPOLLONESHOT)
        else:
            with contextlib.suppress(KeyError):  # still registered (a head still coming): it stays so
                self._selector.register(fd, selectors.EVENT_READ)  # type: ignore[union-attr]

    def quiet(self, fd: int) -> None:
        """A connection handed to a worker, or about to be closed: not to be reported until rearmed."""
        if self._selector is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(fd)

    def ready(self, timeout: float) -> list[int]:
        if self._epoll is not None:
            return [fd for fd, _ in self._epoll.poll(timeout)]
        return [key.fd for key, _ in self._selector.select(timeout)]  # type: ignore[union-attr]

    def close(self) -> None:
        if self._epoll is not None:
            self._epoll.close()
        else:
            self._selector.close()  # type: ignore[union-attr]
