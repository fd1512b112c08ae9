"""Which key prefixes hold a node's keys and memory, which carry no TTL, and which expire soon together: a sample of
the keyspace read in the background every ``keyspace.interval`` under a key budget (RANDOMKEY, then TYPE, PTTL and
MEMORY USAGE with a small sample count, pipelined), scaled to each database's key count. Never inside a scrape.

``RANDOMKEY`` draws fairly enough: Redis and Valkey take a few neighbouring entries of the table and pick one of them,
so a long chain does not hide its keys, and a key's chance of being drawn does not depend on its prefix (the hash is
seeded at random). It does depend on where the key sits: on Redis 7.0 and 8.2 the chances of a table's keys vary by
26 % (their coefficient of variation; Valkey 8.1 draws evenly), which gives each table layout an error of its own, as
likely up as down: up to about a fifth of the sampling error (2,000 draws of 2,200 keys), a twentieth at 2,000 draws
of 50,000. Measured there, with the table sparse, dense (three keys a bucket, a fork child keeping it from growing)
and the prefixes written in blocks or mixed, the spread of the estimates was within 5 % of the binomial one. Each
prefix's key count is served with its 95 % bounds (:func:`count_bounds`: the sampling error and the layout's), with
the sample's size and age. A database of no more keys than the sample is read whole with ``SCAN`` instead: random
draws would miss some of its keys, a walk of the table misses none (where the walk cannot finish, the draws stand in).
In cluster mode only primaries are profiled, so that each key counts once.
"""

from __future__ import annotations

import heapq
import math
import re
import time
from typing import Any

from exporter.common.records import field, record

from .node import RedisNode
from .node_loop import NodeProfiler, Targets
from .resp import ErrorReply

NO_PREFIX, OTHER = "(none)", "(other)"
EXPIRY_WINDOWS = (("1m", 60_000), ("5m", 300_000), ("1h", 3_600_000))  # keys whose TTL ends within each
BIG_KEYS = 10
MAX_KEY_LABEL = 100
Z95 = 1.959963984540054  # the standard normal quantile of 0.975: two-sided 95 % bounds
DRAW_SPREAD = 0.26  # how much RANDOMKEY's chance of drawing a key varies with its place in the table (Redis 7.0, 8.2)


@record(frozen=True)
class KeyspaceConfig:
    enabled: bool = False
    interval: float = 300.0
    sample: int = 2000  # keys drawn per database and interval: the budget
    delimiters: str = ":"
    depth: int = 2
    top: int = 20  # prefixes served by name (by memory); the rest add up in (other)


def key_prefix(key: str, delimiters: str, depth: int) -> str:
    """The first ``depth`` parts of a key split on any of ``delimiters``, never the whole key (its last part is the id):
    ``session:user:42`` → ``session:user``, ``cache:42`` → ``cache``, ``plain`` → ``(none)``."""
    parts = re.split("[" + re.escape(delimiters) + "]", key) if delimiters else [key]
    kept = min(depth, len(parts) - 1)
    if kept <= 0:
        return NO_PREFIX
    end = 0
    for _ in range(kept):  # the prefix as written, with its own delimiters
        end = next(i for i in range(end, len(key)) if key[i] in delimiters) + 1
    return key[: end - 1]


