"""The capacity report: CloudWatch history per node, daily p90, a trend, projected dates, a recommendation.

Per node and signal the per-minute datapoints of the window are fetched (in the fewest
GetMetricData calls that respect 500 queries and 100,800 datapoints a call), reduced to
one p90 a day (the baseline method, per day), fitted with a least-squares line, and set
against the node type's baseline. Pure apart from :func:`fetch_history`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from exporter.aws.api import AwsApi
from exporter.aws.cloudwatch import NAMESPACE
from exporter.aws.discovery import Node
from exporter.baselines.benchmark import percentile
from exporter.baselines.table import BaselineTable

DAY = 86400
MAX_DATAPOINTS_PER_CALL = 100_800
SIGNALS = (
    # name, CloudWatch metric, statistic, whether the value is a Sum over the period (bytes → bytes/s)
    ("network_out", "NetworkBytesOut", "Sum", True),
    ("network_in", "NetworkBytesIn", "Sum", True),
    ("engine_cpu", "EngineCPUUtilization", "Average", False),
    ("memory", "DatabaseMemoryUsagePercentage", "Maximum", False),
    ("connections", "CurrConnections", "Maximum", False),
)
GRAVITON_FAMILIES = ("r7g", "r6g", "m7g", "m6g", "t4g")
RECOMMENDED_FAMILIES = ("r7g", "r6g", "m7g", "m6g", "r5", "m5")


# --- fetching --------------------------------------------------------------------------------


def plan_calls(series: int, days: int, period: int = 60) -> list[int]:
    """How many series go in each GetMetricData call: <= 500 queries and <= 100,800 datapoints a call."""
    points = days * DAY // period
    per_call = max(1, min(500, MAX_DATAPOINTS_PER_CALL // max(1, points)))
    return [min(per_call, series - start) for start in range(0, series, per_call)]


def fetch_history(
    api: AwsApi,
    nodes: list[Node],
    days: int,
    now: float,
    progress: Callable[[int, int], None] | None = None,
    period: int = 60,
) -> tuple[dict[tuple[str, str], list[tuple[float, float]]], int]:
    """{(cluster id, signal): [(unix time, value)]}, and the number of GetMetricData calls made.

    ``period`` 60 gives the baseline method's per-minute datapoints; a longer one fetches less.
    """
    end = math.floor((now - 120) / 60) * 60
    start = end - days * DAY
    queries = []
    for node in nodes:
        for name, metric, statistic, _ in SIGNALS:
            queries.append((node, name, metric, statistic))
    history: dict[tuple[str, str], list[tuple[float, float]]] = {}
    calls = 0
    sizes = plan_calls(len(queries), days, period)
    position = 0
    for size in sizes:
        batch = queries[position : position + size]
        position += size
        by_region: dict[str, list[tuple[int, tuple]]] = {}
        for index, query in enumerate(batch):
            by_region.setdefault(query[0].region, []).append((index, query))
        for region, items in by_region.items():
            client = api.client("cloudwatch", region)
            kwargs: dict[str, Any] = {
                "MetricDataQueries": [
                    {
                        "Id": f"h{index}",
                        "MetricStat": {
                            "Metric": {
                                "Namespace": NAMESPACE,
                                "MetricName": metric,
                                "Dimensions": [
                                    {"Name": "CacheClusterId", "Value": node.cluster_id},
                                    {"Name": "CacheNodeId", "Value": node.node_id},
                                ],
                            },
                            "Period": period,
                            "Stat": statistic,
                        },
                    }
                    for index, (node, _name, metric, statistic) in items
                ],
                "StartTime": datetime.fromtimestamp(start, tz=timezone.utc),
                "EndTime": datetime.fromtimestamp(end, tz=timezone.utc),
                "ScanBy": "TimestampAscending",
            }
            lookup = {f"h{index}": query for index, query in items}
            while True:
                reply = api.call(client, "get_metric_data", **kwargs)
                calls += 1
                for result in reply.get("MetricDataResults", []):
                    node, name, _metric, _statistic = lookup[result["Id"]]
                    divisor = period if next(is_sum for n, _, _, is_sum in SIGNALS if n == name) else 1
                    points = history.setdefault((node.cluster_id, name), [])
                    for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                        points.append((stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp), float(value) / divisor))
                token = reply.get("NextToken")
                if not token:
                    break
                kwargs["NextToken"] = token
        if progress:
            progress(position, len(queries))
    return history, calls


# --- analysis ----------------------------------------------------------------------------------


def daily_p90(points: list[tuple[float, float]], now: float, days: int) -> list[tuple[float, float]]:
    """(day start, p90 of that day's values) for each of the last ``days`` days that has data."""
    end = math.floor((now - 120) / 60) * 60
    start = end - days * DAY
    buckets: dict[int, list[float]] = {}
    for stamp, value in points:
        if start <= stamp < end:
            buckets.setdefault(int((stamp - start) // DAY), []).append(value)
    return [(start + day * DAY, percentile(values, 0.9)) for day, values in sorted(buckets.items())]


def linear_fit(series: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(slope per second, value at t=0) of the least-squares line; None with fewer than two points."""
    if len(series) < 2:
        return None
    n = len(series)
    mean_t = sum(t for t, _ in series) / n
    mean_v = sum(v for _, v in series) / n
    denominator = sum((t - mean_t) ** 2 for t, _ in series)
    if denominator == 0:
        return None
    slope = sum((t - mean_t) * (v - mean_v) for t, v in series) / denominator
    return slope, mean_v - slope * mean_t


def projected_time(fit: tuple[float, float] | None, level: float, now: float) -> float | None:
    """When the fitted line reaches ``level``: now if it is already there, None if it never does."""
    if fit is None:
        return None
    slope, intercept = fit
    current = slope * now + intercept
    if current >= level:
        return now
    if slope <= 0:
        return None
    return (level - intercept) / slope


@dataclass
class NodeReport:
    node: Node
    status: str  # ok | watch | warning | critical | no data | no baseline
    reason: str = ""
    baseline_bytes_per_second: float | None = None
    baseline_source: str = ""
    network_out_p90: float | None = None
    network_in_p90: float | None = None
    peak_p90: float | None = None
    percent_of_baseline: float | None = None
    trend_bytes_per_second_per_day: float | None = None
    reaches_80: float | None = None
    reaches_100: float | None = None
    engine_cpu_p90: float | None = None
    memory_p90: float | None = None
    connections_p90: float | None = None
    recommendation: dict[str, Any] | None = None
    daily: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    @property
    def urgency(self) -> tuple[int, float]:
        order = {"critical": 0, "warning": 1, "watch": 2, "ok": 3, "no baseline": 4, "no data": 5}
        soonest = self.reaches_80 if self.reaches_80 is not None else float("inf")
        return order.get(self.status, 9), soonest

    def as_dict(self) -> dict[str, Any]:
        def iso(stamp: float | None) -> str | None:
            return None if stamp is None else datetime.fromtimestamp(stamp, tz=timezone.utc).strftime("%Y-%m-%d")

        return {
            "node": self.node.cluster_id,
            "node_id": self.node.node_id,
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
            "trend_bytes_per_second_per_day": self.trend_bytes_per_second_per_day,
            "reaches_80_percent": iso(self.reaches_80),
            "reaches_100_percent": iso(self.reaches_100),
            "engine_cpu_p90_percent": self.engine_cpu_p90,
            "memory_p90_percent": self.memory_p90,
            "connections_p90": self.connections_p90,
            "recommendation": self.recommendation,
            "daily_p90": {name: [[iso(t), v] for t, v in values] for name, values in sorted(self.daily.items())},
        }


def recommend(table: BaselineTable, peak: float, memory_gib_needed: float | None) -> dict[str, Any] | None:
    """The smallest current node type whose baseline keeps ``peak`` under 80 % (and whose memory fits), Graviton first."""
    candidates = []
    for name, node in table.node_types.items():
        parts = name.split(".")
        if len(parts) != 3 or parts[1] not in RECOMMENDED_FAMILIES:
            continue
        levels = node.levels(table.basis)
        if not levels or peak > levels[80]:
            continue
        if memory_gib_needed is not None and (node.memory_gib is None or node.memory_gib < memory_gib_needed):
            continue
        graviton = parts[1] in GRAVITON_FAMILIES
        candidates.append((levels[100], not graviton, RECOMMENDED_FAMILIES.index(parts[1]), name, node))
    if not candidates:
        return None
    full, _, _, name, node = min(candidates)
    return {
        "node_type": name,
        "vcpus": node.vcpus,
        "memory_gib": node.memory_gib,
        "baseline_bytes_per_second": full,
        "percent_of_its_baseline": round(peak / full * 100, 1),
        "graviton": name.split(".")[1] in GRAVITON_FAMILIES,
    }


def assess(node: Node, history: dict[tuple[str, str], list[tuple[float, float]]], table: BaselineTable, now: float, days: int) -> NodeReport:
    daily = {name: daily_p90(history.get((node.cluster_id, name), []), now, days) for name, *_ in SIGNALS}
    daily = {name: values for name, values in daily.items() if values}
    report = NodeReport(node=node, status="ok", daily=daily)
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
    current = series[-1][1]
    report.percent_of_baseline = round(current / full[0] * 100, 1)
    fit = linear_fit(series)
    if fit is not None:
        report.trend_bytes_per_second_per_day = fit[0] * DAY
    report.reaches_80 = projected_time(fit, 0.8 * full[0], now)
    report.reaches_100 = projected_time(fit, full[0], now)
    if report.percent_of_baseline >= 90:
        report.status = "critical"
    elif report.percent_of_baseline >= 80:
        report.status = "warning"
    elif report.reaches_80 is not None and report.reaches_80 - now < 30 * DAY:
        report.status = "watch"
    memory_needed = None
    if report.memory_p90 is not None and baseline and baseline.memory_gib:
        memory_needed = baseline.memory_gib * report.memory_p90 / 100 / 0.8
    if report.status != "ok":
        # size for the observed peak or where the trend goes in 30 days, whichever is higher
        ahead = fit[0] * (now + 30 * DAY) + fit[1] if fit is not None else 0.0
        report.recommendation = recommend(table, max(report.peak_p90, ahead), memory_needed)
    return report


def build_reports(
    nodes: list[Node], history: dict[tuple[str, str], list[tuple[float, float]]], table: BaselineTable, days: int, now: float | None = None
) -> list[NodeReport]:
    now = time.time() if now is None else now
    return sorted((assess(node, history, table, now, days) for node in nodes), key=lambda r: (r.urgency, r.node.cluster_id))


# --- output ---------------------------------------------------------------------------------------


def _human_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit in ("B/s", "kB/s", "MB/s", "GB/s"):
        if abs(value) < 1000 or unit == "GB/s":
            return f"{value:.1f} {unit}"
        value /= 1000
    return "-"


def render_text(reports: list[NodeReport]) -> str:
    header = f"{'node':<24} {'type':<18} {'status':<11} {'p90 now':>11} {'of base':>8} {'trend/day':>11} {'80 % on':>10} {'100 % on':>10}  suggestion"
    lines = [header, "-" * len(header)]
    for report in reports:
        data = report.as_dict()
        percent = f"{report.percent_of_baseline:.0f} %" if report.percent_of_baseline is not None else "-"
        suggestion = report.recommendation["node_type"] if report.recommendation else (report.reason or "-")
        lines.append(
            f"{report.node.cluster_id:<24.24} {report.node.node_type:<18.18} {report.status:<11} "
            f"{_human_bytes(series_now(report)):>11} {percent:>8} "
            f"{_human_bytes(report.trend_bytes_per_second_per_day):>11} {data['reaches_80_percent'] or '-':>10} "
            f"{data['reaches_100_percent'] or '-':>10}  {suggestion}"
        )
    return "\n".join(lines) + "\n"


def series_now(report: NodeReport) -> float | None:
    values = [v for v in (report.network_out_p90, report.network_in_p90) if v is not None]
    return max(values) if values else None


def svg_chart(report: NodeReport, width: int = 560, height: int = 160) -> str:
    """An inline SVG of the daily p90 (out and in) against the 80 % and 100 % baseline lines."""
    series = {name: report.daily.get(name, []) for name in ("network_out", "network_in")}
    points = [p for values in series.values() for p in values]
    if not points:
        return '<svg class="chart" width="560" height="40" role="img"><text x="8" y="24">no data</text></svg>'
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    top = max([v for _, v in points] + [report.baseline_bytes_per_second or 0]) * 1.1 or 1.0
    span = (t1 - t0) or 1.0

    def xy(t: float, v: float) -> str:
        return f"{40 + (t - t0) / span * (width - 50):.1f},{height - 20 - v / top * (height - 30):.1f}"

    parts = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">']
    parts.append(f'<rect x="40" y="10" width="{width - 50}" height="{height - 30}" fill="#fafafa" stroke="#ccc"/>')
    if report.baseline_bytes_per_second:
        for fraction, color, label in ((1.0, "#b00020", "100 %"), (0.8, "#e69500", "80 %")):
            y = height - 20 - report.baseline_bytes_per_second * fraction / top * (height - 30)
            parts.append(f'<line x1="40" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" stroke-dasharray="4 3"/>')
            parts.append(f'<text x="2" y="{y + 4:.1f}" font-size="10" fill="{color}">{label}</text>')
    for name, color in (("network_out", "#1f5fbf"), ("network_in", "#2e8b57")):
        values = series[name]
        if values:
            path = " ".join(xy(t, v) for t, v in values)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"><title>{name}</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(reports: list[NodeReport], days: int, generated: float) -> str:
    import jinja2
    from markupsafe import Markup

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("exporter.capacity", ""), autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True
    )
    rows = []
    for report in reports:
        data = report.as_dict()
        rows.append(
            {
                **data,
                "now": _human_bytes(series_now(report)),
                "trend": _human_bytes(report.trend_bytes_per_second_per_day),
                "baseline": _human_bytes(report.baseline_bytes_per_second),
                "chart": Markup(svg_chart(report)),  # noqa: S704 - built here from numbers only
            }
        )
    generated_text = datetime.fromtimestamp(generated, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return environment.get_template("capacity.html").render(rows=rows, days=days, generated=generated_text)
