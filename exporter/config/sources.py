"""Where raw config comes from: the YAML file, flags and environment variables, folded into one mapping."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from exporter.common.errors import ConfigError
from exporter.common.yamlfile import read_yaml

ENV_PREFIX = "ELASTICACHE_EXPORTER_"


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
