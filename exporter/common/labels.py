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

from typing import Any, NoReturn

MAX_CHILDREN = 4096


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
