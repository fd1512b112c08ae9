"""Splitting one target list over several exporter processes: process ``index`` of ``count`` scrapes the targets
whose name hashes to ``index``, by the hash of Prometheus' ``hashmod`` relabel action (MD5 of the value, its
last eight bytes as a big-endian integer, modulo the count), so an exporter shard and a Prometheus shard given
the same names and count pick the same targets.

The count is given (``INDEX/COUNT``) or, with ``INDEX/auto``, read at run time: the replicas of the pod's own
StatefulSet (``exporter.service.kubernetes``), so scaling the StatefulSet re-shards. Until it is known the shard
owns nothing: a shard that guessed its count would scrape targets another shard scrapes too, or none would."""

from __future__ import annotations

from functools import lru_cache

from exporter.common.records import record

MAX_SHARDS = 1024
AUTO = "auto"
# where Kubernetes mounts a pod's service account token and the API's CA
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@record(frozen=True)
class Shard:
    index: int
    count: int  # 0: not known yet (an automatic count before its first read)
    auto: bool = False  # the count is the replicas of the pod's StatefulSet, read at run time

    def owns(self, name: str) -> bool:
        """A shard beyond the count (a pod the StatefulSet is scaling away) or of an unknown count owns nothing."""
        return self.index < self.count and (self.count == 1 or hashmod(name, self.count) == self.index)

    @property
    def known(self) -> bool:
        return self.count > 0

    def with_count(self, count: int) -> Shard:
        return Shard(self.index, count, self.auto)

    def __str__(self) -> str:
        if self.auto:
            return f"{self.index}/{AUTO} ({self.count})" if self.known else f"{self.index}/{AUTO}"
        return f"{self.index}/{self.count}"


@lru_cache(maxsize=65536)  # asked on every /metrics for every target: a name's shard never changes
def hashmod(value: str, modulus: int) -> int:
    import hashlib  # only a sharded exporter loads it

    digest = hashlib.md5(value.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[8:], "big") % modulus


def parse_shard(text: str) -> Shard:
    """``"i/n"`` with 0 <= i < n <= 1024, or ``"i/auto"`` with i < 1024 (the count read at run time, 0 until then); a
    one-line ``ValueError`` otherwise."""
    index_text, slash, count_text = text.strip().partition("/")
    auto = count_text == AUTO
    if not slash or not (index_text.isascii() and index_text.isdigit()) or not (auto or (count_text.isascii() and count_text.isdigit())):
        raise ValueError(f"must be INDEX/COUNT such as 0/3, or INDEX/auto (the count from the pod's StatefulSet), got {text!r}")
    index = int(index_text)
    if auto:
        if index >= MAX_SHARDS:
            raise ValueError(f"the index must be below {MAX_SHARDS}, got {index}")
        return Shard(index, 0, auto=True)
    count = int(count_text)
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"the count must be 1 to {MAX_SHARDS}, got {count}")
    if index >= count:
        raise ValueError(f"the index must be below the count ({count}), got {index}: shards are numbered from 0")
    return Shard(index, count)


@record(frozen=True)
class StatefulSetRef:
    """The StatefulSet whose replicas are the count of ``INDEX/auto``."""

    namespace: str
    name: str

    @property
    def path(self) -> str:
        """Its path on the Kubernetes API (names are DNS labels and subdomains: nothing to escape)."""
        return f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/{self.name}"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_statefulset(text: str) -> StatefulSetRef:
    """``NAMESPACE/NAME``, each a name as Kubernetes allows it (a DNS label, a DNS subdomain); a one-line
    ``ValueError`` otherwise."""
    namespace, slash, name = text.strip().partition("/")
    if not slash or not _dns_name(namespace, 63, dots=False) or not _dns_name(name, 253, dots=True):
        raise ValueError(f"must be NAMESPACE/NAME of a StatefulSet, such as monitoring/elasticache-exporter, got {text!r}")
    return StatefulSetRef(namespace, name)


_DNS_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def _dns_name(text: str, longest: int, *, dots: bool) -> bool:
    allowed = _DNS_CHARACTERS | {"."} if dots else _DNS_CHARACTERS
    return 0 < len(text) <= longest and set(text) <= allowed and text[0].isalnum() and text[-1].isalnum()
