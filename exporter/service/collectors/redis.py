"""Scrape many Redis nodes concurrently into one set of metric families.

A collector never raises out of ``collect()``: a target that fails, hangs or
runs past the deadline is reported as ``redis_up 0`` with its error kind, and
the other targets are unaffected.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from queue import Empty, SimpleQueue

from exporter.common.families import FamilyCollector, FamilySet
from exporter.redis.failures import classify
from exporter.redis.info import InfoReply, parse_number
from exporter.redis.node_metrics import add_node_metrics, add_target_health
from exporter.redis.pipeline import ScrapeResult
from exporter.redis.replication import (
    AddressNames,
    HeartbeatReading,
    Membership,
    add_heartbeat_metrics,
    add_replication_metrics,
    add_shard_membership,
    shard_of,
)

from ..pool import ScrapePool
from ..targets import MEMBER, Target

log = logging.getLogger(__name__)

# a fleet's render joins the lines of every few targets (see FamilySet.compact): joining after each target walked every
# family a target, a twentieth of a target-scrape's CPU at 1,000 targets
COMPACT_EVERY = 8


class RedisCollector(FamilyCollector):
    """Collects the given targets once per ``collect()`` call, by ``deadline``."""

    def __init__(
        self,
        targets: Iterable[Target],
        pool: ScrapePool,
        deadline: float,
        *,
        heartbeat_sources: tuple[tuple[str, str], ...] = (),
        address_names: AddressNames | None = None,
        share: float | None = None,
    ) -> None:
        """``share``: on a page of many targets, the most one without a timeout of its own may take of it, from its start
        (scrape.target_timeout); the others are served without waiting longer for it."""
        self._share = share
        self._targets = list(targets)
        self._pool = pool
        self._deadline = deadline
        self._heartbeat_sources = heartbeat_sources
        self._address_names = address_names or {}

    def write(self, out: FamilySet) -> None:
        """Each target is rendered as soon as its scrape is in, in the order they come in, and its reply let go. Until
        half the time to the deadline has passed, at most ``window`` scrapes are under way or waiting for the render
        at once, a few times the pool's workers: a fleet's /metrics holds no more replies than that (at 1,000 nodes
        every reply at once was much of the exporter's peak memory, which its allocator then kept, and the more so the
        slower the render). After it, every scrape left starts at once, so that a render too slow for the window does
        not hold back the scrapes. A slow or hung target holds one place of the window, never the scrapes or
        the rendering of the others. What is in by the deadline is rendered, however long that takes."""
        started = time.monotonic()
        if len(self._targets) == 1:  # no hand-off to a worker for one target (the /scrape mode)
            target = self._targets[0]
            self._record(target, self._outcome(self._pool.run_here(target, target.node.scrape, self._deadline)), time.monotonic() - started, out)
            return
        late = TimeoutError("scrape did not finish before the deadline")
        if started >= self._deadline:  # no time left: nothing is started only to be dropped by its worker
            for target in self._targets:
                self._record(target, late, 0.0, out)
            return
        scrapes = _Scrapes(self._targets, self._pool, self._deadline, self._share)
        for _ in range(self.window()):
            scrapes.start_next()
        release = started + (self._deadline - started) / 2
        rendered = 0
        while scrapes.under_way:
            windowed = time.monotonic() < release
            if not windowed:
                scrapes.start_all()
            try:
                place = scrapes.done.get(timeout=max(0.0, (release if windowed else self._deadline) - time.monotonic()))
            except Empty:
                if windowed:
                    continue
                break
            target, future = scrapes.under_way.pop(place)
            if windowed:
                scrapes.start_next()
            outcome = future.exception() or future.result()
            del future
            self._record(target, outcome, time.monotonic() - started, out)
            del outcome  # the reply goes with the rendering, not kept while the next is waited for
            rendered += 1
            if scrapes.under_way and rendered % COMPACT_EVERY == 0:  # more to come: what these added is joined
                out.compact()
        for target, _ in scrapes.under_way.values():
            self._record(target, late, time.monotonic() - started, out)

    def window(self) -> int:
        """How many scrapes may be under way or waiting for the render at once, until half the time has passed."""
        return max(4 * self._pool.size, 32)

    def _outcome(self, future: Future[ScrapeResult]) -> ScrapeResult | BaseException:
        wait_futures([future], timeout=max(0.0, self._deadline - time.monotonic()))
        if not future.done():
            return TimeoutError("scrape did not finish before the deadline")
        error = future.exception()
        return error if error is not None else future.result()

    def _record(self, target: Target, outcome: ScrapeResult | BaseException, elapsed: float, out: FamilySet) -> None:
        heartbeat_errors: list[tuple[str, str]] = []
        lags: dict[str, float] = {}
        info = None
        if isinstance(outcome, ScrapeResult):
            try:
                info = outcome.parsed
                with out.rendering(target.rendering):  # the target's lines of its last scrape, replayed where they stand
                    add_node_metrics(outcome, target.rendering.labels, out)
                add_replication_metrics(info, target.name, self._address_names, out)
                heartbeat_errors, lags = add_heartbeat_metrics(
                    self._readings(outcome), info.get("role", "") or "", outcome.read_time, target.name, out
                )
            except Exception as err:  # our own bug with this reply: report the target down, keep the others
                with target.lock:
                    first = type(err).__name__ not in target.state.logged_bugs
                    target.state.logged_bugs.add(type(err).__name__)
                if first:
                    log.exception("could not turn the reply of target %s into metrics", target.name)
                outcome, info = RuntimeError("internal"), None
        _record_state(target, outcome, elapsed, heartbeat_errors, out)
        _add_membership(target, info, out)
        if info is not None:
            with target.lock:
                target.state.heartbeat_lag = lags

    def _readings(self, result: ScrapeResult) -> list[HeartbeatReading]:
        if result.heartbeat_values is None or len(result.heartbeat_values) != len(self._heartbeat_sources):
            return []
        return [
            HeartbeatReading(source, key, value, result.heartbeat_types.get(key))
            for (source, key), value in zip(self._heartbeat_sources, result.heartbeat_values, strict=True)
        ]


class _Scrapes:
    """The scrapes of one /metrics of many targets, by the target's place in the list: those under way or waiting for
    the render, and the places of those done, in the order they came in. The next to start is a target another request
    is scraping already (an HA pair's second /metrics joins the first's scrapes, which costs nothing), else the next in
    the list."""

    def __init__(self, targets: list[Target], pool: ScrapePool, deadline: float, share: float | None = None) -> None:
        self._share = share
        self._targets = targets
        self._pool = pool
        self._deadline = deadline
        self._order = deque(range(len(targets)))
        self._places = {id(target): place for place, target in enumerate(targets)}
        self._started = bytearray(len(targets))
        self.done: SimpleQueue[int] = SimpleQueue()  # places only: a future on it would hold its callback, a cycle
        self.under_way: dict[int, tuple[Target, Future[ScrapeResult]]] = {}  # a target listed twice is rendered twice

    def start_next(self) -> None:
        # the pool's scrapes are looked through only while it has more under way than this request can have: with a
        # pool of hundreds, doing so at every refill cost more than a target's render
        if self._pool.in_flight() > len(self.under_way) - self.done.qsize():
            for key in self._pool.scraping():
                place = self._places.get(key)
                if place is not None and not self._started[place]:
                    self._start(place)
                    return
        while self._order:
            place = self._order.popleft()
            if not self._started[place]:
                self._start(place)
                return

    def start_all(self) -> None:
        while self._order:
            place = self._order.popleft()
            if not self._started[place]:
                self._start(place)

    def _start(self, place: int) -> None:
        self._started[place] = 1
        target = self._targets[place]
        node = target.node
        share = self._share
        work = node.scrape if share is None or node.credentials.own_timeout else _within(node.scrape, share)
        future = self._pool.submit(target, work, self._deadline)
        self.under_way[place] = target, future
        done = self.done  # the callback holds the queue only, never this record of the futures
        future.add_done_callback(lambda _: done.put(place))  # at once, here, if it is done already


def _within(scrape: Callable[[float], ScrapeResult], share: float) -> Callable[[float], ScrapeResult]:
    """``scrape`` by the page's deadline or ``share`` seconds after a worker starts it, the earlier."""
    return lambda deadline: scrape(min(deadline, time.monotonic() + share))


