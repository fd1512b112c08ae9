"""Background work on every node: one daemon thread visits each node in turn every ``interval`` seconds, each on a
connection of its own (never the scrape's)."""

from __future__ import annotations

import threading
import time

from .node import RedisNode


class NodeLoop:
    """Subclasses say what a visit does (:meth:`visit`); a failing node must not stop the visits of the others."""

    def __init__(self, thread_name: str, nodes: list[tuple[str, RedisNode]], interval: float, least_wait: float = 0.0) -> None:
        self._nodes = nodes
        self._interval = interval
        self._least_wait = least_wait
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=2)
        for _, node in self._nodes:
            node.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.visit_all()
            self._stop.wait(max(self._least_wait, self._interval - (time.monotonic() - started)))

    def visit_all(self) -> None:
        for name, node in self._nodes:
            if self._stop.is_set():
                return
            self.visit(name, node)

    def visit(self, name: str, node: RedisNode) -> None:
        raise NotImplementedError
