"""Label sets that recur scrape after scrape, made once and kept.

A node's samples carry the same few hundred label sets every scrape (its ``instance``, then a command's ``cmd``, a
bucket's ``le``, a database's ``db``). :func:`instance_labels` gives a target's root set and :meth:`LabelSet.with_label`
its children, the same objects every scrape, so the text encoder renders each once and keeps the text on the set.
Frozen: a kept set is shared, so it refuses to change (``{**labels, ...}`` makes a plain dict from it).

Bounded: at most ``MAX_KEPT`` sets are kept in all; when they are reached (thousands of targets, or a label that churns)
every root is let go and sets are made anew, which costs what plain dicts cost.
"""

from __future__ import annotations

from typing import Any, NoReturn

MAX_KEPT = 32768  # about 10 MiB with their rendered text


class _Kept:
    def __init__(self) -> None:
        self.roots: dict[str, LabelSet] = {}
        self.count = 0

    def one_more(self) -> None:
        if self.count >= MAX_KEPT:  # every kept set is let go: those in use stay valid, they are no longer handed out
            self.roots = {}
            self.count = 0
        self.count += 1


_KEPT = _Kept()


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
            child = children[(key, value)] = LabelSet({**self, key: value})
            _KEPT.one_more()
        return child

    def _frozen(self, *_: Any, **__: Any) -> NoReturn:
        raise TypeError("a LabelSet is shared between scrapes and cannot change; copy it with {**labels, ...}")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _frozen  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type, tuple[dict[str, str]]]:
        return dict, (dict(self),)


def instance_labels(instance: str) -> LabelSet:
    """The root set ``{"instance": instance}`` of a target, the same object every scrape."""
    root = _KEPT.roots.get(instance)
    if root is None:
        _KEPT.one_more()
        root = _KEPT.roots[instance] = LabelSet({"instance": instance})
    return root


def with_label(labels: dict[str, str], key: str, value: str) -> dict[str, str]:
    """``labels`` and ``key``=``value``, kept where ``labels`` is a kept set."""
    if labels.__class__ is LabelSet:
        return labels.with_label(key, value)  # type: ignore[attr-defined]
    return {**labels, key: value}
