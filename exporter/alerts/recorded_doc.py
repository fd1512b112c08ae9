"""docs/metrics.md's table of the series the rendered rules record (``prometheus.RECORDED``): whether the shipped rules
record each (rendered here from the shipped catalog and table), how to record those they do not, and the alerts that
read each, the ones that cannot fire without it marked inert. ``python -m exporter.alerts.recorded_doc
[docs/metrics.md]`` rewrites its block; the other tables are ``exporter.service.metrics_doc``'s."""

from __future__ import annotations

import re

from exporter.baselines.table import load_table

from .catalog import load_catalog
from .prometheus import RECORDED, render_prometheus, rules

SECTION = "recorded"
_BLOCK = re.compile(rf"(<!-- BEGIN GENERATED: {SECTION} -->\n)(.*?)(<!-- END GENERATED -->)", re.S)


def recorded_table() -> list[str]:
    alerts = load_catalog()
    shipped = set(re.findall(r"^\s*- record: (\S+)$", render_prometheus(alerts, load_table()), re.M))
    rendered = rules(alerts)
    lines = ["| series | labels | meaning | in the shipped rules | alerts that read it |", "|---|---|---|---|---|"]
    for series in RECORDED:
        readers = [rule.alert for rule in rendered if re.search(rf"{re.escape(series.name)}\b", rule.expr)]
        if series.name in shipped:
            recorded = "recorded"
        else:
            recorded = f"**not recorded**; to record it: {series.armed_by}"
            readers = [f"{name} (**inert** until then)" if name in series.inert_without else name for name in readers]
        lines.append(f"| `{series.name}` | {series.labels} | {series.meaning} | {recorded} | {', '.join(readers)} |")
    return lines


def replace_recorded(document: str) -> str:
    """The document with its block of recorded series rendered anew."""
    return _BLOCK.sub(lambda match: match.group(1) + "\n".join(recorded_table()) + "\n" + match.group(3), document)


if __name__ == "__main__":
    import sys
    from pathlib import Path

    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/metrics.md")
    path.write_text(replace_recorded(path.read_text()))
