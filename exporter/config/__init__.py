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
from functools import partial
from typing import Any

from exporter.baselines.settings import BaselineConfig
from exporter.common.errors import ConfigError, Problems
from exporter.redis.keyspace import KeyspaceConfig
from exporter.redis.settings import AllowRule, Credentials, TargetConfig
from exporter.redis.slot_stats import SlotStatsConfig

from .auth_section import discovered_iam
from .aws_section import aws_config
from .declared import BASELINES, CLUSTER, CREDENTIALS, KEYSPACE, LOG, SCRAPE, SLOT_STATS, TARGET, TOP, WEB
from .keys_section import key_probes_config
from .model import DEFAULT_LISTEN_ADDRESS, DEFAULT_REDIS_ADDR, Config
from .readers import as_mapping, check_keys, listen_host_port, parse_duration
from .redis_section import allow_rule, clients_config, credentials_config, heartbeat_config, static_labels_config, target_config
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
    """The configuration of ``raw``, or one error naming every problem in it (each key's, each section's)."""
    environ = os.environ if environ is None else environ
    problems = Problems()
    take = problems.take
    take(lambda: check_keys(raw, "", TOP.keys()), None)
    fields: dict[str, Any] = {}
    for group in (WEB, LOG, SCRAPE):
        section = take(partial(as_mapping, raw, group.path), {})
        fields.update(take(partial(group.fields, section, group.path), {}))
    shard = fields.get("shard")
    if shard is not None and shard.auto and fields.get("shard_statefulset") is None:
        problems.errors.append(
            ConfigError("scrape.shard_statefulset", f"is required with scrape.shard {shard}: NAMESPACE/NAME of the pod's StatefulSet")
        )
    timeout = fields.get("scrape_timeout") or Config.scrape_timeout  # the other sections' errors are wanted too
    allow = take(lambda: _allow_rules(raw, timeout, environ), ())
    aws = take(lambda: as_mapping(raw, "aws"), {})
    aws_settings = take(lambda: aws_config(aws), None)
    # the default address only where nothing else says what to scrape: an exporter of an AWS fleet or of /scrape
    # alone would otherwise page for a localhost nobody configured
    names_regions = aws_settings.accounts if aws_settings is not None else any(aws.get(k) for k in ("region", "regions", "accounts"))
    targets = _targets(raw, timeout, environ, problems, default_addr=not (names_regions or allow))
    discovered = take(lambda: _discovered_credentials(aws, timeout, environ), (Credentials(), False, ()))
    cluster = take(lambda: as_mapping(raw, "cluster"), {})
    sections = {
        "baselines": take(lambda: BaselineConfig(**BASELINES.fields(as_mapping(raw, "baselines"), "baselines")), None),
        "heartbeat": take(lambda: heartbeat_config(as_mapping(raw, "heartbeat")), None),
        "clients": take(lambda: clients_config(as_mapping(raw, "clients")), None),
        "keyspace": take(lambda: KeyspaceConfig(**KEYSPACE.fields(as_mapping(raw, "keyspace"), "keyspace")), None),
        "slot_stats": take(lambda: _slot_stats(cluster), None),
        "cluster_refresh": take(lambda: CLUSTER.value(cluster, "refresh", "cluster"), None),
        "keys": take(lambda: key_probes_config(raw.get("keys"), "keys"), None),
    }
    problems.raise_any()
    return Config(
        **fields,
        **sections,
        aws=aws_settings,
        discovered_credentials=discovered[0],
        discovered_iam=discovered[1],
        discovered_labels=discovered[2],
        targets=targets,
        allow=allow,
        source_file=source_file,
    )


def _allow_rules(raw: Mapping[str, Any], timeout: float, environ: Mapping[str, str]) -> tuple[AllowRule, ...]:
    allow_raw = as_mapping(raw, "scrape").get("allow", []) or []
    if not isinstance(allow_raw, list):
        raise ConfigError("scrape.allow", "must be a list of rules")
    problems = Problems()
    rules = [problems.take(partial(allow_rule, item, f"scrape.allow[{i}]", timeout, environ), None) for i, item in enumerate(allow_raw)]
    problems.raise_any()
    return tuple(rule for rule in rules if rule is not None)


def _slot_stats(cluster: dict[str, Any]) -> SlotStatsConfig:
    check_keys(cluster, "cluster", CLUSTER.keys())
    return SlotStatsConfig(**SLOT_STATS.fields(as_mapping(cluster, "slot_stats"), "cluster.slot_stats"))


def _targets(
    raw: Mapping[str, Any], timeout: float, environ: Mapping[str, str], problems: Problems, *, default_addr: bool
) -> tuple[TargetConfig, ...]:
    """The single target of ``redis`` (the flags' target) first, then those of ``targets``; a name is used once. The
    single target's address defaults to localhost only with ``default_addr`` and no ``targets``. Each target's problems
    go to ``problems``."""
    targets_raw = raw.get("targets", [])
    if targets_raw is None:
        targets_raw = []
    if not isinstance(targets_raw, list):
        problems.errors.append(ConfigError("targets", "must be a list"))
        targets_raw = []
    read = [problems.take(partial(target_config, item, f"targets[{index}]", timeout, environ), None) for index, item in enumerate(targets_raw)]
    redis = problems.take(lambda: as_mapping(raw, "redis"), {})
    problems.take(lambda: check_keys(redis, "redis", TARGET.keys() - {"name", "replication_group", "shard", "keys"}), None)
    addr = redis.get("addr", DEFAULT_REDIS_ADDR if default_addr and not targets_raw else None)
    if addr not in (None, ""):
        single = {"addr": addr, **{k: v for k, v in redis.items() if k != "addr"}}
        read.insert(0, problems.take(lambda: target_config(single, "redis", timeout, environ, default_name=True), None))
    targets = [target for target in read if target is not None]
    names: set[str] = set()
    for target in targets:
        if target.name in names:
            problems.errors.append(ConfigError("targets", f"target name {target.name!r} is used twice"))
        names.add(target.name)
    return tuple(targets)


def _discovered_credentials(aws: dict[str, Any], timeout: float, environ: Mapping[str, str]) -> tuple[Credentials, bool, tuple[tuple[str, str], ...]]:
    """The credentials of discovered nodes, whether they authenticate with IAM (each signs for its own cache), and the
    static labels of each."""
    discovered = as_mapping(aws, "discovered")
    check_keys(discovered, "aws.discovered", {*CREDENTIALS.keys(), "iam_auth", "labels"})
    credentials = credentials_config(discovered, "aws.discovered", timeout, environ, None, None)
    labels = static_labels_config(discovered.get("labels"), "aws.discovered.labels")
    return credentials, discovered_iam(discovered, "aws.discovered", credentials.username), labels
