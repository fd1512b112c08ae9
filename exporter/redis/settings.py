"""What the Redis side needs to reach a node: credentials, TLS, targets, heartbeats (built by exporter.config)."""

from __future__ import annotations

from exporter.common.records import factory, record

from .addresses import Endpoint, HostPattern
from .keys import KeyProbes

DEFAULT_TIMEOUT = 5.0


class Secret:
    """A password read when needed: from a file (re-read on each connect) or a value."""

    def __init__(self, *, value: str | None = None, file: str | None = None, source: str = "") -> None:
        self._value = value
        self.file = file
        self.source = source

    def reveal(self) -> str:
        if self.file is not None:
            with open(self.file, encoding="utf-8") as handle:
                return handle.read().rstrip("\r\n")
        return self._value or ""

    def __repr__(self) -> str:
        return f"Secret(source={self.source!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and (self._value, self.file) == (other._value, other.file)

    def __hash__(self) -> int:
        return hash((self._value, self.file))


@record(frozen=True)
class TlsOptions:
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None
    insecure_skip_verify: bool = False


@record(frozen=True)
class Credentials:
    username: str | None = None
    password: Secret | None = None
    tls: TlsOptions = factory(TlsOptions)
    timeout: float = DEFAULT_TIMEOUT


@record(frozen=True)
class TargetConfig:
    name: str
    endpoint: Endpoint
    credentials: Credentials
    node_type: str = ""
    replication_group: str = ""  # with shard: where the node belongs, for counting masters per shard
    shard: str = ""
    keys: KeyProbes | None = None  # watched keys and streams of this target; None: the config's top-level keys

    @property
    def display(self) -> str:
        return self.endpoint.display()


@record(frozen=True)
class AllowRule:
    """Addresses /scrape may reach beyond the configured targets, and what to send them."""

    hosts: tuple[HostPattern, ...]
    credentials: Credentials

    def matches(self, endpoint: Endpoint) -> bool:
        return any(pattern.matches(endpoint.host) for pattern in self.hosts)


@record(frozen=True)
class HeartbeatConfig:
    """Replication heartbeats: read ElastiCache's and our own key; optionally write our own."""

    read: bool = True
    write: bool = False
    key: str = "elasticache-exporter:heartbeat"
    interval: float = 1.0
    ttl: float = 300.0
