"""Watched keys and streams: the top-level ``keys`` section (and ``--check-keys`` & co.), and a target's own."""

from __future__ import annotations

from typing import Any

from exporter.common.errors import ConfigError
from exporter.redis.keys import KeyProbes, KeySpec, QueueSpec, glob_regex, parse_key_list

from .declared import KEYS
from .readers import as_int, as_string


def key_probes_config(raw: Any, key: str) -> KeyProbes:
    if raw is None:
        return KeyProbes()
    if not isinstance(raw, dict):
        raise ConfigError(key, "must be a mapping such as {check_single_keys: 'db0=queue:jobs'}")
    fields = KEYS.fields(raw, key)
    watched = (*fields["check_keys"], *fields["check_single_keys"])
    return KeyProbes(**fields, queues=_queues(raw.get("queues"), f"{key}.queues", watched))


def _queues(value: Any, key: str, watched: tuple[KeySpec, ...]) -> tuple[QueueSpec, ...]:
    """Which watched keys are queues: a mapping of entries (the key-list syntax) to a maximum length (or null for
    growth alerts only), or a list of entries. An entry that can match none of the watched keys is a typo."""
    if value in (None, ""):
        return ()
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, str)):
        items = [(entry, None) for entry in (value if isinstance(value, list) else [value])]
    else:
        raise ConfigError(key, "must map keys to a maximum length, such as {'db0=queue:default': 10000}, or list keys")
    queues: list[QueueSpec] = []
    for entry, limit in items:
        where = f"{key}[{entry!r}]"
        try:
            specs = parse_key_list(as_string(entry, where))
        except ValueError as err:
            raise ConfigError(where, str(err)) from None
        max_length = None if limit is None else as_int(limit, where, 1, 10**15)
        for spec in specs:
            if not any(_may_overlap(spec, other) for other in watched):
                raise ConfigError(where, f"matches none of the watched keys (check_keys, check_single_keys) in db{spec.db}")
            queues.append(QueueSpec(spec.db, spec.key, max_length))
    return tuple(queues)


def _may_overlap(queue: KeySpec, watched: KeySpec) -> bool:
    if queue.db != watched.db:
        return False
    if queue.key == watched.key or glob_regex(queue.key).fullmatch(watched.key):
        return True
    return watched.is_pattern and glob_regex(watched.key).fullmatch(queue.key) is not None
