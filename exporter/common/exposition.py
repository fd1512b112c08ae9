"""A fast encoder for the Prometheus text format 0.0.4.

prometheus_client's ``generate_latest`` re-validates every metric and label
name on every sample, which is most of a scrape's CPU here; the names this
exporter emits are fixed or sanitised where they are made, so this encoder
only escapes. Its output is checked against prometheus_client's own parser.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .families import Family
from .labels import LabelSet
from .recent import RecentCache

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_HELP_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n"})
_LABEL_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", '"': '\\"'})


_INF = math.inf


def format_value(value: float) -> str:
    if value.__class__ is float and -_INF < value < _INF:  # the common case: a finite float (NaN fails both)
        return repr(value)
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def _label_pair(key: str, value: str) -> str:
    return f'{key}="{str(value).translate(_LABEL_ESCAPES)}"'


# label sets as rendered, by their items: most recur scrape after scrape (a command's cmd, a bucket's le, a database),
# in dicts made anew each scrape. A set unused for two generations (an old run_id's) is let go; longer than a scrape
# interval (up to 2 minutes), so a set seen every scrape stays
RENDERED: RecentCache[tuple[bool, tuple[tuple[str, str], ...]], str] = RecentCache(max_entries=8192, generation_seconds=120.0)


def _render_labels(labels: dict[str, str], drop_instance: bool, pairs: dict[tuple[str, str], str]) -> str:
    items: Iterable[tuple[str, str]] = labels.items()
    if drop_instance and "instance" in labels:
        items = [item for item in items if item[0] != "instance"]
    rendered = []
    for item in items:
        pair = pairs.get(item)
        if pair is None:
            pair = pairs[item] = _label_pair(*item)
        rendered.append(pair)
    return "{" + ",".join(rendered) + "}" if rendered else ""


def _header(family: Any) -> str:
    name = family.name
    if family.type == "counter" and not isinstance(family, Family):
        name += "_total"  # prometheus_client keeps a counter's name without _total
    kind = family.type if family.type in ("counter", "gauge", "summary", "histogram") else "untyped"
    help_text = family.documentation
    if "\\" in help_text or "\n" in help_text:
        help_text = help_text.translate(_HELP_ESCAPES)
    return f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"


# a family's HELP and TYPE lines, by (class, name, type, help): the same few hundred every scrape
_HEADERS: dict[tuple[type, str, str, str], str] = {}
_MAX_HEADERS = 4096


def encode_text(families: Iterable[Any], *, drop_instance: bool = False) -> bytes:
    """Families are prometheus_client ``Metric`` objects or :class:`~exporter.common.families.Family` (same attributes).

    With ``drop_instance`` the ``instance`` label is left out (a scrape of one node: Prometheus sets it)."""
    lines: list[str] = []
    append = lines.append
    pairs: dict[tuple[str, str], str] = {}  # most label pairs (the instance above all) repeat on every line
    # label sets other than kept ones (LabelSet), rendered once per dict: keyed by id, the entry holds the dict
    # itself, so no other dict can take its id while the encoding runs
    rendered_labels: dict[int, tuple[dict[str, str], str]] = {}
    headers = _HEADERS
    RENDERED.tick()
    for family in families:
        key = (family.__class__, family.name, family.type, family.documentation)
        header = headers.get(key)
        if header is None:
            if len(headers) >= _MAX_HEADERS:
                headers.clear()
            header = headers[key] = _header(family)
        append(header)
        samples = family.samples if family.__class__ is Family else [sample[:3] for sample in family.samples]
        for sample_name, labels, value in samples:
            number = repr(value) if value.__class__ is float and -_INF < value < _INF else format_value(value)
            if labels.__class__ is LabelSet:
                text = labels.text_without_instance if drop_instance else labels.text
                if text is None:
                    text = _keep_rendered(labels, drop_instance, pairs)
            elif labels:
                cached = rendered_labels.get(id(labels))
                if cached is None:
                    cached = rendered_labels[id(labels)] = (labels, _rendered(labels, drop_instance, pairs))
                text = cached[1]
            else:
                text = ""
            append(f"{sample_name}{text} {number}\n")
    return "".join(lines).encode("utf-8")


def _keep_rendered(labels: LabelSet, drop_instance: bool, pairs: dict[tuple[str, str], str]) -> str:
    text = _render_labels(labels, drop_instance, pairs)
    if drop_instance:
        labels.text_without_instance = text
    else:
        labels.text = text
    return text


def _rendered(labels: dict[str, str], drop_instance: bool, pairs: dict[tuple[str, str], str]) -> str:
    key = (drop_instance, tuple(labels.items()))
    text = RENDERED.young.get(key) or RENDERED.recall(key)
    if text is None:
        text = _render_labels(labels, drop_instance, pairs)
        RENDERED.put(key, text)
    return text