def count_bounds(hits: int, sampled: int, population: int, spread: float = DRAW_SPREAD, z: float = Z95) -> tuple[float, float]:
    """The 95 % confidence bounds of how many of ``population`` keys share a property (a prefix), ``hits`` of ``sampled``
    distinct keys drawn at random having it; the estimate is ``population * hits / sampled``.

    The distinct keys of uniform draws are a simple random sample without replacement, and the share p's variance is
    p(1-p)/n times the finite-population correction (N-n)/(N-1). Draws whose chances vary by ``spread`` from key to key
    add a variance of their own, fixed for a table layout: p(1-p)/N times the square of (``spread`` times λ(1-s)/s),
    where s = n/N is the share of the keys sampled and λ = -ln(1-s) the draws per key that took them: a key's chance of
    being in the sample, 1 - exp(-λw) for a weight w, varies by λ(1-s)/s times w's variation (a key drawn twice counts
    once, which evens the chances out). Wilson's score interval is taken for the sample size of that
    variance (the plain ±z·sqrt(p(1-p)/n) would give a prefix seen once or never a bound below zero, or none at all),
    and then held to what the sample proves: at least ``hits`` keys have the property and ``sampled - hits`` do not.
    A database read whole (no fewer keys sampled than it holds) is known exactly."""
    if sampled <= 0:
        return 0.0, float(population)
    estimate = population * hits / sampled
    if population <= sampled:
        return estimate, estimate
    seen = sampled / population
    repeats = -math.log1p(-seen) * (1 - seen) / seen  # 1 for a sample of few keys, down to 0 as it takes them all
    draws = 1 / ((population - sampled) / ((population - 1) * sampled) + (spread * repeats) ** 2 / population)
    share = hits / sampled
    squared = z * z / draws
    centre = (share + squared / 2) / (1 + squared)
    half = z / (1 + squared) * math.sqrt(share * (1 - share) / draws + squared / (4 * draws))
    low = max(population * (centre - half), float(hits))
    high = min(population * (centre + half), float(population - (sampled - hits)))
    return min(low, estimate), max(high, estimate)


@record(frozen=True)
class DbProfile:
    keys: int  # the database's key count when sampled
    sampled: int
    prefix_keys: dict[str, float] = field(factory=dict)  # estimates, scaled to ``keys``
    prefix_memory: dict[str, float] = field(factory=dict)
    prefix_without_ttl: dict[str, float] = field(factory=dict)
    expiring: dict[str, float] = field(factory=dict)  # window -> keys whose TTL ends within it
    big_keys: list[tuple[int, str, str]] = field(factory=list)  # (bytes, key, type) of the largest sampled keys
    read_at: float = 0.0
    hot_keys: list[tuple[int, str, str]] = field(factory=list)  # (LFU counter, key, type) of the most used sampled keys (LFU policies)
    prefix_keys_bounds: dict[str, tuple[float, float]] = field(factory=dict)  # 95 % confidence bounds of ``prefix_keys``


