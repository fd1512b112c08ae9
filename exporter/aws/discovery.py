"""ElastiCache discovery: replication groups and cache clusters → one :class:`Node` per cache node.

``build_nodes`` is pure (API replies in, nodes out); ``discover_region`` does the
paginated calls through an :class:`~exporter.aws.AwsApi`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from exporter.common.records import record, replace

from .api import AwsApi, AwsCallError

log = logging.getLogger(__name__)


@record(frozen=True)
class Node:
    """One ElastiCache cache node; ``cluster_id`` is CloudWatch's CacheClusterId, unique only within its account and
    region: (account_id, region, cluster_id, node_id) is the node's identity."""

    region: str
    cluster_id: str
    node_id: str
    node_type: str
    engine: str
    engine_version: str
    replication_group: str = ""
    shard: str = ""
    role: str = ""
    az: str = ""
    address: str = ""
    port: int = 6379
    tls: bool = False
    arn: str = ""
    cluster_mode: bool = False
    tags: tuple[tuple[str, str], ...] = ()
    account_id: str = ""
    maintenance_window: str = ""  # PreferredMaintenanceWindow, as ElastiCache gives it (ddd:hh:mm-ddd:hh:mm, UTC)
    pending_modifications: tuple[str, ...] = ()  # the fields of the cluster's and its group's PendingModifiedValues
    durability: str = ""  # the replication group's EffectiveDurability (sync, async, disabled); "" where it says none
    created: float = 0.0  # the cluster's CacheClusterCreateTime (Unix seconds; 0: not given)

    @property
    def key(self) -> NodeKey:
        return (self.account_id, self.region, self.cluster_id, self.node_id)

    @property
    def serverless(self) -> bool:
        return self.node_type == SERVERLESS

    @property
    def durable(self) -> bool:
        """Durability is on: writes go to a Multi-AZ transactional log (Valkey 9.0+, cluster mode)."""
        return self.durability in DURABLE_MODES

    @property
    def group(self) -> str:
        """The node's replication group; a cluster outside any group stands for a group of its own."""
        return self.replication_group or self.cluster_id


SERVERLESS = "serverless"  # the node_type of a serverless cache: no node-type baseline applies

# Where a replication group's description says durability is on, and how: AWS's ElastiCache guide ("Configuring
# durability") names `EffectiveDurability` in the API's reply: the mode in effect, sync, async or disabled (the request
# member is `Durability`, which may also be `default`).
DURABILITY_FIELD = "EffectiveDurability"
DURABLE_MODES = frozenset({"sync", "async"})


NodeKey = tuple[str, str, str, str]  # account, region, CacheClusterId, CacheNodeId


def instance_names(nodes: Iterable[Node]) -> dict[NodeKey, str]:
    """The ``instance`` of each node: its CacheClusterId where that is unique in the fleet, else
    ``<account>/<region>/<CacheClusterId>`` for every node sharing it (every environment account has its ``sessions-001``)
    but the oldest cluster, by its creation time, which keeps the bare name: a cluster of the same id created in another
    account or region later does not rename the one that was there first (its history, silences and links go on). The
    names come from the fleet alone, so every exporter of a sharded fleet, and the same one after a restart, gives a node
    the same name. Where the creation times do not tell one oldest, every node sharing the id is qualified."""
    nodes = list(nodes)
    created: dict[str, dict[tuple[str, str], float]] = {}
    for node in nodes:
        place = (node.account_id, node.region)
        known = created.setdefault(node.cluster_id, {})
        known[place] = min(known.get(place, node.created), node.created)
    keeps: dict[str, tuple[str, str] | None] = {}
    for cluster_id, places in created.items():
        # a creation time not given (0) is the newest: a cluster being created does not rename the one that was there
        first = sorted(places.items(), key=lambda item: item[1] or math.inf)
        alone = len(first) == 1 or (first[0][1] > 0 and first[0][1] < (first[1][1] or math.inf))
        keeps[cluster_id] = first[0][0] if alone else None
    names = {}
    for node in nodes:
        bare = keeps[node.cluster_id] == (node.account_id, node.region)
        names[node.key] = node.cluster_id if bare else f"{node.account_id}/{node.region}/{node.cluster_id}"
    return names


def arn_account(arn: str) -> str:
    """The account of an ARN (``arn:aws:elasticache:eu-west-1:123456789012:cluster:x``), or ""."""
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 and parts[4].isdigit() else ""


