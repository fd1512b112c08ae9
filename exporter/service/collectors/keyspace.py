"""The keyspace by prefix, from the keyspace profiler's latest sample of each database (read in the background)."""

from __future__ import annotations

import time

from exporter.common.families import GAUGE, FamilyCollector, FamilySet
from exporter.common.labels import instance_labels
from exporter.redis.keyspace import KeyspaceProfiler

from .profiles import add_failures

ESTIMATE = "estimated from the latest sample, scaled to the database's key count"
BOUND = "95 % confidence bound of elasticache_keyspace_prefix_keys: the true count lies outside [lower, upper] in about one sample of 20"


class KeyspaceCollector(FamilyCollector):
    def __init__(self, profiler: KeyspaceProfiler) -> None:
        self._profiler = profiler

    def write(self, out: FamilySet) -> None:
        profiles, errors, durations = self._profiler.snapshot()
        now = time.time()
        for name, dbs in sorted(profiles.items()):
            base = instance_labels(name)
            for db, result in sorted(dbs.items()):
                labels = {**base, "db": db}
                for prefix, keys in sorted(result.prefix_keys.items()):
                    out.add("elasticache_keyspace_prefix_keys", GAUGE, f"Keys by prefix, {ESTIMATE}.", {**labels, "prefix": prefix}, keys)
                for prefix, (lower, upper) in sorted(result.prefix_keys_bounds.items()):
                    out.add("elasticache_keyspace_prefix_keys_lower", GAUGE, f"Lower {BOUND}.", {**labels, "prefix": prefix}, lower)
                    out.add("elasticache_keyspace_prefix_keys_upper", GAUGE, f"Upper {BOUND}.", {**labels, "prefix": prefix}, upper)
                for prefix, used in sorted(result.prefix_memory.items()):
                    out.add(
                        "elasticache_keyspace_prefix_memory_bytes",
                        GAUGE,
                        f"Memory (MEMORY USAGE) by prefix, {ESTIMATE}.",
                        {**labels, "prefix": prefix},
                        used,
                    )
                for prefix in sorted(result.prefix_keys):
                    out.add(
                        "elasticache_keyspace_prefix_keys_without_ttl",
                        GAUGE,
                        f"Keys without a TTL by prefix, {ESTIMATE}.",
                        {**labels, "prefix": prefix},
                        result.prefix_without_ttl.get(prefix, 0.0),
                    )
                for window, keys in result.expiring.items():
                    out.add(
                        "elasticache_keyspace_expiring_keys",
                        GAUGE,
                        f"Keys whose TTL ends within 1m, 5m or 1h, {ESTIMATE}.",
                        {**labels, "within": window},
                        keys,
                    )
                for used, key, kind in result.big_keys:
                    out.add(
                        "elasticache_keyspace_big_key_memory_bytes",
                        GAUGE,
                        "The largest keys of the latest sample (MEMORY USAGE); names cut at 100 bytes.",
                        {**labels, "key": key, "type": kind},
                        float(used),
                    )
                for freq, key, kind in result.hot_keys:
                    out.add(
                        "elasticache_keyspace_hot_key_frequency",
                        GAUGE,
                        "The most used keys of the latest sample by their LFU counter "
                        "(OBJECT FREQ, logarithmic; only under an LFU maxmemory policy); names cut at 100 bytes.",
                        {**labels, "key": key, "type": kind},
                        float(freq),
                    )
                out.add(
                    "elasticache_keyspace_sample_keys", GAUGE, "Distinct keys in the latest sample of the database.", labels, float(result.sampled)
                )
                out.add(
                    "elasticache_keyspace_sample_age_seconds", GAUGE, "Seconds since the database was last sampled.", labels, now - result.read_at
                )
            out.add(
                "elasticache_exporter_keyspace_sample_duration_seconds",
                GAUGE,
                "Duration of the last sample of every database.",
                base,
                durations.get(name, 0.0),
            )
        add_failures(out, "elasticache_exporter_keyspace_sample_errors_total", "Keyspace samples that failed, by kind.", errors)
