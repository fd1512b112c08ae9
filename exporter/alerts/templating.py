"""The one jinja2 environment of the rendered files: templates shipped as package data, StrictUndefined."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any


def yaml_string(value: Any) -> str:
    """A YAML double-quoted scalar (JSON's escaping is valid YAML)."""
    return json.dumps(str(value), ensure_ascii=False)


@lru_cache(maxsize=1)
def environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("exporter.templates", ""),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # noqa: S701 - YAML output, values are quoted by the |q filter
    )
    env.filters["q"] = yaml_string
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
