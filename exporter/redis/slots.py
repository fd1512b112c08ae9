"""Cluster-mode slots: which slot a key hashes to, and which slots a node serves (pure functions)."""

from __future__ import annotations

import re

SLOTS = 16384


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_TABLE = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM, the checksum Redis Cluster hashes keys with."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ byte) & 0xFF]
    return crc


def key_slot(key: bytes) -> int:
    """The slot of ``key``, honouring a non-empty ``{hash tag}`` as Redis does."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key) % SLOTS


def node_lines(cluster_nodes: str) -> tuple[list[list[str]], list[str] | None]:
    lines = [line.split() for line in cluster_nodes.splitlines() if line.strip()]
    myself = next((fields for fields in lines if len(fields) >= 8 and "myself" in fields[2].split(",")), None)
    return lines, myself


def is_replica(fields: list[str]) -> bool:
    flags = fields[2].split(",")
    return "slave" in flags or "replica" in flags


def shard_primary(cluster_nodes: str) -> str | None:
    """The node id of the primary of this node's shard (its own id for a primary), from ``CLUSTER NODES``."""
    _, myself = node_lines(cluster_nodes)
    if myself is None:
        return None
    if is_replica(myself):
        return myself[3] if len(myself[3]) == 40 else None
    return myself[0]


NAMED_RANGES = 3  # a shard with more slot ranges than this is named by its first range and their count
_SLOT_NAME = re.compile(r"\d{1,5}(-\d{1,5})?(,\d{1,5}(-\d{1,5})?)*(,\+\d+)?")  # never a node id: 40 hex digits


def shard_name(slots: frozenset[int], fallback: str) -> str:
    """A cluster-mode shard's name: its slot ranges (``0-5460``; ``0-99,5461-5560``). A failover keeps it (the promoted
    replica serves the same slots) where the primary's node id changes; only a resharding renames. Past three ranges,
    the first and how many (``0-99,+4``): a slot belongs to one shard at a time, so that is still unique. A shard that
    serves no slot is named ``fallback`` (its primary's node id)."""
    if not slots:
        return fallback
    ranges: list[str] = []
    ordered = sorted(slots)
    first = previous = ordered[0]
    for slot in [*ordered[1:], SLOTS + 1]:
        if slot != previous + 1:
            ranges.append(str(first) if first == previous else f"{first}-{previous}")
            first = slot
        previous = slot
    if len(ranges) > NAMED_RANGES:
        return f"{ranges[0]},+{len(ranges) - 1}"
    return ",".join(ranges)


def named_by_slots(shard: str) -> bool:
    """Whether a cluster shard's name is its slot ranges (:func:`shard_name`), not a node id: unique only within its
    cluster, where a node id is unique anywhere."""
    return _SLOT_NAME.fullmatch(shard) is not None


def owned_slots(cluster_nodes: str) -> frozenset[int]:
    """The slots this node serves reads of, from its ``CLUSTER NODES`` reply: its own slots for a
    primary, its primary's for a replica (which answers them after READONLY). Slots being migrated
    (``[slot->-id]``) are left out: a read there may be redirected."""
    lines, myself = node_lines(cluster_nodes)
    if myself is None:
        return frozenset()
    owner = myself
    if is_replica(myself):
        primary = next((fields for fields in lines if fields[0] == myself[3]), None)
        if primary is None:
            return frozenset()
        owner = primary
    return slot_entries(owner[8:])


def slot_entries(entries: list[str]) -> frozenset[int]:
    """The slots of ``CLUSTER NODES`` slot fields (``5``, ``0-5460``), leaving out those being migrated (``[...]``)."""
    slots: set[int] = set()
    for entry in entries:
        if entry.startswith("["):
            continue
        low, _, high = entry.partition("-")
        if not (low.isascii() and low.isdigit()) or (high and not (high.isascii() and high.isdigit())):
            continue
        first, last = int(low), int(high or low)
        if 0 <= first <= last < SLOTS:
            slots.update(range(first, last + 1))
    return frozenset(slots)
