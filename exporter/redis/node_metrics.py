"""Samples from one node's scrape: INFO's, then each command's of the scrape table (``pipeline``)."""

from __future__ import annotations

from exporter.common.families import COUNTER, GAUGE, FamilySet

from .command import Scraped
from .info import InfoReply, parse_number
from .info_metrics import add_info_metrics
from .keys import add_key_metrics
from .pipeline import SCRAPE_COMMANDS, ScrapeResult


def add_node_metrics(result: ScrapeResult, base: dict[str, str], out: FamilySet) -> None:
    """The samples of one node's scrape, labelled ``base`` (the target's instance)."""
    info = result.parsed
    add_info_metrics(info, base, out, result.command_lines, result.command_stats)
    add_start_time(info, result.read_time, base, out)
    _add_config_compat(info, base, out)
    scraped = Scraped(info, result.replies, result.command_stats, base, result.read_time)
    for command in SCRAPE_COMMANDS:
        if command.families is not None:
            command.families(result.replies.get(command.purpose, []), scraped, out)
    if result.keys is not None:
        add_key_metrics(result.keys, base, out)


def _add_config_compat(info: InfoReply, base: dict[str, str], out: FamilySet) -> None:
    """redis_exporter reads these with CONFIG GET, which ElastiCache refuses; INFO has them too."""
    for field, name, help_ in (
        ("maxclients", "redis_config_maxclients", "The maxclients setting (from INFO, no CONFIG needed)."),
        ("maxmemory", "redis_config_maxmemory", "The maxmemory setting in bytes (from INFO, no CONFIG needed)."),
    ):
        value = parse_number(info.get(field, "") or "")
        if value is not None:
            out.add(name, GAUGE, help_, base, value)


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


def add_target_health(
    out: FamilySet,
    base: dict[str, str],
    *,
    up: bool,
    duration: float,
    errors: dict[str, int],
    last_error: str,
    malformed: int,
    connects: int,
    heartbeat_errors: dict[tuple[str, str], int],
) -> None:
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
