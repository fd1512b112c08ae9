"""Typed, validated, immutable configuration: one ``Config`` object for the whole process.

Sources, highest first: command-line flags, ``ELASTICACHE_EXPORTER_*``
environment variables, the YAML file, defaults. Flags and variables are
folded into the same nested mapping as the file (``--redis.addr`` and
``ELASTICACHE_EXPORTER_REDIS_ADDR`` both set ``redis.addr``) before validation,
so every source is checked by the same code and every error names its key.
Each section's records live with the part that uses them (``redis.settings``,
``aws.settings``, ``baselines.settings``); this package reads and validates them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from exporter.aws.settings import AwsConfig
from exporter.baselines.settings import BaselineConfig
from exporter.common.errors import ConfigError
from exporter.common.records import field, record
from exporter.common.sharding import Shard, parse_shard
from exporter.redis.clients import ClientsConfig
from exporter.redis.keys import KeyProbes
from exporter.redis.keyspace import KeyspaceConfig
from exporter.redis.resp import DEFAULT_MAX_REPLY_BYTES
from exporter.redis.settings import DEFAULT_TIMEOUT, AllowRule, Credentials, HeartbeatConfig, TargetConfig

from .auth_section import discovered_iam
from .aws_section import aws_config
from .keys_section import key_probes_config
from .readers import as_choice, as_duration, as_int, as_mapping, as_size, as_string, check_keys, listen_host_port, parse_duration, readable_path
from .redis_section import CREDENTIAL_KEYS, allow_rule, clients_config, credentials_config, heartbeat_config, keyspace_config, target_config
from .sources import env_values, flag_to_env, load_yaml, overlay

__all__ = [
    "DEFAULT_LISTEN_ADDRESS",
    "DEFAULT_REDIS_ADDR",
    "Config",
    "build_config",
    "env_values",
    "flag_to_env",
    "listen_host_port",
    "load_yaml",
    "overlay",
    "parse_duration",
]

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
    scrape_concurrency: int = 16
    shard: Shard | None = None  # this process scrapes only the targets of its shard on /metrics
    scrape_max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    targets: tuple[TargetConfig, ...] = ()
    keys: KeyProbes = field(factory=KeyProbes)  # watched keys of every target without keys of its own
    allow: tuple[AllowRule, ...] = ()
    heartbeat: HeartbeatConfig = field(factory=HeartbeatConfig)
    clients: ClientsConfig = field(factory=ClientsConfig)  # CLIENT LIST aggregates, read in the background
    keyspace: KeyspaceConfig = field(factory=KeyspaceConfig)  # the keyspace by prefix, sampled in the background
    aws: AwsConfig = field(factory=AwsConfig)
    discovered_credentials: Credentials = field(factory=Credentials)  # the config file's aws.discovered
    discovered_iam: bool = False  # aws.discovered.iam_auth: each discovered node signs an IAM token for its own cache
    baselines: BaselineConfig = field(factory=BaselineConfig)
    source_file: str | None = None


def build_config(raw: Mapping[str, Any], *, source_file: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    environ = os.environ if environ is None else environ
    check_keys(raw, "", {"web", "log", "scrape", "redis", "targets", "heartbeat", "aws", "baselines", "keys", "clients", "keyspace"})
    web = as_mapping(raw, "web")
    check_keys(web, "web", {"listen_address", "telemetry_path", "config_file"})
    log = as_mapping(raw, "log")
    check_keys(log, "log", {"level", "format"})
    scrape = as_mapping(raw, "scrape")
    check_keys(scrape, "scrape", {"timeout", "concurrency", "allow", "max_reply_size", "shard"})

    timeout = as_duration(scrape.get("timeout", DEFAULT_TIMEOUT), "scrape.timeout")
    listen = as_string(web.get("listen_address", DEFAULT_LISTEN_ADDRESS), "web.listen_address")
    listen_host_port(listen)
    path = as_string(web.get("telemetry_path", "/metrics"), "web.telemetry_path")
    if not path.startswith("/") or path in ("/", "/scrape", "/-/healthy"):
        raise ConfigError("web.telemetry_path", f"must be a path of its own starting with '/', got {path!r}")
    level = as_choice(log.get("level", "info"), "log.level", ("debug", "info", "warn", "error"))
    fmt = as_choice(log.get("format", "text"), "log.format", ("text", "json"))
    concurrency = as_int(scrape.get("concurrency", 16), "scrape.concurrency", 1, 256)
    shard = None
    if scrape.get("shard") not in (None, ""):
        try:
            shard = parse_shard(as_string(scrape["shard"], "scrape.shard"))
        except ValueError as err:
            raise ConfigError("scrape.shard", str(err)) from None
    max_reply = as_size(scrape.get("max_reply_size", DEFAULT_MAX_REPLY_BYTES), "scrape.max_reply_size", 64 * 1024, 1024**3)

    targets: list[TargetConfig] = []
    targets_raw = raw.get("targets", [])
    if targets_raw is None:
        targets_raw = []
    if not isinstance(targets_raw, list):
        raise ConfigError("targets", "must be a list")
    for index, item in enumerate(targets_raw):
        targets.append(target_config(item, f"targets[{index}]", timeout, environ))

    redis = as_mapping(raw, "redis")
    check_keys(redis, "redis", {"addr", "node_type", "iam_auth", *CREDENTIAL_KEYS})
    addr = redis.get("addr", None if targets_raw else DEFAULT_REDIS_ADDR)
    if addr not in (None, ""):
        single = {"addr": addr, **{k: v for k, v in redis.items() if k != "addr"}}
        targets.insert(0, target_config(single, "redis", timeout, environ, default_name=True))

    names: set[str] = set()
    for target in targets:
        if target.name in names:
            raise ConfigError("targets", f"target name {target.name!r} is used twice")
        names.add(target.name)

    allow_raw = scrape.get("allow", []) or []
    if not isinstance(allow_raw, list):
        raise ConfigError("scrape.allow", "must be a list of rules")
    allow = tuple(allow_rule(item, f"scrape.allow[{i}]", timeout, environ) for i, item in enumerate(allow_raw))

    aws = as_mapping(raw, "aws")
    discovered_credentials, discovered_iam_auth = _discovered_credentials(aws, timeout, environ)
    return Config(
        baselines=baselines_config(as_mapping(raw, "baselines")),
        aws=aws_config(aws),
        discovered_credentials=discovered_credentials,
        discovered_iam=discovered_iam_auth,
        heartbeat=heartbeat_config(as_mapping(raw, "heartbeat")),
        clients=clients_config(as_mapping(raw, "clients")),
        keyspace=keyspace_config(as_mapping(raw, "keyspace")),
        listen_address=listen,
        telemetry_path=path,
        web_config_file=readable_path(web.get("config_file"), "web.config_file"),
        log_level=level,
        log_format=fmt,
        scrape_timeout=timeout,
        scrape_concurrency=concurrency,
        shard=shard,
        scrape_max_reply_bytes=max_reply,
        targets=tuple(targets),
        keys=key_probes_config(raw.get("keys"), "keys"),
        allow=allow,
        source_file=source_file,
    )


def _discovered_credentials(aws: dict[str, Any], timeout: float, environ: Mapping[str, str]) -> tuple[Credentials, bool]:
    """The credentials of discovered nodes, and whether they authenticate with IAM (each signs for its own cache)."""
    discovered = as_mapping(aws, "discovered")
    check_keys(discovered, "aws.discovered", {*CREDENTIAL_KEYS, "iam_auth"})
    credentials = credentials_config(discovered, "aws.discovered", timeout, environ, None, None)
    return credentials, discovered_iam(discovered, "aws.discovered", credentials.username)


def baselines_config(raw: dict[str, Any]) -> BaselineConfig:
    check_keys(raw, "baselines", {"file", "basis", "window"})
    basis = raw.get("basis")
    if basis is not None and basis not in ("lower", "measured", "published"):
        raise ConfigError("baselines.basis", f"must be lower, measured or published, got {basis!r}")
    return BaselineConfig(
        file=readable_path(raw.get("file"), "baselines.file"),
        basis=basis,
        window=as_duration(raw.get("window", "5m"), "baselines.window"),
    )
