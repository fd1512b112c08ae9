"""Samples from one node's scrape: INFO plus the replies of SLOWLOG, LATENCY and CLUSTER INFO."""

from __future__ import annotations

from typing import Any

from exporter.common.families import COUNTER, GAUGE, FamilySet

from .info import InfoReply, parse_info, parse_number
from .info_metrics import CommandStats, add_cluster_info, add_info_metrics
from .keys import add_key_metrics
from .node import ScrapeResult


def parse_result(result: ScrapeResult) -> InfoReply:
    info = parse_info(result.info)
    for extra in result.extra_info:
        info.merge(parse_info(extra))
    return info


def add_node_metrics(info: InfoReply, result: ScrapeResult, target: str, out: FamilySet) -> CommandStats:
    """The samples of one node's scrape; returns INFO's command stats (parsed once per scrape)."""
    command_stats = add_info_metrics(info, target, out)
    base = {"instance": target}
    add_start_time(info, result.read_time, base, out)
    _add_config_compat(info, base, out)
    _add_config_settings(result.config, base, out)
    _add_empty_databases(result.config, info, base, out)
    if result.slowlog_len is not None:
        out.add("redis_slowlog_length", GAUGE, "Entries in the slow log.", base, float(result.slowlog_len))
    _add_slowlog_last(result.slowlog_last, base, out)
    _add_latency_latest(result.latency_latest, base, out)
    if result.latency_histogram is not None:
        add_latency_histograms(result.latency_histogram, command_stats, base, out)
    if result.cluster_info:
        add_cluster_info(result.cluster_info, target, out)
    if result.keys is not None:
        add_key_metrics(result.keys, base, out)
    return command_stats


def _add_config_compat(info: InfoReply, base: dict[str, str], out: FamilySet) -> None:
    """redis_exporter reads these with CONFIG GET, which ElastiCache refuses; INFO has them too."""
    for field, name, help_ in (
        ("maxclients", "redis_config_maxclients", "The maxclients setting (from INFO, no CONFIG needed)."),
        ("maxmemory", "redis_config_maxmemory", "The maxmemory setting in bytes (from INFO, no CONFIG needed)."),
    ):
        value = parse_number(info.get(field, "") or "")
        if value is not None:
            out.add(name, GAUGE, help_, base, value)


def _add_config_settings(config: dict[str, str], base: dict[str, str], out: FamilySet) -> None:
    """redis_exporter's redis_config_* families from CONFIG GET, where the node allows CONFIG."""
    for parameter in ("io-threads", "repl-backlog-size"):
        value = parse_number(config.get(parameter, ""))
        if value is not None:
            out.add("redis_config_" + parameter.replace("-", "_"), GAUGE, f"The {parameter} setting (CONFIG GET).", base, value)
    # "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60": class, hard, soft bytes, soft seconds
    words = config.get("client-output-buffer-limit", "").split()
    for i in range(0, len(words) - 3, 4):
        hard, soft, seconds = (parse_number(word) for word in words[i + 1 : i + 4])
        labels = {**base, "class": words[i]}
        for limit, value in (("hard", hard), ("soft", soft)):
            if value is not None:
                out.add("redis_config_client_output_buffer_limit_bytes", GAUGE, "client-output-buffer-limit per client class (CONFIG GET).",
                        {**labels, "limit": limit}, value)  # fmt: skip
        if seconds is not None:
            out.add("redis_config_client_output_buffer_limit_overcome_seconds", GAUGE,
                    "How long a client may stay over the soft limit (CONFIG GET).", {**labels, "limit": "soft"}, seconds)  # fmt: skip


MAX_PADDED_DATABASES = 1024
DEFAULT_DATABASES = 16  # Redis' and ElastiCache's default of the databases setting


def add_start_time(info: InfoReply, read_time: float, base: dict[str, str], out: FamilySet) -> None:
    """The server's clock minus its uptime; servers older than Redis 5 have no server_time_usec, and there the
    exporter's clock at the reply is used, as redis_exporter always does."""
    uptime = parse_number(info.get("uptime_in_seconds", "") or "")
    if uptime is None:
        return
    server_time = parse_number(info.get("server_time_usec", "") or "")
    now = server_time / 1e6 if server_time is not None else read_time
    if now:
        out.add("redis_start_time_seconds", GAUGE, "Unix time the server started.", base, now - uptime)


def _add_empty_databases(config: dict[str, str], info: InfoReply, base: dict[str, str], out: FamilySet) -> None:
    """redis_db_keys and redis_db_keys_expiring 0 for every empty database, as redis_exporter serves them (INFO lists
    only databases with keys): as many as CONFIG GET databases gives, the default 16 where CONFIG is not allowed
    (ElastiCache), db0 alone in cluster mode."""
    if info.get("cluster_enabled") == "1":
        count: float | None = 1
    else:
        count = parse_number(config.get("databases", "")) if "databases" in config else DEFAULT_DATABASES
    if count is None:
        return
    keyspace = info.sections.get("keyspace", {})
    for index in range(min(int(count), MAX_PADDED_DATABASES)):
        db = f"db{index}"
        if db not in keyspace:
            labels = {**base, "db": db}
            out.add("redis_db_keys", GAUGE, "Keys in the database.", labels, 0.0)
            out.add("redis_db_keys_expiring", GAUGE, "Keys with an expiry in the database.", labels, 0.0)


