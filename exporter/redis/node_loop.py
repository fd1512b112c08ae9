"""Background work on every node: one daemon thread visits each node in turn every ``interval`` seconds, each on a
connection of its own (never the scrape's).

The nodes are a list, or a function that gives the current list at each round (configured targets and the nodes
discovery finds, which come and go): a new node gets a connection, a node gone has its connection closed and what
was kept of it dropped."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .failures import classify
from .node import RedisNode
from .resp import DEFAULT_MAX_REPLY_BYTES
from .settings import TargetConfig

log = logging.getLogger(__name__)
Targets = Sequence[TargetConfig] | Callable[[], Sequence[TargetConfig]]


class NodeLoop:
    """Subclasses say what a visit does (:meth:`visit`); a failing node must not stop the visits of the others."""

    def __init__(self, thread_name: str, targets: Targets, interval: float, least_wait: float = 0.0, max_reply_bytes: int | None = None) -> None:
        self._targets = targets
        self._max_reply_bytes = max_reply_bytes
        self._nodes: dict[str, tuple[TargetConfig, RedisNode]] = {}  # the round's: changed and read only under _round
        self._members: tuple[TargetConfig, ...] = ()  # the latest round's targets, replaced whole: any thread may read it
        self._interval = interval
        self._least_wait = least_wait
        self._stop = threading.Event()
        # one round at a time, whoever runs it (the loop's thread, or a caller of visit_all): the node table is the round's
        self._round = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No more rounds; every node's connection closed. A round under way is waited for (its calls are bounded by
        their deadlines); should it outlast that, its nodes are closed anyway and refuse to connect again."""
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=2)
        waited = self._round.acquire(timeout=10)
        try:
            for _, node in list(self._nodes.values()):
                node.close()
        finally:
            if waited:
                self._round.release()

    @property
    def members(self) -> list[TargetConfig]:
        """The targets of the latest round (a scrape reads them while a round changes the node table)."""
        return list(self._members)

    def _sync(self) -> None:
        current = {target.name: target for target in (self._targets() if callable(self._targets) else self._targets)}
        for name in [name for name, (target, _) in self._nodes.items() if current.get(name) != target]:
            _, node = self._nodes.pop(name)
            node.close()
            self.forget(name)
        for name, target in current.items():
            if name not in self._nodes:
                limit = DEFAULT_MAX_REPLY_BYTES if self._max_reply_bytes is None else self._max_reply_bytes
                self._nodes[name] = (target, RedisNode(target.endpoint, target.credentials, max_reply_bytes=limit))
        self._members = tuple(target for target, _ in self._nodes.values())

    def forget(self, name: str) -> None:
        """A node is gone (or changed): drop what was kept of it."""

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.visit_all()
            self._stop.wait(max(self._least_wait, self._interval - (time.monotonic() - started)))

    def visit_all(self) -> None:
        with self._round:
            if self._stop.is_set():
                return
            self._sync()
            self.visit_round()

    def visit_round(self) -> None:
        """Each node in turn (under the round's lock, the node table just synced), until stopped."""
        for name, (_, node) in list(self._nodes.items()):
            if self._stop.is_set():
                return
            self.visit(name, node)

    def visit(self, name: str, node: RedisNode) -> None:
        raise NotImplementedError


class NodeProfiler(NodeLoop):
    """A loop that reads something of each node (:meth:`read`) and keeps the latest result per target, the time the
    read took, and its failures by kind (each kind logged once per target).

    A read that fails, or that no longer applies (a demoted primary has no slot stats), drops what was kept of the
    node: its series leave /metrics until a read succeeds again, rather than serving the last one as if it were new."""

    what = "profile"  # for the log line

    def __init__(self, thread_name: str, targets: Targets, interval: float, max_reply_bytes: int | None = None) -> None:
        super().__init__(thread_name, targets, interval, least_wait=1.0, max_reply_bytes=max_reply_bytes)
        self._lock = threading.Lock()
        self.profiles: dict[str, Any] = {}
        self.errors: dict[tuple[str, str], int] = {}
        self.durations: dict[str, float] = {}
        self._logged: set[tuple[str, str]] = set()

    def read(self, node: RedisNode) -> Any:
        """The node's profile; None where the node does not allow what it takes (nothing is kept, no error counted)."""
        raise NotImplementedError

    def combine(self, previous: Any, result: Any) -> Any:
        """What is kept of a read, given the one kept before it (rates between reads); the read itself by default."""
        return result

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
            self._drop(name)
            return
        if result is None:
            self._drop(name)
            return
        with self._lock:
            self.profiles[name] = self.combine(self.profiles.get(name), result)
            self.durations[name] = time.monotonic() - started

    def _drop(self, name: str) -> None:
        """The node's profile is no longer true: not served (its failures are still counted)."""
        with self._lock:
            self.profiles.pop(name, None)
            self.durations.pop(name, None)

    def forget(self, name: str) -> None:
        self._drop(name)
        with self._lock:
            for key in [key for key in self.errors if key[0] == name]:
                del self.errors[key]
        self._logged = {key for key in self._logged if key[0] != name}

    def snapshot(self) -> tuple[dict[str, Any], dict[tuple[str, str], int], dict[str, float]]:
        with self._lock:
            return dict(self.profiles), dict(self.errors), dict(self.durations)
