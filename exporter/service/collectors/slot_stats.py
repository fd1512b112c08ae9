"""A cluster's load by slot and by shard, from the slot-stats profiler's latest read of each primary: the top slots of
each node, its totals (counted by the exporter, so they never fall when a slot moves away), each shard's share of its
replication group's load, its load over the mean shard's, and the group's skew."""

from __future__ import annotations

from collections.abc import Callable

from exporter.common.families import COUNTER, GAUGE, FamilyCollector, FamilySet
from exporter.common.labels import instance_labels
from exporter.redis.slot_stats import SlotProfile, SlotStatsProfiler
from exporter.redis.slots import shard_name

from .profiles import add_failures

RESOURCES = ("cpu", "network", "keys")


class SlotStatsCollector(FamilyCollector):
    """``owns``: whether a target or group name is this exporter shard's. The profiler reads the members of the groups
    this shard owns on every shard; each node's series are served by the shard that owns the node, each group's by the
    shard that owns the group (from all its primaries)."""

    def __init__(self, profiler: SlotStatsProfiler, owns: Callable[[str], bool] | None = None) -> None:
        self._profiler = profiler
        self._owns = owns or (lambda _name: True)

    def write(self, out: FamilySet) -> None:
        profiles, errors, durations = self._profiler.snapshot()
        members = {target.name: target for target in self._profiler.members}
        for name, result in sorted(profiles.items()):
            if self._owns(name):
                _add_node(name, result, out)
        groups: dict[str, dict[str, SlotProfile]] = {}
        for name, result in profiles.items():
            target = members.get(name)
            group = target.replication_group if target is not None else ""
            # as on elasticache_shard_member_info: in a named group its slot ranges, which a failover keeps
            by_slots = shard_name(frozenset(result.counters.slots), result.node_id) if group else result.node_id
            shard = (target.shard if target is not None else "") or by_slots
            kept = groups.setdefault(group, {}).get(shard)
            if kept is None or kept.read_at < result.read_at:  # just after a failover, the new primary's read is the later
                groups[group][shard] = result
        for group, shards in sorted(groups.items()):
            # a named group on the shard that owns its name; the nodes of no named group, where they are served
            if self._owns(group) if group else any(self._owns(name) for name, result in profiles.items() if result in shards.values()):
                add_shard_shares(group, shards, out)
        add_failures(out, "elasticache_exporter_slot_stats_errors_total", "Failed reads of CLUSTER SLOT-STATS, by kind.", errors)
        for name, seconds in sorted(durations.items()):
            if not self._owns(name):
                continue
            out.add(
                "elasticache_exporter_slot_stats_read_duration_seconds",
                GAUGE,
                "How long the last CLUSTER SLOT-STATS read of the node took.",
                {"instance": name},
                seconds,
            )


def _add_node(name: str, result: SlotProfile, out: FamilySet) -> None:
    base = instance_labels(name)
    for stat in result.top:
        labels = {**base, "slot": str(stat.slot)}
        out.add("redis_cluster_slot_keys", GAUGE, "Keys in the slot (the node's top slots by CPU and by keys).", labels, stat.keys)
        if stat.cpu_usec is not None:
            out.add(
                "redis_cluster_slot_cpu_seconds_total",
                COUNTER,
                "CPU the slot's commands took (cluster-slot-stats-enabled).",
                labels,
                stat.cpu_usec / 1e6,
            )
        for direction, value in (("in", stat.bytes_in), ("out", stat.bytes_out)):
            if value is not None:
                out.add(
                    "redis_cluster_slot_network_bytes_total",
                    COUNTER,
                    "Network bytes of the slot's commands (cluster-slot-stats-enabled).",
                    {**labels, "direction": direction},
                    value,
                )
    out.add("redis_cluster_node_slots", GAUGE, "Slots the primary serves.", base, result.slot_count)
    out.add("redis_cluster_node_slots_keys", GAUGE, "Keys over all the primary's slots.", base, result.keys)
    if result.cpu_usec is not None:
        out.add(
            "redis_cluster_node_slots_cpu_seconds_total",
            COUNTER,
            "CPU of the primary's slots since the exporter's first read, counted from each slot's increase (never falls when a slot moves).",
            base,
            result.cpu_usec / 1e6,
        )
    for direction, value in (("in", result.bytes_in), ("out", result.bytes_out)):
        if value is not None:
            out.add(
                "redis_cluster_node_slots_network_bytes_total",
                COUNTER,
                "Network bytes of the primary's slots since the exporter's first read, counted from each slot's increase.",
                {**base, "direction": direction},
                value,
            )


def load(result: SlotProfile, resource: str) -> float | None:
    """A shard's load of a resource: CPU seconds and network bytes per second since the read before, keys now."""
    if resource == "cpu":
        return result.cpu_per_second
    if resource == "network":
        return result.bytes_per_second
    return float(result.keys)


def add_shard_shares(group: str, shards: dict[str, SlotProfile], out: FamilySet) -> None:
    """Per resource that every shard of the group has a figure of: each shard's share of the group's load (0 to 1), its
    load over the mean shard's (0 to the number of shards; 1: its fair part) and the group's skew, the busiest shard's
    load over the mean shard's (1: even, up to the number of shards: two shards can be skewed up to 2)."""
    for resource in RESOURCES:
        loads = {shard: load(result, resource) for shard, result in shards.items()}
        if len(loads) < 2 or any(value is None for value in loads.values()):
            continue
        values = {shard: float(value or 0.0) for shard, value in loads.items()}
        total = sum(values.values())
        if total <= 0:
            continue
        mean = total / len(values)
        for shard, value in sorted(values.items()):
            labels = {"replication_group": group, "shard": shard, "resource": resource}
            out.add(
                "elasticache_cluster_shard_share_ratio",
                GAUGE,
                "The shard's share of its replication group's load (cpu, network: since the last read; keys: now).",
                labels,
                value / total,
            )
            out.add(
                "elasticache_cluster_shard_load_over_mean",
                GAUGE,
                "The shard's load over the mean shard's load of its replication group (1: its fair part; up to the number of shards).",
                labels,
                value / mean,
            )
        out.add(
            "elasticache_cluster_load_skew",
            GAUGE,
            "The replication group's busiest shard's load over the mean shard's load (1: even; up to the number of shards).",
            {"replication_group": group, "resource": resource},
            max(values.values()) / mean,
        )
