"""Benchmark results → baselines: readers for the result formats, the seed's arithmetic, and renderers.

Readers turn each format into rows of the seed's Athena schema (instancetype, dataSize,
mbps_p90, …; the load tools' readers are in tools.py); ``derive`` applies the notebook's arithmetic: per node type
the passes at each data size averaged, the data size with the highest ``mbps_p90``, bytes/s = mbps_p90 / 8 * 1024 *
1024, and ``int(bytes/s * level / 100)`` for the levels 100, 90 and 80.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from exporter.common.records import replace
from exporter.common.yamlfile import decode_utf8

from .latency import LatencyFigure, average_passes, looks_like_report
from .rows import BenchmarkRow, mbps_from_bytes_per_minute
from .rows import number as _number
from .table import BaselineError, BaselineTable, Measured, NodeBaseline, table_to_document
from .tools import read_memtier_json, read_redis_benchmark_csv, read_redis_benchmark_report

# --- readers ---------------------------------------------------------------------------

ATHENA_COLUMNS = {
    "instancetype": ("instancetype", str, True),
    "datasize": ("data_size", int, True),
    "mbps_p90": ("mbps_p90", float, True),
    "mbps_p70": ("mbps_p70", float, False),
    "test_passes": ("test_passes", int, False),
    "cpuutilization_90": ("cpuutilization_90", float, False),
    "enginecpuutilization_90": ("enginecpuutilization_90", float, False),
    "cpuutilization_50": ("cpuutilization_50", float, False),
    "enginecpuutilization_50": ("enginecpuutilization_50", float, False),
    "bytepermin p90": ("byte_per_min_p90", float, False),
    "bytepermin_p90": ("byte_per_min_p90", float, False),
    "byteperminp90": ("byte_per_min_p90", float, False),
}


def _athena_columns(path: Path, header: list[str]) -> dict[int, tuple[str, type, bool]]:
    """The known columns of the header by position, every required one present."""
    columns = {index: ATHENA_COLUMNS[name.strip().lower()] for index, name in enumerate(header) if name.strip().lower() in ATHENA_COLUMNS}
    present = {field for field, _, _ in columns.values()}
    for key, (field, _, required) in ATHENA_COLUMNS.items():
        if required and field not in present:
            raise BaselineError(f"{path} line 1: missing column {key!r}")
    return columns


def read_athena_csv(path: Path, text: str) -> list[BenchmarkRow]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise BaselineError(f"{path}: empty file")
    columns = _athena_columns(path, header)
    rows = []
    for line_number, cells in enumerate(reader, start=2):
        if not cells or all(not cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise BaselineError(f"{path} line {line_number}: {len(cells)} columns, the header has {len(header)}")
        values: dict[str, Any] = {}
        for index, (field, kind, required) in columns.items():
            cell = cells[index].strip()
            if cell == "" and not required:
                continue
            where = f"{path} line {line_number} column {header[index].strip()!r}"
            if cell == "":
                raise BaselineError(f"{where}: empty")
            values[field] = cell if kind is str else _number(cell, kind, where)
        rows.append(BenchmarkRow(**values))
    if not rows:
        raise BaselineError(f"{path}: no data rows")
    return rows


def read_jsonl(path: Path, data: bytes) -> list[BenchmarkRow]:
    """Records of the ec2-network-benchmark ElastiCache tooling, aggregated as its Athena query does."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as err:
            raise BaselineError(f"{path}: broken gzip data: {err}") from err
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for line_number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise BaselineError(f"{path} line {line_number} column {err.colno}: invalid JSON: {err.msg}") from err
        if not isinstance(record, dict):
            raise BaselineError(f"{path} line {line_number}: expected a JSON object")
        for field in ("instanceType", "dataSize", "NetworkBytesOut"):
            if field not in record:
                raise BaselineError(f"{path} line {line_number}: missing field {field!r}")
        out = record["NetworkBytesOut"]
        if not isinstance(out, dict) or "p90" not in out:
            raise BaselineError(f"{path} line {line_number} field 'NetworkBytesOut': needs percentiles such as p90")
        where = f"{path} line {line_number}"
        record["_p90"] = _number(out["p90"], float, f"{where} field 'NetworkBytesOut.p90'")
        record["_p70"] = _number(out.get("p70", out["p90"]), float, f"{where} field 'NetworkBytesOut.p70'")
        size = _number(record["dataSize"], int, f"{where} field 'dataSize'")
        key = (str(record.get("region", "")), str(record["instanceType"]), size)
        groups.setdefault(key, []).append(record)
    if not groups:
        raise BaselineError(f"{path}: no records")
    rows = []
    for (_, instance_type, size), records in groups.items():
        p90 = _average(r["_p90"] for r in records)
        rows.append(
            BenchmarkRow(
                instancetype=instance_type,
                data_size=size,
                mbps_p90=mbps_from_bytes_per_minute(p90),
                mbps_p70=mbps_from_bytes_per_minute(_average(r["_p70"] for r in records)),
                test_passes=len({r.get("benchmarkId", i) for i, r in enumerate(records)}),
                cpuutilization_90=_average_field(records, "CPUUtilization", "p90"),
                enginecpuutilization_90=_average_field(records, "EngineCPUUtilization", "p90"),
                cpuutilization_50=_average_field(records, "CPUUtilization", "p50"),
                enginecpuutilization_50=_average_field(records, "EngineCPUUtilization", "p50"),
                byte_per_min_p90=p90,
            )
        )
    return rows


