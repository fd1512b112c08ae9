"""Unknown keys in any input file: named, with the nearest known key."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any


def unknown_key_problem(name: str, allowed: Iterable[str]) -> str:
    """ "unknown key (did you mean 'addr'?)", or the keys there are when nothing is near."""
    import difflib  # only on an error: a process that reads good files never loads it

    choices = sorted(allowed)
    near = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    # a key of the right meaning under a wrong name (password_path): prefer the near keys of the same shape
    near = sorted(near, key=lambda choice: ("_" in choice) != ("_" in name))
    if near:
        same_shape = [choice for choice in near if ("_" in choice) == ("_" in near[0])][:2]
        return "unknown key (did you mean " + " or ".join(f"'{choice}'" for choice in same_shape) + "?)"
    return f"unknown key (expected one of: {', '.join(choices)})"


def check_known_keys(mapping: Mapping[Any, Any], allowed: Iterable[str], where: str, error: Callable[[str], Exception]) -> None:
    """Raise ``error("<where>.<key>: unknown key (did you mean …)")`` for the first key not in ``allowed``."""
    allowed = set(allowed)
    for name in mapping:
        if str(name) not in allowed:
            joined = f"{where} {name}" if where.endswith(":") else f"{where}.{name}"
            raise error(f"{joined}: {unknown_key_problem(str(name), allowed)}")
