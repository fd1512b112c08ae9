"""Scrape many Redis nodes concurrently into one set of metric families.

A collector never raises out of ``collect()``: a target that fails, hangs or
runs past the deadline is reported as ``redis_up 0`` with its error kind, and
the other targets are unaffected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures

from prometheus_client.metrics_core import Metric

from ..families import FamilySet
from ..node_metrics import add_node_metrics, add_target_health, parse_result
from ..redis_node import ScrapeResult, classify
from ..targets import Target

log = logging.getLogger(__name__)


class RedisCollector:
    """Collects the given targets once per ``collect()`` call, by ``deadline``."""

    def __init__(self, targets: Iterable[Target], executor: ThreadPoolExecutor, deadline: float) -> None:
        self._targets = list(targets)
        self._executor = executor
        self._deadline = deadline

    def collect(self) -> Iterator[Metric]:
        out = FamilySet()
        started = time.monotonic()
        outcomes = self._scrape_all()
        elapsed = time.monotonic() - started
        for target, outcome in zip(self._targets, outcomes, strict=True):
            _record(target, outcome, elapsed, out)
        return iter(out)

    def _scrape_all(self) -> list[ScrapeResult | BaseException]:
        if len(self._targets) == 1:
            return [_scrape_one(self._targets[0], self._deadline)]
        futures: list[Future[ScrapeResult]] = [
            self._executor.submit(target.node.scrape, self._deadline) for target in self._targets
        ]
        wait_futures(futures, timeout=max(0.0, self._deadline - time.monotonic()))
        outcomes: list[ScrapeResult | BaseException] = []
        for future in futures:
            if not future.done():
                outcomes.append(TimeoutError("scrape did not finish before the deadline"))
                continue
            error = future.exception()
            outcomes.append(error if error is not None else future.result())
        return outcomes


def _scrape_one(target: Target, deadline: float) -> ScrapeResult | BaseException:
    try:
        return target.node.scrape(deadline)
    except Exception as err:  # noqa: BLE001 - a failing node must never fail the scrape of the exporter
        return err


def _record(target: Target, outcome: ScrapeResult | BaseException, elapsed: float, out: FamilySet) -> None:
    state = target.state
    if isinstance(outcome, ScrapeResult):
        try:
            info = parse_result(outcome)
            add_node_metrics(info, outcome, target.name, out)
        except Exception:  # our own bug with this reply: report the target down, keep the others
            log.exception("could not turn the reply of target %s into metrics", target.name)
            outcome = RuntimeError("internal")
        else:
            with target.lock:
                state.up = True
                state.scraped = True
                state.last_error = "none"
                state.last_duration = outcome.duration
                state.last_success = time.time()
                state.malformed_lines += info.malformed_lines
                state.role = info.get("role", "") or ""
                state.version = info.get("valkey_version") or info.get("redis_version", "") or ""
    if not isinstance(outcome, ScrapeResult):
        kind = classify(outcome)
        with target.lock:
            if state.last_error != kind or state.up:
                log.warning("target %s (%s): scrape failed (%s): %.200s", target.name, target.display, kind, outcome)
            state.up = False
            state.scraped = True
            state.last_error = kind
            state.errors[kind] = state.errors.get(kind, 0) + 1
    with target.lock:
        add_target_health(
            out,
            target.name,
            up=state.up,
            duration=outcome.duration if isinstance(outcome, ScrapeResult) else elapsed,
            errors=dict(state.errors),
            last_error=state.last_error,
            malformed=state.malformed_lines,
            connects=target.node.connects,
        )