def _average(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items)


def _average_field(records: list[dict[str, Any]], metric: str, percentile: str) -> float | None:
    values = [r[metric][percentile] for r in records if isinstance(r.get(metric), dict) and isinstance(r[metric].get(percentile), (int, float))]
    return _average(values) if values else None


def detect_format(path: Path, data: bytes) -> str:
    name = path.name.lower()
    head = data[:4096].lstrip()
    if data[:2] == b"\x1f\x8b" or name.endswith((".jsonl", ".ndjson", ".json.gz", ".jsonl.gz")):
        return "jsonl"
    if head.startswith(b"{") and b"ALL STATS" in data[:1_000_000]:
        return "memtier-json"
    if head.startswith(b"{"):
        return "jsonl"
    first_line = head.split(b"\n", 1)[0].lower()
    if b"instancetype" in first_line:
        return "athena-csv"
    if looks_like_report(data[:1_000_000].decode("utf-8", errors="replace")):
        return "redis-benchmark-report"
    return "redis-benchmark-csv"


def read_rows(path: Path, input_format: str | None, node_type: str | None, data_size: int | None) -> list[BenchmarkRow]:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise BaselineError(f"{path}: cannot read: {err.strerror or err}") from err
    if not data.strip():
        raise BaselineError(f"{path}: empty file")
    kind = input_format or detect_format(path, data)
    if kind == "jsonl":
        return read_jsonl(path, data)
    try:
        text = decode_utf8(data, path)
    except ValueError as err:
        raise BaselineError(str(err)) from err
    if kind == "athena-csv":
        return read_athena_csv(path, text)
    if kind == "redis-benchmark-report":
        if not node_type:
            raise BaselineError(f"{path}: a redis-benchmark report carries no node type: give --node-type")
        return read_redis_benchmark_report(path, text, node_type, data_size)
    if not node_type or data_size is None:
        raise BaselineError(f"{path}: {kind} results carry no node type or data size: give --node-type and --data-size")
    if kind == "redis-benchmark-csv":
        return read_redis_benchmark_csv(path, text, node_type, data_size)
    return read_memtier_json(path, text, node_type, data_size)


# --- the seed's arithmetic -----------------------------------------------------------------


def mapping_levels(mbps_p90: float) -> dict[int, int]:
    max_bandwidth = mbps_p90 / 8 * 1024 * 1024
    return {level: int(max_bandwidth * level / 100) for level in range(100, 70, -10)}