@record(frozen=True)
class ServerlessCache:
    """An ElastiCache Serverless cache: no node type; its limits are ECPUs per second and data storage."""

    region: str
    name: str
    engine: str
    engine_version: str
    address: str = ""
    port: int = 6379
    account_id: str = ""
    status: str = ""
    ecpu_per_second_max: float | None = None
    data_storage_max_bytes: float | None = None
    arn: str = ""
    tags: tuple[tuple[str, str], ...] = ()

    def as_node(self) -> Node:
        """The cache as a node of its own: the subject of its CloudWatch series, and a Redis target (always TLS)."""
        return Node(
            region=self.region,
            cluster_id=self.name,
            node_id="",
            node_type=SERVERLESS,
            engine=self.engine,
            engine_version=self.engine_version,
            address=self.address,
            port=self.port,
            tls=True,
            account_id=self.account_id,
        )


def build_nodes(
    region: str,
    replication_groups: list[dict[str, Any]],
    cache_clusters: list[dict[str, Any]],
    tags: Mapping[str, dict[str, str]] | None = None,
    account_id: str = "",
) -> list[Node]:
    """Join DescribeReplicationGroups and DescribeCacheClusters(ShowCacheNodeInfo) replies.

    Member details (shard, role, read endpoint) come from the replication group; type, engine and
    encryption from the cache cluster. Nodes of engines other than Redis and Valkey are left out, and so
    are clusters being deleted (their alarms and series go with them).
    """
    members: dict[tuple[str, str], dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}
    for group in replication_groups:
        groups[group.get("ReplicationGroupId", "")] = group
        for node_group in group.get("NodeGroups", []):
            for member in node_group.get("NodeGroupMembers", []):
                key = (member.get("CacheClusterId", ""), member.get("CacheNodeId", "0001"))
                members[key] = {**member, "NodeGroupId": node_group.get("NodeGroupId", "")}
    nodes = []
    for cluster in cache_clusters:
        engine = (cluster.get("Engine") or "").lower()
        if engine not in ("redis", "valkey") or cluster.get("CacheClusterStatus") in GONE:
            continue
        cluster_id = cluster.get("CacheClusterId", "")
        group = groups.get(cluster.get("ReplicationGroupId", ""), {})
        cache_nodes = cluster.get("CacheNodes") or [{"CacheNodeId": "0001"}]
        for cache_node in cache_nodes:
            node_id = cache_node.get("CacheNodeId", "0001")
            member = members.get((cluster_id, node_id), {})
            endpoint = cache_node.get("Endpoint") or member.get("ReadEndpoint") or {}
            nodes.append(
                Node(
                    region=region,
                    cluster_id=cluster_id,
                    node_id=node_id,
                    node_type=cluster.get("CacheNodeType") or group.get("CacheNodeType", ""),
                    engine=engine,
                    engine_version=cluster.get("EngineVersion", "") or "",
                    replication_group=cluster.get("ReplicationGroupId", "") or "",
                    shard=member.get("NodeGroupId", ""),
                    role=member.get("CurrentRole", ""),
                    az=cache_node.get("CustomerAvailabilityZone")
                    or cluster.get("PreferredAvailabilityZone")
                    or member.get("PreferredAvailabilityZone", ""),
                    address=endpoint.get("Address", ""),
                    port=int(endpoint.get("Port") or 6379),
                    tls=bool(cluster.get("TransitEncryptionEnabled", group.get("TransitEncryptionEnabled", False))),
                    arn=cluster.get("ARN", ""),
                    cluster_mode=bool(group.get("ClusterEnabled", False)),
                    tags=tuple(sorted((tags or {}).get(cluster.get("ARN", ""), {}).items())),
                    account_id=arn_account(cluster.get("ARN", "")) or account_id,
                    maintenance_window=str(cluster.get("PreferredMaintenanceWindow") or ""),
                    pending_modifications=_pending(cluster, group),
                    durability=_durability(group),
                    created=_seconds(cluster.get("CacheClusterCreateTime")),
                )
            )
    return sorted(nodes, key=lambda n: (n.account_id, n.region, n.cluster_id, n.node_id))


def _seconds(when: Any) -> float:
    """A time the API gives (a datetime from boto3), in Unix seconds; 0 where it gives none."""
    return float(when.timestamp()) if hasattr(when, "timestamp") else 0.0


def _durability(group: Mapping[str, Any]) -> str:
    """The durability mode a replication group's description says is in effect, lower-cased; "" where it says none."""
    return str(group.get(DURABILITY_FIELD) or "").lower()