def profile_db(
    keys: int,
    sampled: list[tuple[str, str, int, int | None]],
    config: KeyspaceConfig,
    read_at: float = 0.0,
    frequencies: dict[str, int] | None = None,
) -> DbProfile:
    """``sampled``: (key, type, PTTL in ms, MEMORY USAGE or None) of distinct sampled keys of a database of ``keys``;
    ``frequencies``: their OBJECT FREQ, where the maxmemory policy is LFU."""
    if not sampled:
        return DbProfile(keys, 0, read_at=read_at)
    scale = keys / len(sampled)
    count: dict[str, int] = {}
    memory: dict[str, int] = {}
    no_ttl: dict[str, int] = {}
    expiring = dict.fromkeys((window for window, _ in EXPIRY_WINDOWS), 0)
    for key, _, ttl, used in sampled:
        prefix = key_prefix(key, config.delimiters, config.depth)
        count[prefix] = count.get(prefix, 0) + 1
        memory[prefix] = memory.get(prefix, 0) + (used or 0)
        if ttl == -1:
            no_ttl[prefix] = no_ttl.get(prefix, 0) + 1
        for window, millis in EXPIRY_WINDOWS:
            if 0 <= ttl <= millis:
                expiring[window] += 1
    ranked = sorted(count, key=lambda p: (-memory[p], -count[p], p))
    kept = set(ranked[: config.top])

    def totals(values: dict[str, int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for prefix in count:
            name = prefix if prefix in kept else OTHER
            out[name] = out.get(name, 0) + values.get(prefix, 0)
        return out

    def folded(values: dict[str, int]) -> dict[str, float]:
        return {name: total * scale for name, total in totals(values).items()}

    big = heapq.nlargest(BIG_KEYS, ((used, key[:MAX_KEY_LABEL], kind) for key, kind, _, used in sampled if used))
    measured = any(used is not None for _, _, _, used in sampled)  # MEMORY USAGE renamed away or refused: no memory figures
    kinds = {key: kind for key, kind, _, _ in sampled}
    hot = heapq.nlargest(BIG_KEYS, ((freq, key[:MAX_KEY_LABEL], kinds.get(key, "")) for key, freq in (frequencies or {}).items()))
    return DbProfile(
        keys,
        len(sampled),
        folded(count),
        folded(memory) if measured else {},
        folded(no_ttl),
        {window: n * scale for window, n in expiring.items()},
        big,
        read_at,
        hot,
        {name: count_bounds(hits, len(sampled), keys) for name, hits in totals(count).items()},
    )


_KEYSPACE_LINE = re.compile(r"^db(\d+):keys=(\d+)", re.M)


class KeyspaceProfiler(NodeProfiler):
    """Samples the keyspace of one node per replication group and shard (a replica where one is a target: the
    primary serves the application), from one background thread. Targets of no known group are each sampled, the
    primaries only in cluster mode."""

    BATCH = 200  # keys per round trip
    what = "keyspace: sampling"

    def __init__(self, config: KeyspaceConfig, targets: Targets, max_reply_bytes: int) -> None:
        super().__init__("keyspace-profiler", targets, config.interval, max_reply_bytes=max_reply_bytes)
        self.config = config
        self._for_group: set[str] = set()  # the targets sampled for their whole group (a replica may be one)
        self._sampling_for_group = False  # the node being visited is one of those

    def visit_round(self) -> None:
        chosen = self._one_per_group()
        for name, (_, node) in list(self._nodes.items()):
            if self._stop.is_set():
                return
            if name in chosen:
                self.visit(name, node)
            else:
                self.forget(name)  # its group is sampled on another node

    def _one_per_group(self) -> set[str]:
        """The targets to sample: per replication group and shard with several targets, the first replica by name
        (the first target where no role could be read); every target of no known group."""
        groups: dict[tuple[str, str], list[str]] = {}
        chosen = set()
        for target in self.members:
            if target.replication_group:
                groups.setdefault((target.replication_group, target.shard), []).append(target.name)
            else:
                chosen.add(target.name)
        self._for_group = set()
        for names in groups.values():
            names.sort()
            replicas = [name for name in names if len(names) > 1 and self._role(name) == "replica"]
            pick = (replicas or names)[0]
            chosen.add(pick)
            if len(names) > 1:
                self._for_group.add(pick)
        return chosen

    def _role(self, name: str) -> str:
        try:
            (replication,) = self._nodes[name][1].call_many([("INFO", "replication")])
        except Exception:  # noqa: BLE001 - an unreadable node is not chosen as the group's replica
            return ""
        return "replica" if isinstance(replication, bytes) and b"role:slave" in replication else "primary"

    def visit(self, name: str, node: RedisNode) -> None:
        self._sampling_for_group = name in self._for_group
        super().visit(name, node)

    def read(self, node: RedisNode) -> dict[str, DbProfile] | None:
        """Each database's profile; None where RANDOMKEY is renamed away, or for a cluster replica of no known group."""
        info, replication, memory_info = node.call_many([("INFO", "keyspace"), ("INFO", "replication"), ("INFO", "memory")])
        if not isinstance(info, bytes) or not node.allows("randomkey", known_only=True):
            return None
        replica = not (isinstance(replication, bytes) and b"role:master" in replication)
        if node.cluster_enabled and replica:
            if not self._sampling_for_group:
                return None  # a replica's keys are its primary's: counted there
            node.call_many([("READONLY",)])  # a cluster replica serves its keys only to a READONLY connection
        memory = node.allows("memory", known_only=True)
        # OBJECT FREQ answers only under an LFU policy (an error otherwise): asked for only then
        lfu = (
            node.allows("object", known_only=True)
            and isinstance(memory_info, bytes)
            and b"maxmemory_policy:" in memory_info
            and b"lfu" in memory_info.split(b"maxmemory_policy:", 1)[1].split(b"\r\n", 1)[0]
        )
        result: dict[str, DbProfile] = {}
        for db, keys in _KEYSPACE_LINE.findall(info.decode("latin-1")):
            if int(keys) == 0 or (node.cluster_enabled and db != "0"):
                continue
            sampled, frequencies = self._sample_db(node, int(db), int(keys), memory, lfu)
            result[f"db{db}"] = profile_db(int(keys), sampled, self.config, time.time(), frequencies)
        return result

    def _sample_db(
        self, node: RedisNode, db: int, key_count: int, memory: bool, lfu: bool
    ) -> tuple[list[tuple[str, str, int, int | None]], dict[str, int]]:
        select = [("SELECT", str(db))] if not node.cluster_enabled else []
        restore = [("SELECT", str(node.endpoint.db))] if select else []
        whole = self._scan_all(node, select, restore) if key_count <= self.config.sample and node.allows("scan", known_only=True) else None
        drawn = whole if whole is not None else self._draw(node, select, restore)
        keys = sorted(drawn)
        sampled: list[tuple[str, str, int, int | None]] = []
        frequencies: dict[str, int] = {}
        for start in range(0, len(keys), self.BATCH):
            chunk = keys[start : start + self.BATCH]
            commands: list[tuple[Any, ...]] = list(select)
            for key in chunk:
                commands += [("TYPE", key), ("PTTL", key)]
                commands += [("MEMORY", "USAGE", key, "SAMPLES", "5")] if memory else []
                commands += [("OBJECT", "FREQ", key)] if lfu else []
            replies = node.call_many([*commands, *restore])[len(select) :]
            step = 2 + memory + lfu
            for i, key in enumerate(chunk):
                kind, ttl = replies[i * step], replies[i * step + 1]
                used = replies[i * step + 2] if memory else None
                if kind == b"none" or not isinstance(ttl, int):
                    continue  # deleted between the draw and the look
                name = key.decode("utf-8", "replace")
                sampled.append((name, kind.decode() if isinstance(kind, bytes) else "", ttl, used if isinstance(used, int) else None))
                freq = replies[i * step + step - 1] if lfu else None
                if isinstance(freq, int):
                    frequencies[name] = freq
        return sampled, frequencies

    def _draw(self, node: RedisNode, select: list[tuple[str, str]], restore: list[tuple[str, str]]) -> set[bytes]:
        drawn: set[bytes] = set()
        for start in range(0, self.config.sample, self.BATCH):
            count = min(self.BATCH, self.config.sample - start)
            replies = node.call_many([*select, *[("RANDOMKEY",)] * count, *restore])
            drawn.update(reply for reply in replies[len(select) : len(select) + count] if isinstance(reply, bytes))
        return drawn

    def _scan_all(self, node: RedisNode, select: list[tuple[str, str]], restore: list[tuple[str, str]]) -> set[bytes] | None:
        """Every key of a small database, or None where the walk cannot give them all: SCAN refused (an ACL that
        COMMAND INFO does not show: the node is not asked again), a table too sparse to walk within the budget (a fork
        child running keeps Redis from shrinking it after mass deletes), or a database grown past the sample meanwhile.
        Random draws stand in then: part of a walk would favour one stretch of the table."""
        seen: set[bytes] = set()
        cursor: Any = b"0"
        for _ in range(4 * (self.config.sample // self.BATCH) + 10):  # bounded: a call covers about COUNT buckets
            reply = node.call_many([*select, ("SCAN", cursor, "COUNT", str(self.BATCH)), *restore])[len(select)]
            if isinstance(reply, ErrorReply):
                node.refuse("scan")
                return None
            if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], list)):
                return None
            cursor = reply[0]
            seen.update(key for key in reply[1] if isinstance(key, bytes))
            if len(seen) > self.config.sample:
                return None
            if cursor in (b"0", 0, "0"):
                return seen
        return None
