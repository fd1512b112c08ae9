"""What the Redis side needs to reach a node: credentials, TLS, targets, heartbeats (built by exporter.config)."""

from __future__ import annotations

from exporter.common.records import field, record
from exporter.common.secrets import Secret

from .addresses import Endpoint, HostPattern
from .keys import KeyProbes

DEFAULT_TIMEOUT = 5.0  # a scrape's: one /metrics or /scrape, and a target's own
# on a /metrics of many targets, one target's share of it: a node that takes longer is reported timed out, and the
# others are served without waiting for it
DEFAULT_TARGET_TIMEOUT = 2.0


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
    tls: TlsOptions = field(factory=TlsOptions)
    timeout: float = DEFAULT_TIMEOUT
    own_timeout: bool = False  # its timeout was set for it (targets[].timeout): on a page of many, not cut to a share
    max_connection_age: float | None = None  # renew a connection this old before using it (IAM: the server cuts at 12 h)


@record(frozen=True)
class TargetConfig:
    name: str
    endpoint: Endpoint
    credentials: Credentials
    node_type: str = ""
    replication_group: str = ""  # with shard: where the node belongs, for counting masters per shard
    shard: str = ""
    keys: KeyProbes | None = None  # watched keys and streams of this target; None: the config's top-level keys
    discover: str = ""  # cluster: the address is a cluster's endpoint; every node of the cluster is a target instead
    labels: tuple[tuple[str, str], ...] = ()  # static labels on every series of its instance (its cluster's nodes too)

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