def _pending(*described: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields with a value in the PendingModifiedValues of a cluster and of its replication group."""
    fields = {name for item in described for name, value in (item.get("PendingModifiedValues") or {}).items() if value not in (None, "", [], {})}
    return tuple(sorted(fields))


def matches_tag_filters(tags: Mapping[str, str], filters: Mapping[str, tuple[str, ...]]) -> bool:
    """Every filtered key must be present; with values listed, the node's value must be one of them."""
    return all(key in tags and (not values or tags[key] in values) for key, values in filters.items())


GONE = frozenset({"deleting", "deleted"})


def discover_region(
    api: AwsApi, region: str, tag_filters: Mapping[str, tuple[str, ...]], account_id: str = "", with_tags: bool = False
) -> tuple[list[Node], list[ServerlessCache]]:
    """The region's nodes and serverless caches; their tags are read (one call each) where ``tag_filters`` or
    ``with_tags`` asks for them."""
    client = api.client("elasticache", region)
    groups = api.paginate(client, "describe_replication_groups", "ReplicationGroups")
    clusters = api.paginate(client, "describe_cache_clusters", "CacheClusters", ShowCacheNodeInfo=True)
    tags: dict[str, dict[str, str]] = {}
    if tag_filters or with_tags:
        for cluster in clusters:
            arn = cluster.get("ARN")
            if arn:
                reply = api.call(client, "list_tags_for_resource", ResourceName=arn)
                tags[arn] = {tag["Key"]: tag["Value"] for tag in reply.get("TagList", [])}
    nodes = build_nodes(region, groups, clusters, tags, account_id)
    if tag_filters:
        nodes = [node for node in nodes if matches_tag_filters(dict(node.tags), tag_filters)]
    caches = _serverless(api, client, region, account_id)
    if with_tags:
        caches = [replace(cache, tags=_serverless_tags(api, client, cache.arn)) if cache.arn else cache for cache in caches]
    return nodes, caches


def _serverless_tags(api: AwsApi, client: Any, arn: str) -> tuple[tuple[str, str], ...]:
    """A serverless cache's tags; none where they cannot be read (the cache is still served, without them)."""
    try:
        reply = api.call(client, "list_tags_for_resource", ResourceName=arn)
    except AwsCallError as err:
        log.debug("tags of %s: %s", arn, err)
        return ()
    return tuple(sorted((tag["Key"], tag["Value"]) for tag in reply.get("TagList", [])))


_STORAGE_UNITS = {"GB": 1e9, "GIB": 2**30, "MB": 1e6, "TB": 1e12}


def build_serverless(region: str, caches: list[dict[str, Any]], account_id: str = "") -> list[ServerlessCache]:
    """DescribeServerlessCaches → the Redis and Valkey caches, with their usage limits where set."""
    result = []
    for cache in caches:
        engine = (cache.get("Engine") or "").lower()
        if engine not in ("redis", "valkey") or (cache.get("Status") or "").lower() in GONE:
            continue
        endpoint = cache.get("Endpoint") or {}
        limits = cache.get("CacheUsageLimits") or {}
        storage = limits.get("DataStorage") or {}
        ecpu = limits.get("ECPUPerSecond") or {}
        storage_max = storage.get("Maximum")
        unit = _STORAGE_UNITS.get(str(storage.get("Unit", "GB")).upper(), 1e9)
        result.append(
            ServerlessCache(
                region=region,
                name=cache.get("ServerlessCacheName", ""),
                engine=engine,
                engine_version=cache.get("FullEngineVersion") or cache.get("MajorEngineVersion", "") or "",
                address=endpoint.get("Address", ""),
                port=int(endpoint.get("Port") or 6379),
                account_id=arn_account(cache.get("ARN", "")) or account_id,
                status=cache.get("Status", "") or "",
                ecpu_per_second_max=float(ecpu["Maximum"]) if ecpu.get("Maximum") is not None else None,
                data_storage_max_bytes=float(storage_max) * unit if storage_max is not None else None,
                arn=cache.get("ARN", "") or "",
            )
        )
    return sorted(result, key=lambda c: (c.account_id, c.region, c.name))


def _serverless(api: AwsApi, client: Any, region: str, account_id: str) -> list[ServerlessCache]:
    try:
        caches = api.paginate(client, "describe_serverless_caches", "ServerlessCaches")
    except Exception as err:  # noqa: BLE001 - an API some endpoints (and moto) lack must not stop discovery
        log.debug("describe_serverless_caches in %s failed: %s", region, err)
        return []
    return build_serverless(region, caches, account_id)


def serverless_as_nodes(caches: Iterable[ServerlessCache], taken: set[str]) -> list[tuple[str, Node]]:
    """Serverless caches as Redis targets (always TLS), named by the cache where that name is unique among the caches
    and not ``taken`` by a node, else ``<account>/<region>/<name>`` (and ``/serverless`` after it if even that is taken)."""
    caches = [cache for cache in caches if cache.address]
    uses: dict[str, int] = {}
    for cache in caches:
        uses[cache.name] = uses.get(cache.name, 0) + 1
    named = []
    for cache in caches:
        name = cache.name
        if name in taken or uses[name] > 1:
            name = f"{cache.account_id}/{cache.region}/{cache.name}"
            if name in taken:
                name += "/serverless"
        named.append((name, cache.as_node()))
    return named
