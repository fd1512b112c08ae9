"""Typed, validated, immutable configuration.

Sources, highest first: command-line flags, ``ELASTICACHE_EXPORTER_*``
environment variables, the YAML file, defaults. Flags and variables are
folded into the same nested mapping as the file (``--redis.addr`` and
``ELASTICACHE_EXPORTER_REDIS_ADDR`` both set ``redis.addr``) before validation,
so every source is checked by the same code and every error names its key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .addresses import AddressError, Endpoint, HostPattern, parse_address
from .errors import ConfigError
from .yamlfile import read_yaml

DEFAULT_LISTEN_ADDRESS = ":9769"
DEFAULT_REDIS_ADDR = "redis://localhost:6379"
DEFAULT_TIMEOUT = 5.0
ENV_PREFIX = "ELASTICACHE_EXPORTER_"

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class Secret:
    """A password read when needed: from a file (re-read on each connect) or a value."""

    def __init__(self, *, value: str | None = None, file: str | None = None, source: str = "") -> None:
        self._value = value
        self.file = file
        self.source = source

    def reveal(self) -> str:
        if self.file is not None:
            return Path(self.file).read_text(encoding="utf-8").rstrip("\r\n")
        return self._value or ""

    def __repr__(self) -> str:
        return f"Secret(source={self.source!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and (self._value, self.file) == (other._value, other.file)

    def __hash__(self) -> int:
        return hash((self._value, self.file))


@dataclass(frozen=True)
class TlsOptions:
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None
    insecure_skip_verify: bool = False


@dataclass(frozen=True)
class Credentials:
    username: str | None = None
    password: Secret | None = None
    tls: TlsOptions = field(default_factory=TlsOptions)
    timeout: float = DEFAULT_TIMEOUT


@dataclass(frozen=True)
class TargetConfig:
    name: str
    endpoint: Endpoint
    credentials: Credentials
    node_type: str = ""

    @property
    def display(self) -> str:
        return self.endpoint.display()


@dataclass(frozen=True)
class AllowRule:
    """Addresses /scrape may reach beyond the configured targets, and what to send them."""

    hosts: tuple[HostPattern, ...]
    credentials: Credentials

    def matches(self, endpoint: Endpoint) -> bool:
        return any(pattern.matches(endpoint.host) for pattern in self.hosts)


@dataclass(frozen=True)
class HeartbeatConfig:
    """Replication heartbeats: read ElastiCache's and our own key; optionally write our own."""

    read: bool = True
    write: bool = False
    key: str = "elasticache-exporter:heartbeat"
    interval: float = 1.0
    ttl: float = 300.0


@dataclass(frozen=True)
class BaselineConfig:
    file: str | None = None  # the shipped table when None
    basis: str | None = None  # the table's own basis when None
    window: float = 300.0  # seconds of INFO counters a rate is taken over


@dataclass(frozen=True)
class AwsAccount:
    """Credentials of one account: the default chain, or a role assumed from it."""

    regions: tuple[str, ...]
    role_arn: str | None = None
    external_id: str | None = None


@dataclass(frozen=True)
class AwsConfig:
    accounts: tuple[AwsAccount, ...] = ()
    tag_filters: dict[str, tuple[str, ...]] = field(default_factory=dict)
    discovery_interval: float = 300.0
    cloudwatch: bool = True
    poll_interval: float = 60.0
    period: int = 60
    delay: float = 120.0
    lookback_periods: int = 5
    metrics: tuple[Any, ...] = ()  # MetricSpec; the default set when empty
    scrape_discovered: bool = False
    discovered_credentials: Credentials = field(default_factory=Credentials)

    @property
    def enabled(self) -> bool:
        return bool(self.accounts)


@dataclass(frozen=True)
class Config:
    listen_address: str = DEFAULT_LISTEN_ADDRESS
    telemetry_path: str = "/metrics"
    web_config_file: str | None = None
    log_level: str = "info"
    log_format: str = "text"
    scrape_timeout: float = DEFAULT_TIMEOUT
    scrape_concurrency: int = 16
    targets: tuple[TargetConfig, ...] = ()
    allow: tuple[AllowRule, ...] = ()
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    aws: AwsConfig = field(default_factory=AwsConfig)
    baselines: BaselineConfig = field(default_factory=BaselineConfig)
    source_file: str | None = None


# --- raw mapping assembly ---------------------------------------------------------


def load_yaml(path: str) -> dict[str, Any]:
    data = read_yaml(path, lambda message: ConfigError("config.file", message))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("config.file", f"{path}: the top level must be a mapping")
    return data


