"""What would bring a cluster's shard skew under a limit, from the measured load of each slot. Pure: it changes nothing.

Self-managed clusters can move chosen slots: the plan moves the heaviest slots of the hottest shard to the coldest, the
fewest moves that bring every shard under ``max_skew`` times the mean. ElastiCache cannot move chosen slots: its
``ModifyReplicationGroupShardConfiguration`` spreads the slots evenly by count (the same shard count: a rebalance; a
larger one: more shards), so the plan says which of these helps, computed as an even split of the slot range. A slot
that carries most of its shard's load on its own is named: moving it moves the problem.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.common.records import record

SLOTS = 16384
DOMINANT_SHARE = 0.5  # a slot with more than this share of its shard's load is a key-design problem, not a placement one
MAX_MOVES = 2000


@record(frozen=True)
class Shard:
    node_id: str
    address: str  # host:port of its primary
    slots: tuple[int, ...]


@record(frozen=True)
class Move:
    first: int
    last: int  # a range of consecutive slots moved together
    source: str  # node id
    target: str
    load: float


@record(frozen=True)
class Plan:
    resource: str
    max_skew: float
    skew_before: float
    skew_after: float
    moves: tuple[Move, ...]
    dominant: tuple[tuple[int, str, float], ...]  # (slot, node id, its share of that shard's load)
    rebalance_skew: float  # an even split over the same shards (what ElastiCache's rebalance does)
    more_shards: int | None  # the fewest shards to add whose even split keeps every shard under the limit; None: none up to 4x
    more_shards_peak: float | None  # then the busiest shard's load over today's mean shard load


def skew(loads: Mapping[str, float]) -> float:
    """The largest over the mean (1: even; 0 for no load)."""
    total = sum(loads.values())
    return max(loads.values()) / (total / len(loads)) if loads and total > 0 else 0.0


def even_split(slot_load: Mapping[int, float], shards: int) -> list[float]:
    """The loads of ``shards`` consecutive ranges of (nearly) equal slot counts, as a cluster creates or rebalances them."""
    return [sum(slot_load.get(slot, 0.0) for slot in range(i * SLOTS // shards, (i + 1) * SLOTS // shards)) for i in range(shards)]


def even_split_skew(slot_load: Mapping[int, float], shards: int) -> float:
    return skew({str(index): load for index, load in enumerate(even_split(slot_load, shards))})


def plan(shards: list[Shard], slot_load: Mapping[int, float], resource: str, max_skew: float) -> Plan:
    owner = {slot: shard.node_id for shard in shards for slot in shard.slots}
    loads = {shard.node_id: sum(slot_load.get(slot, 0.0) for slot in shard.slots) for shard in shards}
    before = skew(loads)
    dominant = tuple(
        (slot, owner[slot], slot_load[slot] / loads[owner[slot]])
        for slot in sorted(slot_load)
        if slot in owner and loads[owner[slot]] > 0 and slot_load[slot] / loads[owner[slot]] > DOMINANT_SHARE
    )
    moves = _moves(shards, slot_load, loads, max_skew, {slot for slot, _, _ in dominant})
    # more shards: the fewest whose even split keeps the busiest under max_skew times today's mean shard load
    mean = sum(loads.values()) / len(loads) if loads else 0.0
    more, more_peak = None, None
    for extra in range(1, 3 * len(shards) + 1):
        peak = max(even_split(slot_load, len(shards) + extra)) / mean if mean else 0.0
        if peak <= max_skew:
            more, more_peak = extra, peak
            break
    after_moves = dict(loads)
    for move in moves:
        after_moves[move.source] -= move.load
        after_moves[move.target] += move.load
    return Plan(
        resource, max_skew, before, skew(after_moves), tuple(_ranges(moves)), dominant, even_split_skew(slot_load, len(shards)), more, more_peak
    )


def _moves(shards: list[Shard], slot_load: Mapping[int, float], loads: dict[str, float], max_skew: float, pinned: set[int]) -> list[Move]:
    """Heaviest movable slots of the hottest shard to the coldest, until every shard is under the limit: largest first,
    so the fewest moves; a slot moves only where it leaves the coldest shard below where the hottest was."""
    loads = dict(loads)
    mean = sum(loads.values()) / len(loads) if loads else 0.0
    limit = max_skew * mean
    slots_of = {shard.node_id: sorted((s for s in shard.slots if s not in pinned), key=lambda s: -slot_load.get(s, 0.0)) for shard in shards}
    moves: list[Move] = []
    while mean > 0 and len(moves) < MAX_MOVES:
        hot = max(loads, key=lambda node: loads[node])
        if loads[hot] <= limit:
            break
        cold = min(loads, key=lambda node: loads[node])
        slot = next((s for s in slots_of[hot] if 0 < slot_load.get(s, 0.0) < loads[hot] - loads[cold]), None)
        if slot is None:
            break
        slots_of[hot].remove(slot)
        loads[hot] -= slot_load[slot]
        loads[cold] += slot_load[slot]
        moves.append(Move(slot, slot, hot, cold, slot_load[slot]))
    return moves


def _ranges(moves: list[Move]) -> list[Move]:
    """Moves of consecutive slots between the same shards, joined."""
    joined: list[Move] = []
    for move in sorted(moves, key=lambda m: (m.source, m.target, m.first)):
        last = joined[-1] if joined else None
        if last is not None and (last.source, last.target) == (move.source, move.target) and last.last + 1 == move.first:
            joined[-1] = Move(last.first, move.last, last.source, last.target, last.load + move.load)
        else:
            joined.append(move)
    return joined


def migrate_commands(move: Move, addresses: Mapping[str, str], cli: str = "redis-cli") -> list[str]:
    """The shell commands that move one range of slots with its keys, as ``--cluster reshard`` does slot by slot."""
    source_host, source_port = addresses[move.source].rsplit(":", 1)
    target_host, target_port = addresses[move.target].rsplit(":", 1)
    src, dst = f"{cli} -h {source_host} -p {source_port}", f"{cli} -h {target_host} -p {target_port}"
    return [
        f"for slot in $(seq {move.first} {move.last}); do",
        f"  {dst} CLUSTER SETSLOT $slot IMPORTING {move.source}",
        f"  {src} CLUSTER SETSLOT $slot MIGRATING {move.target}",
        f'  while keys=$({src} CLUSTER GETKEYSINSLOT $slot 100) && [ -n "$keys" ]; do',
        f'    {src} MIGRATE {target_host} {target_port} "" 0 5000 KEYS $keys',
        "  done",
        f"  {dst} CLUSTER SETSLOT $slot NODE {move.target}",
        f"  {src} CLUSTER SETSLOT $slot NODE {move.target}",
        "done",
    ]
