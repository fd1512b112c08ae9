"""Benchmark results → baselines: readers for the result formats, the seed's arithmetic, and renderers.

Readers turn each format into rows of the seed's Athena schema (instancetype, dataSize,
mbps_p90, …); ``derive`` applies the notebook's arithmetic: per node type the row with the
highest ``mbps_p90``, bytes/s = mbps_p90 / 8 * 1024 * 1024, and ``int(bytes/s * level / 100)``
for the levels 100, 90 and 80.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from exporter.common.records import record, replace
from exporter.common.yamlfile import decode_utf8

from .table import BaselineError, BaselineTable, Measured, NodeBaseline, table_to_document

METHOD = "p90 of per-minute NetworkBytesOut / 60, maximum over data sizes"


@record(frozen=True)
class BenchmarkRow:
    """One row of the seed's Athena query: a node type at one data size."""

    instancetype: str
    data_size: int
    mbps_p90: float
    mbps_p70: float | None = None
    test_passes: int | None = None
    cpuutilization_90: float | None = None
    enginecpuutilization_90: float | None = None
    cpuutilization_50: float | None = None
    enginecpuutilization_50: float | None = None
    byte_per_min_p90: float | None = None
    estimated: bool = False
    method: str = METHOD


def mbps_from_bytes_per_minute(value: float) -> float:
    """The Athena query's unit: Mibit/s from bytes per one-minute datapoint."""
    return value / 60 / 1024 / 1024 * 8


def mbps_from_bytes_per_second(value: float) -> float:
    return value / 1024 / 1024 * 8


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


def _number(text: str, kind: type, where: str) -> Any:
    try:
        value = kind(float(text)) if kind is int else kind(text)
    except (TypeError, ValueError) as err:
        raise BaselineError(f"{where}: not a number: {text!r}") from err
    if kind is float and math.isnan(value):
        raise BaselineError(f"{where}: not a number: {text!r}")
    return value


def read_athena_csv(path: Path, text: str) -> list[BenchmarkRow]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise BaselineError(f"{path}: empty file")
    columns = {}
    for index, name in enumerate(header):
        key = name.strip().lower()
        if key in ATHENA_COLUMNS:
            columns[index] = ATHENA_COLUMNS[key]
    present = {field for field, _, _ in columns.values()}
    for key, (field, _, required) in ATHENA_COLUMNS.items():
        if required and field not in present:
            raise BaselineError(f"{path} line 1: missing column {key!r}")
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


def reply_bytes(data_size: int) -> int:
    """Bytes of a GET reply carrying ``data_size`` bytes: ``$<n>\\r\\n<data>\\r\\n``."""
    return data_size + len(str(data_size)) + 5


def read_redis_benchmark_csv(path: Path, text: str, node_type: str, data_size: int) -> list[BenchmarkRow]:
    """``redis-benchmark --csv``: the header-with-latency form or the old two-column form; GET rps x reply size."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if not rows:
        raise BaselineError(f"{path}: empty file")
    start = 1 if rows[0] and rows[0][0].strip().lower() == "test" else 0
    if start and (len(rows[0]) < 2 or rows[0][1].strip().lower() != "rps"):
        raise BaselineError(f'{path} line 1: expected the columns "test","rps", …')
    for line_number, row in enumerate(rows[start:], start=start + 1):
        if len(row) < 2:
            raise BaselineError(f"{path} line {line_number}: expected at least two columns (test, requests per second)")
        if row[0].strip().upper() == "GET":
            rps = _number(row[1].strip(), float, f"{path} line {line_number} column 'rps'")
            bytes_per_second = rps * reply_bytes(data_size)
            return [_estimated_row(node_type, data_size, bytes_per_second, "redis-benchmark GET requests/s x reply size")]
    raise BaselineError(f"{path}: no GET test (run redis-benchmark with -t get)")


def read_memtier_json(path: Path, text: str, node_type: str, data_size: int) -> list[BenchmarkRow]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise BaselineError(f"{path} line {err.lineno} column {err.colno}: invalid JSON: {err.msg}") from err
    stats = document.get("ALL STATS") if isinstance(document, dict) else None
    gets = stats.get("Gets") if isinstance(stats, dict) else None
    if not isinstance(gets, dict) or "Ops/sec" not in gets:
        raise BaselineError(f"{path}: missing 'ALL STATS' → 'Gets' → 'Ops/sec' (memtier_benchmark --json-out-file)")
    ops = _number(gets["Ops/sec"], float, f"{path} field 'ALL STATS.Gets.Ops/sec'")
    bytes_per_second = ops * reply_bytes(data_size)
    return [_estimated_row(node_type, data_size, bytes_per_second, "memtier_benchmark GET ops/s x reply size")]


def _estimated_row(node_type: str, data_size: int, bytes_per_second: float, how: str) -> BenchmarkRow:
    return BenchmarkRow(
        instancetype=node_type,
        data_size=data_size,
        mbps_p90=mbps_from_bytes_per_second(bytes_per_second),
        test_passes=1,
        byte_per_min_p90=bytes_per_second * 60,
        estimated=True,
        method=f"estimated: {how} (no bandwidth was sampled)",
    )


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
    best: dict[str, BenchmarkRow] = {}
    for row in rows:
        current = best.get(row.instancetype)
        if current is None or row.mbps_p90 > current.mbps_p90:
            best[row.instancetype] = row
    node_types = {}
    for node_type, row in best.items():
        node_types[node_type] = NodeBaseline(
            node_type=node_type,
            measured=Measured(
                bytes_per_second=mapping_levels(row.mbps_p90),
                data_size=row.data_size,
                cpu_utilization_p90=row.cpuutilization_90,
                engine_cpu_utilization_p90=row.enginecpuutilization_90,
                runs=row.test_passes,
                method=row.method,
                source="benchmark",
                estimated=row.estimated,
            ),
        )
    return BaselineTable(node_types=node_types)


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
