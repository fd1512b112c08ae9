"""What would bring a cluster's shard skew under a limit, from the measured load of each slot. Pure: it changes nothing.

Self-managed clusters can move chosen slots: the plan moves the heaviest slots of the hottest shard to the coldest, the
fewest moves that bring every shard under ``max_skew`` times the mean. ElastiCache cannot move chosen slots: its
``ModifyReplicationGroupShardConfiguration`` spreads the slots evenly by count (the same shard count: a rebalance; a
larger one: more shards), so the plan says which of these helps, computed as an even split of the slot range. A slot
that carries most of its shard's load on its own is named: moving it moves the problem.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping

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


ELASTICACHE_SUFFIXES = (".cache.amazonaws.com", ".cache.amazonaws.com.cn")


def on_elasticache(names: Iterable[str]) -> bool:
    """Whether any of these host names (the target's, and every node's address and announced hostname) is an
    ElastiCache endpoint's: there, chosen slots cannot be moved."""
    return any(name.strip().rstrip(".").lower().endswith(ELASTICACHE_SUFFIXES) for name in names if name)


@record(frozen=True)
class CliOptions:
    """How ``redis-cli`` reaches the cluster, as the plan's own connection did. The password is never part of it: the
    script reads it from ``REDISCLI_AUTH``, where redis-cli reads it too."""

    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None
    insecure: bool = False
    user: str | None = None
    password: bool = False  # whether the nodes want one

    def arguments(self) -> list[str]:
        args = ["redis-cli"]
        if self.tls:
            args.append("--tls")
            for flag, value in (("--cacert", self.ca_file), ("--cert", self.cert_file), ("--key", self.key_file), ("--sni", self.server_name)):
                if value:
                    args += [flag, value]
            if self.insecure:
                args.append("--insecure")
        if self.user:
            args += ["--user", self.user]
        return args


BATCH = 100  # keys per MIGRATE, as redis-cli --cluster reshard's default pipeline

