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

from exporter.baselines.settings import BaselineConfig
from exporter.common.errors import ConfigError
from exporter.redis.keyspace import KeyspaceConfig
from exporter.redis.settings import Credentials, TargetConfig
from exporter.redis.slot_stats import SlotStatsConfig

from .auth_section import discovered_iam
from .aws_section import aws_config
from .declared import BASELINES, CLUSTER, CREDENTIALS, KEYSPACE, LOG, SCRAPE, SLOT_STATS, TARGET, TOP, WEB
from .keys_section import key_probes_config
from .model import DEFAULT_LISTEN_ADDRESS, DEFAULT_REDIS_ADDR, Config
from .readers import as_mapping, check_keys, listen_host_port, parse_duration
from .redis_section import allow_rule, clients_config, credentials_config, heartbeat_config, target_config
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


def build_config(raw: Mapping[str, Any], *, source_file: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    environ = os.environ if environ is None else environ
    check_keys(raw, "", TOP.keys())
    fields: dict[str, Any] = {}
    for group in (WEB, LOG, SCRAPE):
        fields.update(group.fields(as_mapping(raw, group.path), group.path))
    timeout = fields["scrape_timeout"]
    scrape = as_mapping(raw, "scrape")
    allow_raw = scrape.get("allow", []) or []
    if not isinstance(allow_raw, list):
        raise ConfigError("scrape.allow", "must be a list of rules")
    allow = tuple(allow_rule(item, f"scrape.allow[{i}]", timeout, environ) for i, item in enumerate(allow_raw))
    aws = as_mapping(raw, "aws")
    aws_settings = aws_config(aws)
    # the default address only where nothing else says what to scrape: an exporter of an AWS fleet or of /scrape
    # alone would otherwise page for a localhost nobody configured
    targets = _targets(raw, timeout, environ, default_addr=not (aws_settings.accounts or allow))
    discovered_credentials, discovered_iam_auth = _discovered_credentials(aws, timeout, environ)
    return Config(
        **fields,
        baselines=BaselineConfig(**BASELINES.fields(as_mapping(raw, "baselines"), "baselines")),
        aws=aws_settings,
        discovered_credentials=discovered_credentials,
        discovered_iam=discovered_iam_auth,
        heartbeat=heartbeat_config(as_mapping(raw, "heartbeat")),
        clients=clients_config(as_mapping(raw, "clients")),
        keyspace=KeyspaceConfig(**KEYSPACE.fields(as_mapping(raw, "keyspace"), "keyspace")),
        slot_stats=_slot_stats(as_mapping(raw, "cluster")),
        cluster_refresh=CLUSTER.value(as_mapping(raw, "cluster"), "refresh", "cluster"),
        targets=targets,
        keys=key_probes_config(raw.get("keys"), "keys"),
        allow=allow,
        source_file=source_file,
    )


def _slot_stats(cluster: dict[str, Any]) -> SlotStatsConfig:
    check_keys(cluster, "cluster", CLUSTER.keys())
    return SlotStatsConfig(**SLOT_STATS.fields(as_mapping(cluster, "slot_stats"), "cluster.slot_stats"))


def _targets(raw: Mapping[str, Any], timeout: float, environ: Mapping[str, str], *, default_addr: bool) -> tuple[TargetConfig, ...]:
    """The single target of ``redis`` (the flags' target) first, then those of ``targets``; a name is used once. The
    single target's address defaults to localhost only with ``default_addr`` and no ``targets``."""
    targets_raw = raw.get("targets", [])
    if targets_raw is None:
        targets_raw = []
    if not isinstance(targets_raw, list):
        raise ConfigError("targets", "must be a list")
    targets = [target_config(item, f"targets[{index}]", timeout, environ) for index, item in enumerate(targets_raw)]
    redis = as_mapping(raw, "redis")
    check_keys(redis, "redis", TARGET.keys() - {"name", "replication_group", "shard", "keys"})
    addr = redis.get("addr", DEFAULT_REDIS_ADDR if default_addr and not targets_raw else None)
    if addr not in (None, ""):
        single = {"addr": addr, **{k: v for k, v in redis.items() if k != "addr"}}
        targets.insert(0, target_config(single, "redis", timeout, environ, default_name=True))
    names: set[str] = set()
    for target in targets:
        if target.name in names:
            raise ConfigError("targets", f"target name {target.name!r} is used twice")
        names.add(target.name)
    return tuple(targets)


def _discovered_credentials(aws: dict[str, Any], timeout: float, environ: Mapping[str, str]) -> tuple[Credentials, bool]:
    """The credentials of discovered nodes, and whether they authenticate with IAM (each signs for its own cache)."""
    discovered = as_mapping(aws, "discovered")
    check_keys(discovered, "aws.discovered", {*CREDENTIALS.keys(), "iam_auth"})
    credentials = credentials_config(discovered, "aws.discovered", timeout, environ, None, None)
    return credentials, discovered_iam(discovered, "aws.discovered", credentials.username)
