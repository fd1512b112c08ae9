"""Reading the heartbeat keys in the scrape: MGET of the keys (one per key of the node's own slots in cluster mode) and
TYPE of each, so that a key of another type is told from a missing one. ``replication`` turns the values into lag."""

from __future__ import annotations

from typing import Any

from .command import Args, NodeView, ScrapeCommand
from .resp import RespFailure


def _heartbeat_get_args(node: NodeView) -> list[Args]:
    # MGET answers nil, not an error, for a key of another type; TYPE tells the two apart. In cluster mode one MGET a
    # key of the node's own slots: several keys or another node's key would be an error.
    keys = [key for key in node.heartbeat_keys if node.owns(key)]
    if not keys:
        return []
    return [("MGET", key) for key in keys] if node.cluster_enabled else [("MGET", *keys)]


def _heartbeat_type_args(node: NodeView) -> list[Args]:
    return [("TYPE", key) for key in node.heartbeat_keys if node.owns(key)] if node.allows("heartbeat") else []


HEARTBEAT_COMMANDS = (
    ScrapeCommand("heartbeat", _heartbeat_get_args, (list,), gate="heartbeat", asked=False),
    ScrapeCommand("heartbeat_type", _heartbeat_type_args, (bytes,), gate="heartbeat_type", asked=False),
)


def heartbeat_values(keys: tuple[str, ...], sent: list[Args], replies: list[Any]) -> list[bytes | None]:
    """Each heartbeat key's value from the MGET replies (None: missing, of another type, or another shard's key)."""
    by_key: dict[str, bytes | None] = {}
    for args, reply in zip(sent, replies, strict=True):
        if len(reply) != len(args) - 1:
            raise RespFailure("protocol", f"MGET of {len(args) - 1} keys answered {len(reply)} values")
        by_key.update((key, value if isinstance(value, bytes) else None) for key, value in zip(args[1:], reply, strict=True))
    return [by_key.get(key) for key in keys]
