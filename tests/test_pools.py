"""The scrape pool and the worker threads under it, without a process or a socket."""

from __future__ import annotations

import gc
import threading
import time

import pytest

from exporter.common.workers import Workers
from exporter.service.pool import ScrapePool

pytestmark = pytest.mark.unit


class Scraped:
    """Something scraped: only its identity matters to the pool."""


def test_a_scrape_in_flight_is_never_joined_by_another_object_at_its_address():
    pool = ScrapePool(2)
    release = threading.Event()
    first = Scraped()
    first_address = id(first)
    running = pool.submit(first, lambda deadline: release.wait(5) and "first", time.monotonic() + 10)
    del first
    gc.collect()
    # the address of an object freed meanwhile is soon given to a new one of the same size
    others = [Scraped() for _ in range(2000)]
    same_address = [other for other in others if id(other) == first_address]
    for other in same_address or others[:1]:
        future = pool.submit(other, lambda deadline: "its own", time.monotonic() + 10)
        assert future is not running
        assert future.result(timeout=5) == "its own"
    release.set()
    assert running.result(timeout=5) == "first"
    pool.close()


def test_the_same_object_shares_the_scrape_under_way():
    pool = ScrapePool(2)
    release = threading.Event()
    target = Scraped()
    first = pool.submit(target, lambda deadline: release.wait(5) and 1, time.monotonic() + 10)
    assert pool.submit(target, lambda deadline: 2, time.monotonic() + 10) is first
    release.set()
    assert first.result(timeout=5) == 1
    assert pool.submit(target, lambda deadline: 3, time.monotonic() + 10).result(timeout=5) == 3
    pool.close()


def test_a_handler_that_raises_costs_its_item_not_the_thread(caplog):
    done: list[int] = []
    finished = threading.Event()

    def handle(item: int) -> None:
        if item == 1:
            raise ValueError("a bug")
        done.append(item)
        finished.set()

    workers: Workers[int] = Workers("test", 1, handle)
    workers.put(1)
    workers.put(2)
    assert finished.wait(5)
    assert done == [2]  # one thread at most: the one that met the bug took the next item
    assert "an item failed" in caplog.text
    workers.close()


def test_work_that_asks_for_more_as_it_is_handed_back_keeps_one_thread():
    """A kept-alive client asks again the moment its reply is handed back: the next item must find the thread that
    answered idle, not start another one (each thread started late may take a malloc arena of its own)."""
    done = threading.Event()
    seen_threads: set[int] = set()

    def handle(item: int):
        seen_threads.add(threading.get_ident())
        if item == 2_000:
            done.set()
            return None
        return lambda: workers.put(item + 1)

    workers: Workers[int] = Workers("test", 4, handle)
    workers.put(1)
    assert done.wait(10)
    assert len(seen_threads) == 1
    assert workers.threads == 1
    workers.close()
