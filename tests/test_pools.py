"""The scrape pool and the worker threads under it, without a process or a socket."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from types import SimpleNamespace

import pytest

from exporter.common.workers import Workers
from exporter.service.collectors.redis import _Scrapes
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


def test_a_scrape_asked_for_the_moment_the_last_one_is_in_finds_its_worker_idle():
    """A /metrics asks for the next scrapes the moment the last ones are in. A worker that gave the waiter its result
    before it counted as idle again made the pool start another, now and then (5 more than the soak's 3 targets
    needed, each with its stack and perhaps a malloc arena). A done callback asks at the worst moment: inside the
    result's hand-over, in the worker's own thread."""
    pool = ScrapePool(8)
    target = Scraped()
    finished = threading.Event()

    def next_scrape(done, left: int = 200) -> None:
        if left == 0:
            finished.set()
            return
        future = pool.submit(target, lambda deadline: deadline, time.monotonic() + 10)
        future.add_done_callback(lambda done: next_scrape(done, left - 1))

    next_scrape(None)
    assert finished.wait(10)
    assert pool._workers.threads == 1
    pool.close()


def test_an_idle_worker_holds_nothing_of_its_last_scrape():
    """A fleet's /metrics lets each reply go once it is rendered: a worker must not keep its last one while idle."""
    pool = ScrapePool(2)

    class Reply:
        """A scrape's result: only whether it is still alive matters."""

    future = pool.submit(Scraped(), lambda deadline: Reply(), time.monotonic() + 10)
    reply = weakref.ref(future.result(timeout=5))
    del future
    deadline = time.monotonic() + 5
    while reply() is not None and time.monotonic() < deadline:  # the worker may still be between its item and idle
        time.sleep(0.001)
    assert reply() is None
    pool.close()


def test_a_thread_that_ends_in_its_hand_back_is_not_counted_idle(monkeypatch):
    """A hand-back runs once its thread counts as idle; should it end the thread (SystemExit in a done callback), the
    next item must still find a thread, not one counted idle that is gone."""
    handled = threading.Event()
    ended = threading.Event()
    monkeypatch.setattr(threading, "excepthook", lambda args: ended.set())  # the thread's end is the point

    def handle(item: str):
        if item == "last":
            handled.set()
            return None

        def hand_back() -> None:
            raise SystemExit

        return hand_back

    workers: Workers[str] = Workers("test", 2, handle)
    workers.put("first")
    assert ended.wait(5)  # the first thread ended in its hand-back
    deadline = time.monotonic() + 5
    while workers.threads and time.monotonic() < deadline:  # and has left the pool
        time.sleep(0.001)
    assert workers.threads == 0
    workers.put("last")
    assert handled.wait(5)
    workers.close()


def test_a_metrics_starts_first_the_scrapes_another_request_has_under_way():
    """The second /metrics of an HA pair joins the first's scrapes under way before it starts scrapes of its own in
    the list's order: joining costs the nodes nothing."""
    pool = ScrapePool(2)
    release = threading.Event()
    targets = [SimpleNamespace(node=SimpleNamespace(scrape=lambda deadline, i=i: f"own {i}")) for i in range(3)]
    deadline = time.monotonic() + 10
    try:
        theirs = pool.submit(targets[2], lambda deadline: release.wait(5) and "shared", deadline)
        scrapes = _Scrapes(targets, pool, deadline)  # type: ignore[arg-type]
        scrapes.start_next()
        assert list(scrapes.under_way) == [2]
        assert scrapes.under_way[2][1] is theirs
        scrapes.start_next()
        scrapes.start_all()
        assert sorted(scrapes.under_way) == [0, 1, 2]  # each once
        release.set()
        assert sorted(scrapes.done.get(timeout=5) for _ in range(3)) == [0, 1, 2]
        assert scrapes.done.empty()  # none started twice
        assert [future.result() for _, future in (scrapes.under_way[place] for place in range(3))] == ["own 0", "own 1", "shared"]
    finally:
        release.set()
        pool.close()
