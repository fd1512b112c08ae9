"""Which slots carry a cluster node's load: ``CLUSTER SLOT-STATS`` (Valkey 8.0+, Redis 8.2+), read in the background
from each primary, never inside a scrape.

``key-count`` is always there; ``cpu-usec`` and ``network-bytes-in``/``-out`` only where ``cluster-slot-stats-enabled``
is on. The reply for a node holding every slot is about 1.5 MB: only the top slots (by CPU and by keys) are served,
with the node's totals; every slot's counters are kept until the next read, which counts each slot's increase from them.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterable, Sequence
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
    top: int = 20  # slots served per node by CPU and by keys: bounded cardinality (at most TOP_MAX)


TOP_MAX = 100  # 2 x top slots a primary (by CPU, by keys), 4 series each (keys, CPU, bytes in and out): at most 800


@record(frozen=True)
class SlotStat:
    slot: int
    keys: int
    cpu_usec: int | None = None  # None: cluster-slot-stats-enabled is off
    bytes_in: int | None = None
    bytes_out: int | None = None


_COUNTERS = ("cpu_usec", "bytes_in", "bytes_out")


@record(frozen=True)
class SlotCounters:
    """Every slot's CPU and network counters as one read found them, in arrays (-1: the counter is missing): a primary
    may hold all 16,384 slots: about 0.5 MB here, 4 MB as records."""

    slots: array[int]
    cpu_usec: array[int]
    bytes_in: array[int]
    bytes_out: array[int]

    @classmethod
    def of(cls, stats: Sequence[SlotStat]) -> SlotCounters:
        def column(field: str) -> array[int]:
            return array("q", (-1 if (value := getattr(stat, field)) is None else value for stat in stats))

        return cls(array("H", (stat.slot for stat in stats)), column("cpu_usec"), column("bytes_in"), column("bytes_out"))


NO_COUNTERS = SlotCounters(array("H"), array("q"), array("q"), array("q"))


@record(frozen=True)
class SlotProfile:
    """A primary's slots: the top ones, every slot's counters as read, and what the exporter counts from them.

    The node's CPU and network totals are not Valkey's sums over the slots (those fall when a slot with load moves
    away, and a slot's stats start afresh on the node that gains it): they are counted by the exporter from each slot's
    increase between two reads of the same node, from zero at its first read, so they only ever go up."""

    node_id: str  # the primary's cluster node id: its shard, where nothing else names one
    slot_count: int
    keys: int
    top: tuple[SlotStat, ...]  # by CPU and by keys, each slot once, by slot number
    read_at: float  # on the profiler's monotonic clock: only differences between reads mean anything
    counters: SlotCounters = NO_COUNTERS  # every slot's, as read: the next read's increases are counted against them
    cpu_usec: int | None = None  # counted since the exporter's first read of the node; None without cpu-usec
    bytes_in: int | None = None
    bytes_out: int | None = None
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


def _measured(stats: Sequence[SlotStat], field: str) -> bool:
    """Whether every slot has the counter (cluster-slot-stats-enabled)."""
    return all(getattr(stat, field) is not None for stat in stats)


def profile(stats: list[SlotStat], node_id: str, top: int, read_at: float) -> SlotProfile:
    """A first read of a node: its top slots, and counted totals that start at zero (:func:`with_rates` adds to them)."""
    measures_cpu = _measured(stats, "cpu_usec")
    by_cpu = sorted(stats, key=lambda s: (-(s.cpu_usec or 0), s.slot))[:top] if measures_cpu else []
    by_keys = sorted(stats, key=lambda s: (-s.keys, s.slot))[:top]
    chosen = {stat.slot: stat for stat in (*by_cpu, *by_keys)}
    return SlotProfile(
        node_id=node_id,
        slot_count=len(stats),
        keys=sum(stat.keys for stat in stats),
        top=tuple(chosen[slot] for slot in sorted(chosen)),
        read_at=read_at,
        counters=SlotCounters.of(stats),
        cpu_usec=0 if measures_cpu else None,
        bytes_in=0 if _measured(stats, "bytes_in") else None,
        bytes_out=0 if _measured(stats, "bytes_out") else None,
    )


def increase(then: SlotCounters, now: SlotCounters, field: str) -> int | None:
    """How much a counter of a node's slots went up between two reads of the node.

    A slot the node did not have before, or whose counter went down, is counted from zero: Valkey starts a slot's
    stats afresh when a node gains the slot, so all of it came since. A slot that left the node adds nothing (it is
    counted on the node that gained it). None where the latest read lacks the counter."""
    values = getattr(now, field)
    if min(values, default=0) < 0:
        return None
    earlier = getattr(then, field)
    if then.slots == now.slots:  # the slots of the read before, in the same order: the usual case
        pairs: Iterable[tuple[int, int]] = zip(earlier, values, strict=True)
    else:
        by_slot = dict(zip(then.slots, earlier, strict=True))
        pairs = ((by_slot.get(slot, -1), value) for slot, value in zip(now.slots, values, strict=True))
    return sum(value - before if 0 <= before <= value else value for before, value in pairs)


def _added(total: int | None, amount: int | None) -> int | None:
    return None if amount is None else (total or 0) + amount


def with_rates(previous: SlotProfile | None, current: SlotProfile) -> SlotProfile:
    """The current read with the exporter's counted totals and the rates since ``previous``, from each slot's increase.

    Another node id (the target now names another node), or no time passed, starts afresh as a first read does."""
    if previous is None or previous.node_id != current.node_id or current.read_at <= previous.read_at:
        return current
    elapsed = current.read_at - previous.read_at
    cpu, bytes_in, bytes_out = (increase(previous.counters, current.counters, field) for field in _COUNTERS)
    return replace(
        current,
        cpu_usec=_added(previous.cpu_usec, cpu),
        bytes_in=_added(previous.bytes_in, bytes_in),
        bytes_out=_added(previous.bytes_out, bytes_out),
        cpu_per_second=None if cpu is None else cpu / 1e6 / elapsed,
        bytes_per_second=None if bytes_in is None or bytes_out is None else (bytes_in + bytes_out) / elapsed,
    )


class SlotStatsProfiler(NodeProfiler):
    """Reads CLUSTER SLOT-STATS of every primary among the targets, from one background thread."""

    what = "cluster: SLOT-STATS"

    def __init__(self, config: SlotStatsConfig, targets: Targets, max_reply_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__("slot-stats", targets, config.interval, max_reply_bytes=max(max_reply_bytes, 8 * 1024 * 1024))
        self.config = config
        self.clock = clock  # what the rates between reads are measured by

    def read(self, node: RedisNode) -> SlotProfile | None:
        cluster, replication = node.call_many([("INFO", "cluster"), ("INFO", "replication")])
        if not (isinstance(cluster, bytes) and b"cluster_enabled:1" in cluster and isinstance(replication, bytes) and b"role:master" in replication):
            return None  # not a cluster's primary: nothing is asked that would draw an error reply
        reply = node.call_if_allowed(GATE, ALL_SLOTS)
        node_id = node.call_if_allowed("cluster", ("CLUSTER", "MYID"))
        if reply is None or not isinstance(node_id, bytes):
            return None
        return profile(parse_slot_stats(reply), node_id.decode(), self.config.top, self.clock())

    def combine(self, previous: Any, result: Any) -> Any:
        return with_rates(previous, result)
