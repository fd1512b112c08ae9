"""``cluster plan``: what would bring a cluster's shard skew under a limit, from each primary's CLUSTER SLOT-STATS (keys:
CLUSTER COUNTKEYSINSLOT where that is missing). It reads and prints, a bash script too; it changes nothing."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .output import emit

# as serve names them: the plan reaches the cluster as the exporter's target does
TLS_FLAGS = (
    ("redis.tls-ca-file", "CA bundle to verify the server"),
    ("redis.tls-cert-file", "client certificate (with --redis.tls-key-file)"),
    ("redis.tls-key-file", "client key (with --redis.tls-cert-file)"),
    ("redis.tls-server-name", "server name to verify instead of the host of the address"),
    ("redis.tls-insecure-skip-verify", "do not verify the server certificate (explicit opt-in)"),
)
AUTH_VARIABLE = "ELASTICACHE_EXPORTER_REDIS_PASSWORD"
PASSWORD_FILE_FLAG = "redis.password-file"  # noqa: S105 - a flag name


def _env(flag: str) -> str:
    from exporter.config import flag_to_env

    return flag_to_env(flag)


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    plan = actions.add_parser(
        "plan",
        help="read the slot stats of every primary and say what would bring the shard skew under --max-skew (changes nothing)",
        allow_abbrev=False,
    )
    plan.add_argument(
        "--target",
        required=True,
        help=f"a node of the cluster, redis://[user@]host:port or rediss://… (the password from --{PASSWORD_FILE_FLAG} or "
        f"{AUTH_VARIABLE}, never the address)",
    )
    plan.add_argument(
        f"--{PASSWORD_FILE_FLAG}",
        dest=PASSWORD_FILE_FLAG,
        metavar="FILE",
        help=f"file holding the password of the cluster's nodes [{_env(PASSWORD_FILE_FLAG)}]",
    )
    for flag, help_text in TLS_FLAGS:
        if flag == "redis.tls-insecure-skip-verify":
            plan.add_argument(f"--{flag}", dest=flag, action="store_true", default=None, help=f"{help_text} [{_env(flag)}]")
        else:
            plan.add_argument(f"--{flag}", dest=flag, metavar="FILE" if flag.endswith("file") else "NAME", help=f"{help_text} [{_env(flag)}]")
    plan.add_argument("--resource", choices=("cpu", "network", "keys"), default="cpu", help="the load to even out (default cpu)")
    plan.add_argument("--max-skew", type=float, default=1.2, help="the largest shard over the mean to reach (default 1.2)")
    plan.add_argument(
        "--interval", default="10s", help="cpu and network: the load between two reads this far apart; 0: since the counters started (default 10s)"
    )
    plan.add_argument(
        "--format",
        dest="output_format",
        choices=("text", "json", "script"),
        default="text",
        help="script: a bash script that moves the slots with their keys (self-managed clusters; the password from REDISCLI_AUTH)",
    )
    plan.add_argument("--out", metavar="FILE", help="write here instead of standard output")


def run_cluster(args: argparse.Namespace, environ: Mapping[str, str], sleep: Callable[[float], None] = time.sleep) -> int:
    from exporter.common.errors import UsageError
    from exporter.config import parse_duration
    from exporter.redis.cluster_plan import Shard, migrate_script, on_elasticache, plan

    if not args.max_skew >= 1.0:
        raise UsageError(f"--max-skew: the largest shard over the mean is at least 1, got {args.max_skew}")
    interval = 0.0 if args.interval in ("0", "0s") else parse_duration(args.interval)
    if interval is None:
        raise UsageError(f"--interval: not a duration such as 10s, got {args.interval!r}")
    reader = _Reader(args, environ)
    try:
        with reader.failures_named():
            members, primaries, loads = _read_loads(reader, args.resource, interval, sleep)
    finally:
        reader.close()
    shards = [Shard(member.node_id, member.name, tuple(sorted(member.slots))) for member in primaries]
    result = plan(shards, loads, args.resource, args.max_skew)
    # ElastiCache by its names: the target's, or a node's address or announced hostname (CLUSTER NODES' ",hostname")
    elasticache = on_elasticache([reader.endpoint.host, *(member.host for member in members), *(member.hostname for member in members)])
    addresses = {shard.node_id: shard.address for shard in shards}
    if args.output_format == "json":
        text = json.dumps({**_as_dict(result, addresses), "on_elasticache": elasticache}, indent=2) + "\n"
    elif args.output_format == "script":
        if elasticache:
            raise UsageError("--format script: ElastiCache cannot move chosen slots (the text format says what it can do)")
        text = migrate_script(_needed(result), addresses, reader.cli_options())
    else:
        text = _text(result, addresses, elasticache, reader.cli_options())
    emit(text, args.out)
    return 0


def _read_loads(reader: _Reader, resource: str, interval: float, sleep: Callable[[float], None]) -> tuple[list[Any], list[Any], dict[int, float]]:
    """The cluster's members, its primaries serving slots, and each slot's load (over ``interval`` for cpu and network)."""
    from exporter.common.errors import UsageError

    members = reader.members()
    primaries = [member for member in members if member.role == "primary" and member.slots]
    failed = [member.name for member in primaries if not member.answering]
    if failed:
        raise UsageError(
            f"--target: the cluster of {reader.endpoint.host_port} has failed primaries ({', '.join(failed)}): plan once they have failed over"
        )
    if not primaries:
        raise UsageError(f"--target: the cluster of {reader.endpoint.host_port} has no primary serving slots")
    first = reader.slot_loads(primaries, resource)
    loads = first
    if resource != "keys" and interval > 0:
        sleep(interval)
        second = reader.slot_loads(primaries, resource)
        loads = {slot: max(0.0, value - first.get(slot, 0.0)) / interval for slot, value in second.items()}
    return members, primaries, loads


def _needed(result: Any) -> tuple[Any, ...]:
    return () if result.skew_before <= result.max_skew else result.moves


class _Reader:
    """The cluster's nodes from the target (CLUSTER SHARDS, or CLUSTER NODES before 7.0), and each primary's slot stats
    on a connection of its own, reached as the target is (TLS, user, password)."""

    def __init__(self, args: argparse.Namespace, environ: Mapping[str, str]) -> None:
        from exporter.common.errors import UsageError
        from exporter.common.secrets import Secret
        from exporter.redis.addresses import AddressError, parse_address
        from exporter.redis.settings import Credentials, TlsOptions

        try:
            parsed = parse_address(args.target)
        except AddressError as err:
            raise UsageError(f"--target: {err}") from err
        if parsed.password:
            raise UsageError(f"--target: a password in the address shows in the process list; put it in {AUTH_VARIABLE}")
        values = vars(args)

        def option(flag: str) -> str | None:
            value = values.get(flag)
            return str(value) if value is not None else environ.get(_env(flag)) or None

        insecure = values.get("redis.tls-insecure-skip-verify") or environ.get(_env("redis.tls-insecure-skip-verify"), "").lower() in ("1", "true")
        self.tls = TlsOptions(
            ca_file=option("redis.tls-ca-file"),
            cert_file=option("redis.tls-cert-file"),
            key_file=option("redis.tls-key-file"),
            server_name=option("redis.tls-server-name"),
            insecure_skip_verify=bool(insecure),
        )
        password = environ.get(AUTH_VARIABLE)
        password_file = option(PASSWORD_FILE_FLAG)
        self.endpoint = parsed.endpoint
        secret = Secret(value=password, source=AUTH_VARIABLE) if password else None
        if password_file:
            try:
                open(password_file, encoding="utf-8").close()
            except OSError as err:
                raise UsageError(f"--{PASSWORD_FILE_FLAG}: cannot read {password_file}: {err.strerror}") from None
            secret = Secret(file=password_file, source=f"--{PASSWORD_FILE_FLAG}")
        self.credentials = Credentials(username=parsed.endpoint.username, password=secret, tls=self.tls, timeout=10.0)
        self._nodes: dict[str, Any] = {}
        self._failed_node: str | None = None  # the node last asked, named when it fails

    @contextmanager
    def failures_named(self) -> Iterator[None]:
        """A node that refuses or cannot be reached is one line naming it and what to give (never a traceback)."""
        from exporter.common.errors import RuntimeFailure
        from exporter.redis.failures import NOT_AUTHENTICATED
        from exporter.redis.resp import RespFailure

        try:
            yield
        except RespFailure as err:
            where, detail = self._failed_node or self.endpoint.host_port, str(err)
            if err.kind == "auth" and "NOAUTH" in detail:
                problem = f"wants a password: give it in a file with --{PASSWORD_FILE_FLAG}, or in {AUTH_VARIABLE}"
            elif err.kind == "auth" and any(prefix in detail for prefix in NOT_AUTHENTICATED):
                source = self.credentials.password.source if self.credentials.password else "no password"
                user = self.endpoint.username or "default"
                problem = f"refused user {user} with the password of {source} (WRONGPASS)"
            else:
                problem = f"failed ({detail})"
            raise RuntimeFailure(f"--target: {where} {problem}") from None
        except OSError as err:
            raise RuntimeFailure(f"--target: cannot reach {self._failed_node or self.endpoint.host_port}: {err.strerror or err}") from None

    def cli_options(self) -> Any:
        from exporter.redis.cluster_plan import CliOptions

        tls = self.tls
        return CliOptions(
            self.endpoint.tls,
            tls.ca_file,
            tls.cert_file,
            tls.key_file,
            tls.server_name,
            tls.insecure_skip_verify,
            self.endpoint.username,
            self.credentials.password is not None,
        )

    def _node(self, address: str) -> Any:
        from exporter.redis.addresses import Endpoint
        from exporter.redis.node import RedisNode

        self._failed_node = address
        if address not in self._nodes:
            host, port = address.rsplit(":", 1)
            endpoint = Endpoint(host, int(port), self.endpoint.tls, 0, self.endpoint.username)
            self._nodes[address] = RedisNode(endpoint, self.credentials, max_reply_bytes=8 * 1024 * 1024)
        return self._nodes[address]

    def members(self) -> list[Any]:
        from exporter.common.errors import UsageError
        from exporter.redis.cluster_members import read_members

        found = read_members(self._node(self.endpoint.host_port))
        if found is None:
            raise UsageError(f"--target: {self.endpoint.host_port} is no cluster node, or CLUSTER is renamed away")
        return found[0]

    def slot_loads(self, primaries: list[Any], resource: str) -> dict[int, float]:
        from exporter.common.errors import UsageError
        from exporter.redis.slot_stats import ALL_SLOTS, GATE, parse_slot_stats

        loads: dict[int, float] = {}
        for primary in primaries:
            node = self._node(primary.name)
            reply = node.call_if_allowed(GATE, ALL_SLOTS)
            if reply is None and resource == "keys":
                loads.update(self._keys_counted(node, primary))
                continue
            if reply is None:
                raise UsageError(
                    f"{primary.name} has no CLUSTER SLOT-STATS (Valkey 8.0+, Redis 8.2+), or the user may not run it (--resource keys works)"
                )
            for stat in parse_slot_stats(reply):
                if stat.slot not in primary.slots:
                    continue
                value = stat.keys if resource == "keys" else stat.cpu_usec if resource == "cpu" else _bytes(stat.bytes_in, stat.bytes_out)
                if value is None:
                    raise UsageError(f"{primary.name}: cluster-slot-stats-enabled is off, so there is no {resource} per slot (--resource keys works)")
                loads[stat.slot] = float(value)
        return loads

    @staticmethod
    def _keys_counted(node: Any, primary: Any) -> dict[int, float]:
        """Without CLUSTER SLOT-STATS (Redis OSS 7, as on ElastiCache): CLUSTER COUNTKEYSINSLOT of each of the primary's
        slots, pipelined."""
        from exporter.common.errors import UsageError

        slots = sorted(primary.slots)
        replies = node.call_many([("CLUSTER", "COUNTKEYSINSLOT", str(slot)) for slot in slots], timeout=60.0)
        if not all(isinstance(reply, int) for reply in replies):
            raise UsageError(f"{primary.name}: CLUSTER COUNTKEYSINSLOT refused ({next(r for r in replies if not isinstance(r, int))!s:.80})")
        return {slot: float(count) for slot, count in zip(slots, replies, strict=True)}

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


def _text(result: Any, addresses: Mapping[str, str], elasticache: bool, options: Any) -> str:
    from exporter.redis.cluster_plan import migrate_script

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
        lines.append("the script that moves them with their keys, as `--cluster reshard` does (alone with --format script):")
        lines += ["  " + line for line in migrate_script(result.moves, addresses, options).splitlines()]
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
