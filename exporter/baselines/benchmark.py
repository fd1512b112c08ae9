"""``elasticache-exporter benchmark``: load a node with redis-benchmark (or memtier_benchmark) per data
size, sample its INFO every second, and write the results in the seed's CSV schema plus a baseline entry.

Each data size: fill keys with SET, then a GET load for the duration while a sampler
reads ``total_net_output_bytes``, ``total_net_input_bytes``, the CPU counters and the
ops per second every second. Bandwidth per data size is the p50/p70/p90 of the
per-second rates, as the seed takes the p90 of per-minute CloudWatch datapoints.
Ctrl-C stops the load and keeps what was measured.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import time
from collections.abc import Callable

from exporter.common.processes import stop_process
from exporter.common.progress import Progress
from exporter.common.records import field, record, replace
from exporter.common.secrets import Secret
from exporter.redis.addresses import Endpoint
from exporter.redis.info import parse_info, parse_number
from exporter.redis.node import RedisNode
from exporter.redis.resp import ErrorReply, RespFailure
from exporter.redis.settings import Credentials

from .latency import LatencyFigure, from_csv_row
from .rows import BenchmarkRow, mbps_from_bytes_per_second
from .table import BaselineError

CSV_COLUMNS = (
    "instancetype",
    "dataSize",
    "mbps_p90",
    "mbps_p70",
    "test_passes",
    "cpuutilization_90",
    "enginecpuutilization_90",
    "cpuutilization_50",
    "enginecpuutilization_50",
    "BytePerMinP90",
)


@record
class Sample:
    time: float
    bytes_out: float
    bytes_in: float
    cpu_total: float
    cpu_main: float
    ops: float


@record
class SizeResult:
    data_size: int
    samples: list[Sample] = field(factory=list)
    interrupted: bool = False
    latency: list[LatencyFigure] = field(factory=list)  # the tool's own rate and percentiles of a short pass after the load

    def rates(self) -> dict[str, list[float]]:
        rates: dict[str, list[float]] = {"out": [], "in": [], "cpu": [], "engine": [], "ops": []}
        for first, second in zip(self.samples, self.samples[1:], strict=False):
            elapsed = second.time - first.time
            if elapsed <= 0:
                continue
            rates["out"].append((second.bytes_out - first.bytes_out) / elapsed)
            rates["in"].append((second.bytes_in - first.bytes_in) / elapsed)
            rates["cpu"].append((second.cpu_total - first.cpu_total) / elapsed * 100)
            rates["engine"].append((second.cpu_main - first.cpu_main) / elapsed * 100)
            rates["ops"].append(second.ops)
        return rates


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (as numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def to_row(node_type: str, result: SizeResult) -> BenchmarkRow | None:
    rates = result.rates()
    if len(rates["out"]) < 1:
        return None
    p90 = percentile(rates["out"], 0.9)
    return BenchmarkRow(
        instancetype=node_type,
        data_size=result.data_size,
        mbps_p90=mbps_from_bytes_per_second(p90),
        mbps_p70=mbps_from_bytes_per_second(percentile(rates["out"], 0.7)),
        test_passes=1,
        cpuutilization_90=percentile(rates["cpu"], 0.9),
        enginecpuutilization_90=percentile(rates["engine"], 0.9),
        cpuutilization_50=percentile(rates["cpu"], 0.5),
        enginecpuutilization_50=percentile(rates["engine"], 0.5),
        byte_per_min_p90=p90 * 60,
        method="p90 of per-second INFO total_net_output_bytes rates, maximum over data sizes (elasticache-exporter benchmark)",
        latency=tuple(result.latency),
    )


def rows_to_csv(rows: list[BenchmarkRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow(
            [
                row.instancetype,
                row.data_size,
                f"{row.mbps_p90:.6f}",
                f"{row.mbps_p70 or 0:.6f}",
                row.test_passes or 1,
                f"{row.cpuutilization_90 or 0:.6f}",
                f"{row.enginecpuutilization_90 or 0:.6f}",
                f"{row.cpuutilization_50 or 0:.6f}",
                f"{row.enginecpuutilization_50 or 0:.6f}",
                f"{row.byte_per_min_p90 or 0:.6e}",
            ]
        )
    return buffer.getvalue()


@record
class BenchmarkPlan:
    endpoint: Endpoint
    password: str | None
    node_type: str
    data_sizes: tuple[int, ...] = (1000, 10000, 100000)
    duration: float = 60.0
    clients: int = 50
    keys: int = 10000
    tool: str = "redis-benchmark"
    pipeline: int = 1
    cluster: bool = False  # the target is a node of a cluster: the tool spreads the load over its shards
    ratio: str | None = None  # memtier's SET:GET ratio, e.g. 1:4 (a mixed workload); None: GETs only
    size_range: tuple[int, int] | None = None  # memtier's --data-size-range: values of every size between (one "data size", the mean)

    def tool_args(self, size: int) -> list[str]:
        """The workload's arguments: cluster mode, the value size (or range) and the ratio, as the tool takes them."""
        if self.tool != "memtier_benchmark":
            return ["-d", str(size), *(["--cluster"] if self.cluster else [])]
        low_high = self.size_range
        sizes = [f"--data-size-range={low_high[0]}-{low_high[1]}", "--data-size-pattern=S"] if low_high else [f"--data-size={size}"]
        return [*sizes, *(["--cluster-mode"] if self.cluster else [])]


