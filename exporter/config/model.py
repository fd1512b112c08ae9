"""The ``Config`` record: the whole process's configuration, as ``build_config`` makes it."""

from __future__ import annotations

from exporter.aws.settings import AwsConfig
from exporter.baselines.settings import BaselineConfig
from exporter.common.records import field, record
from exporter.common.sharding import SERVICE_ACCOUNT_DIR, Shard, StatefulSetRef
from exporter.redis.clients import ClientsConfig
from exporter.redis.keys import KeyProbes
from exporter.redis.keyspace import KeyspaceConfig
from exporter.redis.resp import DEFAULT_MAX_REPLY_BYTES
from exporter.redis.settings import DEFAULT_TARGET_TIMEOUT, DEFAULT_TIMEOUT, AllowRule, Credentials, HeartbeatConfig, TargetConfig
from exporter.redis.slot_stats import SlotStatsConfig

DEFAULT_LISTEN_ADDRESS = ":9769"
DEFAULT_REDIS_ADDR = "redis://localhost:6379"


@record(frozen=True)
class Config:
    listen_address: str = DEFAULT_LISTEN_ADDRESS
    telemetry_path: str = "/metrics"
    web_config_file: str | None = None
    log_level: str = "info"
    log_format: str = "text"
    scrape_timeout: float = DEFAULT_TIMEOUT
    scrape_target_timeout: float = DEFAULT_TARGET_TIMEOUT  # a target's default, at most scrape_timeout
    scrape_concurrency: int = 16
    shard: Shard | None = None  # this process scrapes only the targets of its shard on /metrics
    # with shard INDEX/auto: the StatefulSet whose replicas are the count, how often they are read, with which token
    shard_statefulset: StatefulSetRef | None = None
    shard_refresh: float = 30.0
    shard_service_account_dir: str = SERVICE_ACCOUNT_DIR
    scrape_max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    targets: tuple[TargetConfig, ...] = ()
    keys: KeyProbes = field(factory=KeyProbes)  # watched keys of every target without keys of its own
    allow: tuple[AllowRule, ...] = ()
    heartbeat: HeartbeatConfig = field(factory=HeartbeatConfig)
    clients: ClientsConfig = field(factory=ClientsConfig)  # CLIENT LIST aggregates, read in the background
    keyspace: KeyspaceConfig = field(factory=KeyspaceConfig)  # the keyspace by prefix, sampled in the background
    slot_stats: SlotStatsConfig = field(factory=SlotStatsConfig)  # a cluster's per-slot load, read in the background
    cluster_refresh: float = 60.0  # how often a cluster found from one endpoint is read again
    aws: AwsConfig = field(factory=AwsConfig)
    discovered_credentials: Credentials = field(factory=Credentials)  # the config file's aws.discovered
    discovered_iam: bool = False  # aws.discovered.iam_auth: each discovered node signs an IAM token for its own cache
    discovered_labels: tuple[tuple[str, str], ...] = ()  # aws.discovered.labels: static labels of every discovered node
    baselines: BaselineConfig = field(factory=BaselineConfig)
    source_file: str | None = None
