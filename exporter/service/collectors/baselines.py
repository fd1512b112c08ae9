"""Each target compared with its node type's baseline: network and engine-CPU utilization, headroom.

Rates come from the INFO counters of recent scrapes (a sliding window), and from
CloudWatch's NetworkBytesIn/Out and EngineCPUUtilization where the node is
polled; the ``source`` label says which.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from exporter.baselines.table import LEVELS, BaselineTable, NodeBaseline
from exporter.common.families import COUNTER, GAUGE, FamilyCollector, FamilySet

from ..targets import Target

log = logging.getLogger(__name__)
_warned: set[str] = set()


def window_rates(counters: Iterable[tuple[float, float, float, float]], window: float, now: float) -> tuple[float, float, float] | None:
    """(bytes/s out, bytes/s in, engine CPU percent) between the oldest sample in the window and the newest."""
    recent = [sample for sample in counters if now - sample[0] <= window]
    if len(recent) < 2:
        return None
    first, last = recent[0], recent[-1]
    elapsed = last[0] - first[0]
    if elapsed < 0.5 or any(b < a for a, b in zip(first[1:], last[1:], strict=True)):
        return None  # too short, or the counters reset (a restart)
    return (
        (last[1] - first[1]) / elapsed,
        (last[2] - first[2]) / elapsed,
        (last[3] - first[3]) / elapsed * 100.0,
    )


def target_utilization(target: Target, table: BaselineTable, window: float, now: float) -> dict[str, float] | None:
    """The status page's view: out/in/engine-CPU ratios to the baseline from the INFO counters, or None."""
    baseline = table.get(target.node_type)
    levels = baseline.levels(table.basis) if baseline is not None else None
    if baseline is None or not levels:
        return None
    with target.lock:
        rates = window_rates(list(target.state.counters), window, now)
    if rates is None:
        return {}
    out_rate, in_rate, cpu = rates
    result = {"out": out_rate / levels[100], "in": in_rate / levels[100]}
    result["engine_cpu"] = cpu / baseline.engine_cpu_baseline()[0]
    return result


class BaselineCollector(FamilyCollector):
    """``targets``: Redis targets (INFO rates, and CloudWatch's where polled); ``cloudwatch_only``: (instance, node type)
    of discovered nodes that are not targets here, compared from their CloudWatch data alone."""

    def __init__(
        self,
        targets: Iterable[Target],
        table: BaselineTable,
        window: float,
        aws_monitor: Any = None,
        cloudwatch_only: Iterable[tuple[str, str]] = (),
    ) -> None:
        self._targets = list(targets)
        self._table = table
        self._window = window
        self._aws = aws_monitor
        self._cloudwatch_only = list(cloudwatch_only)

    def write(self, out: FamilySet) -> None:
        now = time.monotonic()
        seen_types: set[str] = set()
        for target in self._targets:
            baseline = self._baseline(target.node_type)
            if target.node_type and baseline is None:
                self._missing(target, out)
            if baseline is not None and target.node_type not in seen_types:
                seen_types.add(target.node_type)
                _add_baseline(target.node_type, baseline, self._table.basis, out)
            with target.lock:
                # traffic of a node that stopped answering is not served: old rates would keep alerts firing
                rates = window_rates(list(target.state.counters), self._window, now) if target.state.up else None
            if rates is not None:
                _add_utilization(target.name, target.node_type, baseline, self._table.basis, "info", rates, out)
            cloudwatch = self._cloudwatch_rates(target.name)
            if cloudwatch is not None:
                _add_utilization(target.name, target.node_type, baseline, self._table.basis, "cloudwatch", cloudwatch, out)
        for name, node_type in self._cloudwatch_only:
            baseline = self._baseline(node_type)
            if baseline is not None and node_type not in seen_types:
                seen_types.add(node_type)
                _add_baseline(node_type, baseline, self._table.basis, out)
            cloudwatch = self._cloudwatch_rates(name)
            if cloudwatch is not None:
                _add_utilization(name, node_type, baseline, self._table.basis, "cloudwatch", cloudwatch, out)

    def _baseline(self, node_type: str) -> NodeBaseline | None:
        """The node type's baseline, where the table has levels for it in the configured basis."""
        baseline = self._table.get(node_type) if node_type else None
        return baseline if baseline is not None and baseline.levels(self._table.basis) is not None else None

    def _missing(self, target: Target, out: FamilySet) -> None:
        with target.lock:
            target.state.baseline_missing += 1
            count = target.state.baseline_missing
        if target.node_type not in _warned:
            _warned.add(target.node_type)
            log.warning("no baseline for node type %s (target %s): no utilization is computed for it", target.node_type, target.name)
        out.add(
            "elasticache_exporter_baseline_missing_total",
            COUNTER,
            "Scrapes of a target whose node type has no baseline in the table.",
            {"instance": target.name, "node_type": target.node_type},
            count,
        )

    def _cloudwatch_rates(self, instance: str) -> tuple[float | None, float | None, float | None] | None:
        if self._aws is None:
            return None
        period = self._aws.config.period
        fresh_after = self._aws.now() - self._aws.fresh_seconds()
        out, received, cpu = (
            _fresh(self._aws.latest(instance, metric, statistic), fresh_after)
            for metric, statistic in (("NetworkBytesOut", "Sum"), ("NetworkBytesIn", "Sum"), ("EngineCPUUtilization", "Average"))
        )
        if out is None and received is None and cpu is None:
            return None
        return (
            None if out is None else out.value / period,
            None if received is None else received.value / period,
            None if cpu is None else cpu.value,
        )