def _add_slowlog_last(reply: Any, base: dict[str, str], out: FamilySet) -> None:
    """As redis_exporter: both series whenever SLOWLOG GET answered, 0 while the slow log is empty."""
    if not isinstance(reply, list):
        return
    entry = reply[0] if reply and isinstance(reply[0], list) else []
    last_id = entry[0] if entry and isinstance(entry[0], int) else 0
    duration = entry[2] if len(entry) > 2 and isinstance(entry[2], int) else 0
    out.add("redis_slowlog_last_id", GAUGE, "Id of the newest slow log entry (0 while the log is empty).", base, float(last_id))
    out.add("redis_last_slow_execution_duration_seconds", GAUGE, "Execution time of the newest slow log entry.", base, duration / 1e6)


def _add_latency_latest(reply: Any, base: dict[str, str], out: FamilySet) -> None:
    if not isinstance(reply, list):
        return
    for event in reply:
        if not isinstance(event, list) or len(event) < 3 or not isinstance(event[0], bytes):
            continue
        labels = {**base, "event_name": event[0].decode("utf-8", errors="replace")}
        if isinstance(event[1], int):
            out.add("redis_latency_spike_last", GAUGE, "Unix time of the latest latency spike per event.", labels, float(event[1]))
        if isinstance(event[2], int):
            out.add("redis_latency_spike_duration_seconds", GAUGE, "Duration of the latest latency spike per event.", labels, event[2] / 1000.0)


def most_called_commands(command_stats: CommandStats, limit: int) -> tuple[str, ...]:
    """The ``limit`` commands with the most calls (subcommands as ``config|get``)."""
    ranked = sorted((-calls, cmd) for cmd, (calls, _) in command_stats.items() if calls)
    return tuple(cmd for _, cmd in ranked[:limit])


def add_latency_histograms(reply: Any, command_stats: CommandStats, base: dict[str, str], out: FamilySet) -> None:
    """LATENCY HISTOGRAM as redis_exporter serves it: ``redis_commands_latencies_usec{cmd}``, the server's cumulative
    counts per bucket upper bound (µs), +Inf and _count the command's calls, _sum its µs from commandstats (a
    container command's subcommands included)."""
    if not isinstance(reply, list):
        return
    seen: set[bytes] = set()
    for i in range(0, len(reply) - 1, 2):
        name, details = reply[i], reply[i + 1]
        if not isinstance(name, bytes) or not isinstance(details, list) or name in seen:
            continue
        seen.add(name)
        fields = {details[j]: details[j + 1] for j in range(0, len(details) - 1, 2) if isinstance(details[j], bytes)}
        calls, buckets = fields.get(b"calls"), fields.get(b"histogram_usec")
        if not isinstance(calls, int) or not isinstance(buckets, list):
            continue
        cmd = name.decode("utf-8", errors="replace")
        total = sum(usec for command, (_, usec) in command_stats.items() if command == cmd or command.startswith(cmd + "|"))
        bounds = [
            (str(buckets[j]), float(buckets[j + 1]))  # le="8", as redis_exporter's Go client writes 8
            for j in range(0, len(buckets) - 1, 2)
            if isinstance(buckets[j], int) and isinstance(buckets[j + 1], int)
        ]
        out.add_histogram("redis_commands_latencies_usec", "Latency of each command in microseconds (LATENCY HISTOGRAM).",
                          {**base, "cmd": cmd}, bounds, float(calls), total)  # fmt: skip


def add_target_health(
    out: FamilySet,
    target: str,
    *,
    up: bool,
    duration: float,
    errors: dict[str, int],
    last_error: str,
    malformed: int,
    connects: int,
    heartbeat_errors: dict[tuple[str, str], int],
) -> None:
    base = {"instance": target}
    out.add("redis_up", GAUGE, "Whether the last scrape of the target succeeded.", base, 1.0 if up else 0.0)
    out.add(
        "elasticache_exporter_target_scrape_duration_seconds",
        GAUGE,
        "Duration of the last scrape of the target.",
        base,
        duration,
    )
    for kind, count in sorted(errors.items()):
        out.add(
            "elasticache_exporter_target_scrape_errors_total",
            COUNTER,
            "Failed scrapes of the target by kind of error.",
            {**base, "kind": kind},
            float(count),
        )
    out.add(
        "elasticache_exporter_target_last_error",
        GAUGE,
        "Kind of the last scrape's error as a label ('none' when it succeeded).",
        {**base, "kind": last_error},
        1.0,
    )
    out.add(
        "elasticache_exporter_info_malformed_lines_total",
        COUNTER,
        "INFO lines that could not be parsed and were skipped.",
        base,
        float(malformed),
    )
    out.add("elasticache_exporter_target_connects_total", COUNTER, "Connections opened to the target.", base, float(connects))
    for (source, reason), count in sorted(heartbeat_errors.items()):
        out.add(
            "elasticache_exporter_heartbeat_errors_total",
            COUNTER,
            "Heartbeat keys that could not be read: of another type than string, or not a timestamp.",
            {**base, "source": source, "reason": reason},
            float(count),
        )
