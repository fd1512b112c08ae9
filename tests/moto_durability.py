"""ElastiCache durability for moto, which lacks it (and so does the botocore model it serializes with): CreateReplicationGroup
takes `Durability` and DescribeReplicationGroups says `EffectiveDurability`, for the duration of a test.

AWS's guide ("Configuring durability") names both: the request member `Durability` (sync, async, disabled or default)
and the reply's `EffectiveDurability`, the mode in effect (sync, async or disabled). The botocore model this package
pins has neither, so the two members are added to the loaded model (as a newer botocore would have them), and the reply
goes through moto's serializer and botocore's parser like every other: a field the model lacks would be dropped on the
way, as it would for a client of an older botocore. What a request asks is checked as AWS documents its limits: Valkey
9.0 or later, cluster mode enabled, Multi-AZ and encryption in transit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.loaders
from moto.core.responses import ActionResult
from moto.core.utils import get_service_model
from moto.elasticache.exceptions import InvalidParameterValueException
from moto.elasticache.responses import ElastiCacheResponse

MODES = ("sync", "async", "disabled", "default")
# (shape, member) the model gains: where a request names the mode, and where a reply says the mode in effect
MEMBERS = (("CreateReplicationGroupMessage", "Durability"), ("ReplicationGroup", "EffectiveDurability"))


def _with_durability(original):
    """Loader.load_service_model, adding the members to ElastiCache's model (every loader's copy: moto's and each
    client's); ``added`` records them, so they are taken out again."""
    added: list[dict[str, Any]] = []

    def load_service_model(self, service_name: str, type_name: str, *args: Any, **kwargs: Any) -> Any:
        model = original(self, service_name, type_name, *args, **kwargs)
        if service_name == "elasticache" and type_name == "service-2":
            for shape, member in MEMBERS:
                members = model["shapes"][shape]["members"]
                if member not in members:
                    members[member] = {"shape": "String"}
                    added.append(members)
        return model

    return load_service_model, added


def _version(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in (text or "0").split("."))
    except ValueError:
        return (0,)


def _check(params: dict[str, Any], mode: str) -> None:
    if mode not in MODES:
        raise InvalidParameterValueException(f"Invalid value for Durability: {mode}; one of {', '.join(MODES)}.")
    if mode not in ("sync", "async"):
        return
    if (params.get("Engine") or "").lower() != "valkey" or _version(params.get("EngineVersion")) < (9, 0):
        raise InvalidParameterValueException("Durability requires Valkey 9.0 or later.")
    if params.get("ClusterMode") != "enabled":
        raise InvalidParameterValueException("Durability requires cluster mode enabled.")
    if str(params.get("MultiAZEnabled")).lower() != "true" or str(params.get("TransitEncryptionEnabled")).lower() != "true":
        raise InvalidParameterValueException("Durability requires Multi-AZ and encryption in transit.")


def _create(original):
    def create_replication_group(self: ElastiCacheResponse) -> ActionResult:
        params = self._get_params()
        mode = params.get("Durability")
        if mode is not None:
            _check(params, mode)
        result = original(self)
        if mode is not None:  # default is disabled for now (Valkey 9.0), as the guide's table says
            group = self.elasticache_backend.replication_groups[params["ReplicationGroupId"]]
            group.EffectiveDurability = mode if mode in ("sync", "async") else "disabled"
        return result

    return create_replication_group


def _member(original):
    """CreateCacheCluster keeping the ReplicationGroupId of a Valkey cluster too (moto keeps it for Redis OSS alone), so a
    durable group's clusters are its members."""

    def create_cache_cluster(self: ElastiCacheResponse) -> ActionResult:
        result = original(self)
        params = self._get_params()
        if params.get("ReplicationGroupId"):
            cluster = self.elasticache_backend.cache_clusters[params["CacheClusterId"]]
            cluster.replication_group_id = params["ReplicationGroupId"]
        return result

    return create_cache_cluster


@contextmanager
def durability_in_moto() -> Iterator[None]:
    original_load = botocore.loaders.Loader.load_service_model
    original_create = ElastiCacheResponse.create_replication_group
    original_member = ElastiCacheResponse.create_cache_cluster
    load, added = _with_durability(original_load)
    botocore.loaders.Loader.load_service_model = load  # type: ignore[method-assign]
    ElastiCacheResponse.create_replication_group = _create(original_create)
    ElastiCacheResponse.create_cache_cluster = _member(original_member)
    get_service_model.cache_clear()  # moto's model, loaded anew with the members
    try:
        yield
    finally:
        botocore.loaders.Loader.load_service_model = original_load  # type: ignore[method-assign]
        ElastiCacheResponse.create_replication_group = original_create
        ElastiCacheResponse.create_cache_cluster = original_member
        for members in added:
            for _, member in MEMBERS:
                members.pop(member, None)
        get_service_model.cache_clear()
