"""``cluster plan``: what would bring a cluster's shard skew under a limit, from each primary's CLUSTER SLOT-STATS.
It reads and prints; it changes nothing."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from .output import emit

ELASTICACHE_SUFFIX = ".cache.amazonaws.com"


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    plan = actions.add_parser(
        "plan",
        help="read the slot stats of every primary and say what would bring the shard skew under --max-skew (changes nothing)",
        allow_abbrev=False,
    )
    plan.add_argument(
        "--target", required=True, help="a node of the cluster, redis://host:port or rediss://… (password from ELASTICACHE_EXPORTER_REDIS_PASSWORD)"
    )
    plan.add_argument("--resource", choices=("cpu", "network", "keys"), default="cpu", help="the load to even out (default cpu)")
    plan.add_argument("--max-skew", type=float, default=1.2, help="the largest shard over the mean to reach (default 1.2)")
    plan.add_argument(
        "--interval", default="10s", help="cpu and network: the load between two reads this far apart; 0: since the counters started (default 10s)"
    )
    plan.add_argument("--format", dest="output_format", choices=("text", "json"), default="text")
    plan.add_argument("--out", metavar="FILE", help="write here instead of standard output")


def run_cluster(args: argparse.Namespace, environ: Mapping[str, str], sleep: Callable[[float], None] = time.sleep) -> int:
    from exporter.common.errors import UsageError
    from exporter.config import parse_duration
    from exporter.redis.cluster_plan import Shard, plan

    if not args.max_skew >= 1.0:
        raise UsageError(f"--max-skew: the largest shard over the mean is at least 1, got {args.max_skew}")
    interval = 0.0 if args.interval in ("0", "0s") else parse_duration(args.interval)
    if interval is None:
        raise UsageError(f"--interval: not a duration such as 10s, got {args.interval!r}")
    reader = _Reader(args.target, environ)
    try:
        primaries = reader.primaries()
        first = reader.slot_loads(primaries, args.resource)
        loads = first
        if args.resource != "keys" and interval > 0:
            sleep(interval)
            second = reader.slot_loads(primaries, args.resource)
            loads = {slot: max(0.0, value - first.get(slot, 0.0)) / interval for slot, value in second.items()}
    finally:
        reader.close()
    shards = [Shard(node_id, address, tuple(sorted(slots))) for node_id, address, slots in primaries]
    result = plan(shards, loads, args.resource, args.max_skew)
    elasticache = any(address.split(":")[0].endswith(ELASTICACHE_SUFFIX) for _, address, _ in primaries)
    addresses = {shard.node_id: shard.address for shard in shards}
    text = json.dumps(_as_dict(result, addresses), indent=2) + "\n" if args.output_format == "json" else _text(result, addresses, elasticache)
    emit(text, args.out)
    return 0


class _Reader:
    """The cluster's primaries from the target's CLUSTER NODES, and each primary's slot stats on a connection of its own."""

    def __init__(self, target: str, environ: Mapping[str, str]) -> None:
        from exporter.common.errors import UsageError
        from exporter.common.secrets import Secret
        from exporter.redis.addresses import AddressError, parse_address
        from exporter.redis.settings import Credentials

        try:
            parsed = parse_address(target)
        except AddressError as err:
            raise UsageError(f"--target: {err}") from err
        password = parsed.password or environ.get("ELASTICACHE_EXPORTER_REDIS_PASSWORD")
        self.endpoint = parsed.endpoint
        secret = Secret(value=password, source="the cluster plan's password") if password else None
        self.credentials = Credentials(username=parsed.endpoint.username, password=secret, timeout=10.0)
        self._nodes: dict[str, Any] = {}

    def _node(self, address: str) -> Any:
        from exporter.redis.addresses import Endpoint
        from exporter.redis.node import RedisNode

        if address not in self._nodes:
            host, port = address.rsplit(":", 1)
            endpoint = Endpoint(host, int(port), self.endpoint.tls, 0, self.endpoint.username)
            self._nodes[address] = RedisNode(endpoint, self.credentials, max_reply_bytes=8 * 1024 * 1024)
        return self._nodes[address]

    def primaries(self) -> list[tuple[str, str, frozenset[int]]]:
        from exporter.common.errors import UsageError
        from exporter.redis.slots import primaries

        reply = self._node(self.endpoint.host_port).call_if_allowed("cluster", ("CLUSTER", "NODES"))
        if not isinstance(reply, bytes):
            raise UsageError(f"--target: {self.endpoint.host_port} answers no CLUSTER NODES: not a cluster node, or CLUSTER is renamed away")
        found = primaries(reply.decode())
        if not found:
            raise UsageError(f"--target: the cluster of {self.endpoint.host_port} has no primary serving slots")
        return found

    def slot_loads(self, primaries: list[tuple[str, str, frozenset[int]]], resource: str) -> dict[int, float]:
        from exporter.common.errors import UsageError
        from exporter.redis.slot_stats import ALL_SLOTS, GATE, parse_slot_stats

        loads: dict[int, float] = {}
        for _, address, slots in primaries:
            reply = self._node(address).call_if_allowed(GATE, ALL_SLOTS)
            if reply is None:
                raise UsageError(f"{address} has no CLUSTER SLOT-STATS (Valkey 8.0+, Redis 8.2+), or the user may not run it")
            for stat in parse_slot_stats(reply):
                if stat.slot not in slots:
                    continue
                value = stat.keys if resource == "keys" else stat.cpu_usec if resource == "cpu" else _bytes(stat.bytes_in, stat.bytes_out)
                if value is None:
                    raise UsageError(f"{address}: cluster-slot-stats-enabled is off, so there is no {resource} per slot (--resource keys works)")
                loads[stat.slot] = float(value)
        return loads

    def close(self) -> None:
        for node in self._nodes.values():
            node.close()


