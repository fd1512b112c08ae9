"""DescribeGlobalReplicationGroups for moto, which lacks it, added to moto's ElastiCache responses for the duration of a
test (as tests/moto_fleet_events.py adds DescribeEvents).

A global datastore belongs to its account, not to one region: it is kept per account and listed in every region that
holds one of its members, as AWS lists it, so an exporter polling several regions sees it more than once. Members are
listed only when ShowMemberInfo asks for them. The reply goes through moto's serializer and botocore's parser, shaped
by botocore's model of the operation, and pages are small (a reader that drops the Marker loses datastores).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from moto.core.responses import ActionResult
from moto.elasticache.exceptions import InvalidParameterValueException
from moto.elasticache.models import elasticache_backends
from moto.elasticache.responses import ElastiCacheResponse

PAGE = 1  # datastores per page, whatever MaxRecords asks
_HOME = "us-east-1"  # the backend the account's datastores are kept on, so moto's reset clears them too


def _store(account: str) -> dict[str, dict[str, Any]]:
    return elasticache_backends[account][_HOME].__dict__.setdefault("_test_global_datastores", {})


def add_global_datastore(account: str, global_id: str, members: list[tuple[str, str, str, str]], *, engine_version: str = "7.1") -> None:
    """``members``: (replication group, region, role primary|secondary, status associated|associating|...)."""
    roles = [role for _, _, role, _ in members]
    assert roles.count("primary") == 1, "one primary"
    assert set(roles) <= {"primary", "secondary"}, "the rest secondaries"
    _store(account)[global_id] = {
        "GlobalReplicationGroupId": global_id,
        "GlobalReplicationGroupDescription": f"{global_id} (test)",
        "Status": "available" if len(members) > 1 else "primary-only",
        "CacheNodeType": "cache.r6g.large",
        "Engine": "redis",
        "EngineVersion": engine_version,
        "ClusterEnabled": False,
        "TransitEncryptionEnabled": True,
        "ARN": f"arn:aws:elasticache::{account}:globalreplicationgroup:{global_id}",
        "Members": [
            {"ReplicationGroupId": group, "ReplicationGroupRegion": region, "Role": role.upper(), "AutomaticFailover": "enabled", "Status": status}
            for group, region, role, status in members
        ],
    }


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def _describe(self: ElastiCacheResponse) -> ActionResult:
    params = self._get_params()
    wanted = params.get("GlobalReplicationGroupId")
    listed = [
        datastore
        for datastore in _store(self.current_account).values()
        if any(member["ReplicationGroupRegion"] == self.region for member in datastore["Members"])
    ]
    if wanted:
        listed = [datastore for datastore in listed if datastore["GlobalReplicationGroupId"] == wanted]
        if not listed:
            raise InvalidParameterValueException(f"Global replication group {wanted} not found.")
    if not _flag(params.get("ShowMemberInfo")):
        listed = [{key: value for key, value in datastore.items() if key != "Members"} for datastore in listed]
    start = int(params.get("Marker") or 0)
    result: dict[str, Any] = {"GlobalReplicationGroups": listed[start : start + PAGE]}
    if start + PAGE < len(listed):
        result["Marker"] = str(start + PAGE)
    return ActionResult(result)


@contextmanager
def global_datastores_in_moto() -> Iterator[None]:
    missing = not hasattr(ElastiCacheResponse, "describe_global_replication_groups")
    if missing:
        ElastiCacheResponse.describe_global_replication_groups = _describe
    try:
        yield
    finally:
        if missing:
            del ElastiCacheResponse.describe_global_replication_groups
