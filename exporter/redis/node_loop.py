"""Background work on every node: one daemon thread visits each node in turn every ``interval`` seconds, each on a
connection of its own (never the scrape's)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .failures import classify
from .node import RedisNode

log = logging.getLogger(__name__)


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


class NodeProfiler(NodeLoop):
    """A loop that reads something of each node (:meth:`read`) and keeps the latest result per target, the time the
    read took, and its failures by kind (each kind logged once per target)."""

    what = "profile"  # for the log line

    def __init__(self, thread_name: str, nodes: list[tuple[str, RedisNode]], interval: float) -> None:
        super().__init__(thread_name, nodes, interval, least_wait=1.0)
        self._lock = threading.Lock()
        self.profiles: dict[str, Any] = {}
        self.errors: dict[tuple[str, str], int] = {}
        self.durations: dict[str, float] = {}
        self._logged: set[tuple[str, str]] = set()

    def read(self, node: RedisNode) -> Any:
        """The node's profile; None where the node does not allow what it takes (nothing is kept, no error counted)."""
        raise NotImplementedError

    def visit(self, name: str, node: RedisNode) -> None:
        started = time.monotonic()
        try:
            result = self.read(node)
        except Exception as err:  # noqa: BLE001 - a failing node must not stop the others' profiles
            kind = classify(err)
            with self._lock:
                self.errors[(name, kind)] = self.errors.get((name, kind), 0) + 1
            if (name, kind) not in self._logged:
                self._logged.add((name, kind))
                log.warning("%s of target %s failed (%s): %.200s", self.what, name, kind, err)
            return
        if result is None:
            return
        with self._lock:
            self.profiles[name] = result
            self.durations[name] = time.monotonic() - started

    def snapshot(self) -> tuple[dict[str, Any], dict[tuple[str, str], int], dict[str, float]]:
        with self._lock:
            return dict(self.profiles), dict(self.errors), dict(self.durations)
