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
    yield {"stable": stable.addr, "refused": f"redis://127.0.0.1:{free_port()}", "closing": f"redis://127.0.0.1:{closing.getsockname()[1]}",
           "hanging": hanging.addr}  # fmt: skip
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
    app = make_app({"scrape": {"timeout": "200ms"}, "heartbeat": {"read": False},
                    "targets": [{"name": name, "addr": addr} for name, addr in failing_targets.items()]})  # fmt: skip
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
            FRAMES[:] = collections.Counter(f"{t.f_code.co_filename.rsplit('/', 1)[-1]}:{t.f_code.co_name}" for t in gc.garbage
                                            if type(t).__name__ == "frame").most_common(10)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    finally:
        app.close()
    # every failed scrape used to leave its exception chain's frames (and the buffers they held) in a cycle
    assert kinds["frame"] == 0, (kinds.most_common(8), FRAMES)
    assert sum(kinds.values()) < 50, kinds.most_common(8)
