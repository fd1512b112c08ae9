"""The heartbeat writer's own counters, served on the telemetry path."""

from __future__ import annotations

from exporter.common.families import COUNTER, GAUGE, FamilyCollector, FamilySet
from exporter.redis.heartbeat import HeartbeatWriter


class HeartbeatWriterCollector(FamilyCollector):
    """The writer's own counters, served on the telemetry path."""

    def __init__(self, writer: HeartbeatWriter) -> None:
        self._writer = writer

    def write(self, out: FamilySet) -> None:
        writes, skipped, errors, last_write = self._writer.snapshot()
        for name, count in sorted(writes.items()):
            out.add("elasticache_exporter_heartbeat_writes_total", COUNTER, "Heartbeats written on a primary.", {"instance": name}, count)
        for name, count in sorted(skipped.items()):
            out.add(
                "elasticache_exporter_heartbeat_skipped_total",
                COUNTER,
                "Heartbeat writes skipped because the node was not a master.",
                {"instance": name},
                count,
            )
        for (name, kind), count in sorted(errors.items()):
            out.add(
                "elasticache_exporter_heartbeat_write_errors_total",
                COUNTER,
                "Heartbeat writes that failed, by kind (permission: an ACL refused ROLE or SET).",
                {"instance": name, "kind": kind},
                count,
            )
        for name, stamp in sorted(last_write.items()):
            out.add(
                "elasticache_exporter_heartbeat_last_write_timestamp_seconds",
                GAUGE,
                "When the exporter last wrote its heartbeat on the target.",
                {"instance": name},
                stamp,
            )
