"""Daemon threads that take work items from one queue, started only as the work needs them."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")
log = logging.getLogger(__name__)


class Workers(Generic[Item]):
    """At most ``size`` daemon threads hand each item ``put`` to ``handle``. A thread is started only when an item
    waits and no thread is idle, so an idle process holds no more threads than its busiest moment needed. Daemon
    threads: a handler stuck past any deadline never keeps the process from exiting.

    ``handle`` may return a callable, run once the thread counts as idle again: the hand-back of a result that makes
    the next item come (a reply whose client asks again at once) goes there, so that item finds this thread idle
    rather than starting another one."""

    def __init__(self, name: str, size: int, handle: Callable[[Item], Callable[[], None] | None], *, linger: float | None = None) -> None:
        self.size = size
        self.linger = linger  # seconds an idle thread waits for work before it ends; None: it waits for ever
        self._name = name
        self._handle = handle
        self._queue: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    @property
    def threads(self) -> int:
        with self._lock:
            return len(self._threads)

    @property
    def busy(self) -> int:
        """Threads handling an item now."""
        with self._lock:
            return len(self._threads) - self._idle

    def put(self, item: Item) -> None:
        self._queue.put(item)
        with self._lock:
            if self._closed or len(self._threads) >= self.size or self._queue.qsize() <= self._idle:
                return
            thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
            self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        try:
            with self._lock:
                self._idle += 1
            while True:
                try:
                    item = self._queue.get(timeout=self.linger)
                except queue.Empty:
                    with self._lock:
                        if not self._queue.qsize():  # else put() counted this thread as idle: it stays for the item
                            self._idle -= 1
                            self._threads.remove(threading.current_thread())  # under the lock put() counts with
                            return
                    continue
                with self._lock:
                    self._idle -= 1
                if item is None:
                    return
                hand_back = None
                try:
                    hand_back = self._handle(item)
                except Exception:  # a handler's bug costs its item, never the thread
                    log.exception("%s worker: an item failed", self._name)
                with self._lock:
                    self._idle += 1
                if hand_back is not None:
                    try:
                        hand_back()
                    except Exception:
                        log.exception("%s worker: handing an item back failed", self._name)
                    except BaseException:
                        with self._lock:
                            self._idle -= 1  # the thread ends here: put() must not count it idle
                        raise
                item = hand_back = None  # an idle thread holds nothing of its last item (a scrape's reply)
        finally:
            with self._lock, contextlib.suppress(ValueError):  # already gone if it retired idle
                self._threads.remove(threading.current_thread())

    def close(self) -> None:
        """Take no more threads; each ends when it is free."""
        with self._lock:
            self._closed = True
            count = len(self._threads)
        for _ in range(count):
            self._queue.put(None)
