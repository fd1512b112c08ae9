"""What AWS does to the fleet, as served: events by category, service updates not yet applied, the next maintenance
window and the pending modifications of each replication group, and the tags chosen for routing. Reads what the
monitor keeps: nothing here calls AWS.

A sharded exporter serves each of these series on one shard only, the one that owns the name of the replication group
it is about (``monitor.owns``, as for a node's name); an event of no group (a parameter group's, a user's) goes by its
source's name."""

from __future__ import annotations

from collections.abc import Iterable

from exporter.aws.discovery import Node
from exporter.aws.fleet_events import next_window_start, tag_label
from exporter.aws.monitor import AwsMonitor
from exporter.common.families import COUNTER, GAUGE, FamilySet


def tag_labels(tags: Iterable[tuple[str, str]], export: tuple[str, ...]) -> dict[str, str]:
    """``tag_<key>`` of each exported tag key: the value, or "" where the resource lacks the tag (every series of a family
    then has the same label names)."""
    present = dict(tags)
    return {label: present.get(key, "") for key in export if (label := tag_label(key)) is not None}


def event_group(source_type: str, source_id: str, groups: dict[tuple[str, str, str], str], account_id: str, region: str) -> str:
    """The replication group an event's source belongs to: the group itself, or a cache cluster's group as discovery
    knows it (a cluster outside any group stands for its own); "" for other sources (parameter groups, users)."""
    if source_type == "replication-group":
        return source_id
    if source_type == "cache-cluster":
        return groups.get((account_id, region, source_id), source_id)
    return ""


def add_fleet(monitor: AwsMonitor, now: float, out: FamilySet) -> None:
    fleet = monitor.fleet
    nodes = monitor.nodes()
    if fleet is not None:
        groups = {(node.account_id, node.region, node.cluster_id): node.group for node in nodes}
        for (account_id, region, source_type, source_id, category), total, last in fleet.event_counts():
            group = event_group(source_type, source_id, groups, account_id, region)
            if not monitor.owns(group or source_id):
                continue
            labels = {
                "account_id": account_id,
                "region": region,
                "source_type": source_type,
                "source_id": source_id,
                "category": category,
                "replication_group": group,
            }
            out.add(
                "elasticache_events_total",
                COUNTER,
                "ElastiCache events (DescribeEvents) by source and category, each counted once.",
                labels,
                float(total),
            )
            out.add("elasticache_event_last_timestamp_seconds", GAUGE, "When the newest event of this source and category happened.", labels, last)
        for action in fleet.update_actions():
            if not monitor.owns(action.replication_group):
                continue
            where = {
                "account_id": action.account_id,
                "region": action.region,
                "replication_group": action.replication_group,
                "service_update": action.service_update,
            }
            out.add(
                "elasticache_service_update_info",
                GAUGE,
                "A service update not yet applied to a replication group (DescribeUpdateActions).",
                {**where, "severity": action.severity, "update_type": action.update_type, "status": action.status},
                1.0,
            )
            if action.apply_by is not None:
                out.add(
                    "elasticache_service_update_apply_by_timestamp_seconds", GAUGE, "The update's recommended apply-by date.", where, action.apply_by
                )
            if action.auto_update_start is not None:
                out.add(
                    "elasticache_service_update_auto_update_start_timestamp_seconds",
                    GAUGE,
                    "When AWS applies the update itself (after its apply-by date), where it does.",
                    where,
                    action.auto_update_start,
                )
    _add_groups([node for node in nodes if monitor.owns(node.group)], now, out)


def _add_groups(nodes: list[Node], now: float, out: FamilySet) -> None:
    """Per replication group (a node outside any group counts as one): the next start of its maintenance window and the
    fields of its pending modifications."""
    windows: dict[tuple[str, str, str], float] = {}
    pending: set[tuple[str, str, str, str]] = set()
    for node in nodes:
        group = (node.account_id, node.region, node.group)
        start = next_window_start(node.maintenance_window, now) if node.maintenance_window else None
        if start is not None:
            windows[group] = min(start, windows.get(group, start))
        pending.update((*group, field) for field in node.pending_modifications)
    for (account_id, region, group_name), start in sorted(windows.items()):
        out.add(
            "elasticache_maintenance_window_next_start_timestamp_seconds",
            GAUGE,
            "The next start of the replication group's preferred maintenance window (UTC).",
            {"account_id": account_id, "region": region, "replication_group": group_name},
            start,
        )
    for account_id, region, group_name, field in sorted(pending):
        out.add(
            "elasticache_pending_modification_info",
            GAUGE,
            "A modification of the replication group or its nodes that waits to be applied.",
            {"account_id": account_id, "region": region, "replication_group": group_name, "field": field},
            1.0,
        )
