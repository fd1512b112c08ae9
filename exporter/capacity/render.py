"""The capacity report as text, and as HTML with an inline SVG chart per node."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from html import escape

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
