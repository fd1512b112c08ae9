"""Every configuration key, declared once: its reader (type and checks), default, help, and flag where it has one.

The sections' code reads values through these declarations, so the allowed keys of a mapping, the defaults, the
``serve`` flags with their environment variables and ``--help``, and the settings table of docs/configuration.md
(:func:`markdown_table`) all come from here. A default not given here is the one of the record field the key fills.
A key whose value is a list or a mapping with a schema of its own (``targets``, ``scrape.allow``) is declared with
no reader: its section reads it, this table names it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache, partial
from typing import Any

from exporter.aws.iam_auth import MAX_CONNECTION_AGE
from exporter.aws.settings import AwsConfig
from exporter.baselines.settings import BaselineConfig
from exporter.common.errors import ConfigError, Problems
from exporter.common.records import record
from exporter.common.sharding import parse_shard, parse_statefulset
from exporter.redis.addresses import AddressError, ParsedAddress, parse_address
from exporter.redis.clients import ClientsConfig
from exporter.redis.keys import KeyProbes, KeySpec, parse_key_list
from exporter.redis.keyspace import KeyspaceConfig
from exporter.redis.settings import HeartbeatConfig, TlsOptions
from exporter.redis.slot_stats import TOP_MAX, SlotStatsConfig

from .model import DEFAULT_REDIS_ADDR, Config
from .readers import (
    as_bool,
    as_choice,
    as_int,
    as_size,
    as_string,
    check_keys,
    is_bare_number,
    listen_host_port,
    parse_duration,
    readable_path,
)
from .sources import flag_to_env

UNSET = object()  # a key with no default: absent unless given


@record(frozen=True)
class Reader:
    """How a key's raw value becomes its typed value (raising ConfigError naming the key), and how its default reads."""

    kind: str  # the type, as the settings table names it
    read: Callable[[Any, str], Any]
    show: Callable[[Any], str] = str


@record(frozen=True)
class Setting:
    key: str  # within its group
    reader: Reader | None  # None: a list or mapping its section reads
    help: str
    field: str | None = None  # the record field it fills, for the group's record; None: its section uses the value
    default: Any = UNSET  # the typed value where the key is absent; UNSET: the record field's default (or none)
    flag: str | None = None  # the serve flag, without dashes; its environment variable is derived from it
    env_only: bool = False  # an environment variable and no flag: a secret on the command line shows in `ps`
    upstream_env: str | None = None  # redis_exporter's variable for the same setting, read after this exporter's own
    shown_default: str | None = None  # how the default reads where it is not just the value
    shape: str = "mapping"  # without a reader: what its value is, for the settings table

    @property
    def kind(self) -> str:
        return self.reader.kind if self.reader is not None else self.shape


@record(frozen=True)
class Group:
    """The keys of one mapping of the config file, the record they fill, and where the group's flags land."""

    path: str  # where it appears, e.g. "scrape" or "targets[]"
    settings: tuple[Setting, ...]
    record: type | None = None
    flag_path: str | None = None  # the mapping the group's flags set (the single-target `redis` for the target keys)
    more_keys: tuple[str, ...] = ()  # keys of another group that share this mapping (a target's credentials)

    def keys(self) -> set[str]:
        return {setting.key for setting in self.settings} | set(self.more_keys)

    def setting(self, key: str) -> Setting:
        for setting in self.settings:
            if setting.key == key:
                return setting
        raise KeyError(key)

    def default(self, setting: Setting) -> Any:
        if setting.default is not UNSET:
            return setting.default
        if setting.field is not None and self.record is not None and hasattr(self.record, setting.field):
            return getattr(self.record, setting.field)
        return UNSET

    def value(self, raw: Mapping[str, Any], key: str, where: str) -> Any:
        """The typed value of ``key`` in ``raw`` (its default where absent; None where it has none)."""
        setting = self.setting(key)
        value = raw.get(key)
        if value is None:  # absent: the default, a typed value already
            default = self.default(setting)
            return None if default is UNSET else default
        assert setting.reader is not None, f"{self.path}.{key} is read by its section"
        return setting.reader.read(value, f"{where}.{key}" if where else key)

    def fields(self, raw: Mapping[str, Any], where: str, *, check: bool = True) -> dict[str, Any]:
        """The group's record fields from ``raw``, after its keys are checked (unknown keys are refused by name) unless
        ``check`` is false (a group that shares its mapping with another, which checks it)."""
        problems = Problems()
        if check:
            problems.take(lambda: check_keys(raw, where, self.keys()), None)
        fields = {
            setting.field: problems.take(partial(self.value, raw, setting.key, where), None)
            for setting in self.settings
            if setting.field and setting.reader
        }
        problems.raise_any()  # every key's problem at once
        return fields


