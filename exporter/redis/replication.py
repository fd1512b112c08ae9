"""Replication lag: heartbeat timestamps, byte offsets, and who replicates from whom. Pure functions."""

from __future__ import annotations

import re
from collections.abc import Mapping

from exporter.common.families import GAUGE, FamilySet
from exporter.common.records import record

from .heartbeat import HeartbeatParseError, parse_timestamp
from .info import InfoReply, parse_number, parse_subfields
from .slots import named_by_slots

_REPLICA_LINE = re.compile(r"slave\d+$")

# (host, port) -> the configured target name at that address
AddressNames = Mapping[tuple[str, int], str]


@record(frozen=True)
class HeartbeatReading:
    source: str
    key: str
    value: bytes | None  # None: the key is missing (or not a string)
    key_type: str | None  # from TYPE, when it was read


def replica_lines(info: InfoReply) -> list[dict[str, str]]:
    """The primary's view of each replica: ip, port, state, offset, lag (Redis 2.6 lines have no offset)."""
    replicas = []
    for name, raw in info.sections.get("replication", {}).items():
        if not _REPLICA_LINE.match(name):
            continue
        if "=" in raw:
            replicas.append(parse_subfields(raw))
        else:
            replicas.append(dict(zip(("ip", "port", "state"), raw.split(","), strict=False)))
    return replicas


def _name_for(names: AddressNames, host: str, port: str) -> str:
    try:
        return names.get((host.lower(), int(port)), f"{host}:{port}")
    except ValueError:
        return f"{host}:{port}"


def add_replication_metrics(info: InfoReply, target: str, names: AddressNames, out: FamilySet) -> None:
    base = {"instance": target}
    fields = info.sections.get("replication", {})
    master_offset = parse_number(fields.get("master_repl_offset", ""))
    for replica in replica_lines(info):
        ip, port = replica.get("ip", ""), replica.get("port", "")
        labels = {**base, "slave_ip": ip, "slave_port": port}
        out.add(
            "elasticache_replication_replica_info",
            GAUGE,
            "A replica connected to this primary; 'replica' is the configured target at that address, else ip:port.",
            {**labels, "replica": _name_for(names, ip, port), "slave_state": replica.get("state", "")},
            1.0,
        )
        offset = parse_number(replica.get("offset", ""))
        if master_offset is not None and offset is not None:
            out.add(
                "elasticache_replication_lag_bytes",
                GAUGE,
                "Bytes of the replication stream a replica has not acknowledged: master_repl_offset minus its offset.",
                labels,
                max(0.0, master_offset - offset),
            )
    if "master_host" in fields:
        host, port = fields.get("master_host", ""), fields.get("master_port", "")
        out.add(
            "elasticache_replication_primary_info",
            GAUGE,
            "The primary this replica replicates from; 'primary' is the configured target at that address, else host:port.",
            {**base, "primary": _name_for(names, host, port), "master_host": host, "master_port": port},
            1.0,
        )


@record(frozen=True)
class Membership:
    """Where a node belongs, as configured or discovered; in cluster mode, its shard's name (its slot ranges)."""

    replication_group: str = ""
    shard: str = ""
    cluster_shard: str | None = None


# (replication group, shard, where the shard's name comes from: config, cluster or replication)
Shard = tuple[str, str, str]


def shard_of(info: InfoReply | None, membership: Membership) -> Shard | None:
    """The node's shard: the configured or discovered name, else the cluster-mode shard's slot ranges, else the
    replication id (a primary and the replicas synced to it share it, and a replica keeps it while its link is down).
    ``info`` None: the node did not answer, so only what is known without it."""
    if membership.shard:
        return membership.replication_group, membership.shard, "config"
    if membership.cluster_shard:
        source = "slots" if named_by_slots(membership.cluster_shard) else "cluster"
        return membership.replication_group, membership.cluster_shard, source
    if info is None:
        return None
    replid = info.sections.get("replication", {}).get("master_replid", "")
    if replid and replid.strip("0"):
        return membership.replication_group, replid, "replication"
    return None


def add_shard_membership(shard: Shard, target: str, role: str, out: FamilySet) -> None:
    """A node's membership; ``role`` empty for a node that does not answer, which stays in the shard it is known in
    (a shard's membership does not end when a node stops answering) with no role, as it answers as none (an empty
    label is no label to Prometheus: ``{role=""}`` selects it; every series of the family has the same label names)."""
    group, name, source = shard
    labels = {"instance": target, "replication_group": group, "shard": name, "shard_source": source, "role": role}
    out.add(
        "elasticache_shard_member_info",
        GAUGE,
        "The shard a node belongs to, with its role as it answers now (no role while it does not answer); count by (replication_group, shard).",
        labels,
        1.0,
    )


def add_heartbeat_metrics(
    readings: list[HeartbeatReading], role: str, read_time: float, target: str, out: FamilySet
) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """Heartbeat lag on replicas, heartbeat age on primaries; returns the parse errors (source, reason) and the lags."""
    errors: list[tuple[str, str]] = []
    lags: dict[str, float] = {}
    if readings:
        out.add(
            "elasticache_exporter_heartbeat_read_time_seconds",
            GAUGE,
            "The exporter's clock when it read the heartbeats (compare with redis_server_time_seconds for skew).",
            {"instance": target},
            read_time,
        )
    for reading in readings:
        if reading.value is None:
            if reading.key_type not in (None, "none", "string"):
                errors.append((reading.source, "wrong_type"))
            continue
        try:
            stamp = parse_timestamp(reading.value)
        except HeartbeatParseError:
            errors.append((reading.source, "unparsable"))
            continue
        labels = {"instance": target, "source": reading.source}
        out.add(
            "elasticache_replication_heartbeat_timestamp_seconds",
            GAUGE,
            "The heartbeat time read from the node, as a Unix time.",
            labels,
            stamp,
        )
        if role == "master":
            out.add(
                "elasticache_replication_heartbeat_age_seconds",
                GAUGE,
                "On a primary: how old its heartbeat is; a growing age means the writer stopped, not that replication lags.",
                labels,
                read_time - stamp,
            )
        else:
            lags[reading.source] = read_time - stamp
            out.add(
                "elasticache_replication_heartbeat_lag_seconds",
                GAUGE,
                "On a replica: read time minus the replicated heartbeat time (includes the writer's interval and clock skew).",
                labels,
                read_time - stamp,
            )
    return errors, lags