def flag_to_env(flag: str) -> str:
    """``redis.addr`` → ``ELASTICACHE_EXPORTER_REDIS_ADDR``."""
    return ENV_PREFIX + re.sub(r"[.\-]", "_", flag).upper()


def flag_to_path(flag: str) -> tuple[str, ...]:
    """``web.listen-address`` → ``("web", "listen_address")``."""
    return tuple(part.replace("-", "_") for part in flag.split("."))


def overlay(raw: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Set each ``flag: value`` of ``values`` into the nested mapping ``raw`` (a copy)."""
    merged = _deep_copy(raw)
    for flag, value in values.items():
        node = merged
        *parents, leaf = flag_to_path(flag)
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[leaf] = value
    return merged


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def env_values(flags: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    return {flag: environ[flag_to_env(flag)] for flag in flags if flag_to_env(flag) in environ}


# --- validation --------------------------------------------------------------------


def build_config(raw: Mapping[str, Any], *, source_file: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    environ = os.environ if environ is None else environ
    _check_keys(raw, "", {"web", "log", "scrape", "redis", "targets", "heartbeat", "aws", "baselines"})
    web = _mapping(raw, "web")
    _check_keys(web, "web", {"listen_address", "telemetry_path", "config_file"})
    log = _mapping(raw, "log")
    _check_keys(log, "log", {"level", "format"})
    scrape = _mapping(raw, "scrape")
    _check_keys(scrape, "scrape", {"timeout", "concurrency", "allow"})

    timeout = _duration(scrape.get("timeout", DEFAULT_TIMEOUT), "scrape.timeout")
    listen = _string(web.get("listen_address", DEFAULT_LISTEN_ADDRESS), "web.listen_address")
    _listen_parts(listen, "web.listen_address")
    path = _string(web.get("telemetry_path", "/metrics"), "web.telemetry_path")
    if not path.startswith("/") or path in ("/", "/scrape", "/-/healthy"):
        raise ConfigError("web.telemetry_path", f"must be a path of its own starting with '/', got {path!r}")
    level = _choice(log.get("level", "info"), "log.level", ("debug", "info", "warn", "error"))
    fmt = _choice(log.get("format", "text"), "log.format", ("text", "json"))
    concurrency = _int(scrape.get("concurrency", 16), "scrape.concurrency", 1, 256)

    targets: list[TargetConfig] = []
    targets_raw = raw.get("targets", [])
    if targets_raw is None:
        targets_raw = []
    if not isinstance(targets_raw, list):
        raise ConfigError("targets", "must be a list")
    for index, item in enumerate(targets_raw):
        targets.append(_target(item, f"targets[{index}]", timeout, environ))

    redis = _mapping(raw, "redis")
    _check_keys(redis, "redis", {"addr", "node_type", *_CREDENTIAL_KEYS})
    addr = redis.get("addr", None if targets_raw else DEFAULT_REDIS_ADDR)
    if addr not in (None, ""):
        single = {"addr": addr, **{k: v for k, v in redis.items() if k != "addr"}}
        targets.insert(0, _target(single, "redis", timeout, environ, default_name=True))

    names: set[str] = set()
    for target in targets:
        if target.name in names:
            raise ConfigError("targets", f"target name {target.name!r} is used twice")
        names.add(target.name)

    allow_raw = scrape.get("allow", []) or []
    if not isinstance(allow_raw, list):
        raise ConfigError("scrape.allow", "must be a list of rules")
    allow = tuple(_allow_rule(item, f"scrape.allow[{i}]", timeout, environ) for i, item in enumerate(allow_raw))

    return Config(
        baselines=_baselines(_mapping(raw, "baselines")),
        aws=_aws(_mapping(raw, "aws"), timeout, environ),
        heartbeat=_heartbeat(_mapping(raw, "heartbeat")),
        listen_address=listen,
        telemetry_path=path,
        web_config_file=_readable(web.get("config_file"), "web.config_file"),
        log_level=level,
        log_format=fmt,
        scrape_timeout=timeout,
        scrape_concurrency=concurrency,
        targets=tuple(targets),
        allow=allow,
        source_file=source_file,
    )


_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")


def _regions(value: Any, key: str) -> tuple[str, ...]:
    if value in (None, ""):
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigError(key, "must be a list of regions")
    regions = []
    for i, item in enumerate(items):
        region = _string(item, f"{key}[{i}]").strip()
        if not _REGION.match(region):
            raise ConfigError(f"{key}[{i}]", f"not an AWS region: {region!r}")
        regions.append(region)
    return tuple(dict.fromkeys(regions))


def _aws(raw: dict[str, Any], timeout: float, environ: Mapping[str, str]) -> AwsConfig:
    from .cloudwatch import DEFAULT_METRICS, MetricSpec, valid_statistic

    _check_keys(raw, "aws", {"region", "regions", "role_arn", "external_id", "accounts", "tag_filters", "discovery_interval",
                             "cloudwatch", "scrape_discovered", "discovered"})  # fmt: skip
    regions = _regions(raw.get("regions"), "aws.regions") + _regions(raw.get("region"), "aws.region")
    accounts: list[AwsAccount] = []
    role = raw.get("role_arn")
    if regions:
        accounts.append(AwsAccount(regions=regions, role_arn=_role(role, "aws.role_arn"), external_id=raw.get("external_id")))
    elif role:
        raise ConfigError("aws.role_arn", "needs aws.regions")
    for i, item in enumerate(raw.get("accounts") or []):
        key = f"aws.accounts[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(key, "must be a mapping with role_arn and regions")
        _check_keys(item, key, {"role_arn", "external_id", "regions"})
        account_regions = _regions(item.get("regions"), f"{key}.regions") or regions
        if not account_regions:
            raise ConfigError(f"{key}.regions", "no regions given here or in aws.regions")
        external_id = item.get("external_id")
        accounts.append(AwsAccount(account_regions, _role(item.get("role_arn"), f"{key}.role_arn"), external_id))
    filters_raw = raw.get("tag_filters") or {}
    if not isinstance(filters_raw, dict):
        raise ConfigError("aws.tag_filters", "must map tag keys to lists of values")
    filters = {}
    for tag, values in filters_raw.items():
        if values in (None, "", []):
            filters[str(tag)] = ()
        elif isinstance(values, list):
            filters[str(tag)] = tuple(_string(v, f"aws.tag_filters.{tag}") for v in values)
        else:
            filters[str(tag)] = (_string(values, f"aws.tag_filters.{tag}"),)
    cloudwatch = _mapping(raw, "cloudwatch")
    _check_keys(cloudwatch, "aws.cloudwatch", {"enabled", "interval", "period", "delay", "lookback", "metrics"})
    period = _duration(cloudwatch.get("period", 60), "aws.cloudwatch.period")
    if period < 60 or period % 60:
        raise ConfigError("aws.cloudwatch.period", "must be a multiple of 60s (ElastiCache publishes one datapoint a minute)")
    delay = _duration(cloudwatch.get("delay", "2m"), "aws.cloudwatch.delay")
    if delay < 120:
        raise ConfigError("aws.cloudwatch.delay", "must be at least 2m: newer one-minute datapoints are still incomplete")
    lookback = _duration(cloudwatch.get("lookback", period * 5), "aws.cloudwatch.lookback")
    metrics = []
    for i, entry in enumerate(cloudwatch.get("metrics") or []):
        key = f"aws.cloudwatch.metrics[{i}]"
        item = {"name": entry} if isinstance(entry, str) else entry
        if not isinstance(item, dict) or "name" not in item:
            raise ConfigError(key, "must be a metric name or a mapping with name and statistics")
        _check_keys(item, key, {"name", "statistics"})
        statistics = item.get("statistics") or ["Average"]
        if isinstance(statistics, str):
            statistics = [statistics]
        for statistic in statistics:
            if not valid_statistic(str(statistic)):
                raise ConfigError(f"{key}.statistics", f"unknown statistic {statistic!r} (Average, Maximum, Minimum, Sum, SampleCount or pNN)")
        metrics.append(MetricSpec(_string(item["name"], f"{key}.name"), tuple(str(s) for s in statistics)))
    discovered = _mapping(raw, "discovered")
    _check_keys(discovered, "aws.discovered", _CREDENTIAL_KEYS)
    return AwsConfig(
        accounts=tuple(accounts),
        tag_filters=filters,
        discovery_interval=_duration(raw.get("discovery_interval", "5m"), "aws.discovery_interval"),
        cloudwatch=_bool(cloudwatch.get("enabled", True), "aws.cloudwatch.enabled"),
        poll_interval=_duration(cloudwatch.get("interval", "60s"), "aws.cloudwatch.interval"),
        period=int(period),
        delay=delay,
        lookback_periods=max(1, int(lookback // period)),
        metrics=tuple(metrics) or DEFAULT_METRICS,
        scrape_discovered=_bool(raw.get("scrape_discovered", False), "aws.scrape_discovered"),
        discovered_credentials=_credentials(discovered, "aws.discovered", timeout, environ, None, None),
    )


def _role(value: Any, key: str) -> str | None:
    if value in (None, ""):
        return None
    role = _string(value, key)
    if not _ROLE_ARN.match(role):
        raise ConfigError(key, f"not an IAM role ARN: {role!r}")
    return role


def _baselines(raw: dict[str, Any]) -> BaselineConfig:
    _check_keys(raw, "baselines", {"file", "basis", "window"})
    basis = raw.get("basis")
    if basis is not None and basis not in ("lower", "measured", "published"):
        raise ConfigError("baselines.basis", f"must be lower, measured or published, got {basis!r}")
    return BaselineConfig(
        file=_readable(raw.get("file"), "baselines.file"),
        basis=basis,
        window=_duration(raw.get("window", "5m"), "baselines.window"),
    )


def _heartbeat(raw: dict[str, Any]) -> HeartbeatConfig:
    _check_keys(raw, "heartbeat", {"read", "write", "key", "interval", "ttl"})
    defaults = HeartbeatConfig()
    key = _string(raw.get("key", defaults.key), "heartbeat.key")
    if not key or len(key) > 512 or not key.isprintable() or " " in key:
        raise ConfigError("heartbeat.key", "must be a non-empty printable key name without spaces")
    interval = _duration(raw.get("interval", defaults.interval), "heartbeat.interval")
    ttl = _duration(raw.get("ttl", defaults.ttl), "heartbeat.ttl")
    if ttl <= interval:
        raise ConfigError("heartbeat.ttl", f"must be longer than heartbeat.interval ({interval:g}s)")
    return HeartbeatConfig(
        read=_bool(raw.get("read", defaults.read), "heartbeat.read"),
        write=_bool(raw.get("write", defaults.write), "heartbeat.write"),
        key=key,
        interval=interval,
        ttl=ttl,
    )


_TLS_KEYS = {"tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name", "tls_insecure_skip_verify"}
_CREDENTIAL_KEYS = {"user", "password", "password_file", "password_env", "timeout", *_TLS_KEYS}
_NODE_TYPE = re.compile(r"^(cache\.)?[a-z][a-z0-9-]*\.[a-z0-9]+$")


def _target(item: Any, key: str, timeout: float, environ: Mapping[str, str], default_name: bool = False) -> TargetConfig:
    if isinstance(item, str):
        item = {"addr": item}
    if not isinstance(item, dict):
        raise ConfigError(key, "must be an address or a mapping with 'addr'")
    _check_keys(item, key, {"name", "addr", "node_type", *_CREDENTIAL_KEYS})
    node_type = _string(item.get("node_type") or "", f"{key}.node_type")
    if node_type and not _NODE_TYPE.match(node_type):
        raise ConfigError(f"{key}.node_type", f"not a node type such as cache.r6g.large: {node_type!r}")
    if node_type and not node_type.startswith("cache."):
        node_type = "cache." + node_type
    addr = _string(item.get("addr"), f"{key}.addr")
    try:
        parsed = parse_address(addr)
    except AddressError as err:
        raise ConfigError(f"{key}.addr", str(err)) from err
    endpoint = parsed.endpoint
    user = item.get("user")
    if user is not None:
        endpoint = Endpoint(endpoint.host, endpoint.port, endpoint.tls, endpoint.db, _string(user, f"{key}.user"))
    password = None
    if parsed.password is not None:
        password = Secret(value=parsed.password, source=f"{key}.addr")
    credentials = _credentials(item, key, timeout, environ, password, endpoint.username)
    name = item.get("name")
    if name is None:
        name = endpoint.host_port
    name = _string(name, f"{key}.name")
    if not name or not name.isprintable():
        raise ConfigError(f"{key}.name", "must be a non-empty printable string")
    return TargetConfig(name=name, endpoint=endpoint, credentials=credentials, node_type=node_type)


def _allow_rule(item: Any, key: str, timeout: float, environ: Mapping[str, str]) -> AllowRule:
    if not isinstance(item, dict):
        raise ConfigError(key, "must be a mapping with 'hosts'")
    _check_keys(item, key, {"hosts", *_CREDENTIAL_KEYS})
    hosts_raw = item.get("hosts")
    if isinstance(hosts_raw, str):
        hosts_raw = [hosts_raw]
    if not isinstance(hosts_raw, list) or not hosts_raw:
        raise ConfigError(f"{key}.hosts", "must be a non-empty list of host globs or networks")
    hosts = []
    for i, text in enumerate(hosts_raw):
        try:
            hosts.append(HostPattern.parse(_string(text, f"{key}.hosts[{i}]")))
        except AddressError as err:
            raise ConfigError(f"{key}.hosts[{i}]", str(err)) from err
    user = item.get("user")
    credentials = _credentials(item, key, timeout, environ, None, None if user is None else _string(user, f"{key}.user"))
    return AllowRule(hosts=tuple(hosts), credentials=credentials)


def _credentials(
    item: dict[str, Any], key: str, timeout: float, environ: Mapping[str, str], password: Secret | None, username: str | None
) -> Credentials:
    if item.get("password") not in (None, ""):
        password = Secret(value=_string(item["password"], f"{key}.password"), source=f"{key}.password")
    if item.get("password_file") not in (None, ""):
        path = _string(item["password_file"], f"{key}.password_file")
        if not os.access(path, os.R_OK):
            raise ConfigError(f"{key}.password_file", f"cannot read {path}")
        password = Secret(file=path, source=f"{key}.password_file")
    if item.get("password_env") not in (None, ""):
        var = _string(item["password_env"], f"{key}.password_env")
        if var not in environ:
            raise ConfigError(f"{key}.password_env", f"environment variable {var} is not set")
        password = Secret(value=environ[var], source=f"{key}.password_env")
    tls = TlsOptions(
        ca_file=_readable(item.get("tls_ca_file"), f"{key}.tls_ca_file"),
        cert_file=_readable(item.get("tls_cert_file"), f"{key}.tls_cert_file"),
        key_file=_readable(item.get("tls_key_file"), f"{key}.tls_key_file"),
        server_name=None if item.get("tls_server_name") in (None, "") else _string(item["tls_server_name"], f"{key}.tls_server_name"),
        insecure_skip_verify=_bool(item.get("tls_insecure_skip_verify", False), f"{key}.tls_insecure_skip_verify"),
    )
    if (tls.cert_file is None) != (tls.key_file is None):
        raise ConfigError(f"{key}.tls_cert_file", "tls_cert_file and tls_key_file go together")
    target_timeout = _duration(item["timeout"], f"{key}.timeout") if "timeout" in item else timeout
    user = item.get("user", username)
    return Credentials(
        username=None if user in (None, "") else _string(user, f"{key}.user"),
        password=password,
        tls=tls,
        timeout=target_timeout,
    )


# --- small typed readers -------------------------------------------------------------


def _check_keys(mapping: Mapping[str, Any], key: str, allowed: set[str]) -> None:
    for name in mapping:
        if name not in allowed:
            where = f"{key}.{name}" if key else str(name)
            raise ConfigError(where, f"unknown key (expected one of: {', '.join(sorted(allowed))})")


def _mapping(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(key, "must be a mapping")
    return value


def _string(value: Any, key: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise ConfigError(key, f"must be a string, got {type(value).__name__}")
    return value


def _readable(value: Any, key: str) -> str | None:
    if value in (None, ""):
        return None
    path = _string(value, key)
    if not os.access(path, os.R_OK):
        raise ConfigError(key, f"cannot read {path}")
    return path


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
        return value.lower() in ("true", "1", "yes")
    raise ConfigError(key, f"must be true or false, got {value!r}")


def _int(value: Any, key: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError) as err:
        raise ConfigError(key, f"must be a whole number, got {value!r}") from err
    if isinstance(value, bool) or not low <= number <= high:
        raise ConfigError(key, f"must be between {low} and {high}, got {value!r}")
    return number


def _choice(value: Any, key: str, choices: tuple[str, ...]) -> str:
    text = _string(value, key).lower()
    if text == "warning":
        text = "warn"
    if text not in choices:
        raise ConfigError(key, f"must be one of {', '.join(choices)}, got {value!r}")
    return text


def parse_duration(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value > 0 else None
    if not isinstance(value, str):
        return None
    match = _DURATION.match(value.strip())
    if not match:
        return None
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    return seconds if seconds > 0 else None


def _duration(value: Any, key: str) -> float:
    seconds = parse_duration(value)
    if seconds is None or seconds > 3600:
        raise ConfigError(key, f"must be a positive duration such as 500ms, 5s or 1m, got {value!r}")
    return seconds


def _listen_parts(listen: str, key: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(key, f"must be host:port or :port, got {listen!r}")
    return host.strip("[]"), int(port)


def listen_host_port(listen: str) -> tuple[str, int]:
    return _listen_parts(listen, "web.listen_address")