def _node(plan: BenchmarkPlan) -> RedisNode:
    """The node under load, for its INFO every second: the exporter's own connection (AUTH, TLS, a deadline a call)."""
    password = Secret(value=plan.password, source="the benchmark's password") if plan.password else None
    return RedisNode(plan.endpoint, Credentials(username=plan.endpoint.username, password=password, timeout=5.0))


def _info(node: RedisNode) -> str:
    (reply,) = node.call_many([("INFO", "ALL")])
    if not isinstance(reply, bytes):
        raise RespFailure("error_reply" if isinstance(reply, ErrorReply) else "protocol", f"INFO answered {reply!r:.100}")
    return reply.decode("utf-8", errors="replace")


def _connection_args(plan: BenchmarkPlan, tool: str) -> list[str]:
    if tool == "memtier_benchmark":
        args = ["-s", plan.endpoint.host, "-p", str(plan.endpoint.port)]
        if plan.password:
            args += ["-a", f"{plan.endpoint.username}:{plan.password}" if plan.endpoint.username else plan.password]
        return args + (["--tls"] if plan.endpoint.tls else [])
    args = ["-h", plan.endpoint.host, "-p", str(plan.endpoint.port)]
    if plan.endpoint.username:
        args += ["--user", plan.endpoint.username]
    if plan.password:
        args += ["-a", plan.password]
    return args + (["--tls"] if plan.endpoint.tls else [])


def _read_sample(client: RedisNode) -> Sample:
    info = parse_info(_info(client))

    def number(name: str) -> float:
        return parse_number(info.get(name, "") or "") or 0.0

    main = number("used_cpu_sys_main_thread") + number("used_cpu_user_main_thread")
    total = number("used_cpu_sys") + number("used_cpu_user")
    return Sample(
        time=time.monotonic(),
        bytes_out=number("total_net_output_bytes"),
        bytes_in=number("total_net_input_bytes"),
        cpu_total=total,
        cpu_main=main or total,
        ops=number("instantaneous_ops_per_sec"),
    )


