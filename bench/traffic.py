"""Production-like traffic for the benchmarks: what reaches a node between two scrapes.

A node that only exporters read stands still between scrapes, and an exporter that replays what stood still then looks
better than it is. Before each scrape the benchmarks send one pipeline of about 25 kinds of command (strings, hashes,
lists, sets, sorted sets, expiries, hits and misses), so INFO's commandstats, latencystats, keyspace hits and misses,
byte counters and the latency histograms of those commands move as they do on a node in production. The keys live
under one prefix and stay few and small, so the data set does not grow over a run.
"""

from __future__ import annotations

import random

import redis

PREFIX = "bench:traffic:"


class Traffic:
    """One client of one server; ``send()`` sends one pipeline."""

    def __init__(self, port: int, seed: int = 1) -> None:
        self._client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
        self._random = random.Random(seed)

    def send(self) -> None:
        n = self._random.randrange(1000)
        key, other = f"{PREFIX}{n % 64}", f"{PREFIX}{(n + 1) % 64}"
        pipe = self._client.pipeline(transaction=False)
        pipe.set(key, "v" * (n % 200 + 1))
        pipe.get(key)  # a hit
        pipe.get(f"{PREFIX}missing:{n}")  # a miss
        pipe.incr(f"{PREFIX}counter")
        pipe.incrby(f"{PREFIX}counter", n)
        pipe.decr(f"{PREFIX}counter")
        pipe.mset({key: "m", other: "n"})
        pipe.mget(key, other, f"{PREFIX}missing")
        pipe.append(other, "x")
        pipe.strlen(other)
        pipe.hset(f"{PREFIX}hash", f"f{n % 32}", n)
        pipe.hget(f"{PREFIX}hash", f"f{n % 32}")
        pipe.hgetall(f"{PREFIX}hash")
        pipe.lpush(f"{PREFIX}list", n)
        pipe.ltrim(f"{PREFIX}list", 0, 99)
        pipe.lrange(f"{PREFIX}list", 0, 9)
        pipe.sadd(f"{PREFIX}set", n % 128)
        pipe.sismember(f"{PREFIX}set", n % 7)
        pipe.scard(f"{PREFIX}set")
        pipe.zadd(f"{PREFIX}zset", {f"m{n % 128}": n})
        pipe.zrange(f"{PREFIX}zset", 0, 9, withscores=True)
        pipe.zscore(f"{PREFIX}zset", f"m{n % 128}")
        pipe.expire(key, 300)
        pipe.ttl(key)
        pipe.exists(key, other)
        pipe.delete(f"{PREFIX}missing:{n}")
        pipe.ping()
        pipe.execute()

    def close(self) -> None:
        self._client.close()
