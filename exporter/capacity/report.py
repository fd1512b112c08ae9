"""The capacity report: CloudWatch history per node, daily p90, a trend, projected dates, a recommendation.

Per node and signal the per-minute datapoints of the window are fetched (in the fewest
GetMetricData calls that respect 500 queries and 100,800 datapoints a call), reduced to
one p90 a day (the baseline method, per day), fitted with a least-squares line, and set
against the node type's baseline. Pure apart from :func:`fetch_history`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from typing import Any

from exporter.aws.api import AwsApi
from exporter.aws.cloudwatch import NAMESPACE
from exporter.aws.discovery import Node, NodeKey
from exporter.baselines.benchmark import percentile
from exporter.baselines.table import BaselineTable

from .trend import BAND_Z, Projection, project

History = dict[tuple[NodeKey, str], list[tuple[float, float]]]  # (node, signal) → [(unix time, value)]

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
) -> tuple[History, int]:
    """{(node key, signal): [(unix time, value)]}, and the number of GetMetricData calls made; keyed by the node's
    account, region, cluster and node, as one account has ``sessions-001`` in each of its regions.

    ``period`` 60 gives the baseline method's per-minute datapoints; a longer one fetches less.
    """
    end = math.floor((now - 120) / 60) * 60
    start = end - days * DAY
    queries = []
    for node in nodes:
        for name, metric, statistic, _ in SIGNALS:
            queries.append((node, name, metric, statistic))
    history: History = {}
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
                                "Dimensions": [{"Name": name, "Value": value} for name, value in node.dimensions],
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
                    points = history.setdefault((node.key, name), [])
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


@dataclass
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
            "trend_bytes_per_second_per_day": self.trend_bytes_per_second_per_day,
            "reaches_80_percent": iso(self.reaches_80),
            "reaches_100_percent": iso(self.reaches_100),
            "reaches_80_percent_central": iso(self.reaches_80_central),
            "reaches_100_percent_central": iso(self.reaches_100_central),
            "model": self.projection.fit.model if self.projection else None,
            "growth_per_week_percent": (round(self.projection.fit.growth_per_week * 100, 2)
                                        if self.projection and self.projection.fit.model == "compound" else None),
            "regime_start": iso(self.projection.regime_start) if self.projection else None,
            "step_change": self.projection.step if self.projection else False,
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


def assess(node: Node, history: History, table: BaselineTable, now: float, days: int, name: str = "") -> NodeReport:
    daily = {signal: daily_p90(history.get((node.key, signal), []), now, days) for signal, *_ in SIGNALS}
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
    current = series[-1][1]
    report.percent_of_baseline = round(current / full[0] * 100, 1)
    projection = report.projection = project(series)
    if projection is not None:
        fit = projection.fit
        # the rate of growth now: the slope of a line, the derivative of compound growth at today's value
        report.trend_bytes_per_second_per_day = fit.slope * DAY * (fit.value_at(now) if fit.model == "compound" else 1.0)
        report.reaches_80, report.reaches_80_central = projection.reaches(0.8 * full[0], now)
        report.reaches_100, report.reaches_100_central = projection.reaches(full[0], now)
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
        # size for the observed peak (of the latest regime) or where the upper band goes in 30 days, whichever is higher
        ahead = projection.fit.value_at(now + 30 * DAY, BAND_Z) if projection is not None else 0.0
        report.recommendation = recommend(table, max(report.peak_p90, ahead), memory_needed)
    return report


def build_reports(
    nodes: list[Node], history: History, table: BaselineTable, days: int, now: float | None = None, names: Mapping[NodeKey, str] | None = None
) -> list[NodeReport]:
    now = time.time() if now is None else now
    reports = (assess(node, history, table, now, days, (names or {}).get(node.key, "")) for node in nodes)
    return sorted(reports, key=lambda r: (r.urgency, r.node.key))


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
    header = (f"{'node':<24} {'type':<18} {'status':<11} {'p90 now':>11} {'of base':>8} {'trend/day':>11} {'model':<9} "
              f"{'80 % on':>10} {'100 % on':>10}  suggestion")  # fmt: skip
    lines = [header, "-" * len(header)]
    for report in reports:
        data = report.as_dict()
        percent = f"{report.percent_of_baseline:.0f} %" if report.percent_of_baseline is not None else "-"
        suggestion = report.recommendation["node_type"] if report.recommendation else (report.reason or "-")
        lines.append(
            f"{data['node']:<24.24} {report.node.node_type:<18.18} {report.status:<11} "
            f"{_human_bytes(series_now(report)):>11} {percent:>8} "
            f"{_human_bytes(report.trend_bytes_per_second_per_day):>11} {data['model'] or '-':<9} {data['reaches_80_percent'] or '-':>10} "
            f"{data['reaches_100_percent'] or '-':>10}  {suggestion}"
        )
    return "\n".join(lines) + "\n"


def series_now(report: NodeReport) -> float | None:
    values = [v for v in (report.network_out_p90, report.network_in_p90) if v is not None]
    return max(values) if values else None


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round values (1, 2 or 5 times a power of ten) from ``low`` to ``high``."""
    raw = (high - low) / max(1, count) or 1.0
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def svg_chart(report: NodeReport, width: int = 640, height: int = 220) -> str:
    """An inline SVG (no script, nothing fetched) of the daily p90 out and in, with a date axis (UTC), a bandwidth
    axis in MB/s, the 80 % and 100 % baseline lines, and the chosen growth model over its regime and 30 days on."""
    series = {name: report.daily.get(name, []) for name in ("network_out", "network_in")}
    points = [p for values in series.values() for p in values]
    if not points:
        return '<svg class="chart" width="640" height="40" role="img"><text x="8" y="24">no data</text></svg>'
    left, right, top_pad, bottom = 70, 20, 12, 40
    t0 = min(t for t, _ in points)
    t1 = max(t for t, _ in points) + (30 * DAY if report.projection else 0)
    fit = report.projection.fit if report.projection else None
    highest = max([v for _, v in points] + [report.baseline_bytes_per_second or 0.0])
    if fit is not None:
        highest = max(highest, min(fit.value_at(t1), 1.5 * highest))
    top = highest * 1.1 or 1.0
    span = (t1 - t0) or 1.0
    plot_w, plot_h = width - left - right, height - top_pad - bottom

    def x(t: float) -> float:
        return left + (t - t0) / span * plot_w

    def y(v: float) -> float:
        return top_pad + plot_h - max(0.0, min(v, top)) / top * plot_h

    parts = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="daily p90 network of {escape(report.name or report.node.cluster_id)}">']  # fmt: skip
    parts.append(f'<rect x="{left}" y="{top_pad}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#999"/>')
    for value in _ticks(0.0, top):
        parts.append(f'<line class="ytick" x1="{left - 4}" x2="{left + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#e4e4e4"/>')
        parts.append(f'<text x="{left - 6}" y="{y(value) + 4:.1f}" font-size="10" text-anchor="end">{value / 1e6:g}</text>')
    days = max(1, round(span / DAY / 6))
    tick = math.ceil(t0 / DAY) * DAY
    while tick <= t1:
        label = datetime.fromtimestamp(tick, tz=timezone.utc).strftime("%Y-%m-%d")
        parts.append(f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{top_pad + plot_h}" y2="{top_pad + plot_h + 4}" stroke="#999"/>')
        parts.append(f'<text class="xtick" x="{x(tick):.1f}" y="{top_pad + plot_h + 16}" font-size="10" text-anchor="middle">{label}</text>')
        tick += days * DAY
    parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{height - 4}" font-size="11" text-anchor="middle">date (UTC)</text>')
    parts.append(f'<text x="12" y="{top_pad + plot_h / 2:.0f}" font-size="11" text-anchor="middle" '
                 f'transform="rotate(-90 12 {top_pad + plot_h / 2:.0f})">network, MB/s (daily p90)</text>')  # fmt: skip
    if report.baseline_bytes_per_second:
        for fraction, color, label in ((1.0, "#b00020", "100 % baseline"), (0.8, "#e69500", "80 %")):
            level = y(report.baseline_bytes_per_second * fraction)
            parts.append(f'<line class="baseline" x1="{left}" x2="{left + plot_w}" y1="{level:.1f}" y2="{level:.1f}" stroke="{color}" '
                         f'stroke-dasharray="4 3"/>')  # fmt: skip
            parts.append(f'<text x="{left + plot_w - 4}" y="{level - 3:.1f}" font-size="10" text-anchor="end" fill="{color}">{label}</text>')
    if fit is not None and report.projection is not None:
        start = report.projection.regime_start
        steps = [start + (t1 - start) * i / 40 for i in range(41)]
        path = " ".join(f"{x(t):.1f},{y(fit.value_at(t)):.1f}" for t in steps)
        parts.append(f'<polyline class="model" fill="none" stroke="#555" stroke-dasharray="2 3" points="{path}">'
                     f"<title>{fit.model} growth</title></polyline>")  # fmt: skip
        if report.projection.step:
            parts.append(f'<line x1="{x(start):.1f}" x2="{x(start):.1f}" y1="{top_pad}" y2="{top_pad + plot_h}" stroke="#7a3db8"/>'
                         f'<text x="{x(start) + 3:.1f}" y="{top_pad + 10}" font-size="10" fill="#7a3db8">step change</text>')  # fmt: skip
    for name, color in (("network_out", "#1f5fbf"), ("network_in", "#2e8b57")):
        values = series[name]
        if values:
            path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in values)
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
