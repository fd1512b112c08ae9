"""The capacity report as text, and as HTML with an inline SVG chart per node."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from .assess import NodeReport
from .history import DAY


def _human_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit in ("B/s", "kB/s", "MB/s", "GB/s"):
        if abs(value) < 1000 or unit == "GB/s":
            return f"{value:.1f} {unit}"
        value /= 1000
    return "-"


def render_support_text(support: list[dict[str, str]]) -> str:
    """The clusters past or near their engine's end of standard support, or on a version the table lacks; "" for none."""
    if not support:
        return ""
    header = (
        f"{'replication group':<28} {'account':<14} {'region':<16} {'engine':<16} {'phase':<9} {'standard end':<12} {'extended end':<12}  upgrade to"
    )
    lines = ["", "engine support (Extended Support is billed from the month after standard support ends)", header, "-" * len(header)]
    for row in support:
        engine = f"{row['engine']} {row['engine_version']}"
        lines.append(
            f"{row['replication_group']:<28.28} {row['account_id'] or '-':<14} {row['region']:<16} {engine:<16.16} {row['phase']:<9} "
            f"{row['standard_end'] or '-':<12} {row['extended_end'] or '-':<12}  {row['upgrade_to'] or '-'}"
        )
    return "\n".join(lines) + "\n"


def render_text(reports: list[NodeReport]) -> str:
    header = (
        f"{'node':<24} {'type':<18} {'status':<11} {'p90 now':>11} {'of base':>8} {'by':<5} {'peak s':>7} {'trend/day':>11} {'model':<9} "
        f"{'80 % on':>10} {'100 % on':>10}  suggestion"
    )
    lines = [header, "-" * len(header)]
    for report in reports:
        data = report.as_dict()
        percent = f"{report.percent_of_baseline:.0f} %" if report.percent_of_baseline is not None else "-"
        peak = f"{report.peak_second_percent:.0f} %" if report.peak_second_percent is not None else "-"
        source = "AWS" if report.percent_source == "aws" else ("table" if report.percent_source else "-")
        suggestion = report.recommendation["node_type"] if report.recommendation else (report.reason or "-")
        lines.append(
            f"{data['node']:<24.24} {report.node.node_type:<18.18} {report.status:<11} "
            f"{_human_bytes(series_now(report)):>11} {percent:>8} {source:<5} {peak:>7} "
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


def chart(report: NodeReport, width: int = 640, height: int = 220) -> dict[str, Any] | None:
    """What ``chart.svg`` draws, in pixels: the daily p90 out and in, a date axis (UTC), a bandwidth axis in MB/s, the
    80 % and 100 % baseline lines, and the chosen growth model over its regime and 30 days on; None without data."""
    series = {name: report.daily.get(name, []) for name in ("network_out", "network_in")}
    points = [p for values in series.values() for p in values]
    if not points:
        return None
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

    def polyline(values: list[tuple[float, float]]) -> str:
        return " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in values)

    every = max(1, round(span / DAY / 6)) * DAY
    dates = [first for first in (math.ceil(t0 / DAY) * DAY + i * every for i in range(int(span // every) + 2)) if first <= t1]
    model = None
    if fit is not None and report.projection is not None:
        start = report.projection.regime_start
        steps = [start + (t1 - start) * i / 40 for i in range(41)]
        model = {"name": fit.model, "points": polyline([(t, fit.value_at(t)) for t in steps]), "step_x": x(start) if report.projection.step else None}
    baselines = []
    if report.baseline_bytes_per_second:
        for fraction, color, label in ((1.0, "#b00020", "100 % baseline"), (0.8, "#e69500", "80 %")):
            baselines.append({"y": y(report.baseline_bytes_per_second * fraction), "color": color, "label": label})
    return {
        "width": width,
        "height": height,
        "left": left,
        "top": top_pad,
        "plot_w": plot_w,
        "plot_h": plot_h,
        "name": report.name or report.node.cluster_id,
        "value_ticks": [{"y": y(value), "label": f"{value / 1e6:g}"} for value in _ticks(0.0, top)],
        "date_ticks": [{"x": x(t), "label": datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d")} for t in dates],
        "baselines": baselines,
        "model": model,
        "series": [
            {"name": name, "color": color, "points": polyline(series[name])}
            for name, color in (("network_out", "#1f5fbf"), ("network_in", "#2e8b57"))
            if series[name]
        ],
    }


def render_html(reports: list[NodeReport], days: int, generated: float, support: list[dict[str, str]] | None = None) -> str:
    import jinja2

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
                "chart": chart(report),
            }
        )
    generated_text = datetime.fromtimestamp(generated, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return environment.get_template("capacity.html").render(rows=rows, days=days, generated=generated_text, support=support or [])
