"""Reading a YAML file with one-line errors that name the file and, for syntax errors, the line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def read_yaml(path: str | Path, error: Callable[[str], Exception]) -> Any:
    """The parsed document; ``error(message)`` builds what is raised when the file cannot be read or parsed."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise error(f"{path}: cannot read: {err.strerror or err}") from err
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise error(f"{path}{where}: {getattr(err, 'problem', None) or 'invalid YAML'}") from err
