"""Who holds each node's connections, from the client profiler's latest CLIENT LIST (read in the background)."""

from __future__ import annotations

import time

from exporter.common.families import GAUGE, FamilyCollector, FamilySet
from exporter.common.labels import LabelSet, instance_labels
from exporter.redis.clients import ClientProfile, ClientProfiler

from .profiles import add_failures

# redis_exporter's gauges of one connection (--export-client-list): name, help, the CLIENT LIST field
CONNECTION_GAUGES = (
    ("redis_connected_client_output_buffer_memory_usage_bytes", "Memory used by the connection's output buffer (omem).", "omem"),
    ("redis_connected_client_total_memory_consumed_bytes", "Memory the connection uses in all (tot-mem).", "tot-mem"),
    ("redis_connected_client_created_at_timestamp", "Unix time the connection was made (the read's time less age).", "age"),
    ("redis_connected_client_idle_since_timestamp", "Unix time of the connection's last command (the read's time less idle).", "idle"),
    ("redis_connected_client_channel_subscriptions_count", "Channels the connection is subscribed to (sub).", "sub"),
    ("redis_connected_client_pattern_matching_subscriptions_count", "Patterns the connection is subscribed to (psub).", "psub"),
    ("redis_connected_client_query_buffer_length_bytes", "Length of the connection's query buffer (qbuf).", "qbuf"),
    ("redis_connected_client_query_buffer_free_space_bytes", "Free space of the connection's query buffer (qbuf-free).", "qbuf-free"),
    ("redis_connected_client_output_buffer_length_bytes", "Length of the connection's fixed output buffer (obl).", "obl"),
    ("redis_connected_client_output_list_length", "Replies queued in the connection's output list (oll).", "oll"),
    ("redis_connected_client_shard_channel_subscriptions_count", "Shard channels the connection is subscribed to (ssub).", "ssub"),
    ("redis_connected_client_shard_channel_watched_keys", "Keys the connection watches (watch; redis_exporter's name).", "watch"),
)
_AGES = {"age", "idle"}  # served as the Unix time the read found less this many seconds


class ClientProfileCollector(FamilyCollector):
    def __init__(self, profiler: ClientProfiler) -> None:
        self._profiler = profiler

    def write(self, out: FamilySet) -> None:
        profiles, errors, durations = self._profiler.snapshot()
        now = time.time()
        for name, result in sorted(profiles.items()):
            base = instance_labels(name)
            for client, count in sorted(result.connected.items()):
                out.add(
                    "elasticache_clients_connected",
                    GAUGE,
                    "Connections by client name (CLIENT SETNAME): the top names, (unnamed) and (other).",
                    {**base, "client_name": client},
                    float(count),
                )
            for (client, idle), count in sorted(result.idle.items()):
                out.add(
                    "elasticache_clients_idle",
                    GAUGE,
                    "Connections by client name that have been idle longer than 1m, 10m or 1h.",
                    {**base, "client_name": client, "idle": idle},
                    float(count),
                )
            for source, count in sorted(result.by_source.items()):
                out.add(
                    "elasticache_clients_connected_by_source",
                    GAUGE,
                    "Connections by source address (without the port): the top addresses and (other).",
                    {**base, "source": source},
                    float(count),
                )
            for client, omem in sorted(result.output_buffer_max.items()):
                out.add(
                    "elasticache_clients_output_buffer_bytes_max",
                    GAUGE,
                    "The largest output buffer (omem) among a client name's connections: where big replies pile up.",
                    {**base, "client_name": client},
                    float(omem),
                )
            if result.connections:
                self._add_connections(out, base, result)
            out.add("elasticache_clients_profile_age_seconds", GAUGE, "Seconds since CLIENT LIST was last read.", base, now - result.read_at)
            out.add(
                "elasticache_exporter_client_list_duration_seconds",
                GAUGE,
                "Duration of the last CLIENT LIST read and count.",
                base,
                durations.get(name, 0.0),
            )
        add_failures(out, "elasticache_exporter_client_list_errors_total", "CLIENT LIST reads that failed, by kind.", errors)

    def _add_connections(self, out: FamilySet, base: LabelSet, result: ClientProfile) -> None:
        """One connection's series as redis_exporter serves them: the info labels, then id and name on each gauge."""
        include_port = self._profiler.config.include_port
        read_at = int(result.read_at)
        for connection in result.connections:
            labels = {**base, "id": connection.id, "name": connection.name, "flags": connection.flags, "db": connection.db, "host": connection.host}
            if include_port:
                labels["port"] = connection.port
            if connection.user:
                labels["user"] = connection.user
            if connection.resp:
                labels["resp"] = connection.resp
            out.add("redis_connected_client_info", GAUGE, "A connection of CLIENT LIST, its details as labels.", labels, 1.0)
            short = {**base, "id": connection.id, "name": connection.name}
            for family, help_text, field in CONNECTION_GAUGES:
                value = connection.numbers[field]
                if value is not None:
                    out.add(family, GAUGE, help_text, short, float(read_at - value if field in _AGES else value))
