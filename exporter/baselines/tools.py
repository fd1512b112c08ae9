"""Results of the load tools run against a node: redis-benchmark (``--csv`` or its report) and memtier_benchmark
(``--json-out-file``). Every test's rate and percentiles are kept; the bandwidth is estimated from what the GETs
returned, since these tools sample no NetworkBytesOut."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from exporter.common.records import replace

from .latency import LatencyFigure, from_csv_row, from_memtier, read_report
from .rows import BenchmarkRow, mbps_from_bytes_per_second
from .rows import number as _number
from .table import BaselineError


def reply_bytes(data_size: int) -> int:
    """Bytes of a GET reply carrying ``data_size`` bytes: ``$<n>\r\n<data>\r\n``."""
    return data_size + len(str(data_size)) + 5


MISS_REPLY_BYTES = len(b"$-1\r\n")


def read_redis_benchmark_csv(path: Path, text: str, node_type: str, data_size: int) -> list[BenchmarkRow]:
    """``redis-benchmark --csv``: the header-with-latency form or the old two-column form. Every test's rate and
    percentiles are kept; the bandwidth is estimated from GET's: requests/s x reply size."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if not rows:
        raise BaselineError(f"{path}: empty file")
    header = rows[0] if rows[0] and rows[0][0].strip().lower() == "test" else []
    if header and (len(header) < 2 or header[1].strip().lower() != "rps"):
        raise BaselineError(f'{path} line 1: expected the columns "test","rps", …')
    figures = []
    for line_number, row in enumerate(rows[1 if header else 0 :], start=2 if header else 1):
        if len(row) < 2:
            raise BaselineError(
                f"{path} line {line_number}: expected at least two columns (test, requests per second); "
                "a redis-benchmark report without --csv is read as --input-format redis-benchmark-report"
            )
        figures.append(from_csv_row(header, row, data_size, f"{path} line {line_number}"))
    return [_tool_row(node_type, data_size, figures, "redis-benchmark")]


def read_redis_benchmark_report(path: Path, text: str, node_type: str, data_size: int | None) -> list[BenchmarkRow]:
    """redis-benchmark's report (no ``--csv``): its payload size is the data size where ``--data-size`` is not given."""
    figures = read_report(text, str(path))
    sizes = {figure.data_size for figure in figures if figure.data_size is not None}
    size = data_size if data_size is not None else (sizes.pop() if len(sizes) == 1 else None)
    if size is None and not sizes:
        raise BaselineError(f"{path}: the report does not say its payload (redis-benchmark -q): give --data-size")
    if size is None:
        raise BaselineError(f"{path}: the tests have different payloads ({sorted(sizes)}): give --data-size, or one file per size")
    return [_tool_row(node_type, size, [replace(figure, data_size=size) for figure in figures], "redis-benchmark")]


def read_memtier_json(path: Path, text: str, node_type: str, data_size: int) -> list[BenchmarkRow]:
    """memtier_benchmark's ``--json-out-file``: Sets and Gets kept with their percentiles; the bandwidth is what the
    Gets returned: hits x reply size + misses x the nil reply (all Gets as hits where the file has no Hits/sec)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise BaselineError(f"{path} line {err.lineno} column {err.colno}: invalid JSON: {err.msg}") from err
    stats = document.get("ALL STATS") if isinstance(document, dict) else None
    gets = stats.get("Gets") if isinstance(stats, dict) else None
    if not isinstance(gets, dict) or "Ops/sec" not in gets:
        raise BaselineError(f"{path}: missing 'ALL STATS' → 'Gets' → 'Ops/sec' (memtier_benchmark --json-out-file)")
    figures = from_memtier(stats, data_size, str(path))  # type: ignore[arg-type]
    ops = _number(gets["Ops/sec"], float, f"{path} field 'ALL STATS.Gets.Ops/sec'")
    if "Hits/sec" in gets:
        hits = _number(gets["Hits/sec"], float, f"{path} field 'ALL STATS.Gets.Hits/sec'")
        misses = _number(gets.get("Misses/sec", ops - hits), float, f"{path} field 'ALL STATS.Gets.Misses/sec'")
        bytes_per_second, how = hits * reply_bytes(data_size) + misses * MISS_REPLY_BYTES, "memtier_benchmark GET hits/s x reply size"
    else:
        bytes_per_second, how = ops * reply_bytes(data_size), "memtier_benchmark GET ops/s x reply size"
    return [replace(_estimated_row(node_type, data_size, bytes_per_second, how), latency=tuple(figures))]


def _tool_row(node_type: str, data_size: int, figures: list[LatencyFigure], tool: str) -> BenchmarkRow:
    """The rates and percentiles of a tool's tests, with the bandwidth estimated from its GET test where it ran one."""
    gets = [figure.rps for figure in figures if figure.command == "GET"]  # -q prints a line per pass: their mean
    if not gets:
        return BenchmarkRow(
            instancetype=node_type,
            data_size=data_size,
            mbps_p90=None,
            test_passes=1,
            latency=tuple(figures),
            estimated=True,
            method=f"{tool}: latency only (no GET test to estimate bandwidth from)",
        )
    row = _estimated_row(node_type, data_size, sum(gets) / len(gets) * reply_bytes(data_size), f"{tool} GET requests/s x reply size")
    row = replace(row, test_passes=len(gets))
    return replace(row, latency=tuple(figures))


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


def parse_data_size(text: str, where: str) -> int:
    """A value size in bytes, or a range ``1024-4096`` (memtier's ``--data-size-range``) as its mean."""
    low, sep, high = text.partition("-")
    try:
        sizes = (int(low), int(high)) if sep else (int(low), int(low))
    except ValueError as err:
        raise BaselineError(f"{where}: not a byte count or a range such as 1024-4096: {text!r}") from err
    if min(sizes) < 1 or sizes[0] > sizes[1]:
        raise BaselineError(f"{where}: sizes must be positive, the range low to high: {text!r}")
    return (sizes[0] + sizes[1]) // 2


def per_shard(row: BenchmarkRow, shards: int) -> BenchmarkRow:
    """A load tool's result against a cluster endpoint, as one node's: its estimated bandwidth split over the shards
    (the tool's rate is the cluster's). Sampled bandwidth (Athena, JSON lines) is a node's already."""
    if shards == 1 or not row.estimated or row.mbps_p90 is None:
        return replace(row, latency=tuple(replace(figure, shards=shards) for figure in row.latency)) if shards > 1 else row
    return replace(
        row,
        mbps_p90=row.mbps_p90 / shards,
        byte_per_min_p90=(row.byte_per_min_p90 or 0) / shards,
        method=f"{row.method}; a cluster of {shards} shards: the cluster's rate / {shards}",
        latency=tuple(replace(figure, shards=shards) for figure in row.latency),
    )
