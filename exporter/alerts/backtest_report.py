"""The backtest's reports (pure): the terminal's text and an HTML page with plots of pages and warnings a day, per rule
set and per alert."""

from __future__ import annotations

import datetime
import html
from collections.abc import Mapping, Sequence
from typing import Any

DAY = 86_400


def _when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def text_report(results: Sequence[Mapping[str, Any]]) -> str:
    """The terminal's report: totals side by side, then per rule set its noisiest alerts, days and nodes."""
    first = results[0]
    lines = [f"Backtest {_when(first['start'])} to {_when(first['end'])} UTC ({(first['end'] - first['start']) / DAY:.1f} days)", ""]
    lines.append(f"{'rule set':<40} {'pages':>6} {'warnings':>9} {'notifications':>14} {'not evaluable':>14}")
    for result in results:
        counts = f"{result['pages']:>6} {result['warnings']:>9} {result['notifications']:>14} {len(result['not_evaluable']):>14}"
        lines.append(f"{str(result['rules'])[-40:]:<40} {counts}")
    for result in results:
        lines += ["", f"{result['rules']}:"]
        alerts = result["alerts"]
        noisy = sorted(
            (name for name, entry in alerts.items() if entry.get("notifications") or entry.get("firings")),
            key=lambda n: -alerts[n].get("notifications", 0),
        )
        if noisy:
            lines.append(f"  {'alert':<44} {'sev':<8} {'firings':>7} {'pages':>5} {'warn':>5} {'notif':>6} {'longest':>8} {'flapping':>8}")
            for name in noisy[:25]:
                entry = alerts[name]
                sent = f"{entry.get('pages', 0):>5} {entry.get('warnings_sent', 0):>5} {entry.get('notifications', 0):>6}"
                runs = f"{entry.get('longest_minutes', 0):>7}m {entry.get('flapping', 0):>8}"
                lines.append(f"  {name[:44]:<44} {entry.get('severity', ''):<8} {entry.get('firings', 0):>7} {sent} {runs}")
        else:
            lines.append("  nothing fired")
        if result["per_day"]:
            lines.append(
                "  per day (pages / warnings / notifications): "
                + ", ".join(f"{day} {c['pages']}/{c['warnings']}/{c['notifications']}" for day, c in sorted(result["per_day"].items()))
            )
        if result["per_node"]:
            lines.append("  noisiest nodes: " + ", ".join(f"{node} {count}" for node, count in list(result["per_node"].items())[:10]))
        lines += _caveats(result, alerts)
    return "\n".join(lines)


def _caveats(result: Mapping[str, Any], alerts: Mapping[str, Any]) -> list[str]:
    """What a rule set's figures do not say: the alerts read from partial data, or that read ALERTS, those that could not
    be evaluated, and those whose figures are approximate."""
    lines: list[str] = []
    reading = sorted(name for name, entry in alerts.items() if entry.get("reads_alerts") and entry.get("evaluable", True))
    if reading:
        lines.append(f"  read the server's own ALERTS, not this rule set's ({len(reading)}): {', '.join(reading[:10])}")
    partial = sorted(name for name, entry in alerts.items() if entry.get("warnings"))
    if partial:
        lines.append(f"  partial data (the server warned) for {len(partial)} alert(s): {', '.join(partial[:10])}")
    if result["not_evaluable"]:
        lines.append(f"  not evaluable ({len(result['not_evaluable'])}): the history lacks their series, or a query failed:")
        for name in result["not_evaluable"][:40]:
            entry = alerts[name]
            lines.append(f"    {name}: " + (entry.get("error") or f"needs {', '.join(entry['missing'][:6])}"))
    if result.get("names_unknown"):
        lines.append("  the server does not list its metric names: an alert whose series it lacks cannot be told from a quiet one")
    noted = sorted(name for name, entry in alerts.items() if entry.get("notes"))
    if noted:
        lines.append(f"  approximate ({len(noted)}): " + "; ".join(f"{name}: {', '.join(alerts[name]['notes'])}" for name in noted[:10]))
    return lines


def _days(results: Sequence[Mapping[str, Any]]) -> list[str]:
    first = results[0]
    start = first["start"] - first["start"] % DAY
    return [
        datetime.datetime.fromtimestamp(at, tz=datetime.timezone.utc).strftime("%Y-%m-%d") for at in range(int(start), int(first["end"]) + 1, DAY)
    ]


def _bar(x: float, tall: float, height: float, width: float, colour: str, title: str) -> str:
    return f'<rect x="{x:.1f}" y="{height - tall + 10:.1f}" width="{width:.1f}" height="{tall:.1f}" fill="{colour}"><title>{title}</title></rect>'


