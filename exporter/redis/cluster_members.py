"""A cluster found from one endpoint: every node of it, with its role and shard, from ``CLUSTER SHARDS`` (7.0+; its
``endpoint`` is the address clients are told to use, a hostname where the cluster announces one) or ``CLUSTER NODES``
before that. Each member also carries the hostname its node announces (``cluster-announce-hostname``; ElastiCache's
node names), which CLUSTER NODES gives after the address (``ip:port@bus,hostname``), and a primary its slots.
Parsing is pure; :func:`read_members` asks a node."""

from __future__ import annotations

from typing import Any

from exporter.common.records import record

from .node import RedisNode
from .slots import SLOTS, is_replica, node_lines, shard_name, slot_entries


@record(frozen=True)
class Member:
    node_id: str
    host: str
    port: int
    role: str  # primary | replica
    shard: str  # its shard's slot ranges (slots.shard_name); a shard without slots: its primary's node id
    hostname: str = ""  # the hostname the node announces, "" where it announces none
    slots: frozenset[int] = frozenset()  # a primary's slots (a replica's: none)
    answering: bool = True  # False: the cluster holds it failed or not yet serving (loading, syncing); still a member

    @property
    def name(self) -> str:
        return f"{self.host}:{self.port}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pairs(items: Any) -> dict[str, Any]:
    return {_text(k): v for k, v in zip(items[::2], items[1::2], strict=False)} if isinstance(items, list) else {}


def settled(reply: Any) -> bool:
    """Whether every node CLUSTER SHARDS names is online (not loading, syncing or failed): a cluster in flux is read
    again soon."""
    return all(
        _text(_pairs(node).get("health", "online")) == "online"
        for shard in (reply if isinstance(reply, list) else [])
        for node in _pairs(shard).get("nodes", [])
    )


def _slot_ranges(bounds: Any) -> frozenset[int]:
    """CLUSTER SHARDS' ``slots``: first and last slot of each range, flat."""
    if not isinstance(bounds, list):
        return frozenset()
    slots: set[int] = set()
    for first, last in zip(bounds[::2], bounds[1::2], strict=False):
        if isinstance(first, int) and isinstance(last, int) and 0 <= first <= last < SLOTS:
            slots.update(range(first, last + 1))
    return frozenset(slots)


def parse_cluster_shards(reply: Any, tls: bool) -> list[Member]:
    """CLUSTER SHARDS (RESP2: flat name/value lists). A node the cluster holds failed or not yet serving is a member
    all the same, marked not answering: it is still part of its shard until the cluster forgets it."""
    members = []
    for shard_items in reply if isinstance(reply, list) else []:
        shard = _pairs(shard_items)
        nodes = [_pairs(node) for node in shard.get("nodes", [])]
        slots = _slot_ranges(shard.get("slots"))
        primaries = [node for node in nodes if _text(node.get("role", "")) == "master"]
        # after a failover the failed old primary may still be listed as a master: the shard is named by the one online
        primary = next((node for node in primaries if _online(node)), primaries[0] if primaries else None)
        shard_id = shard_name(slots, _text(primary.get("id", "")) if primary else _text(shard.get("id", "")))
        for node in nodes:
            host = _text(node.get("endpoint") or node.get("ip") or "")
            port = node.get("tls-port") if tls and node.get("tls-port") else node.get("port")
            if not host or host == "?" or not isinstance(port, int) or port <= 0:
                continue
            role = "primary" if _text(node.get("role", "")) == "master" else "replica"
            hostname = _text(node.get("hostname") or "")
            owned = slots if node is primary else frozenset()  # the shard's slots are its serving primary's alone
            members.append(Member(_text(node.get("id", "")), host, port, role, shard_id, hostname, owned, _online(node)))
    return members


def _online(node: dict[str, Any]) -> bool:
    return _text(node.get("health", "online")) == "online"


def parse_cluster_nodes(text: str) -> list[Member]:
    """CLUSTER NODES (before 7.0): a node's address is its ``ip:port``; a failed node (``fail`` or ``fail?``) is a member
    marked not answering, a node in handshake or without an address is none yet."""
    lines = node_lines(text)[0]
    served = {fields[0]: slot_entries(fields[8:]) for fields in lines if len(fields) >= 8 and not is_replica(fields)}
    members = []
    for fields in lines:
        flags = set(fields[2].split(",")) if len(fields) >= 8 else set()
        if len(fields) < 8 or {"handshake", "noaddr"} & flags:
            continue
        address, _, hostname = fields[1].partition(",")
        host, _, port = address.split("@", 1)[0].rpartition(":")
        if not host or not port.isdigit() or int(port) <= 0:
            continue
        replica = is_replica(fields)
        role, primary = ("replica", fields[3]) if replica else ("primary", fields[0])
        shard = shard_name(served.get(primary, frozenset()), primary)
        slots = frozenset() if replica else served[primary]
        announced = hostname.split(",", 1)[0]
        failed = bool({"fail", "fail?"} & flags) or fields[7] != "connected"
        members.append(Member(fields[0], host, int(port), role, shard, "" if "=" in announced else announced, slots, not failed))
    return members


def read_members(node: RedisNode) -> tuple[list[Member], bool] | None:
    """The cluster's nodes as ``node`` sees them, and whether all of them are online (the others are read again soon);
    None where it is not a cluster node (or CLUSTER is renamed away)."""
    (server, cluster) = node.call_many([("INFO", "server"), ("INFO", "cluster")])
    if not isinstance(cluster, bytes) or b"cluster_enabled:1" not in cluster:
        return None
    version = next((line.split(":", 1)[1] for line in _text(server).splitlines() if line.startswith(("valkey_version:", "redis_version:"))), "")
    major = int(version.split(".", 1)[0]) if version.split(".", 1)[0].isdigit() else 0
    if major >= 7 or "valkey_version:" in _text(server):
        reply = node.call_if_allowed("cluster", ("CLUSTER", "SHARDS"))
        return None if reply is None else (parse_cluster_shards(reply, node.endpoint.tls), settled(reply))
    reply = node.call_if_allowed("cluster", ("CLUSTER", "NODES"))
    if not isinstance(reply, bytes):
        return None
    text = reply.decode()
    members = parse_cluster_nodes(text)
    listed = len([line for line in text.splitlines() if line.strip()])
    return members, len(members) == listed and all(member.answering for member in members)