def _add_membership(target: Target, info: InfoReply | None, out: FamilySet) -> None:
    """A node that answers is in the shard it is configured or discovered in, else the one it says, with its role; one
    that does not (``info`` None) stays in the shard it is known in or last answered in, without a role, so the alerts
    joined with its shard (RedisDown) keep their labels and inhibitions for as long as it is down."""
    if target.kind is MEMBER:  # its shard is the cluster's (its slot ranges), as discovery last read it
        membership = Membership(target.replication_group, "", target.shard)
    else:
        membership = Membership(target.replication_group, target.shard, target.node.cluster_shard(bool(target.replication_group)))
    with target.lock:
        if info is None:
            shard = shard_of(None, membership) or target.state.shard
        else:
            shard = target.state.shard = shard_of(info, membership)
    role = (info.get("role", "") or "") if info is not None else ""
    if shard is not None and (role or info is None):
        add_shard_membership(shard, target.name, role, out)


def _record_state(
    target: Target,
    outcome: ScrapeResult | BaseException,
    elapsed: float,
    heartbeat_errors: list[tuple[str, str]],
    out: FamilySet,
) -> None:
    state = target.state
    with target.lock:
        failed_before = state.scraped and not state.up
        state.scraped = True
        state.scraped_at = time.monotonic()
        if isinstance(outcome, ScrapeResult):
            info = outcome.parsed
            if failed_before:  # the other side of the failure's line: said once, when it ends
                log.info("target %s (%s): scrape succeeds again (after %s)", target.name, target.display, state.last_error)
            state.up = True
            state.last_error = "none"
            state.last_duration = outcome.duration
            state.last_success = time.time()
            state.malformed_lines += info.malformed_lines
            state.role = info.get("role", "") or ""
            sample = traffic_counters(info)
            if sample is not None:
                state.counters.append((time.monotonic(), *sample))
            state.version = info.get("valkey_version") or info.get("redis_version", "") or ""
        else:
            kind = classify(outcome)
            if state.last_error != kind or state.up:
                log.warning("target %s (%s): scrape failed (%s): %.200s", target.name, target.display, kind, outcome)
            state.up = False
            state.last_error = kind
            state.errors[kind] = state.errors.get(kind, 0) + 1
            if target.on_down is not None:  # a cluster's node that fails may have left the cluster, or failed over
                target.on_down()
        for key in heartbeat_errors:
            state.heartbeat_errors[key] = state.heartbeat_errors.get(key, 0) + 1
        add_target_health(
            out,
            target.rendering.labels,
            up=state.up,
            duration=outcome.duration if isinstance(outcome, ScrapeResult) else elapsed,
            errors=dict(state.errors),
            last_error=state.last_error,
            malformed=state.malformed_lines,
            connects=target.node.connects,
            heartbeat_errors=dict(state.heartbeat_errors),
        )


def traffic_counters(info: InfoReply) -> tuple[float, float, float] | None:
    """(bytes out, bytes in, engine CPU seconds) from INFO; the main thread's CPU where Redis reports it."""
    out = parse_number(info.get("total_net_output_bytes", "") or "")
    received = parse_number(info.get("total_net_input_bytes", "") or "")
    if out is None or received is None:
        return None
    cpu = 0.0
    for field in ("used_cpu_sys_main_thread", "used_cpu_user_main_thread"):
        value = parse_number(info.get(field, "") or "")
        if value is None:
            cpu = -1.0
            break
        cpu += value
    if cpu < 0:  # before Redis 7 only the whole process is reported
        cpu = sum(parse_number(info.get(f, "") or "") or 0.0 for f in ("used_cpu_sys", "used_cpu_user"))
    return out, received, cpu