def _seconds(value: float) -> str:
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if value >= size and value % size == 0:
            return f"{value / size:g}{unit}"
    return f"{value * 1000:g}ms"


def _bytes(value: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


def _text(value: Any) -> str:
    return "none" if value in (None, "") else str(value).lower() if isinstance(value, bool) else str(value)


def duration(at_least: float = 0, why: str = "", at_most: float = 3600) -> Reader:
    def read(value: Any, key: str) -> float:
        seconds = parse_duration(value)
        if seconds is None and is_bare_number(value):
            raise ConfigError(key, f"not a valid duration: {value!r} has no unit (500ms, 5s, 1m, 2h), as Prometheus refuses it")
        if seconds is None or seconds > at_most:
            raise ConfigError(key, f"must be a positive duration such as 500ms, 5s or 1m, at most {_seconds(at_most)}, got {value!r}")
        if seconds < at_least:
            raise ConfigError(key, f"must be at least {_seconds(at_least)}{': ' + why if why else ''}")
        return seconds

    return Reader("duration", read, _seconds)


def integer(low: int, high: int) -> Reader:
    return Reader(f"integer {low}-{high}", lambda value, key: as_int(value, key, low, high))


def size(low: int, high: int) -> Reader:
    return Reader(f"size {_bytes(low)}-{_bytes(high)}", lambda value, key: as_size(value, key, low, high), _bytes)


def choice(*choices: str) -> Reader:
    return Reader(" \\| ".join(choices), lambda value, key: as_choice(value, key, choices))


def optional_choice(*choices: str) -> Reader:
    def read(value: Any, key: str) -> str | None:
        if value in (None, ""):
            return None
        return as_choice(value, key, choices)

    return Reader(" \\| ".join(choices), read, _text)


def checked_string(check: Callable[[str], str | None] | None = None, kind: str = "string") -> Reader:
    """A string; ``check`` returns the problem with it, or None."""

    def read(value: Any, key: str) -> str:
        text = as_string(value, key)
        problem = check(text) if check else None
        if problem:
            raise ConfigError(key, problem)
        return text

    return Reader(kind, read, _text)


def _http_url(text: str) -> str | None:
    import urllib.parse

    if not text.startswith(("https://", "http://")):
        return f"not an http(s) URL: {text!r}"
    # never into a log line: requests are signed with the account's credentials, not a URL's
    return "must not carry a user or password (requests are signed with SigV4)" if urllib.parse.urlsplit(text).username is not None else None


def optional_string() -> Reader:
    return Reader("string", lambda value, key: None if value in (None, "") else as_string(value, key), _text)


BOOL = Reader("boolean", as_bool, _text)
PATH = Reader("file", readable_path, _text)


def _shard(value: Any, key: str) -> Any:
    if value in (None, ""):
        return None
    try:
        return parse_shard(as_string(value, key))
    except ValueError as err:
        raise ConfigError(key, str(err)) from None


def _statefulset(value: Any, key: str) -> Any:
    if value in (None, ""):
        return None
    try:
        return parse_statefulset(as_string(value, key))
    except ValueError as err:
        raise ConfigError(key, str(err)) from None


def _listen_address(value: Any, key: str) -> str:
    listen = as_string(value, key)
    listen_host_port(listen)
    return listen


def _telemetry_path(text: str) -> str | None:
    if not text.startswith("/") or text in ("/", "/scrape", "/-/healthy"):
        return f"must be a path of its own starting with '/', got {text!r}"
    return None


def _heartbeat_key(text: str) -> str | None:
    if not text or len(text) > 512 or not text.isprintable() or " " in text:
        return "must be a non-empty printable key name without spaces"
    return None


def _delimiters(text: str) -> str | None:
    if not text or not text.isprintable():
        return "must be one or more printable characters, such as ':' or ':/'"
    return None


def _metric_groups(value: Any, key: str) -> tuple[str, ...]:
    from exporter.aws.cloudwatch import METRIC_GROUPS  # only a config with an aws section gets here

    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigError(key, "must be a list of metric groups")
    groups = tuple(dict.fromkeys(as_string(item, key).strip() for item in items))
    unknown = [group for group in groups if group not in METRIC_GROUPS]
    if unknown:
        raise ConfigError(key, f"unknown metric group {unknown[0]!r} (one of {', '.join(METRIC_GROUPS)})")
    return groups


def _usd(value: Any, key: str) -> float | None:
    if value in (None, ""):
        return None
    try:
        amount = float(value)
    except (TypeError, ValueError) as err:
        raise ConfigError(key, f"must be an amount of USD a month, such as 250 or 12.5, got {value!r}") from err
    if isinstance(value, bool) or not 0 < amount < 1e9:
        raise ConfigError(key, f"must be more than 0 USD a month, got {value!r}")
    return amount


_NODE_TYPE = re.compile(r"^(cache\.)?[a-z][a-z0-9-]*\.[a-z0-9]+$")


def _node_type(value: Any, key: str) -> str:
    """``cache.r6g.large`` (or ``r6g.large``, given the prefix), or ``""``."""
    node_type = as_string(value or "", key)
    if node_type and not _NODE_TYPE.match(node_type):
        raise ConfigError(key, f"not a node type such as cache.r6g.large: {node_type!r}")
    return "cache." + node_type if node_type and not node_type.startswith("cache.") else node_type


def _address(value: Any, key: str) -> ParsedAddress:
    try:
        return parse_address(as_string(value, key))
    except AddressError as err:
        raise ConfigError(key, str(err)) from err


def _printable(text: str) -> str | None:
    return "must be a printable string" if text and not text.isprintable() else None


WEB = Group(
    "web",
    (
        Setting("listen_address", Reader("host:port", _listen_address), "address to listen on, host:port or :port",
                field="listen_address", flag="web.listen-address", upstream_env="REDIS_EXPORTER_WEB_LISTEN_ADDRESS"),
        Setting("telemetry_path", checked_string(_telemetry_path, "path"), "path of the metrics of the configured targets",
                field="telemetry_path", flag="web.telemetry-path", upstream_env="REDIS_EXPORTER_WEB_TELEMETRY_PATH"),
        Setting("config_file", PATH, "TLS and basic auth for the exporter's own endpoints (Prometheus exporter-toolkit "
                "web-config format)", field="web_config_file", flag="web.config-file", shown_default="plain HTTP, no auth"),
    ),
    record=Config,
)  # fmt: skip

LOG = Group(
    "log",
    (
        Setting("level", choice("debug", "info", "warn", "error"), "log level", field="log_level", flag="log.level",
                upstream_env="REDIS_EXPORTER_LOG_LEVEL"),
        Setting("format", choice("text", "json"), "log format (txt is text)", field="log_format", flag="log.format",
                upstream_env="REDIS_EXPORTER_LOG_FORMAT"),
    ),
    record=Config,
)  # fmt: skip

SCRAPE = Group(
    "scrape",
    (
        Setting("timeout", duration(), "the time one /metrics or /scrape may take (Prometheus' own scrape timeout, "
                "sent in its request, also applies)", field="scrape_timeout", flag="scrape.timeout",
                upstream_env="REDIS_EXPORTER_CONNECTION_TIMEOUT"),
        Setting("target_timeout", duration(), "on a /metrics of many targets, a target's share of scrape.timeout: a node "
                "that has not answered by then is served as down (redis_up 0, error kind timeout) and the others "
                "without waiting for it (a target's own timeout overrides it; a lone target and /scrape get the whole "
                "scrape.timeout)", field="scrape_target_timeout", flag="scrape.target-timeout"),
        Setting("concurrency", integer(1, 256), "scrape workers: targets scraped at once", field="scrape_concurrency",
                flag="scrape.concurrency"),
        Setting("max_reply_size", size(64 * 1024, 1024**3), "largest reply read from a node; a larger one fails the scrape "
                "(reply_too_large) before it is read", field="scrape_max_reply_bytes", flag="scrape.max-reply-size"),
        Setting("shard", Reader("INDEX/COUNT \\| INDEX/auto", _shard, _text), "of the configured and discovered targets, serve "
                "on /metrics only those of this shard (Prometheus' hashmod of the target name), e.g. 1/3; run COUNT exporters "
                "with indexes 0 to COUNT-1. INDEX/auto: COUNT is the replicas of the pod's StatefulSet "
                "(scrape.shard_statefulset), read from the Kubernetes API every scrape.shard_refresh; no target is served "
                "until it is first read, and a failed read keeps the last count", field="shard", flag="scrape.shard"),
        Setting("shard_statefulset", Reader("NAMESPACE/NAME", _statefulset, _text), "with scrape.shard INDEX/auto: the "
                "StatefulSet whose spec.replicas is the count (the service account needs get on it)",
                field="shard_statefulset", flag="scrape.shard-statefulset"),
        Setting("shard_refresh", duration(1), "with scrape.shard INDEX/auto: how often the StatefulSet's replicas are read",
                field="shard_refresh", flag="scrape.shard-refresh"),
        Setting("shard_service_account_dir", checked_string(kind="directory"), "with scrape.shard INDEX/auto: the service "
                "account's token and ca.crt for the in-cluster API at KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                "(the token is read again for every request)", field="shard_service_account_dir",
                flag="scrape.shard-service-account-dir"),
        Setting("allow", None, "what /scrape?target= may reach beyond the targets: a list of rules, each hosts (globs or "
                "networks) and the credentials sent to them", shown_default="none", shape="list"),
    ),
    record=Config,
)  # fmt: skip

CREDENTIALS = Group(
    "targets[]",
    (
        Setting("user", optional_string(), "ACL user name", flag="redis.user", upstream_env="REDIS_USER"),
        Setting("password", optional_string(), "the password (in the file; the environment variable only for redis.*)",
                env_only=True, upstream_env="REDIS_PASSWORD"),
        Setting("password_file", PATH, "file holding the password, re-read on every reconnect", flag="redis.password-file"),
        Setting("password_env", optional_string(), "name of an environment variable holding the password"),
        Setting("password_secret", optional_string(), "AWS Secrets Manager secret (ARN or name) holding the password"),
        Setting("password_secret_key", optional_string(), "with password_secret: the key of a JSON secret"),
        Setting("timeout", duration(), "this target's scrape timeout", shown_default="scrape.timeout"),
        Setting("tls_ca_file", PATH, "CA bundle to verify the server", field="ca_file", flag="redis.tls-ca-file",
                shown_default="system CAs", upstream_env="REDIS_EXPORTER_TLS_CA_CERT_FILE"),
        Setting("tls_cert_file", PATH, "client certificate (with tls_key_file)", field="cert_file", flag="redis.tls-cert-file",
                upstream_env="REDIS_EXPORTER_TLS_CLIENT_CERT_FILE"),
        Setting("tls_key_file", PATH, "client key (with tls_cert_file)", field="key_file", flag="redis.tls-key-file",
                upstream_env="REDIS_EXPORTER_TLS_CLIENT_KEY_FILE"),
        Setting("tls_server_name", optional_string(), "server name to verify instead of the host of the address",
                field="server_name", flag="redis.tls-server-name", shown_default="the host of the address",
                upstream_env="REDIS_EXPORTER_TLS_SERVER_NAME"),
        Setting("tls_insecure_skip_verify", BOOL, "do not verify the server certificate (explicit opt-in)",
                field="insecure_skip_verify", flag="redis.tls-insecure-skip-verify",
                upstream_env="REDIS_EXPORTER_SKIP_TLS_VERIFICATION"),
    ),
    record=TlsOptions,
    flag_path="redis",
)  # fmt: skip

TARGET = Group(
    "targets[]",
    (
        Setting("addr", Reader("address", _address), "the address: redis://, rediss:// (TLS), valkey://, valkeys:// or host:port; /N selects a "
                "database; '' for no single target (redis.addr)", flag="redis.addr", upstream_env="REDIS_ADDR",
                shown_default=f"{DEFAULT_REDIS_ADDR} for redis.addr, unless targets, aws regions or scrape.allow say what to scrape"),
        Setting("name", checked_string(), "the instance label of its series", shown_default="host:port of addr"),
        Setting("node_type", Reader("node type", _node_type, _text), "node type, e.g. cache.r6g.large, to compare the node with its baseline",
                flag="redis.node-type"),
        Setting("replication_group", checked_string(_printable), "with shard: where the node belongs"),
        Setting("shard", checked_string(_printable), "the node's shard within replication_group"),
        Setting("keys", None, "the target's own watched keys and streams (as the keys section)", shown_default="the keys section"),
        Setting("iam_auth", None, "ElastiCache IAM authentication: cache, region, serverless, max_connection_age"),
        Setting("discover", optional_choice("cluster"), "cluster: the address is a cluster's (configuration) endpoint, and every node "
                "of the cluster is a target instead, found with CLUSTER SHARDS (CLUSTER NODES before 7.0)", flag="redis.discover"),
        Setting("labels", None, "static labels on every series of the target's instance (its cluster's nodes too), as Prometheus' "
                "relabelling adds a target's labels: label name to value, e.g. {team: payments}; not a label the exporter "
                "serves (instance, job, db, cmd, role, shard, ...)", shown_default="none"),
    ),
    flag_path="redis",
    more_keys=tuple(setting.key for setting in CREDENTIALS.settings),
)  # fmt: skip

IAM_AUTH = Group(
    "targets[].iam_auth",
    (
        Setting("cache", None, "the replication group id or serverless cache name the token is signed for", shape="string"),
        Setting("region", None, "its AWS region", shape="region"),
        Setting("serverless", BOOL, "the cache is serverless", default=False),
        Setting(
            "max_connection_age",
            duration(at_most=12 * 3600),
            "a connection this old is renewed (ElastiCache cuts them at 12 hours)",
            default=MAX_CONNECTION_AGE,
        ),
    ),
)

ALLOW_RULE = Group(
    "scrape.allow[]",
    (Setting("hosts", None, "host globs or networks the rule matches", shape="list"),),
    more_keys=tuple(setting.key for setting in CREDENTIALS.settings),
)

HEARTBEAT = Group(
    "heartbeat",
    (
        Setting("read", BOOL, "read ElastiCache's replication timestamp and the exporter's key", field="read"),
        Setting("write", BOOL, "write the exporter's own heartbeat key on targets that are primaries (opt-in)", field="write",
                flag="heartbeat.write"),
        Setting("key", checked_string(_heartbeat_key, "key name"), "name of the exporter's heartbeat key", field="key",
                flag="heartbeat.key"),
        Setting("interval", duration(), "how often the heartbeat is written", field="interval", flag="heartbeat.interval"),
        Setting("ttl", duration(), "expiry of the heartbeat key (longer than interval)", field="ttl"),
    ),
    record=HeartbeatConfig,
)  # fmt: skip

CLIENTS = Group(
    "clients",
    (
        Setting("enabled", BOOL, "read CLIENT LIST of every configured target in the background", field="enabled"),
        Setting("interval", duration(5, "CLIENT LIST walks every connection of the node"), "how often", field="interval"),
        Setting("top", integer(1, 1000), "client names and source addresses served by name", field="top"),
        Setting("per_connection", BOOL, "serve each connection of CLIENT LIST as redis_exporter does "
                "(redis_connected_client_*)", field="per_connection", flag="export-client-list",
                upstream_env="REDIS_EXPORTER_EXPORT_CLIENT_LIST"),
        Setting("include_port", BOOL, "with per_connection, the client's port as a label (a new series per connection)",
                field="include_port", flag="export-client-port", upstream_env="REDIS_EXPORTER_EXPORT_CLIENT_PORT"),
        Setting("max_connections", integer(1, 1_000_000), "with per_connection: series of at most this many connections "
                "(the lowest ids)", field="max_connections"),
        Setting("max_reply_size", size(64 * 1024, 1024**3), "a larger CLIENT LIST is skipped and counted",
                field="max_reply_bytes"),
    ),
    record=ClientsConfig,
)  # fmt: skip

KEYSPACE = Group(
    "keyspace",
    (
        Setting("enabled", BOOL, "sample every configured target's keys in the background", field="enabled"),
        Setting("interval", duration(10), "how often", field="interval"),
        Setting("sample", integer(100, 100_000), "keys drawn per database and interval", field="sample"),
        Setting("delimiters", checked_string(_delimiters, "characters"), "characters a key's prefix is split on",
                field="delimiters"),
        Setting("depth", integer(1, 10), "parts of a key that make its prefix", field="depth"),
        Setting("top", integer(1, 1000), "prefixes served by name (by memory)", field="top"),
    ),
    record=KeyspaceConfig,
)  # fmt: skip


SLOT_STATS = Group(
    "cluster.slot_stats",
    (
        Setting(
            "enabled",
            BOOL,
            "read CLUSTER SLOT-STATS of every primary among the targets in the background (Valkey 8.0+, "
            "Redis 8.2+; the ACL user needs CLUSTER SLOT-STATS)",
            field="enabled",
        ),
        Setting("interval", duration(10), "how often", field="interval"),
        Setting(
            "top",
            integer(1, TOP_MAX),
            "slots served per primary, by CPU and by keys: up to 2 x top slots of 4 series each (keys, CPU, network in "
            "and out), at most 160 series a primary at 20, 800 at 100",
            field="top",
        ),
    ),
    record=SlotStatsConfig,
)

CLUSTER = Group(
    "cluster",
    (
        Setting("slot_stats", None, "per-slot load: the cluster.slot_stats keys"),
        Setting("refresh", duration(5), "how often a cluster found from one endpoint (discover: cluster) is read again",
                field="cluster_refresh"),
    ),
    record=Config,
)  # fmt: skip


def _key_list(value: Any, key: str) -> tuple[KeySpec, ...]:
    """redis_exporter's comma-separated text, or a YAML list of its entries."""
    if value in (None, ""):
        return ()
    entries = value if isinstance(value, list) else [value]
    specs: list[KeySpec] = []
    for index, entry in enumerate(entries):
        where = f"{key}[{index}]" if isinstance(value, list) else key
        try:
            specs.extend(parse_key_list(as_string(entry, where)))
        except ValueError as err:
            raise ConfigError(where, str(err)) from None
    return tuple(dict.fromkeys(specs))


KEY_LIST = Reader("key list", _key_list, lambda value: "none" if not value else str(value))

KEYS = Group(
    "keys",
    (
        Setting("check_keys", KEY_LIST, "keys to watch (size, value, memory), as redis_exporter takes them: comma-separated, each "
                "optionally db<N>= first; a glob pattern is found by SCAN, e.g. db0=queue:*", field="check_keys",
                flag="check-keys", upstream_env="REDIS_EXPORTER_CHECK_KEYS"),
        Setting("check_single_keys", KEY_LIST, "exact keys to watch, no SCAN", field="check_single_keys",
                flag="check-single-keys", upstream_env="REDIS_EXPORTER_CHECK_SINGLE_KEYS"),
        Setting("count_keys", KEY_LIST, "patterns whose matching keys are counted by SCAN, e.g. db0=sessions:*", field="count_keys",
                flag="count-keys", upstream_env="REDIS_EXPORTER_COUNT_KEYS"),
        Setting("check_streams", KEY_LIST, "stream patterns to watch (length, groups, consumers, pending, lag), found by SCAN",
                field="check_streams", flag="check-streams", upstream_env="REDIS_EXPORTER_CHECK_STREAMS"),
        Setting("check_single_streams", KEY_LIST, "exact streams to watch", field="check_single_streams",
                flag="check-single-streams", upstream_env="REDIS_EXPORTER_CHECK_SINGLE_STREAMS"),
        Setting("check_keys_batch_size", integer(1, 1_000_000), "SCAN COUNT for the patterns above", field="batch_size",
                flag="check-keys-batch-size", upstream_env="REDIS_EXPORTER_CHECK_KEYS_BATCH_SIZE"),
        Setting("max_keys", integer(1, 10_000_000), "keys watched at most per target", field="max_keys"),
        Setting("max_counted", integer(1, 1_000_000_000), "keys counted at most per pattern", field="max_counted"),
        Setting("stream_consumers", BOOL, "series per stream consumer", field="stream_consumers"),
        Setting("queues", None, "which watched keys are queues: a mapping to a maximum length (or null), or a list",
                shown_default="none", shape="mapping or list"),
    ),
    record=KeyProbes,
    flag_path="keys",
)  # fmt: skip

BASELINES = Group(
    "baselines",
    (
        Setting("file", PATH, "baseline table", field="file", flag="baselines.file", shown_default="the shipped table"),
        Setting("basis", optional_choice("lower", "measured", "published"), "which figure thresholds use where both exist",
                field="basis", flag="baselines.basis", shown_default="the table's (lower)"),
        Setting("window", duration(), "INFO counters a rate is taken over", field="window"),
    ),
    record=BaselineConfig,
)  # fmt: skip

AWS = Group(
    "aws",
    (
        Setting("region", None, "regions to discover ElastiCache nodes in and poll CloudWatch for, comma-separated",
                flag="aws.region", shown_default="none: AWS off", shape="region list"),
        Setting("regions", None, "regions, a list (with region: both)", shown_default="none", shape="list"),
        Setting("role_arn", None, "a role to assume for these regions", shape="role ARN"),
        Setting("external_id", None, "with role_arn: its external id", shape="string"),
        Setting("accounts", None, "more accounts: a list of role_arn, external_id, regions", shape="list"),
        Setting("tag_filters", None, "only clusters with these tags: tag key to values (empty: any value)"),
        Setting("discovery_interval", duration(), "how often clusters are discovered", field="discovery_interval"),
        Setting("cloudwatch", None, "CloudWatch polling: the aws.cloudwatch keys"),
        Setting("scrape_discovered", BOOL, "scrape the Redis of the discovered nodes too", field="scrape_discovered"),
        Setting("discovered", None, "credentials (and iam_auth: true) of the discovered nodes, as a target's, and labels: "
                "static labels of every discovered node, as a target's labels"),
        Setting("export_tags", None, "tag keys served as tag_<key> labels of elasticache_node_info, as YACE names them",
                shown_default="none", shape="list"),
        Setting("events", BOOL, "poll DescribeEvents and the service updates", field="events"),
    ),
    record=AwsConfig,
)  # fmt: skip

CLOUDWATCH = Group(
    "aws.cloudwatch",
    (
        Setting("enabled", BOOL, "poll CloudWatch", field="cloudwatch"),
        Setting("interval", duration(), "how often the poller wakes and asks the paging tier (the inputs of the alerts that "
                "page: docs/cloudwatch-cost.md)", field="poll_interval"),
        Setting("alerting_interval", duration(), "how often the alerting tier is asked (the inputs of the other warnings)",
                field="alerting_interval"),
        Setting("trends_interval", duration(), "how often the trends tier is asked (dashboards, capacity planning)",
                field="trends_interval"),
        Setting("period", duration(60), "datapoint period: 60s, one datapoint a minute as ElastiCache publishes (the alerts count minutes)",
                field="period"),
        Setting("delay", duration(120, "newer one-minute datapoints are still incomplete"), "how far behind now the "
                "newest datapoint asked for ends", field="delay"),
        Setting("lookback", duration(), "how far back each poll asks", shown_default="5 periods"),
        Setting("metrics", None, "metric names, or mappings of name and statistics", shown_default="the default set", shape="list"),
        Setting("serverless_metrics", None, "the same, for serverless caches", shown_default="the default set", shape="list"),
        Setting("node_type_metrics", BOOL, "poll the metrics only some node types have (data tiering, t-family credits)",
                field="node_type_metrics"),
        Setting("exclude_groups", Reader("list of groups", _metric_groups, _text), "groups of AWS's own node metrics not to "
                "poll: network_capacity, memory_health, connections, pubsub, throughput, host_peaks", field="exclude_groups",
                shown_default="none: all polled"),
        Setting("info_first", BOOL, "for a node whose INFO the exporter reads, do not ask CloudWatch what INFO says "
                "(connections, evictions, hits, replication, fragmentation...: docs/cloudwatch-cost.md)", field="info_first"),
        Setting("budget_usd_per_month", Reader("USD a month", _usd, _text), "the most the polling may cost a month (GetMetricData, "
                "the PromQL API): over it the non-paging tiers are asked less often, and a warning gives the figures",
                field="budget_usd_per_month",
                shown_default="none"),
        Setting("promql", choice("auto", "off"), "auto: a Valkey node's metrics that ElastiCache's OpenTelemetry metrics stand "
                "for are read through CloudWatch's PromQL API where it has them, billed per sample scanned instead of per "
                "metric (docs/cloudwatch-cost.md); off: GetMetricData only", field="promql"),
        Setting("promql_endpoint", checked_string(_http_url, "URL"), "where CloudWatch's PromQL API is asked (a proxy or a "
                "VPC endpoint)", field="promql_endpoint", shown_default="CloudWatch's endpoint of each region"),
    ),
    record=AwsConfig,
)  # fmt: skip

ACCOUNT = Group(
    "aws.accounts[]",
    (
        Setting("role_arn", None, "the role to assume", shape="role ARN"),
        Setting("external_id", None, "its external id", shape="string"),
        Setting("regions", None, "its regions", shown_default="aws.regions", shape="list"),
    ),
)

METRIC = Group(
    "aws.cloudwatch.metrics[]",
    (
        Setting("name", None, "the CloudWatch metric name", shape="string"),
        Setting("statistics", None, "Average, Maximum, Minimum, Sum, SampleCount or pNN", shown_default="Average", shape="list"),
    ),
)

TOP = Group(
    "",
    tuple(
        Setting(name, None, help_)
        for name, help_ in (
            ("web", "the exporter's HTTP side"),
            ("log", "logging"),
            ("scrape", "scrapes"),
            ("redis", "the single target of the flags: a target's keys"),
            ("targets", "the Redis targets: a list of addresses or of mappings with a target's keys"),
            ("heartbeat", "replication heartbeats"),
            ("aws", "discovery and CloudWatch"),
            ("baselines", "the baseline table"),
            ("keys", "watched keys and streams of every target without keys of its own"),
            ("clients", "CLIENT LIST aggregates, read in the background"),
            ("keyspace", "the keyspace by prefix, sampled in the background"),
            ("cluster", "a cluster's per-slot load, read in the background"),
        )
    ),
)

# the groups of the settings table, in its order
GROUPS = (
    WEB,
    LOG,
    SCRAPE,
    TARGET,
    CREDENTIALS,
    IAM_AUTH,
    ALLOW_RULE,
    HEARTBEAT,
    CLIENTS,
    KEYSPACE,
    SLOT_STATS,
    KEYS,
    BASELINES,
    AWS,
    ACCOUNT,
    CLOUDWATCH,
    METRIC,
)


@record(frozen=True)
class Flag:
    """A ``serve`` flag: where its value lands in the config, and how it reads in ``--help``."""

    name: str  # without dashes, e.g. "scrape.timeout"; also the argparse dest
    key: str  # the config key it sets, e.g. "scrape.timeout"
    switch: bool  # given without a value (sets true)
    help: str
    env: str
    upstream_env: str | None
    env_only: bool  # an environment variable and no flag


def _help_default(group: Group, setting: Setting) -> str:
    if setting.shown_default is not None:
        return setting.shown_default
    default = group.default(setting)
    if default is UNSET:
        return "none"
    return setting.reader.show(default) if setting.reader is not None else _text(default)


@cache
def serve_flags() -> tuple[Flag, ...]:
    """The flags of ``serve``, in the groups' order, with their environment variables."""
    flags = []
    for group in GROUPS:
        for setting in group.settings:
            if setting.flag is None and not setting.env_only:
                continue
            where = group.flag_path or group.path
            name = setting.flag or f"{where}.{setting.key}"
            default = _help_default(group, setting)
            help_ = setting.help + ("" if default == "none" or setting.reader is BOOL else f" (default {default})")
            key = f"{where}.{setting.key}"
            flags.append(Flag(name, key, setting.reader is BOOL, help_, flag_to_env(name), setting.upstream_env, setting.env_only))
    return tuple(flags)


def markdown_table() -> str:
    """The settings table of docs/configuration.md: every key of every group, in the groups' order."""
    lines = ["| key | type | default | flag, environment variable | meaning |", "|---|---|---|---|---|"]
    for group in GROUPS:
        for setting in group.settings:
            key = f"{group.path}.{setting.key}"
            where = group.flag_path or group.path
            flag_name = setting.flag or (f"{where}.{setting.key}" if setting.env_only else None)
            sources = []
            if setting.flag:
                sources.append(f"`--{setting.flag}`")
            if flag_name:
                sources.append(f"`{flag_to_env(flag_name)}`")
            if setting.upstream_env:
                sources.append(f"`{setting.upstream_env}`")
            lines.append(f"| `{key}` | {setting.kind} | {_help_default(group, setting)} | {', '.join(sources)} | {setting.help} |")
    return "\n".join(lines) + "\n"
