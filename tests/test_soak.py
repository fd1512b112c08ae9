"""Memory stays flat under failing targets: a failed scrape leaves nothing for the cyclic collector, which ``serve`` runs
rarely (bench/soak_bench.py is the long version, with RSS over 8,000 scrapes)."""

from __future__ import annotations

import collections
import gc
import threading

import pytest
from helpers import call, make_app
from servers import free_port, start_redis

FRAMES: list = []


@pytest.fixture
def failing_targets():
    """A stable node, one that refuses connections, one that closes every connection it accepts, one that hangs."""
    stable, hanging = start_redis(), start_redis()
    hanging.pause()
    closing = _closing_listener()
    yield {
        "stable": stable.addr,
        "refused": f"redis://127.0.0.1:{free_port()}",
        "closing": f"redis://127.0.0.1:{closing.getsockname()[1]}",
        "hanging": hanging.addr,
    }
    closing.close()
    stable.stop()
    hanging.stop()


def _closing_listener():
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            connection.close()

    threading.Thread(target=accept, daemon=True).start()
    return listener


def test_failed_scrapes_leave_no_cyclic_garbage(failing_targets):
    app = make_app(
        {
            "scrape": {"timeout": "200ms"},
            "heartbeat": {"read": False},
            "targets": [{"name": name, "addr": addr} for name, addr in failing_targets.items()],
        }
    )
    try:
        for _ in range(3):
            call(app, "/metrics")
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(30):
                assert call(app, "/metrics").code == 200
            gc.collect()
            kinds = collections.Counter(type(thing).__name__ for thing in gc.garbage)
            FRAMES[:] = collections.Counter(
                f"{t.f_code.co_filename.rsplit('/', 1)[-1]}:{t.f_code.co_name}" for t in gc.garbage if type(t).__name__ == "frame"
            ).most_common(10)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    finally:
        app.close()
    # every failed scrape used to leave its exception chain's frames (and the buffers they held) in a cycle
    assert kinds["frame"] == 0, (kinds.most_common(8), FRAMES)
    assert sum(kinds.values()) < 50, kinds.most_common(8)


def test_a_restarted_nodes_old_label_sets_are_let_go(monkeypatch):
    """Each start of a node gives it a new run_id, so its info series get new label sets; the ones of a run gone for two
    generations of the render cache are no longer held (before, they stayed until 8,192 sets filled the cache)."""
    from exporter.common import exposition

    monkeypatch.setattr(exposition.RENDERED, "generation_seconds", 0.0)  # every encoding is a generation
    node = start_redis()
    app = make_app({"heartbeat": {"read": False}, "targets": [{"name": "restarting", "addr": node.addr}]})
    run_ids = []
    try:
        for _ in range(3):
            run_ids.append(node.info()["run_id"])
            served = [f'run_id="{run_ids[-1]}"' in call(app, "/metrics").text for _ in range(3)]  # the first may find the old connection closed
            assert served[1:] == [True, True]
            node.stop()
            node.start()
        held = "".join(value for _, items in exposition.RENDERED.held_keys() for _, value in items)
    finally:
        app.close()
        node.stop()
    assert run_ids[-1] in held, "the latest run's label sets are kept between scrapes"
    assert not [run_id for run_id in run_ids[:-1] if run_id in held]


@pytest.mark.unit
def test_the_recent_cache_keeps_what_each_generation_uses():
    from exporter.common.recent import RecentCache

    now = [0.0]
    cache: RecentCache[str, str] = RecentCache(max_entries=3, generation_seconds=10.0, clock=lambda: now[0])
    cache.put("steady", "s")
    cache.put("churned", "c")
    for second in range(1, 40):
        now[0] = float(second)
        cache.tick()
        assert cache.get("steady") == "s", second  # used every second: survives every turn
    assert cache.get("churned") is None
    assert cache.held_keys() == {"steady"}
    for key in "abcd":  # a full young generation turns at once: the bound holds without waiting for the clock
        cache.put(key, key)
    assert len(cache.young) <= 3
    assert len(cache) <= 6
