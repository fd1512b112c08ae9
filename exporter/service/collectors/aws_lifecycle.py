"""Beyond one region and one engine version, as served: the Global Datastores and their members, and where each
cluster's engine stands against the end of its support. Reads what the monitor keeps: nothing here calls AWS.

Each series is fleet-wide, so a sharded exporter serves it on one shard only: ``owns`` is asked about the name of the
group it describes (the Global Datastore's id, the replication group's name), as a node is served by the shard that
owns its name."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from exporter.aws.engine_support import ClusterSupport
from exporter.aws.global_datastores import ASSOCIATED, ROLES, GlobalDatastore
from exporter.common.families import GAUGE, FamilySet


def add_global_datastores(datastores: Iterable[GlobalDatastore], out: FamilySet, owns: Callable[[str], bool]) -> None:
    for datastore in datastores:
        if not owns(datastore.global_id):
            continue
        where = {"account_id": datastore.account_id, "global_replication_group": datastore.global_id}
        out.add(
            "elasticache_global_datastore_info",
            GAUGE,
            "A Global Datastore (DescribeGlobalReplicationGroups) and its status.",
            {**where, "status": datastore.status, "engine": datastore.engine, "engine_version": datastore.engine_version},
            1.0,
        )
        for role in ROLES:
            out.add(
                "elasticache_global_datastore_members",
                GAUGE,
                "The Global Datastore's member clusters of each role (0 secondaries: it replicates nowhere).",
                {**where, "role": role},
                float(len(datastore.members_of(role))),
            )
        for member in datastore.members:
            labels = {**where, "replication_group": member.replication_group, "region": member.region, "role": member.role}
            out.add("elasticache_global_datastore_member_info", GAUGE, "A member cluster of a Global Datastore, in its region.", labels, 1.0)
            out.add(
                "elasticache_global_datastore_member_associated",
                GAUGE,
                "1 while the member's status is associated (replicating), else 0 (associating, disassociating, ...).",
                labels,
                1.0 if member.status == ASSOCIATED else 0.0,
            )


def add_engine_support(clusters: Iterable[ClusterSupport], out: FamilySet, owns: Callable[[str], bool]) -> None:
    """A count of clusters on an unknown version belongs to no one group: it counts the whole fleet's, on the shard that
    owns the version (``engine engine_version``)."""
    unknown: dict[tuple[str, str, str, str], int] = {}
    for cluster in clusters:
        row = cluster.row
        if row is None:
            key = (cluster.account_id, cluster.region, cluster.engine, cluster.engine_version)
            unknown[key] = unknown.get(key, 0) + 1
            continue
        if not owns(cluster.replication_group):
            continue
        where = {
            "account_id": cluster.account_id,
            "region": cluster.region,
            "replication_group": cluster.replication_group,
            "engine": cluster.engine,
            "engine_version": cluster.engine_version,
        }
        for phase, end in (("standard", row.standard_end), ("extended", row.extended_end)):
            if end is not None:
                out.add(
                    "elasticache_engine_support_end_timestamp_seconds",
                    GAUGE,
                    "When the cluster's engine major version leaves standard support (phase standard: Extended Support is billed "
                    "from the next month) or Extended Support (phase extended: ElastiCache upgrades the cache itself).",
                    {**where, "phase": phase},
                    end,
                )
        if row.standard_end is not None:
            out.add(
                "elasticache_engine_support_upgrade_info",
                GAUGE,
                "The engine version AWS recommends moving to, for a cluster whose version has an end of support.",
                {**where, "upgrade_to": row.upgrade_to},
                1.0,
            )
    for (account_id, region, engine, version), count in sorted(unknown.items()):
        if not owns(f"{engine} {version}"):
            continue
        out.add(
            "elasticache_engine_support_unknown_clusters",
            GAUGE,
            "Clusters on an engine version the end-of-support table lacks (its support dates are not guessed).",
            {"account_id": account_id, "region": region, "engine": engine, "engine_version": version},
            float(count),
        )