def run_benchmark(plan: BenchmarkPlan, progress: Progress | None = None, sleep: Callable[[float], None] = time.sleep) -> list[SizeResult]:
    tool_path = shutil.which(plan.tool)
    if tool_path is None:
        raise BaselineError(f"{plan.tool} is not on PATH (apt-get install redis-tools)")
    try:
        client = _node(plan)
        _info(client)
    except RespFailure as err:
        raise BaselineError(f"{plan.endpoint.display()}: cannot reach the node: {err}") from err
    progress = progress or Progress(plan.duration * len(plan.data_sizes))
    results: list[SizeResult] = []
    try:
        for index, size in enumerate(plan.data_sizes):
            result = SizeResult(size)
            results.append(result)
            _fill(plan, tool_path, size)
            load = subprocess.Popen(_load_command(plan, tool_path, size), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            started = time.monotonic()
            try:
                while time.monotonic() - started < plan.duration:
                    result.samples.append(_read_sample(client))
                    progress.update(index * plan.duration + time.monotonic() - started, f"data size {size} bytes")
                    if load.poll() is not None and time.monotonic() - started > 1:
                        break
                    sleep(min(1.0, max(0.0, plan.duration - (time.monotonic() - started))))
                result.samples.append(_read_sample(client))
            except KeyboardInterrupt:
                result.interrupted = True
                raise
            finally:
                stop_process(load)
            result.latency = _latency_pass(plan, tool_path, size, result)
    except KeyboardInterrupt:
        pass
    finally:
        progress.finish()
        client.close()
    return results


LATENCY_PASS_SECONDS = 3.0


def _latency_pass(plan: BenchmarkPlan, tool_path: str, size: int, result: SizeResult) -> list[LatencyFigure]:
    """redis-benchmark's GET rate and percentiles at the same clients and pipeline, from a pass of about
    LATENCY_PASS_SECONDS (its requests sized from the rate the load ran at): the load itself is stopped, not finished,
    so it prints none. memtier_benchmark's are not taken here (its JSON is read by ``baseline derive``)."""
    if plan.tool != "redis-benchmark":
        return []
    rates = result.rates()["ops"]
    requests = int(min(2_000_000, max(2_000, percentile(rates, 0.5) * LATENCY_PASS_SECONDS))) if rates else 2_000
    command = _redis_benchmark_gets(plan, tool_path, size, requests, "--csv")
    try:
        output = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False).stdout
    except subprocess.TimeoutExpired:
        return []
    rows = [row for row in csv.reader(io.StringIO(output)) if row]
    header = rows[0] if rows and rows[0][0].strip().lower() == "test" else []
    return [
        replace(from_csv_row(header, row, size, "redis-benchmark --csv"), clients=plan.clients)
        for row in rows[1 if header else 0 :]
        if len(row) >= 2 and row[0].strip().upper() == "GET"
    ]


def _fill(plan: BenchmarkPlan, tool_path: str, size: int) -> None:
    if plan.tool == "memtier_benchmark":
        command = [
            tool_path,
            *_connection_args(plan, plan.tool),
            "--ratio=1:0",
            *plan.tool_args(size),
            f"--key-maximum={plan.keys}",
            "--key-pattern=P:P",
            f"--requests={max(1, plan.keys // 4)}",
            "-c",
            "1",
            "-t",
            "4",
        ]
    else:
        command = [
            tool_path,
            *_connection_args(plan, plan.tool),
            "-t",
            "set",
            *plan.tool_args(size),
            "-n",
            str(plan.keys),
            "-r",
            str(plan.keys),
            "-c",
            "10",
            "-q",
        ]
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=max(60.0, plan.duration * 2), check=False)


def _load_command(plan: BenchmarkPlan, tool_path: str, size: int) -> list[str]:
    if plan.tool == "memtier_benchmark":
        return [
            tool_path,
            *_connection_args(plan, plan.tool),
            f"--ratio={plan.ratio or '0:1'}",
            *plan.tool_args(size),
            f"--key-maximum={plan.keys}",
            f"--test-time={int(plan.duration) + 5}",
            "-c",
            str(max(1, plan.clients // 4)),
            "-t",
            "4",
            f"--pipeline={plan.pipeline}",
        ]
    return _redis_benchmark_gets(plan, tool_path, size, 2_000_000_000, "-q")


def _redis_benchmark_gets(plan: BenchmarkPlan, tool_path: str, size: int, requests: int, output: str) -> list[str]:
    """redis-benchmark's GETs of the plan's keys, clients and pipeline: ``requests`` of them, printed as ``output`` says."""
    load = ["-n", str(requests), "-r", str(plan.keys), "-c", str(plan.clients), "-P", str(plan.pipeline)]
    return [tool_path, *_connection_args(plan, plan.tool), "-t", "get", *plan.tool_args(size), *load, output]
