"""A cluster-mode node: CLUSTER INFO as ``redis_cluster_*`` samples each scrape, and CLUSTER NODES now and then for the
slots the node serves and its shard's primary (``slots``). Sent only where INFO says ``cluster_enabled:1``."""

from __future__ import annotations

from typing import Any

from exporter.common.families import GAUGE, FamilySet

from .command import Args, Doc, NodeView, ScrapeCommand, Scraped, T, text
from .info import parse_number, parse_value
from .info_fields import CLUSTER_INFO_FIELDS
from .info_metrics import KNOWN_METRIC_NAMES, metric_name_for_unknown

NODES_REFRESH = 30.0  # seconds between reads of CLUSTER NODES on a cluster-mode node


def add_cluster_info(replies: list[Any], scraped: Scraped, out: FamilySet) -> None:
    """Fields of ``CLUSTER INFO`` as ``redis_cluster_*`` samples."""
    base = scraped.base
    for reply in replies:
        for line in text(reply).split("\n"):
            name, sep, raw = line.strip().partition(":")
            if not sep:
                continue
            spec = CLUSTER_INFO_FIELDS.get(name)
            if spec is not None:
                value = parse_value(raw)
                if value is not None:
                    out.add(spec.name, spec.kind, spec.help, base, value)
                continue
            value = parse_number(raw)
            if value is not None:
                metric = metric_name_for_unknown(name if name.startswith("cluster_") else "cluster_" + name)
                if metric not in KNOWN_METRIC_NAMES:
                    out.add(metric, GAUGE, f"CLUSTER INFO field {name}.", base, value)


def _info_args(node: NodeView) -> list[Args]:
    return [("CLUSTER", "INFO")] if node.cluster_enabled else []


def _nodes_args(node: NodeView) -> list[Args]:
    return [("CLUSTER", "NODES")] if node.cluster_enabled and node.cluster_nodes_due() else []


COMMANDS = (
    ScrapeCommand("cluster", _info_args, (bytes,), gate="cluster", families=add_cluster_info,
                  docs=(Doc("redis_cluster_<field>", "gauge", T, "`CLUSTER INFO` (only when `cluster_enabled:1`)",
                            "every numeric field the table above lacks"),)),
    ScrapeCommand("cluster_nodes", _nodes_args, (bytes,), gate="cluster", on_reply=lambda node, reply: node.on_cluster_nodes(reply)),
)  # fmt: skip