def _fresh(datapoint: Any, after: float) -> Any:
    """A CloudWatch datapoint newer than ``after``, else None (a node CloudWatch stopped reporting)."""
    return datapoint if datapoint is not None and datapoint.timestamp >= after else None


def _add_baseline(node_type: str, baseline: NodeBaseline, basis: str, out: FamilySet) -> None:
    levels = baseline.levels(basis) or {}
    full = baseline.full_bandwidth(basis)
    source = full[1] if full else ""
    for level in LEVELS:
        out.add(
            "elasticache_baseline_network_bytes_per_second",
            GAUGE,
            "Network bandwidth of the node type at a level (100, 90, 80 %) of its baseline.",
            {"node_type": node_type, "level": str(level), "source": source},
            levels[level],
        )
    engine = baseline.measured_engine_cpu
    if engine is not None:
        out.add(
            "elasticache_baseline_engine_cpu_percent",
            GAUGE,
            "EngineCPUUtilization (p90) the node type showed at its benchmarked bandwidth.",
            {"node_type": node_type},
            engine,
        )


def _add_utilization(
    instance: str,
    node_type: str,
    baseline: NodeBaseline | None,
    basis: str,
    source: str,
    rates: tuple[float | None, float | None, float | None],
    out: FamilySet,
) -> None:
    """Traffic and engine CPU of every target; the ratios and headroom where its node type has a baseline."""
    full = (baseline.levels(basis) or {}).get(100) if baseline is not None else None
    out_rate, in_rate, cpu = rates
    for direction, rate in (("out", out_rate), ("in", in_rate)):
        if rate is None:
            continue
        labels = {"instance": instance, "direction": direction, "source": source, "node_type": node_type}
        out.add("elasticache_network_bytes_per_second", GAUGE, "Network traffic of the node.", labels, rate)
        if not full:
            continue
        out.add(
            "elasticache_network_utilization_ratio",
            GAUGE,
            "Network traffic divided by the node type's baseline bandwidth (1 = at the baseline).",
            labels,
            rate / full,
        )
        out.add(
            "elasticache_network_headroom_bytes_per_second",
            GAUGE,
            "Baseline bandwidth minus the current traffic (negative: above the baseline).",
            labels,
            full - rate,
        )
    if cpu is None:
        return
    labels = {"instance": instance, "source": source, "node_type": node_type}
    out.add("elasticache_engine_cpu_utilization_percent", GAUGE, "CPU of Redis' main thread, in percent of one core.", labels, cpu)
    engine = baseline.measured_engine_cpu if baseline is not None else None
    if engine:
        out.add(
            "elasticache_engine_cpu_utilization_ratio",
            GAUGE,
            "Engine CPU divided by the engine CPU the node type showed at its benchmarked bandwidth.",
            labels,
            cpu / engine,
        )
