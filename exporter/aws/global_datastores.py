"""Global Datastores: replication groups that replicate across regions (DescribeGlobalReplicationGroups, ShowMemberInfo).

A global datastore is listed in every region that holds one of its members, so an account's regions list it more than
once: :func:`merge_global_datastores` keeps one per (account, id), the newest listing winning. Parsing is pure;
:func:`describe_global_datastores` makes the paginated call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from exporter.common.records import record

from .api import AwsApi, AwsCallError

log = logging.getLogger(__name__)

ROLES = ("primary", "secondary")
ASSOCIATED = "associated"


@record(frozen=True)
class GlobalMember:
    replication_group: str
    region: str
    role: str  # primary or secondary
    status: str  # associating, associated, disassociating, disassociated


@record(frozen=True)
class GlobalDatastore:
    account_id: str
    global_id: str
    status: str  # creating, available, primary-only (every secondary gone), modifying, deleting, ...
    engine: str
    engine_version: str
    members: tuple[GlobalMember, ...] = ()

    def members_of(self, role: str) -> list[GlobalMember]:
        return [member for member in self.members if member.role == role]

    @property
    def key(self) -> tuple[str, str]:
        return (self.account_id, self.global_id)


def parse_global_datastores(items: Iterable[Mapping[str, Any]], account_id: str) -> list[GlobalDatastore]:
    """DescribeGlobalReplicationGroups' ``GlobalReplicationGroups`` as records; one without an id is left out."""
    parsed = []
    for item in items:
        global_id = str(item.get("GlobalReplicationGroupId") or "")
        if not global_id:
            continue
        members = tuple(
            sorted(
                (
                    GlobalMember(
                        replication_group=str(member.get("ReplicationGroupId") or ""),
                        region=str(member.get("ReplicationGroupRegion") or ""),
                        role=str(member.get("Role") or "").lower(),
                        status=str(member.get("Status") or "").lower(),
                    )
                    for member in item.get("Members") or []
                    if member.get("ReplicationGroupId")
                ),
                key=lambda member: (ROLES.index(member.role) if member.role in ROLES else len(ROLES), member.region, member.replication_group),
            )
        )
        parsed.append(
            GlobalDatastore(
                account_id=account_id,
                global_id=global_id,
                status=str(item.get("Status") or "").lower(),
                engine=str(item.get("Engine") or "").lower(),
                engine_version=str(item.get("EngineVersion") or ""),
                members=members,
            )
        )
    return parsed


def merge_global_datastores(listings: Iterable[Iterable[GlobalDatastore]]) -> list[GlobalDatastore]:
    """One record per (account, global datastore) from the listings of several regions (the later listing wins)."""
    merged: dict[tuple[str, str], GlobalDatastore] = {}
    for listing in listings:
        for datastore in listing:
            merged[datastore.key] = datastore
    return [merged[key] for key in sorted(merged)]


def describe_global_datastores(api: AwsApi, region: str, account_id: str) -> list[GlobalDatastore]:
    """The global datastores listed in ``region``, with their members; a region where the call is refused as unknown
    lists none (an endpoint without Global Datastore), any other failure is raised."""
    client = api.client("elasticache", region)
    try:
        items = api.paginate(client, "describe_global_replication_groups", "GlobalReplicationGroups", ShowMemberInfo=True)
    except AwsCallError as err:
        if err.kind == "unsupported":
            log.debug("describe_global_replication_groups in %s: %s", region, err)
            return []
        raise
    return parse_global_datastores(items, account_id)


def secondary_groups(datastores: Iterable[GlobalDatastore]) -> set[tuple[str, str, str]]:
    """(account, region, replication group) of every secondary member: the clusters that publish
    GlobalDatastoreReplicationLag."""
    return {(d.account_id, m.region, m.replication_group) for d in datastores for m in d.members_of("secondary")}
