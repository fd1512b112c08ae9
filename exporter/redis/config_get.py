"""Settings redis_exporter reads with CONFIG GET, served as ``redis_config_*`` where the node allows CONFIG (ElastiCache
renames it away: there COMMAND INFO says so and nothing is sent); and the empty databases it pads INFO's keyspace with.
maxclients and maxmemory come from INFO, which every node allows."""

from __future__ import annotations

from typing import Any

from exporter.common.families import GAUGE, FamilySet

from .command import Doc, ScrapeCommand, Scraped, T, text
from .info import InfoReply, parse_number

# one parameter per command, as every Redis version accepts; re-read once a minute
PARAMETERS = ("io-threads", "repl-backlog-size", "client-output-buffer-limit", "databases")
REFRESH = 60.0
MAX_PADDED_DATABASES = 1024
DEFAULT_DATABASES = 16  # Redis' and ElastiCache's default of the databases setting


def settings(replies: list[Any]) -> dict[str, str]:
    """Parameter → value from CONFIG GET replies."""
    values: dict[str, str] = {}
    for reply in replies:
        for i in range(0, len(reply) - 1, 2):
            if isinstance(reply[i], bytes) and isinstance(reply[i + 1], bytes):
                values[text(reply[i])] = text(reply[i + 1])
    return values


def add_settings(replies: list[Any], scraped: Scraped, out: FamilySet) -> None:
    config, base = settings(replies), scraped.base
    # these change about never: while the settings, the cluster mode and the databases with keys stand, the lines do
    source = (tuple(config.items()), scraped.info.get("cluster_enabled"), tuple(scraped.info.sections.get("keyspace", ())))
    memo = out.memo("config")
    if memo is None:  # a target without a memo of its own: what every node with these settings shares
        out.add_shared("config", source, base, lambda labels, into: _add_settings(config, scraped.info, labels, into))
    elif out.replay(memo, "settings", source) is None:
        with out.recording(memo, "settings", source):
            _add_settings(config, scraped.info, base, out)


def _add_settings(config: dict[str, str], info: InfoReply, base: dict[str, str], out: FamilySet) -> None:
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
                out.add(
                    "redis_config_client_output_buffer_limit_bytes",
                    GAUGE,
                    "client-output-buffer-limit per client class (CONFIG GET).",
                    {**labels, "limit": limit},
                    value,
                )
        if seconds is not None:
            out.add(
                "redis_config_client_output_buffer_limit_overcome_seconds",
                GAUGE,
                "How long a client may stay over the soft limit (CONFIG GET).",
                {**labels, "limit": "soft"},
                seconds,
            )
    add_empty_databases(config, info, base, out)


def add_empty_databases(config: dict[str, str], info: InfoReply, base: dict[str, str], out: FamilySet) -> None:
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


COMMANDS = (
    ScrapeCommand("config", lambda _node: [("CONFIG", "GET", parameter) for parameter in PARAMETERS], (list,), gate="config",
                  known_only=True, refresh=REFRESH, families=add_settings,
                  docs=(Doc("redis_config_io_threads", "gauge", T, "`CONFIG GET io-threads`, where `COMMAND INFO` shows CONFIG",
                            "re-read once a minute"),
                        Doc("redis_config_repl_backlog_size", "gauge", T, "`CONFIG GET repl-backlog-size`, where allowed", "bytes"),
                        Doc("redis_config_client_output_buffer_limit_bytes", "gauge", f"{T}, `class`, `limit` (`hard`, `soft`)",
                            "`CONFIG GET client-output-buffer-limit`, where allowed"),
                        Doc("redis_config_client_output_buffer_limit_overcome_seconds", "gauge", f"{T}, `class`, `limit` (`soft`)",
                            "`CONFIG GET client-output-buffer-limit`, where allowed"))),
)  # fmt: skip