def _chart(result: Mapping[str, Any], days: list[str], top: float) -> str:
    """Bars of pages (red) and warnings (amber) a day, one rule set."""
    width, height, gap = 28, 120, 8
    bars = []
    for index, day in enumerate(days):
        counts = result["per_day"].get(day, {"pages": 0, "warnings": 0})
        x = index * (width + gap) + 30
        pages, warnings = counts["pages"] / top * height, counts["warnings"] / top * height
        bars.append(_bar(x, pages, height, width / 2, "#c0392b", f"{day}: {counts['pages']} pages"))
        bars.append(_bar(x + width / 2, warnings, height, width / 2, "#e0a020", f"{day}: {counts['warnings']} warnings"))
        bars.append(f'<text x="{x}" y="{height + 24}" font-size="9">{day[5:]}</text>')
    total = len(days) * (width + gap) + 40
    axis = f'<text x="0" y="16" font-size="10">{top:g}</text><line x1="28" y1="{height + 10}" x2="{total}" y2="{height + 10}" stroke="#555"/>'
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{height + 30}">{axis}{"".join(bars)}</svg>'


def _spark(entry: Mapping[str, Any], days: list[str]) -> str:
    """One alert's notifications a day as small bars (red where a page was among them, amber a warning), to its own
    highest day."""
    per_day = entry.get("per_day", {})
    top = max([1] + [counts["notifications"] for counts in per_day.values()])
    width, height = 8, 24
    bars = []
    for index, day in enumerate(days):
        counts = per_day.get(day, {"pages": 0, "warnings": 0, "notifications": 0})
        colour = "#c0392b" if counts["pages"] else "#e0a020" if counts["warnings"] else "#7f8c8d"
        title = f"{day}: {counts['notifications']} notifications, {counts['pages']} pages, {counts['warnings']} warnings"
        bars.append(_bar(index * (width + 2), counts["notifications"] / top * height, height, width, colour, title))
    total = len(days) * (width + 2)
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{height + 12}">{"".join(bars)}</svg> {top}'


def html_report(results: Sequence[Mapping[str, Any]]) -> str:
    """One page: the totals side by side, each rule set's pages and warnings a day as bars, its alerts as a table with
    each alert's notifications a day."""
    days = _days(results)
    top = max([1] + [max(c["pages"], c["warnings"]) for r in results for c in r["per_day"].values()])
    first = results[0]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Backtest</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;"
        "text-align:right}td:first-child,th:first-child{text-align:left}</style></head><body>",
        f"<h1>What the rules would have paged</h1><p>{_when(first['start'])} to {_when(first['end'])} UTC</p>",
        "<table><tr><th>rule set</th><th>pages</th><th>warnings</th><th>notifications</th><th>not evaluable</th></tr>",
    ]
    for result in results:
        cells = (result["pages"], result["warnings"], result["notifications"], len(result["not_evaluable"]))
        parts.append(f"<tr><td>{html.escape(str(result['rules']))}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append("</table>")
    for result in results:
        parts.append(f"<h2>{html.escape(str(result['rules']))}</h2><p>Pages (red) and warnings (amber) a day</p>{_chart(result, days, top)}")
        heads = ("alert", "severity", "firings", "pages", "warnings", "notifications", "longest (min)", "flapping", "notifications a day (max)")
        parts.append("<table><tr>" + "".join(f"<th>{head}</th>" for head in heads) + "</tr>")
        alerts = result["alerts"]
        for name in sorted(alerts, key=lambda n: (-alerts[n].get("notifications", 0), n)):
            entry = alerts[name]
            if not (entry.get("firings") or entry.get("notifications")):
                continue
            row = (
                entry.get("firings", 0),
                entry.get("pages", 0),
                entry.get("warnings_sent", 0),
                entry.get("notifications", 0),
                entry.get("longest_minutes", 0),
                entry.get("flapping", 0),
            )
            parts.append(
                f"<tr><td>{html.escape(name)}</td><td>{html.escape(str(entry.get('severity', '')))}</td>"
                + "".join(f"<td>{c}</td>" for c in row)
                + f"<td>{_spark(entry, days)}</td></tr>"
            )
        parts.append("</table>")
        if result["not_evaluable"]:
            listed = "".join(
                f"<li>{html.escape(n)}: {html.escape(alerts[n].get('error') or 'needs ' + ', '.join(alerts[n]['missing'][:6]))}</li>"
                for n in result["not_evaluable"]
            )
            parts.append(f"<p>Not evaluable, the history lacks their series:</p><ul>{listed}</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)
