"""Typed readers for raw config values: each names the key in its error."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from exporter.common.errors import ConfigError, Problems
from exporter.common.schema import unknown_key_problem

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_BARE_NUMBER = re.compile(r"^[+-]?\d+(?:\.\d*)?$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def check_keys(mapping: Mapping[str, Any], key: str, allowed: set[str]) -> None:
    """Every unknown key of ``mapping``, each named with the nearest known one."""
    problems = Problems()
    for name in mapping:
        if name not in allowed:
            where = f"{key}.{name}" if key else str(name)
            problems.errors.append(ConfigError(where, unknown_key_problem(str(name), allowed)))
    problems.raise_any()


def as_mapping(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(key, "must be a mapping")
    return value


def as_string(value: Any, key: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise ConfigError(key, f"must be a string, got {type(value).__name__}")
    return value


def readable_path(value: Any, key: str) -> str | None:
    if value in (None, ""):
        return None
    path = as_string(value, key)
    if not os.access(path, os.R_OK):
        raise ConfigError(key, f"cannot read {path}")
    return path


def as_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
        return value.lower() in ("true", "1", "yes")
    raise ConfigError(key, f"must be true or false, got {value!r}")


def as_int(value: Any, key: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError) as err:
        raise ConfigError(key, f"must be a whole number, got {value!r}") from err
    if isinstance(value, bool) or not low <= number <= high:
        raise ConfigError(key, f"must be between {low} and {high}, got {value!r}")
    return number


_ALIASES = {"warning": "warn", "txt": "text"}  # redis_exporter's (logrus') names of a log level and format


def as_choice(value: Any, key: str, choices: tuple[str, ...]) -> str:
    text = as_string(value, key).lower()
    text = _ALIASES.get(text, text)
    if text not in choices:
        raise ConfigError(key, f"must be one of {', '.join(choices)}, got {value!r}")
    return text


def parse_duration(value: Any) -> float | None:
    """Seconds of a positive duration with its unit (500ms, 5s, 1m, 2h); None for anything else, a bare number
    included: Prometheus refuses one too, and 500 would be read as seconds where milliseconds were meant."""
    if not isinstance(value, str):
        return None
    match = _DURATION.match(value.strip())
    if not match:
        return None
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    return seconds if seconds > 0 else None


def is_bare_number(value: Any) -> bool:
    """A number without a unit, as YAML or a flag gives it: 500, 0.5, "500"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return True
    return isinstance(value, str) and _BARE_NUMBER.match(value.strip()) is not None


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$", re.IGNORECASE)
_UNIT_BYTES = {None: 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2, "gb": 1000**3, "gib": 1024**3}


def as_size(value: Any, key: str, low: int, high: int) -> int:
    """A byte count such as 4MiB, 512KiB or 1000000."""
    match = _SIZE.match(str(value).strip()) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    if match is None:
        raise ConfigError(key, f"must be a size such as 4MiB or 512KiB, got {value!r}")
    size = int(float(match.group(1)) * _UNIT_BYTES[match.group(2) and match.group(2).lower()])
    if not low <= size <= high:
        raise ConfigError(key, f"must be between {low} and {high} bytes, got {value!r}")
    return size


def _listen_parts(listen: str, key: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not 0 <= int(port) < 65536:
        raise ConfigError(key, f"must be host:port or :port, got {listen!r}")
    return host.strip("[]"), int(port)


def listen_host_port(listen: str) -> tuple[str, int]:
    return _listen_parts(listen, "web.listen_address")
