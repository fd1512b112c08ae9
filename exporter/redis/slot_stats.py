"""Which slots carry a cluster node's load: ``CLUSTER SLOT-STATS`` (Valkey 8.0+, Redis 8.2+), read in the background
from each primary, never inside a scrape.

``key-count`` is always there; ``cpu-usec`` and ``network-bytes-in``/``-out`` only where ``cluster-slot-stats-enabled``
is on. The reply for a node holding every slot is about 1.5 MB, so only the top slots (by CPU and by keys) are kept, with
the node's totals over all its slots.
"""

from __future__ import annotations

import time
from typing import Any

from exporter.common.records import record, replace

from .node import RedisNode
from .node_loop import NodeProfiler, Targets

GATE = "cluster|slot-stats"  # asked by COMMAND INFO on each connect: a node without it is never sent the command
ALL_SLOTS = ("CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", "16383")


@record(frozen=True)
class SlotStatsConfig:
    enabled: bool = False
    interval: float = 60.0
    top: int = 20  # slots served per node by CPU and by keys: bounded cardinality


@record(frozen=True)
class SlotStat:
    slot: int
    keys: int
    cpu_usec: int | None = None  # None: cluster-slot-stats-enabled is off
    bytes_in: int | None = None
    bytes_out: int | None = None


@record(frozen=True)
class SlotProfile:
    """A primary's slots: the top ones, its totals over all of them, and the rates since the read before."""

    node_id: str  # the primary's cluster node id: its shard, where nothing else names one
    slot_count: int
    keys: int
    cpu_usec: int | None
    bytes_in: int | None
    bytes_out: int | None
    top: tuple[SlotStat, ...]  # by CPU and by keys, each slot once, by slot number
    read_at: float
    cpu_per_second: float | None = None  # since the previous read of this node (None on the first)
    bytes_per_second: float | None = None  # in and out


def parse_slot_stats(reply: Any) -> list[SlotStat]:
    """``[[slot, [name, value, ...]], ...]`` (RESP2) into records; an entry of another shape is skipped."""
    stats = []
    for entry in reply if isinstance(reply, list) else []:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int) and isinstance(entry[1], list)):
            continue
        fields = entry[1]
        values = {
            (name.decode() if isinstance(name, bytes) else str(name)): value
            for name, value in zip(fields[::2], fields[1::2], strict=False)
            if isinstance(value, int)
        }
        stats.append(
            SlotStat(entry[0], values.get("key-count", 0), values.get("cpu-usec"), values.get("network-bytes-in"), values.get("network-bytes-out"))
        )
    return stats


def _total(stats: list[SlotStat], field: str) -> int | None:
    values = [getattr(stat, field) for stat in stats]
    return None if not values or any(value is None for value in values) else sum(values)


def profile(stats: list[SlotStat], node_id: str, top: int, read_at: float) -> SlotProfile:
    by_cpu = sorted(stats, key=lambda s: (-(s.cpu_usec or 0), s.slot))[:top] if _total(stats, "cpu_usec") is not None else []
    by_keys = sorted(stats, key=lambda s: (-s.keys, s.slot))[:top]
    chosen = {stat.slot: stat for stat in (*by_cpu, *by_keys)}
    return SlotProfile(
        node_id=node_id,
        slot_count=len(stats),
        keys=sum(stat.keys for stat in stats),
        cpu_usec=_total(stats, "cpu_usec"),
        bytes_in=_total(stats, "bytes_in"),
        bytes_out=_total(stats, "bytes_out"),
        top=tuple(chosen[slot] for slot in sorted(chosen)),
        read_at=read_at,
    )


def with_rates(previous: SlotProfile | None, current: SlotProfile) -> SlotProfile:
    """The current profile with its CPU and network rates since ``previous`` (the same node, counters not reset)."""
    if previous is None or previous.node_id != current.node_id or current.read_at <= previous.read_at:
        return current
    elapsed = current.read_at - previous.read_at
    cpu = None
    if current.cpu_usec is not None and previous.cpu_usec is not None and current.cpu_usec >= previous.cpu_usec:
        cpu = (current.cpu_usec - previous.cpu_usec) / 1e6 / elapsed
    network = None
    now_bytes = None if current.bytes_in is None or current.bytes_out is None else current.bytes_in + current.bytes_out
    then_bytes = None if previous.bytes_in is None or previous.bytes_out is None else previous.bytes_in + previous.bytes_out
    if now_bytes is not None and then_bytes is not None and now_bytes >= then_bytes:
        network = (now_bytes - then_bytes) / elapsed
    return replace(current, cpu_per_second=cpu, bytes_per_second=network)


class SlotStatsProfiler(NodeProfiler):
    """Reads CLUSTER SLOT-STATS of every primary among the targets, from one background thread."""

    what = "cluster: SLOT-STATS"

    def __init__(self, config: SlotStatsConfig, targets: Targets, max_reply_bytes: int) -> None:
        super().__init__("slot-stats", targets, config.interval, max_reply_bytes=max(max_reply_bytes, 8 * 1024 * 1024))
        self.config = config

    def read(self, node: RedisNode) -> SlotProfile | None:
        cluster, replication = node.call_many([("INFO", "cluster"), ("INFO", "replication")])
        if not (isinstance(cluster, bytes) and b"cluster_enabled:1" in cluster and isinstance(replication, bytes) and b"role:master" in replication):
            return None  # not a cluster's primary: nothing is asked that would draw an error reply
        reply = node.call_if_allowed(GATE, ALL_SLOTS)
        node_id = node.call_if_allowed("cluster", ("CLUSTER", "MYID"))
        if reply is None or not isinstance(node_id, bytes):
            return None
        return profile(parse_slot_stats(reply), node_id.decode(), self.config.top, time.time())

    def combine(self, previous: Any, result: Any) -> Any:
        return with_rates(previous, result)