# The part of the script that is the same for every plan: one slot moved with its keys, as redis-cli --cluster reshard
# moves it. Keys are read in redis-cli's quoted form (--no-raw: any byte, a newline too, survives) and handed back on
# redis-cli's standard input, so neither a key nor the password is ever split by the shell or shown on a command line.
_MOVE_SLOT = r"""
fail() { echo "$*" >&2; exit 1; }

quoted() {  # a value as redis-cli reads it between double quotes
  local value=${1//\\/\\\\}
  value=${value//\"/\\\"}
  value=${value//$'\n'/\\n}
  value=${value//$'\r'/\\r}
  printf '"%s"' "$value"
}

ok() {  # a command that must answer OK
  local reply
  reply=$("${cli[@]}" "$@") || fail "redis-cli $*: no answer"
  [ "$reply" = OK ] || fail "$* answered: $reply"
}

keys_in() {  # host port slot
  local count
  count=$("${cli[@]}" -h "$1" -p "$2" CLUSTER COUNTKEYSINSLOT "$3") || fail "$1:$2: no answer"
  [[ $count =~ ^[0-9]+$ ]] || fail "$1:$2 CLUSTER COUNTKEYSINSLOT $3 answered: $count"
  echo "$count"
}

serves() {  # host port slot: whether that node serves the slot (its own line of CLUSTER NODES)
  local nodes
  nodes=$("${cli[@]}" -h "$1" -p "$2" CLUSTER NODES) || fail "$1:$2: no answer to CLUSTER NODES"
  awk -v slot="$3" '$3 ~ /myself/ {
    for (i = 9; i <= NF; i++) { if ($i ~ /^\[/) continue; n = split($i, r, "-"); if (slot >= r[1] && slot <= r[n]) found = 1 }
  } END { exit !found }' <<<"$nodes"
}

move_slot() {  # slot source-host source-port source-id target-host target-port target-id
  local slot=$1 src_host=$2 src_port=$3 src_id=$4 dst_host=$5 dst_port=$6 dst_id=$7
  local left now keys command reply
  if serves "$dst_host" "$dst_port" "$slot"; then
    echo "slot $slot: already on $dst_host:$dst_port"
    return
  fi
  ok -h "$dst_host" -p "$dst_port" CLUSTER SETSLOT "$slot" IMPORTING "$src_id"
  ok -h "$src_host" -p "$src_port" CLUSTER SETSLOT "$slot" MIGRATING "$dst_id"
  left=$(keys_in "$src_host" "$src_port" "$slot")
  while [ "$left" -gt 0 ]; do
    keys=$("${cli[@]}" --no-raw -h "$src_host" -p "$src_port" CLUSTER GETKEYSINSLOT "$slot" BATCH | sed -n 's/^ *[0-9][0-9]*) //p' | tr '\n' ' ') ||
      fail "$src_host:$src_port: no answer to CLUSTER GETKEYSINSLOT $slot"
    reply=""
    if [ -n "$keys" ]; then
      command=$(printf 'MIGRATE %s %s "" 0 5000%s KEYS %s' "$dst_host" "$dst_port" "$migrate_auth" "$keys")
      reply=$(printf '%s\n' "$command" | "${cli[@]}" -h "$src_host" -p "$src_port") || fail "$src_host:$src_port: no answer to MIGRATE"
    fi
    now=$(keys_in "$src_host" "$src_port" "$slot")
    if [ "$now" -ge "$left" ]; then
      echo "slot $slot: $now key(s) did not move from $src_host:$src_port to $dst_host:$dst_port; MIGRATE answered: ${reply:-nothing}" >&2
      echo "the slot stays MIGRATING there and IMPORTING on the target: fix the cause (BUSYKEY: the target has a key of that name)" >&2
      echo "and run this again (slots already moved are skipped), or undo with CLUSTER SETSLOT $slot STABLE on both nodes" >&2
      exit 1
    fi
    left=$now
  done
  ok -h "$dst_host" -p "$dst_port" CLUSTER SETSLOT "$slot" NODE "$dst_id"
  ok -h "$src_host" -p "$src_port" CLUSTER SETSLOT "$slot" NODE "$dst_id"
}
""".replace("BATCH", str(BATCH))


def migrate_script(moves: Iterable[Move], addresses: Mapping[str, str], options: CliOptions) -> str:
    """A bash script that moves each range of slots with its keys, slot by slot as ``redis-cli --cluster reshard`` does,
    and stops with a message at the first pass that moves no key; run again, it skips the slots already moved."""
    moves = list(moves)
    lines = [
        "#!/usr/bin/env bash",
        f"# Moves {len(moves)} range(s) of slots with their keys (elasticache-exporter cluster plan).",
    ]
    if options.password:
        lines.append("# The password is read from REDISCLI_AUTH, never from a command line: export REDISCLI_AUTH=... first.")
    lines += ["set -euo pipefail", f"cli=({' '.join(shlex.quote(arg) for arg in options.arguments())})"]
    lines += _MOVE_SLOT.strip("\n").splitlines()
    if options.password:
        lines.append(': "${REDISCLI_AUTH:?export REDISCLI_AUTH with the password of the nodes first}"')
        who = f"AUTH2 $(quoted {shlex.quote(options.user)}) " if options.user else "AUTH "
        lines.append(f'migrate_auth=" {who}$(quoted "$REDISCLI_AUTH")"')
    else:
        lines.append('migrate_auth=""')
    for move in moves:
        source_host, source_port = addresses[move.source].rsplit(":", 1)
        target_host, target_port = addresses[move.target].rsplit(":", 1)
        ends = (source_host, source_port, move.source, target_host, target_port, move.target)
        lines += [
            f"echo 'slots {move.first}-{move.last}: {addresses[move.source]} -> {addresses[move.target]}'",
            f"for slot in $(seq {move.first} {move.last}); do",
            f'  move_slot "$slot" {" ".join(shlex.quote(value) for value in ends)}',
            "done",
        ]
    lines.append("echo 'every move done'")
    return "\n".join(lines) + "\n"
