"""Splitting one target list over several exporter processes: process ``index`` of ``count`` scrapes the targets
whose name hashes to ``index``, by the hash of Prometheus' ``hashmod`` relabel action (MD5 of the value, its
last eight bytes as a big-endian integer, modulo the count), so an exporter shard and a Prometheus shard given
the same names and count pick the same targets."""

from __future__ import annotations

from functools import lru_cache

from exporter.common.records import record


@record(frozen=True)
class Shard:
    index: int
    count: int

    def owns(self, name: str) -> bool:
        return self.count <= 1 or hashmod(name, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@lru_cache(maxsize=65536)  # asked on every /metrics for every target: a name's shard never changes
def hashmod(value: str, modulus: int) -> int:
    import hashlib  # only a sharded exporter loads it

    digest = hashlib.md5(value.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[8:], "big") % modulus


def parse_shard(text: str) -> Shard:
    """``"i/n"`` with 0 <= i < n <= 1024; a one-line ``ValueError`` otherwise."""
    index_text, slash, count_text = text.strip().partition("/")
    if not slash or not (index_text.isascii() and index_text.isdigit()) or not (count_text.isascii() and count_text.isdigit()):
        raise ValueError(f"must be INDEX/COUNT such as 0/3, got {text!r}")
    index, count = int(index_text), int(count_text)
    if not 1 <= count <= 1024:
        raise ValueError(f"the count must be 1 to 1024, got {count}")
    if index >= count:
        raise ValueError(f"the index must be below the count ({count}), got {index}: shards are numbered from 0")
    return Shard(index, count)
