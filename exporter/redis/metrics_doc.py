"""Render the table of INFO-field metrics for docs/metrics.md from the field table itself."""

from __future__ import annotations

from .info_fields import CLUSTER_INFO_FIELDS, KNOWN_FIELDS, MASTER_LABELLED_FIELDS, FieldMetric

BEGIN = "<!-- BEGIN GENERATED: python -m exporter.redis.metrics_doc -->"
END = "<!-- END GENERATED -->"


def _unit(name: str) -> str:
    for suffix, unit in (("_bytes", "bytes"), ("_seconds", "seconds"), ("_ratio", "ratio"), ("_percentage", "percent")):
        if name.removesuffix("_total").endswith(suffix):
            return unit
    return ""


def _row(field: str, spec: FieldMetric, labels: str, source: str) -> str:
    upstream = f"`{spec.upstream}`" if spec.upstream else "same"
    return f"| `{spec.name}` | {spec.kind} | {_unit(spec.name)} | {source} `{field}` | {labels} | {upstream} |"


def render_table() -> str:
    lines = [
        BEGIN,
        "| metric | type | unit | source | labels | redis_exporter name |",
        "|---|---|---|---|---|---|",
    ]
    lines += [_row(field, spec, "`target`", "INFO") for field, spec in KNOWN_FIELDS.items()]
    lines += [_row(field, spec, "`target`, `master_host`, `master_port`", "INFO") for field, spec in MASTER_LABELLED_FIELDS.items()]
    lines += [_row(field, spec, "`target`", "CLUSTER INFO") for field, spec in CLUSTER_INFO_FIELDS.items()]
    lines.append(END)
    return "\n".join(lines) + "\n"


def replace_table(document: str) -> str:
    start, end = document.index(BEGIN), document.index(END) + len(END) + 1
    return document[:start] + render_table() + document[end:]


if __name__ == "__main__":
    import sys
    from pathlib import Path

    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/metrics.md")
    path.write_text(replace_table(path.read_text()))
