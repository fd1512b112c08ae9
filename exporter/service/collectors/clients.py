"""Who holds each node's connections, from the client profiler's latest CLIENT LIST (read in the background)."""

from __future__ import annotations

import time

from exporter.common.families import COUNTER, GAUGE, FamilyCollector, FamilySet
from exporter.common.labels import instance_labels
from exporter.redis.clients import ClientProfiler


class ClientProfileCollector(FamilyCollector):
    def __init__(self, profiler: ClientProfiler) -> None:
        self._profiler = profiler

    def build(self) -> FamilySet:
        profiles, errors, durations = self._profiler.snapshot()
        out = FamilySet()
        now = time.time()
        for name, result in sorted(profiles.items()):
            base = instance_labels(name)
            for client, count in sorted(result.connected.items()):
                out.add("elasticache_clients_connected", GAUGE, "Connections by client name (CLIENT SETNAME): the top names, "
                        "(unnamed) and (other).", {**base, "client_name": client}, float(count))  # fmt: skip
            for (client, idle), count in sorted(result.idle.items()):
                out.add("elasticache_clients_idle", GAUGE, "Connections by client name that have been idle longer than 1m, 10m or 1h.",
                        {**base, "client_name": client, "idle": idle}, float(count))  # fmt: skip
            for source, count in sorted(result.by_source.items()):
                out.add("elasticache_clients_connected_by_source", GAUGE, "Connections by source address (without the port): the "
                        "top addresses and (other).", {**base, "source": source}, float(count))  # fmt: skip
            for client, omem in sorted(result.output_buffer_max.items()):
                out.add("elasticache_clients_output_buffer_bytes_max", GAUGE, "The largest output buffer (omem) among a client name's "
                        "connections: where big replies pile up.", {**base, "client_name": client}, float(omem))  # fmt: skip
            out.add("elasticache_clients_profile_age_seconds", GAUGE, "Seconds since CLIENT LIST was last read.", base, now - result.read_at)
            out.add("elasticache_exporter_client_list_duration_seconds", GAUGE, "Duration of the last CLIENT LIST read and count.", base,
                    durations.get(name, 0.0))  # fmt: skip
        for (name, kind), count in sorted(errors.items()):
            out.add("elasticache_exporter_client_list_errors_total", COUNTER, "CLIENT LIST reads that failed, by kind.",
                    {"instance": name, "kind": kind}, float(count))  # fmt: skip
        return out