def derive(rows: Iterable[BenchmarkRow]) -> BaselineTable:
    """Per node type: its passes at each data size averaged (weighted by their own passes), then the data size with the
    highest bandwidth, as the seed does; the latency figures averaged per test. A tool's rate that is the same on
    different node types is the client's limit: it is marked client-bound and not taken as a node's bandwidth
    (``table.extra['notes']`` says which)."""
    rows = list(rows)
    bound = client_bound_tests([figure_of for row in rows for figure_of in ((row.instancetype, f) for f in row.latency)])
    notes = [
        f"{node_type}: {command} at {rps:,.0f} requests/s on every node type tried: the client's limit (client-bound), "
        "not taken as the node's bandwidth"
        for node_type, command, rps in sorted(bound)
    ]
    bound_types = {(node_type, command) for node_type, command, _ in bound}
    by_size: dict[tuple[str, int], list[BenchmarkRow]] = {}
    latency: dict[str, list[LatencyFigure]] = {}
    for row in rows:
        figures = [replace(f, client_bound=(row.instancetype, f.command) in bound_types) for f in row.latency]
        latency.setdefault(row.instancetype, []).extend(figures)
        if row.mbps_p90 is not None and not (row.estimated and (row.instancetype, "GET") in bound_types):
            by_size.setdefault((row.instancetype, row.data_size), []).append(row)
    best: dict[str, BenchmarkRow] = {}
    for (node_type, _), passes in by_size.items():
        row = average_rows(passes)
        if node_type not in best or row.mbps_p90 > best[node_type].mbps_p90:  # type: ignore[operator]
            best[node_type] = row
    node_types = {}
    for node_type in sorted(set(best) | set(latency)):
        row = best.get(node_type)  # type: ignore[assignment]
        measured = (
            None
            if row is None
            else Measured(
                bytes_per_second=mapping_levels(row.mbps_p90),  # type: ignore[arg-type]
                data_size=row.data_size,
                cpu_utilization_p90=row.cpuutilization_90,
                engine_cpu_utilization_p90=row.enginecpuutilization_90,
                runs=row.test_passes,
                method=row.method,
                source="benchmark",
                estimated=row.estimated,
            )
        )
        node_types[node_type] = NodeBaseline(node_type=node_type, measured=measured, latency=tuple(average_passes(latency.get(node_type, []))))
    return BaselineTable(node_types=node_types, extra={"notes": notes} if notes else {})


def average_rows(passes: list[BenchmarkRow]) -> BenchmarkRow:
    """Rows of one node type and data size (several files, regions or runs) as one: each figure the mean of the rows
    that have it, weighted by their passes; the passes added up."""
    if len(passes) == 1:
        return passes[0]
    weights = [row.test_passes or 1 for row in passes]

    def mean(field: str) -> float | None:
        pairs = [(getattr(row, field), w) for row, w in zip(passes, weights, strict=True) if getattr(row, field) is not None]
        return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None

    numbers = (
        "mbps_p90",
        "mbps_p70",
        "cpuutilization_90",
        "enginecpuutilization_90",
        "cpuutilization_50",
        "enginecpuutilization_50",
        "byte_per_min_p90",
    )
    return replace(
        passes[0], test_passes=sum(weights), estimated=any(row.estimated for row in passes), latency=(), **{field: mean(field) for field in numbers}
    )


def client_bound_tests(figures: list[tuple[str, LatencyFigure]], spread: float = 0.05) -> set[tuple[str, str, float]]:
    """(node type, command, rps) of the tests whose rate is within ``spread`` on every node type that ran them with the
    same data size, clients and tool: two node types of different size do not top out at the same rate unless the
    client does (a single redis-benchmark process stops near 100,000 requests/s)."""
    tests: dict[tuple[str, int | None, int | None, str, int], dict[str, list[float]]] = {}
    for node_type, figure in figures:
        tests.setdefault(figure.key, {}).setdefault(node_type, []).append(figure.rps)
    bound = set()
    for (command, *_), by_type in tests.items():
        rates = {node_type: sum(values) / len(values) for node_type, values in by_type.items()}
        if len(rates) >= 2 and max(rates.values()) <= min(rates.values()) * (1 + spread):
            bound |= {(node_type, command, rate) for node_type, rate in rates.items()}
    return bound


def with_published(table: BaselineTable, reference: BaselineTable) -> BaselineTable:
    """Add vCPUs, memory and the published bandwidth of the same node types from ``reference``."""
    merged = {}
    for name, node in table.node_types.items():
        known = reference.get(name)
        merged[name] = replace(node, vcpus=known.vcpus, memory_gib=known.memory_gib, published=known.published) if known else node
    return replace(table, node_types=merged)


# --- renderers -----------------------------------------------------------------------------


def render_mapping(table: BaselineTable) -> str:
    """The seed notebook's output: ``json.dumps(mapping, indent=2, sort_keys=True)`` with integer levels."""
    mapping = {name: dict(node.measured.bytes_per_second) for name, node in table.node_types.items() if node.measured}
    return json.dumps(mapping, indent=2, sort_keys=True) + "\n"


def render_table(table: BaselineTable) -> str:
    import yaml

    return yaml.safe_dump(table_to_document(table), sort_keys=False, width=200)


def render(table: BaselineTable, output_format: str) -> str:
    if output_format == "mapping":
        return render_mapping(table)
    return render_table(table)
