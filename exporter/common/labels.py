"""Label sets that recur scrape after scrape, made once and kept by their owner.

A node's samples carry the same few hundred label sets every scrape (its ``instance``, then a command's ``cmd``, a
bucket's ``le``, a database's ``db``). A target keeps its root set (``{"instance": name}``, made with the target and
dropped with it) and :meth:`LabelSet.with_label` gives the root's children, the same objects every scrape, so the text
encoder renders each once and keeps the text on the set. Frozen: a kept set is shared, so it refuses to change
(``{**labels, ...}`` makes a plain dict from it).

Bounded: a set keeps at most ``MAX_CHILDREN`` children; past that (a label that churns) they are let go and made anew,
which costs what plain dicts cost.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NoReturn

MAX_CHILDREN = 4096

# The label names the exporter's own series carry (every family of docs/metrics.md, and what Prometheus adds to a
# scrape): a target's static labels (``targets[].labels``) may not take one, nor a name of the families that make their
# label names (``tag_<key>``, ``dimension_<name>``), nor one Prometheus reserves (``__``).
SERVED_LABELS = frozenset(
    """
    instance job le quantile db cmd err role replication_group shard shard_source node_type cluster prefix source
    direction level kind reason name ver version python_version index count primary replica master_host master_port
    slave_ip slave_port slave_state read_only redis_version redis_build_id redis_mode os maxmemory_policy tcp_port
    run_id process_id master_replid valkey_version valkey_release_stage abi_version account_id api az cache category
    certificate class client_name consumer engine engine_version event_name field flags global_replication_group group
    host id idle key limit log metric module node option pattern phase port region resource resp serial service_update
    severity slot source_id source_type status stream thread tier type update_type upgrade_to user val within
    """.split()  # noqa: SIM905 - a list of names, read as one
)
SERVED_LABEL_PREFIXES = ("__", "tag_", "dimension_")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def static_label_problem(name: str) -> str | None:
    """Why ``name`` cannot be a target's static label, or None."""
    if not _LABEL_NAME.match(name):
        return f"{name!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"
    if name.startswith(SERVED_LABEL_PREFIXES):
        prefix = next(prefix for prefix in SERVED_LABEL_PREFIXES if name.startswith(prefix))
        reason = "is reserved by Prometheus" if prefix == "__" else "names labels the exporter serves"
        return f"{name!r}: the prefix {prefix} {reason}"
    if name in SERVED_LABELS:
        return f"{name!r} is a label the exporter serves itself"
    return None


def static_labels(by_instance: Mapping[str, Mapping[str, str]], labels: dict[str, str]) -> dict[str, str]:
    """``labels`` with the static labels of its ``instance`` after that label, where ``by_instance`` has some and
    ``labels`` lacks them (a target's root set and its children carry them already); else ``labels`` itself."""
    static = by_instance.get(labels.get("instance", ""))
    if not static or next(iter(static)) in labels:
        return labels
    return {"instance": labels["instance"], **static, **labels}


class LabelSet(dict):
    __slots__ = ("_children", "text", "text_without_instance")

    def __init__(self, items: Any) -> None:
        super().__init__(items)
        self._children: dict[tuple[str, str], LabelSet] | None = None
        self.text: str | None = None  # as the encoder renders it; None until first encoded
        self.text_without_instance: str | None = None

    def with_label(self, key: str, value: str) -> LabelSet:
        """These labels and ``key``=``value``: the same set each time it is asked for."""
        children = self._children
        if children is None:
            children = self._children = {}
        child = children.get((key, value))
        if child is None:
            if len(children) >= MAX_CHILDREN:
                children.clear()
            child = children[(key, value)] = LabelSet({**self, key: value})
        return child

    def _frozen(self, *_: Any, **__: Any) -> NoReturn:
        raise TypeError("a LabelSet is shared between scrapes and cannot change; copy it with {**labels, ...}")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _frozen

    def __reduce__(self) -> tuple[type, tuple[dict[str, str]]]:
        return dict, (dict(self),)


def instance_labels(instance: str) -> LabelSet:
    """A root set ``{"instance": instance}`` for one use; a target keeps its own (``TargetRendering.labels``)."""
    return LabelSet({"instance": instance})


def with_label(labels: dict[str, str], key: str, value: str) -> dict[str, str]:
    """``labels`` and ``key``=``value``, kept where ``labels`` is a kept set."""
    if labels.__class__ is LabelSet:
        return labels.with_label(key, value)
    return {**labels, key: value}
