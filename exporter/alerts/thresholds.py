"""Per node type, every threshold the rules and the alarms compare with, computed once from the baseline table."""

from __future__ import annotations

from exporter.baselines.table import BaselineError, BaselineTable
from exporter.common.records import record

from .catalog import Alert

ENGINE_CPU_FLOOR_PERCENT = 65.0  # no engine-CPU warning below this: at 65 % of a core queueing stays under 2x service time
HOST_CPU_PERCENT = 90.0  # AWS: alarm CPUUtilization at 90 % divided by the vCPUs
BASELINE_NAMES = {"measured": "benchmarked", "published": "published", "cloudwatch": "cloudwatch"}  # cloudwatch: as AWS counted it
NO_SUGGESTION = "more shards (no larger node type in the table)"
# the CloudFormation Mappings attribute naming where a signal's baseline comes from
BASELINE_KEYS = {"network_out": "NetworkBaseline", "network_in": "NetworkBaseline", "engine_cpu": "EngineCpuBaseline"}


@record(frozen=True)
class NodeTypeThresholds:
    node_type: str
    levels: dict[int, int]  # bytes per second at 100, 90 and 80 % of the baseline
    baseline: str  # benchmarked | published | cloudwatch
    engine_cpu: float  # percent of a core at the baseline bandwidth
    engine_baseline: str  # benchmarked | aws-guidance
    host_cpu: float | None  # CPUUtilization threshold, percent; None without a vCPU count
    suggested: str  # the node type to move to

    @property
    def bytes_per_second(self) -> int:
        return self.levels[100]

    def alarm_values(self) -> dict[str, float | str | None]:
        """The CloudFormation Mappings row: every threshold the alarms read, in the alarm's statistic and period (Sum
        over 60 s: bytes per minute), and where each baseline comes from."""
        return {
            "NetworkBytesPerMinute80": self.levels[80] * 60,
            "NetworkBytesPerMinute90": self.levels[90] * 60,
            "NetworkBaseline": self.baseline,
            "EngineCpuPercent90": engine_cpu_threshold(self.engine_cpu, 90),
            "EngineCpuBaseline": self.engine_baseline,
            "HostCpuPercent": self.host_cpu,
        }


def engine_cpu_threshold(baseline_percent: float, level: int) -> float:
    return round(max(baseline_percent * level / 100, ENGINE_CPU_FLOOR_PERCENT), 2)


def host_cpu_threshold(table: BaselineTable, node_type: str) -> float | None:
    vcpus = table.node_types[node_type].vcpus
    return round(HOST_CPU_PERCENT / vcpus, 2) if vcpus else None


def suggested_node_type(table: BaselineTable, node_type: str) -> str:
    """Where a node of this type goes when it is full: the table's suggestion for its whole baseline and at least its
    memory (a node moved for bandwidth keeps its data), same class first; the capacity report asks the same question."""
    node = table.node_types[node_type]
    levels = node.levels(table.basis)
    if not levels:
        return "a larger node type"
    return table.suggest(levels[100], memory_gib=node.memory_gib, like=node_type) or NO_SUGGESTION


def node_type_thresholds(table: BaselineTable) -> list[NodeTypeThresholds]:
    """Every node type with a bandwidth figure, sorted by name."""
    rows = []
    for node_type in sorted(table.node_types):
        node = table.node_types[node_type]
        levels = node.levels(table.basis)
        full = node.full_bandwidth(table.basis)
        if not levels or not full:
            continue
        engine_cpu, engine_source = node.engine_cpu_baseline()
        rows.append(
            NodeTypeThresholds(
                node_type=node_type,
                levels=levels,
                baseline=BASELINE_NAMES[full[1]],
                engine_cpu=engine_cpu,
                engine_baseline=engine_source,
                host_cpu=host_cpu_threshold(table, node_type),
                suggested=suggested_node_type(table, node_type),
            )
        )
    if not rows:
        raise BaselineError(f"{table.source}: no node type has a bandwidth figure")
    return rows


def alarm_thresholds(table: BaselineTable) -> list[NodeTypeThresholds]:
    """The node types the CloudFormation alarms cover: those with a vCPU count as well (the host CPU alarm needs it)."""
    return [row for row in node_type_thresholds(table) if row.host_cpu is not None]


def alarm_threshold_key(alert: Alert) -> str | None:
    """The Mappings attribute (second-level key) of a baseline alarm, or None for a fixed threshold."""
    if alert.baseline is not None and alert.baseline.signal in ("network_out", "network_in"):
        return f"NetworkBytesPerMinute{alert.baseline.level}"
    if alert.baseline is not None and alert.baseline.signal == "engine_cpu":
        return f"EngineCpuPercent{alert.baseline.level}"
    if alert.cloudwatch and alert.cloudwatch.per_node_type == "host_cpu":
        return "HostCpuPercent"
    return None


def threshold_sentence(alert: Alert, baseline: str, node_type: str) -> str | None:
    """What an alarm's threshold is, with the baseline's source and the node type written in (the template passes
    CloudFormation's ``${Baseline}`` and ``${CacheNodeType}``, a direct alarm the node's own)."""
    if alert.baseline is not None and alert.baseline.signal in ("network_out", "network_in"):
        return f"Threshold: {alert.baseline.level} % of the {baseline} baseline bandwidth of {node_type}."
    if alert.baseline is not None and alert.baseline.signal == "engine_cpu":
        return (
            f"Threshold: {alert.baseline.level} % of the {baseline} engine CPU of {node_type} at its baseline bandwidth, "
            f"and at least {ENGINE_CPU_FLOOR_PERCENT:g} % of a core."
        )
    if alert.cloudwatch and alert.cloudwatch.per_node_type == "host_cpu":
        return f"Threshold: 90 % divided by the vCPUs of {node_type}."
    return None


# A command's class, by redis_commands_latencies_usec's cmd label: the benchmark command whose latency stands for it
READ_COMMANDS = ("get", "mget", "getex", "hget", "hmget", "hgetall", "exists", "ttl", "pttl", "type", "strlen", "llen", "lrange",
                 "lindex", "scard", "smembers", "sismember", "zscore", "zrange", "zrangebyscore", "zcard", "xrange", "xlen")  # fmt: skip
WRITE_COMMANDS = ("set", "setex", "psetex", "mset", "del", "unlink", "incr", "incrby", "decr", "hset", "hmset", "hdel", "lpush", "rpush",
                  "lpop", "rpop", "sadd", "srem", "zadd", "zrem", "xadd", "expire", "pexpire")  # fmt: skip
COMMAND_CLASSES = {"read": ("GET", READ_COMMANDS), "write": ("SET", WRITE_COMMANDS)}


def command_latency_baselines(table: BaselineTable) -> list[tuple[str, str, float]]:
    """(node type, command class, p99 seconds) where the table keeps benchmark latency of the class's command: the
    median p99 over its figures (data sizes, client counts, tools)."""
    import statistics

    rows = []
    for node_type in sorted(table.node_types):
        figures = table.node_types[node_type].latency
        for command_class, (command, _) in COMMAND_CLASSES.items():
            p99s = [figure.p99_ms for figure in figures if figure.command == command and figure.p99_ms]
            if p99s:
                rows.append((node_type, command_class, round(statistics.median(p99s) / 1000, 6)))
    return rows
