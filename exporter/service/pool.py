"""A fixed number of scrape workers, and at most one scrape of a target at a time.

Workers are daemon threads: a scrape stuck past its deadline never keeps the
process from exiting. A target that is still being scraped is not scraped a
second time: whoever asks meanwhile shares the scrape under way (two Prometheus
servers of an HA pair get one scrape's answer, and the node sees one client).
Work whose deadline passed while it waited for a worker is not started.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from exporter.common.workers import Workers
from exporter.redis.resp import RespFailure

_Work = tuple[Future[Any], Callable[[float], Any], float]


class ScrapePool:
    def __init__(self, workers: int) -> None:
        self.size = workers
        self._workers: Workers[_Work] = Workers("scrape", workers, self._work)
        # scrapes under way by the identity of what is scraped; each entry holds that object, so its id cannot be taken
        # by another one (an evicted target's) while the entry stands
        self._inflight: dict[int, tuple[Any, Future[Any]]] = {}
        self._lock = threading.Lock()

    @property
    def busy(self) -> int:
        return self._workers.busy

    @property
    def queued(self) -> int:
        return self._workers.queued

    def submit(self, key: Any, work: Callable[[float], Any], deadline: float) -> Future[Any]:
        """Run ``work(deadline)`` on a worker, or join the run of the same ``key`` under way."""
        future, new = self._claim(key)
        if new:
            self._workers.put((future, work, deadline))
        return future

    def run_here(self, key: Any, work: Callable[[float], Any], deadline: float) -> Future[Any]:
        """Run ``work`` in the calling thread (one target: no hand-off), or join the run under way."""
        future, new = self._claim(key)
        if new:
            _settle(future, work, deadline)()
        return future

    def in_flight(self) -> int:
        """How many scrapes are under way or waiting for a worker."""
        return len(self._inflight)

    def scraping(self) -> list[int]:
        """The identities of what is being scraped now (the keys ``submit`` was given)."""
        with self._lock:
            return list(self._inflight)

    def _claim(self, key: Any) -> tuple[Future[Any], bool]:
        with self._lock:
            entry = self._inflight.get(id(key))
            if entry is not None and entry[0] is key and not entry[1].done():
                return entry[1], False
            future: Future[Any] = Future()
            future.set_running_or_notify_cancel()
            self._inflight[id(key)] = (key, future)
        future.add_done_callback(functools.partial(self._release, key))
        return future, True

    def _release(self, key: Any, done: Future[Any]) -> None:
        with self._lock:
            entry = self._inflight.get(id(key))
            if entry is not None and entry[1] is done:
                del self._inflight[id(key)]

    @staticmethod
    def _work(item: _Work) -> Callable[[], None]:
        """The scrape, and as the hand-back its outcome for the future: whoever waits asks for the next scrapes once
        this worker counts as idle again, so they find it free rather than start another worker."""
        future, work, deadline = item
        if time.monotonic() >= deadline:
            return functools.partial(future.set_exception, RespFailure("timeout", "no scrape worker was free before the deadline"))
        return _settle(future, work, deadline)

    def close(self) -> None:
        """Stop taking work; workers end when they are free (a stuck one is a daemon and never holds up exit)."""
        self._workers.close()


def _settle(future: Future[Any], work: Callable[[float], Any], deadline: float) -> Callable[[], None]:
    """Runs ``work``; what gives the future its result or error."""
    try:
        result = work(deadline)
    except BaseException as err:  # noqa: BLE001 - handed to whoever waits for the scrape
        return functools.partial(future.set_exception, without_tracebacks(err))
    return functools.partial(future.set_result, result)


def without_tracebacks(err: BaseException) -> BaseException:
    """The error and the ones it was raised from, without their tracebacks: a traceback's frames hold the future
    (a cycle) and the node's buffers and replies, which only a full collection would free, and the cyclic
    collector runs rarely here (``serve`` tunes it). Kind and message are all a failed scrape reports."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.__traceback__ = None
        current = current.__cause__ or current.__context__
    return err