def _bytes(received: int | None, sent: int | None) -> int | None:
    return None if received is None or sent is None else received + sent


def _as_dict(result: Any, addresses: Mapping[str, str]) -> dict[str, Any]:
    return {
        "resource": result.resource,
        "max_skew": result.max_skew,
        "skew_before": round(result.skew_before, 3),
        "skew_after_moves": round(result.skew_after, 3),
        "moves": [
            {
                "slots": [m.first, m.last],
                "from": m.source,
                "from_address": addresses[m.source],
                "to": m.target,
                "to_address": addresses[m.target],
                "load": m.load,
            }
            for m in result.moves
        ],
        "dominant_slots": [{"slot": slot, "node": node, "share_of_its_shard": round(share, 3)} for slot, node, share in result.dominant],
        "elasticache": {
            "even_rebalance_skew": round(result.rebalance_skew, 3),
            "shards_to_add": result.more_shards,
            "busiest_shard_with_them_over_todays_mean": None if result.more_shards_peak is None else round(result.more_shards_peak, 3),
        },
    }


def _text(result: Any, addresses: Mapping[str, str], elasticache: bool) -> str:
    from exporter.redis.cluster_plan import migrate_commands

    lines = [f"{result.resource} skew now {result.skew_before:.2f} (largest shard over the mean; limit {result.max_skew:g})"]
    for slot, node, share in result.dominant:
        lines.append(
            f"slot {slot} carries {share:.0%} of its shard's load ({addresses[node]}): one key or hash tag; moving it moves the problem, "
            "fix the key design (split the key, narrow the hash tag)"
        )
    if result.skew_before <= result.max_skew:
        lines.append("already under the limit: nothing to do")
    elif elasticache:
        lines += _elasticache_advice(result)
    elif not result.moves:
        lines.append("no slot move helps: the load sits in slots that cannot be split further")
    else:
        lines.append(f"{len(result.moves)} move(s) bring the skew to {result.skew_after:.2f}:")
        for move in result.moves:
            span = f"{move.first}" if move.first == move.last else f"{move.first}-{move.last}"
            lines.append(f"  slots {span}: {addresses[move.source]} -> {addresses[move.target]} (load {move.load:g})")
        lines.append("commands (as `--cluster reshard` moves a slot, with its keys):")
        for move in result.moves:
            lines += ["  " + line for line in migrate_commands(move, addresses)]
    return "\n".join(lines) + "\n"


def _elasticache_advice(result: Any) -> list[str]:
    """ElastiCache cannot move chosen slots: ModifyReplicationGroupShardConfiguration spreads them evenly by count."""
    lines = ["ElastiCache spreads slots evenly by count (ModifyReplicationGroupShardConfiguration); it cannot move chosen slots:"]
    if result.rebalance_skew <= result.max_skew:
        lines.append(f"  an even rebalance with the same shard count brings the skew to {result.rebalance_skew:.2f}: do that")
    else:
        lines.append(f"  an even rebalance with the same shard count leaves the skew at {result.rebalance_skew:.2f}: not enough")
        if result.more_shards is not None:
            lines.append(
                f"  {result.more_shards} more shard(s), evenly spread, keep the busiest at {result.more_shards_peak:.2f} of today's mean shard load"
            )
        else:
            lines.append("  no number of shards up to four times the current brings it under the limit: the load is in few slots")
    return lines
