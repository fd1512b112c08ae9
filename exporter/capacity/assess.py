"""The capacity assessment of each node: daily p90 of its history, a projection, a status against its node type's
baseline, and the node type to move to. Pure functions."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from exporter.aws.discovery import Node, NodeKey
from exporter.baselines.benchmark import percentile
from exporter.baselines.table import BaselineTable
from exporter.common.records import field, record

from .history import DAY, SIGNALS, History, history_window
from .trend import BAND_Z, Projection, project

GRAVITON_FAMILIES = ("r7g", "r6g", "m7g", "m6g", "t4g")


def daily_p90(points: list[tuple[float, float]], now: float, days: int, period: int = 60) -> list[tuple[float, float]]:
    """(day start, p90 of that day's values) for each day of the history window that has data."""
    start, end = (moment.timestamp() for moment in history_window(now, days, period))
    buckets: dict[int, list[float]] = {}
    for stamp, value in points:
        if start <= stamp < end:
            buckets.setdefault(int((stamp - start) // DAY), []).append(value)
    return [(start + day * DAY, percentile(values, 0.9)) for day, values in sorted(buckets.items())]


@record
class NodeReport:
    node: Node
    status: str  # ok | watch | warning | critical | no data | no baseline
    name: str = ""  # the node's instance name: its CacheClusterId, qualified where another account or region has it too
    reason: str = ""
    baseline_bytes_per_second: float | None = None
    baseline_source: str = ""
    network_out_p90: float | None = None
    network_in_p90: float | None = None
    peak_p90: float | None = None
    percent_of_baseline: float | None = None
    percent_source: str = ""  # aws: AWS's NetworkBaselineUsage*Percentage; table: traffic over the table's baseline
    peak_second_percent: float | None = None  # AWS: the busiest second's share of the baseline (daily p90), where published
    trend_bytes_per_second_per_day: float | None = None
    reaches_80: float | None = None  # the earliest date of the range: the model's upper band reaches 80 %
    reaches_100: float | None = None
    reaches_80_central: float | None = None  # the model's own date, the later end of the range
    reaches_100_central: float | None = None
    projection: Projection | None = None
    engine_cpu_p90: float | None = None
    memory_p90: float | None = None
    connections_p90: float | None = None
    recommendation: dict[str, Any] | None = None
    daily: dict[str, list[tuple[float, float]]] = field(factory=dict)

    @property
    def urgency(self) -> tuple[int, float]:
        order = {"critical": 0, "warning": 1, "watch": 2, "ok": 3, "no baseline": 4, "no data": 5}
        soonest = self.reaches_80 if self.reaches_80 is not None else float("inf")
        return order.get(self.status, 9), soonest

    def as_dict(self) -> dict[str, Any]:
        def iso(stamp: float | None) -> str | None:
            return None if stamp is None else datetime.fromtimestamp(stamp, tz=timezone.utc).strftime("%Y-%m-%d")

        return {
            "node": self.name or self.node.cluster_id,
            "cluster_id": self.node.cluster_id,
            "node_id": self.node.node_id,
            "account_id": self.node.account_id,
            "region": self.node.region,
            "replication_group": self.node.replication_group,
            "node_type": self.node.node_type,
            "status": self.status,
            "reason": self.reason,
            "baseline_bytes_per_second": self.baseline_bytes_per_second,
            "baseline_source": self.baseline_source,
            "network_out_p90_bytes_per_second": self.network_out_p90,
            "network_in_p90_bytes_per_second": self.network_in_p90,
            "percent_of_baseline": self.percent_of_baseline,
            "percent_of_baseline_source": self.percent_source,
            "peak_second_percent_of_baseline": self.peak_second_percent,
            "trend_bytes_per_second_per_day": self.trend_bytes_per_second_per_day,
            "reaches_80_percent": iso(self.reaches_80),
            "reaches_100_percent": iso(self.reaches_100),
            "reaches_80_percent_central": iso(self.reaches_80_central),
            "reaches_100_percent_central": iso(self.reaches_100_central),
            "model": self.projection.fit.model if self.projection else None,
            "growth_per_week_percent": (
                round(self.projection.fit.growth_per_week * 100, 2) if self.projection and self.projection.fit.model == "compound" else None
            ),
            "regime_start": iso(self.projection.regime_start) if self.projection else None,
            "step_change": self.projection.step if self.projection else False,
            "engine_cpu_p90_percent": self.engine_cpu_p90,
            "memory_p90_percent": self.memory_p90,
            "connections_p90": self.connections_p90,
            "recommendation": self.recommendation,
            "daily_p90": {name: [[iso(t), v] for t, v in values] for name, values in sorted(self.daily.items())},
        }


def recommend(table: BaselineTable, peak: float, memory_gib_needed: float | None) -> dict[str, Any] | None:
    """The table's suggestion for ``peak`` bytes per second and the memory needed, with its figures."""
    name = table.suggest(peak, memory_gib=memory_gib_needed)
    if name is None:
        return None
    node = table.node_types[name]
    full = node.levels(table.basis)[100]  # type: ignore[index]
    return {
        "node_type": name,
        "vcpus": node.vcpus,
        "memory_gib": node.memory_gib,
        "baseline_bytes_per_second": full,
        "percent_of_its_baseline": round(peak / full * 100, 1),
        "graviton": name.split(".")[1] in GRAVITON_FAMILIES,
    }


def assess(node: Node, history: History, table: BaselineTable, now: float, days: int, name: str = "", period: int = 60) -> NodeReport:
    daily = {signal: daily_p90(history.get((node.key, signal), []), now, days, period) for signal, *_ in SIGNALS}
    daily = {signal: values for signal, values in daily.items() if values}
    report = NodeReport(node=node, status="ok", name=name, daily=daily)
    if "network_out" not in daily and "network_in" not in daily:
        report.status, report.reason = "no data", "CloudWatch has no network datapoints for this node in the window"
        return report
    report.network_out_p90 = daily["network_out"][-1][1] if "network_out" in daily else None
    report.network_in_p90 = daily["network_in"][-1][1] if "network_in" in daily else None
    report.engine_cpu_p90 = daily["engine_cpu"][-1][1] if "engine_cpu" in daily else None
    report.memory_p90 = daily["memory"][-1][1] if "memory" in daily else None
    report.connections_p90 = daily["connections"][-1][1] if "connections" in daily else None
    # the busier direction drives the assessment
    direction = max(("network_out", "network_in"), key=lambda name: max((v for _, v in daily.get(name, [])), default=-1))
    series = daily[direction]
    report.peak_p90 = max(v for _, v in series)
    baseline = table.get(node.node_type)
    full = baseline.full_bandwidth(table.basis) if baseline else None
    if full is None:
        report.status = "no baseline"
        report.reason = f"node type {node.node_type or '(unknown)'} is not in the baseline table; no recommendation"
        return report
    report.baseline_bytes_per_second, report.baseline_source = full
    _against_table(report, series, full[0], now)
    share = daily.get("aws_share_" + direction.removeprefix("network_"))
    if share:
        _against_aws(report, share, daily.get("aws_peak_" + direction.removeprefix("network_")), now)
    if report.percent_of_baseline is None:
        return report
    if report.percent_of_baseline >= 90:
        report.status = "critical"
    elif report.percent_of_baseline >= 80:
        report.status = "warning"
    elif report.reaches_80 is not None and report.reaches_80 - now < 30 * DAY:
        report.status = "watch"
    _recommend(report, table, baseline.memory_gib if baseline else None, now)
    return report


def _against_table(report: NodeReport, series: list[tuple[float, float]], full: float, now: float) -> None:
    """The traffic's percentage of the table's baseline, its trend and the dates it reaches 80 and 100 %."""
    report.percent_of_baseline, report.percent_source = round(series[-1][1] / full * 100, 1), "table"
    projection = report.projection = project(series)
    if projection is not None:
        fit = projection.fit
        # the rate of growth now: the slope of a line, the derivative of compound growth at today's value
        report.trend_bytes_per_second_per_day = fit.slope * DAY * (fit.value_at(now) if fit.model == "compound" else 1.0)
        report.reaches_80, report.reaches_80_central = projection.reaches(0.8 * full, now)
        report.reaches_100, report.reaches_100_central = projection.reaches(full, now)


def _against_aws(report: NodeReport, share: list[tuple[float, float]], peak: list[tuple[float, float]] | None, now: float) -> None:
    """Where the node publishes AWS's share of its baseline, that share (ground truth for shaping) sets the percentage
    and the dates it reaches 80 and 100 %; the traffic's trend in bytes stays the table's."""
    report.percent_of_baseline, report.percent_source = round(share[-1][1], 1), "aws"
    report.peak_second_percent = round(peak[-1][1], 1) if peak else None
    projection = project(share)
    if projection is not None:
        report.reaches_80, report.reaches_80_central = projection.reaches(80.0, now)
        report.reaches_100, report.reaches_100_central = projection.reaches(100.0, now)


def _recommend(report: NodeReport, table: BaselineTable, memory_gib: float | None, now: float) -> None:
    memory_needed = None
    if report.memory_p90 is not None and memory_gib:
        memory_needed = memory_gib * report.memory_p90 / 100 / 0.8
    if report.status != "ok" and report.peak_p90 is not None:
        # size for the observed peak (of the latest regime) or where the upper band goes in 30 days, whichever is higher
        projection = report.projection
        ahead = projection.fit.value_at(now + 30 * DAY, BAND_Z) if projection is not None else 0.0
        report.recommendation = recommend(table, max(report.peak_p90, ahead), memory_needed)


def build_reports(
    nodes: list[Node],
    history: History,
    table: BaselineTable,
    days: int,
    now: float | None = None,
    names: Mapping[NodeKey, str] | None = None,
    period: int = 60,
) -> list[NodeReport]:
    now = time.time() if now is None else now
    reports = (assess(node, history, table, now, days, (names or {}).get(node.key, ""), period) for node in nodes)
    return sorted(reports, key=lambda r: (r.urgency, r.node.key))
