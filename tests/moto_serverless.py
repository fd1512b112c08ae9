"""ElastiCache Serverless for moto, which lacks it: CreateServerlessCache, DescribeServerlessCaches (paginated) and
DeleteServerlessCache, added to moto's ElastiCache responses for the duration of a test.

The replies go through moto's serializer and botocore's parser like every other moto reply, shaped by botocore's
own model of these operations, so the exporter reads them exactly as it reads AWS's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from moto.core.responses import ActionResult
from moto.elasticache.exceptions import InvalidParameterValueException
from moto.elasticache.responses import ElastiCacheResponse

_STORE = "_test_serverless_caches"  # on the account-region backend, so moto's reset clears it with everything else


def _caches(response: ElastiCacheResponse) -> dict[str, dict[str, Any]]:
    return response.elasticache_backend.__dict__.setdefault(_STORE, {})


def _create(self: ElastiCacheResponse) -> ActionResult:
    params = self._get_params()
    name = params["ServerlessCacheName"]
    caches = _caches(self)
    if name in caches:
        raise InvalidParameterValueException(f"Serverless cache {name} already exists.")
    engine = params["Engine"].lower()
    major = params.get("MajorEngineVersion") or ("8" if engine == "valkey" else "7")
    cache = {
        "ServerlessCacheName": name,
        "Description": params.get("Description", ""),
        "Status": "available",
        "Engine": engine,
        "MajorEngineVersion": major,
        "FullEngineVersion": f"{major}.1",
        "Endpoint": {"Address": f"{name}-abc123.serverless.{self.region}.cache.amazonaws.com", "Port": 6379},
        "ReaderEndpoint": {"Address": f"{name}-abc123.serverless.{self.region}.cache.amazonaws.com", "Port": 6380},
        "ARN": f"arn:aws:elasticache:{self.region}:{self.current_account}:serverlesscache:{name}",
    }
    if params.get("CacheUsageLimits"):
        cache["CacheUsageLimits"] = params["CacheUsageLimits"]
    tags = params.get("Tags") or []
    cache["_tags"] = tags.get("Tag", list(tags.values())) if isinstance(tags, dict) else tags
    caches[name] = cache
    return ActionResult({"ServerlessCache": cache})


def _describe(self: ElastiCacheResponse) -> ActionResult:
    params = self._get_params()
    caches = list(_caches(self).values())
    if params.get("ServerlessCacheName"):
        caches = [cache for cache in caches if cache["ServerlessCacheName"] == params["ServerlessCacheName"]]
    start = int(params.get("NextToken") or 0)
    size = int(params.get("MaxResults") or 2)  # small pages, so a reader that ignores NextToken loses caches
    result: dict[str, Any] = {"ServerlessCaches": caches[start : start + size]}
    if start + size < len(caches):
        result["NextToken"] = str(start + size)
    return ActionResult(result)


def _tags_of(original):
    """ListTagsForResource for a serverless cache's ARN too (moto's own knows only its clusters and groups)."""

    def list_tags_for_resource(self: ElastiCacheResponse) -> ActionResult:
        arn = self._get_param("ResourceName")
        cache = next((c for c in _caches(self).values() if c["ARN"] == arn), None)
        if cache is None:
            return original(self)
        return ActionResult({"TagList": cache.get("_tags", [])})

    return list_tags_for_resource


def _delete(self: ElastiCacheResponse) -> ActionResult:
    cache = _caches(self)[self._get_param("ServerlessCacheName")]
    cache["Status"] = "deleting"
    return ActionResult({"ServerlessCache": cache})


@contextmanager
def serverless_in_moto() -> Iterator[None]:
    added = {"create_serverless_cache": _create, "describe_serverless_caches": _describe, "delete_serverless_cache": _delete}
    missing = [name for name in added if not hasattr(ElastiCacheResponse, name)]
    for name in missing:
        setattr(ElastiCacheResponse, name, added[name])
    original_tags = ElastiCacheResponse.list_tags_for_resource
    ElastiCacheResponse.list_tags_for_resource = _tags_of(original_tags)
    try:
        yield
    finally:
        ElastiCacheResponse.list_tags_for_resource = original_tags
        for name in missing:
            delattr(ElastiCacheResponse, name)
