"""A fast encoder for the Prometheus text format 0.0.4.

prometheus_client's ``generate_latest`` re-validates every metric and label
name on every sample, which is most of a scrape's CPU here; the names this
exporter emits are fixed or sanitised where they are made, so this encoder
only escapes. Its output is checked against prometheus_client's own parser.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from .families import HISTOGRAM, NOT_RECORDING, SUMMARY, Family, FamilySet
from .labels import LabelSet, static_labels
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


def _number(value: float) -> str:
    return repr(value) if value.__class__ is float and -_INF < value < _INF else format_value(value)


def _label_value(value: str) -> str:
    return value.translate(_LABEL_ESCAPES) if '"' in value or "\\" in value or "\n" in value else value


def _label_pair(key: str, value: str) -> str:
    return f'{key}="{str(value).translate(_LABEL_ESCAPES)}"'


# label sets as rendered, by their items: most recur scrape after scrape (a database, a client class), in dicts made
# anew each scrape. A node's dicts begin with its instance and differ from another node's by that alone: what follows
# the instance is kept (by those items, with None first), so that a fleet's nodes share it and the cache does not grow
# with them; other dicts whole (by drop_instance and the items). A set unused for two generations (an old run_id's) is
# let go; longer than a scrape interval (up to 2 minutes), so a set seen every scrape stays
RENDERED: RecentCache[tuple[bool | None, tuple[tuple[str, str], ...]], str] = RecentCache(max_entries=8192, generation_seconds=120.0)


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


# what a part of a target renders to where it depends only on its inputs and the target's instance (the settings CONFIG
# GET reads, which stand still for days and are the same on most nodes of a fleet): rendered once with a stand-in
# instance and kept as each line's text around it, by (part, inputs, drop_instance), so that a target without a memo
# of its own (most of a fleet) writes each line with one concatenation instead of rendering its labels and value
# (and turned with RENDERED). A rendering of more than SHARED_LINES lines (a node with a thousand databases) or one that
# cannot be shared is kept as () and made for each target.
SHARED: RecentCache[tuple[Any, ...], tuple[tuple[str, str, str, str | None], ...]] = RecentCache(max_entries=256, generation_seconds=120.0)
SHARED_LINES = 64
_STAND_IN = "\x00"  # no target's instance: a label value with a NUL never reaches a rendering that is shared


def _shared_lines(render: Callable[[dict[str, str], FamilySet], None], drop_instance: bool) -> tuple[tuple[str, str, str, str | None], ...] | None:
    """(family, its HELP and TYPE lines, the line's text before the instance pair, after it; None: no instance pair)
    for each line ``render`` adds for the stand-in instance; None where a line holds the stand-in elsewhere."""
    scratch = TextFamilySet(drop_instance=drop_instance)
    journal: list[Any] = []
    scratch._journal = journal
    render(LabelSet({"instance": _STAND_IN}), scratch)
    pair = _label_pair("instance", _STAND_IN)
    lines: list[tuple[str, str, str, str | None]] = []
    for i in range(0, len(journal), 3):
        family, header, line = journal[i : i + 3]
        before, found, after = line.partition(pair)
        if _STAND_IN in before or (found and (drop_instance or _STAND_IN in after)):
            return None
        lines.append((family, header, before, after if found else None))
    return tuple(lines)


def _header(name: str, kind: str, help_text: str) -> str:
    kind = kind if kind in ("counter", "gauge", "summary", "histogram") else "untyped"
    if "\\" in help_text or "\n" in help_text:
        help_text = help_text.translate(_HELP_ESCAPES)
    return f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"


# The lines a target's inputs rendered to, kept for its next scrape by the target itself (``RenderMemo``), part by part
# (a section of INFO, the latency histograms, the CONFIG-derived gauges): most INFO fields, command stats and histograms
# of a node stand still from one scrape to the next, and a line that is replayed is neither parsed nor rendered again.
# Each part holds at most MEMO_ENTRIES inputs (a server that makes up field names empties its part).
MEMO_ENTRIES = 2048
# the input; the entries it made, flat as (family, its block's header, entry) after each other (a tuple of tuples would
# double the size of an entry, and a target keeps a few hundred): text lines, or protobuf's Metric messages
Rendered = tuple[Any, tuple[Any, ...]]


class RenderMemo:
    """What one target's inputs rendered to at its last scrape, for one way of rendering (text or protobuf, with or
    without the ``instance`` label). Owned by the target and dropped with it; one render uses it at a time (:meth:`claim`), and a
    render that finds it taken (two requests for one target at once) renders without it."""

    __slots__ = ("_lock", "_parts")

    def __init__(self) -> None:
        self._parts: dict[str, dict[Any, Rendered]] = {}
        self._lock = threading.Lock()

    def claim(self) -> bool:
        return self._lock.acquire(blocking=False)

    def release(self) -> None:
        self._lock.release()

    def part(self, name: str) -> dict[Any, Rendered]:
        kept = self._parts.get(name)
        if kept is None or len(kept) >= MEMO_ENTRIES:
            kept = self._parts[name] = {}
        return kept

    def __len__(self) -> int:
        """Inputs kept, over every part."""
        return sum(len(kept) for kept in self._parts.values())


class TargetRendering:
    """A target's own render state, made with it and dropped with it: its root label set (``{"instance": name}`` and its
    static labels, whose children keep their rendered text) and, where its owner grants it (``replay``), a :class:`RenderMemo` per way of
    rendering that the target is scraped in (about 90 KiB each); without one, every sample is rendered afresh (but the
    lines every target with the same settings shares, see :meth:`TextFamilySet.add_shared`)."""

    __slots__ = ("labels", "memos")

    def __init__(self, instance: str, replay: bool = True, static: Iterable[tuple[str, str]] = ()) -> None:
        # ``static``: the target's own labels (targets[].labels), after the instance: its every child carries them
        self.labels = LabelSet({"instance": instance, **dict(static)})
        # by the way of rendering (text or protobuf, with or without the instance label, which histograms are native)
        self.memos: dict[Hashable, RenderMemo] | None = {} if replay else None

    def memo(self, way: Hashable) -> RenderMemo | None:
        """The memo of one way of rendering, made when the target is first rendered that way; None where none is
        granted."""
        memos = self.memos
        if memos is None:
            return None
        memo = memos.get(way)
        return memos.setdefault(way, RenderMemo()) if memo is None else memo  # setdefault: two renders get the same


class _Recording:
    """``with out.recording(memo, key, source):`` the lines added inside are kept as ``source``'s rendering, unless the
    block raises."""

    __slots__ = ("_key", "_memo", "_out", "_source")

    def __init__(self, out: RenderingFamilySet, memo: dict[Any, Rendered], key: Any, source: Any) -> None:
        self._out, self._memo, self._key, self._source = out, memo, key, source

    def __enter__(self) -> None:
        self._out._journal = []

    def __exit__(self, kind: Any, *_: Any) -> None:
        journal, self._out._journal = self._out._journal, None
        if kind is None and journal is not None:
            self._memo[self._key] = (self._source, tuple(journal))


# a body of fewer lines is written in one join (a node's has about a thousand); a fleet's (or a compacted set's),
# family by family as its lines are let go
RELEASE_LINES = 20000
# entries a block gathers before compact() joins them into one (see there)
COMPACT_ENTRIES = 48

# a family's HELP and TYPE lines by its name, with the type and help they were made from: the same few hundred
# every scrape
_HEADERS: dict[str, tuple[str, str, str]] = {}
_MAX_HEADERS = 4096

_OPENMETRICS_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "summary": "summary", "untyped": "unknown"}
_OPENMETRICS_HEADERS: dict[str, str] = {}  # a text family's HELP and TYPE lines: the OpenMetrics ones


def split_header(text_header: str) -> tuple[str, str, str]:
    """A family's name, help text (as escaped in the text format) and type, from its HELP and TYPE lines."""
    help_line, type_line = text_header.split("\n", 1)
    name, kind = type_line[len("# TYPE ") :].rstrip("\n").rsplit(" ", 1)
    return name, help_line[len("# HELP ") + len(name) + 1 :], kind


def openmetrics_header(text_header: str) -> str:
    """A family's HELP and TYPE lines of the text format, as OpenMetrics 1.0.0 writes them: a counter's family is named
    without ``_total`` (its samples keep it); a counter whose name lacks it, which OpenMetrics cannot type counter, is
    ``unknown``, as is an untyped one; HELP also escapes ``"``. Every other line of a sample is the same in both."""
    header = _OPENMETRICS_HEADERS.get(text_header)
    if header is None:
        name, help_text, kind = split_header(text_header)
        help_text = help_text.replace('"', '\\"')
        family, kind = name, _OPENMETRICS_TYPES.get(kind, "unknown")
        if kind == "counter":
            if name.endswith("_total"):
                family = name[: -len("_total")]
            else:
                kind = "unknown"
        header = f"# HELP {family} {help_text}\n# TYPE {family} {kind}\n"
        if len(_OPENMETRICS_HEADERS) >= _MAX_HEADERS:
            _OPENMETRICS_HEADERS.clear()
        _OPENMETRICS_HEADERS[text_header] = header
    return header


class RenderingFamilySet(FamilySet):
    """A :class:`FamilySet` that renders each sample into its family's block as it is added: no sample tuples or family
    objects are kept, and a family's block is the list its entries are appended to (its header first, then one entry a
    sample, or a histogram's or summary's). A target's inputs that stand still replay the entries they made last time
    (:meth:`replay`). :class:`TextFamilySet` renders text lines, ``protobuf.ProtobufFamilySet`` Metric messages.

    With ``drop_instance`` the ``instance`` label is left out (a scrape of one node: Prometheus sets it)."""

    def __init__(self, *, drop_instance: bool = False) -> None:
        self._blocks: dict[str, list[Any]] = {}
        self._drop_instance = drop_instance
        self._pairs: dict[tuple[str, str], str] = {}  # most label pairs (the instance above all) repeat on every line
        # label sets other than kept ones (LabelSet), rendered once per dict: keyed by id, the entry holds the dict
        # itself, so no other dict can take its id while this set is filled
        self._rendered: dict[int, tuple[dict[str, str], str]] = {}
        self._journal: list[Any] | None = None  # the entries of the input being recorded (see recording)
        self._compacted: dict[str, int] = {}  # by family: where its block's entries start that compact() has not joined
        self._memo: RenderMemo | None = None  # the memo of the target being rendered, claimed by rendering()
        RENDERED.tick()
        SHARED.tick()

    def _labels(self, labels: dict[str, str]) -> str:
        """The labels as the text format writes them (``{a="b"}``, or nothing): also the key other encodings keep
        their own rendering of a label set by."""
        if labels.__class__ is LabelSet:
            text = labels.text_without_instance if self._drop_instance else labels.text
            return _keep_rendered(labels, self._drop_instance, self._pairs) if text is None else text
        if not labels:
            return ""
        cached = self._rendered.get(id(labels))
        if cached is None:
            cached = self._rendered[id(labels)] = (labels, _rendered(labels, self._drop_instance, self._pairs))
        return cached[1]

    @contextlib.contextmanager
    def rendering(self, rendering: TargetRendering | None) -> Iterator[None]:
        """Within: :meth:`memo` gives the parts of that target's memo for this way of rendering, if no other render
        holds it now. After: the target's label dicts rendered within are let go (their rendering was kept by id)."""
        memo = rendering.memo(self.way()) if rendering is not None else None
        claimed = memo is not None and memo.claim()
        if claimed:
            self._memo = memo
        try:
            yield
        finally:
            self._rendered.clear()
            if claimed:
                self._memo = None
                memo.release()  # type: ignore[union-attr]

    @staticmethod
    def _join(entries: list[Any]) -> Any:
        """Entries as one (a run of text lines, or of protobuf messages)."""
        raise NotImplementedError

    def compact(self) -> None:
        """Joins the entries each block gathered since it was last compacted into one, where they are more than
        COMPACT_ENTRIES: a fleet's /metrics holds every target's entries until the body is written, and as tens of
        thousands of small objects, made among the targets' long-lived objects (each scrape's parsed replies), they
        fill the allocator's arenas for small objects, which stay once the entries are gone (about 25 KiB of RSS a target
        at 1,000 targets). Runs of that many are a few KiB each, which malloc takes and gives back. A set compacted
        writes its body family by family, as a fleet's."""
        compacted = self._compacted
        join = self._join
        for name, block in self._blocks.items():
            start = compacted.get(name, 1)
            if len(block) - start > COMPACT_ENTRIES:
                block[start:] = [join(block[start:])]
                compacted[name] = start + 1

    def way(self) -> Hashable:
        """What the entries depend on besides the inputs: a target keeps one memo for each way it is rendered."""
        return ("text", self._drop_instance)

    def memo(self, part: str) -> dict[Any, Rendered] | None:
        return self._memo.part(part) if self._memo is not None else None

    def replay(self, memo: dict[Any, Rendered] | None, key: Any, source: Any) -> Rendered | None:
        """Adds again the entries ``source`` rendered to last time and returns what was kept, if ``key``'s input is
        still ``source``; if not, None (render it, within :meth:`recording`)."""
        if memo is None:
            return None
        kept = memo.get(key)
        if kept is None or kept[0] != source:
            return None
        self._add_entries(kept[1])
        return kept

    def replay_each(self, memo: dict[Any, Rendered] | None, inputs: dict[Any, Any], render: Callable[[Any, Any], None]) -> int:
        """:meth:`replay` of every input of ``inputs`` by its key, in one call (a section's fields, most of which stand
        still), and ``render(key, source)`` within :meth:`recording` of each that changed, in their order; returns how
        many were rendered."""
        if memo is None:
            for key, source in inputs.items():
                render(key, source)
            return len(inputs)
        blocks = self._blocks
        rendered = 0
        for key, source in inputs.items():
            kept = memo.get(key)
            if kept is None or kept[0] != source:
                with _Recording(self, memo, key, source):
                    render(key, source)
                rendered += 1
                continue
            lines = kept[1]
            if len(lines) == 3:  # most inputs (an INFO field) make one line
                block = blocks.get(lines[0])
                if block is None:
                    block = blocks[lines[0]] = [lines[1]]
                block.append(lines[2])
            else:
                self._add_entries(lines)
        return rendered

    def _add_entries(self, lines: tuple[Any, ...]) -> None:
        """Kept entries (family, header, entry; ...) added again."""
        blocks = self._blocks
        entries = iter(lines)
        for family, header, entry in zip(entries, entries, entries, strict=True):
            block = blocks.get(family)
            if block is None:
                block = blocks[family] = [header]
            block.append(entry)

    def add_numbers(self, labels: dict[str, str], samples: list[tuple[str, str, str, float | str]]) -> None:
        if self._journal is not None:  # recorded sample by sample
            super().add_numbers(labels, samples)
            return
        self._add_numbers(self._labels(labels), labels, samples)

    def _add_numbers(self, text: str, labels: dict[str, str], samples: list[tuple[str, str, str, float | str]]) -> None:
        """The samples of :meth:`add_numbers` whose labels render to ``text``, outside a recording."""
        raise NotImplementedError

    def recording(self, memo: dict[Any, Rendered] | None, key: Any, source: Any) -> AbstractContextManager[None]:
        return NOT_RECORDING if memo is None else _Recording(self, memo, key, source)

    def record_together(self, memo: dict[Any, Rendered] | None, key: Any, source: Any, parts: Iterable[Any]) -> None:
        """Keeps under ``key`` the entries of the inputs ``parts`` (each kept or replayed in this scrape), one after the
        other: when the whole of ``source`` stands still, they are replayed at once."""
        if memo is None:
            return
        lines: list[Any] = []
        for part in parts:
            kept = memo.get(part)
            if kept is None:
                return
            lines += kept[1]
        memo[key] = (source, tuple(lines))

    def names(self) -> set[str]:
        return set(self._blocks)

    def __contains__(self, name: str) -> bool:
        return name in self._blocks

    def families(self) -> Iterator[Family]:
        raise TypeError("a rendering set holds rendered entries; use encode()")

    def __iter__(self) -> Iterator[Any]:
        raise TypeError("a rendering set holds rendered entries; use encode()")

    def encode(self) -> bytes:
        raise NotImplementedError

    def body(self, openmetrics: bool = False) -> bytes | bytearray:
        """The answer's body, the set's entries let go as it is made (the set is empty after); ``openmetrics``: in
        that format, where the set writes text."""
        raise NotImplementedError


class TextFamilySet(RenderingFamilySet):
    """Renders each sample as its text line (``name{labels} value``); each family's block is its HELP and TYPE lines
    and its lines, written as text 0.0.4 (and 1.0.0) by :meth:`encode` and as OpenMetrics by :meth:`encode_openmetrics`."""

    @staticmethod
    def _join(entries: list[Any]) -> Any:
        """A run of lines as UTF-8, as the body writes it: a str would take the width of its widest character for all
        of them (one label value in CJK or emoji among a thousand targets made runs twice or four times the size)."""
        return "".join(entries).encode("utf-8")

    def _block(self, name: str, kind: str, help_: str) -> list[str]:
        """The first help text and type of a name win, as in :class:`FamilySet`."""
        header = _HEADERS.get(name)
        if header is None or header[0] != kind or header[1] != help_:
            if len(_HEADERS) >= _MAX_HEADERS:
                _HEADERS.clear()
            header = _HEADERS[name] = (kind, help_, _header(name, kind, help_))
        block = self._blocks[name] = [header[2]]
        return block

    def add(self, name: str, kind: str, help_: str, labels: dict[str, str], value: float) -> None:
        block = self._blocks.get(name) or self._block(name, kind, help_)
        number = repr(value) if value.__class__ is float and -_INF < value < _INF else format_value(value)
        if labels.__class__ is LabelSet:  # _labels inlined for the commonest case: this runs for every sample
            text = labels.text_without_instance if self._drop_instance else labels.text
            if text is None:
                text = _keep_rendered(labels, self._drop_instance, self._pairs)
        else:
            text = self._labels(labels)
        line = f"{name}{text} {number}\n"
        block.append(line)
        if self._journal is not None:
            self._journal += (name, block[0], line)

    def _add_numbers(self, text: str, labels: dict[str, str], samples: list[tuple[str, str, str, float | str]]) -> None:
        blocks = self._blocks
        for name, kind, help_, value in samples:
            block = blocks.get(name) or self._block(name, kind, help_)
            block.append(f"{name}{text} {value}\n")  # a float formats as its repr

    def add_shared(self, part: str, source: Hashable, base: dict[str, str], render: Callable[[dict[str, str], FamilySet], None]) -> None:
        if self._journal is not None or base.__class__ is not LabelSet or len(base) != 1 or _STAND_IN in base.get("instance", _STAND_IN):
            render(base, self)
            return
        key = (part, source, self._drop_instance)
        lines = SHARED.young.get(key)
        if lines is None:
            lines = SHARED.recall(key)
            if lines is None:
                lines = _shared_lines(render, self._drop_instance) or ()
                SHARED.put(key, lines if len(lines) <= SHARED_LINES else ())
        if not lines:
            render(base, self)
            return
        text = self._labels(base)
        pair = text[1:-1]  # the instance's pair, between the braces
        blocks = self._blocks
        for family, header, before, after in lines:
            block = blocks.get(family)
            if block is None:
                block = blocks[family] = [header]
            block.append(before if after is None else before + pair + after)

    def add_sample(self, family: str, kind: str, help_: str, sample: str, labels: dict[str, str], value: float) -> None:
        block = self._blocks.get(family) or self._block(family, kind, help_)
        line = f"{sample}{self._labels(labels)} {_number(value)}\n"
        block.append(line)
        if self._journal is not None:
            self._journal += (family, block[0], line)

    def add_histogram(self, name: str, help_: str, labels: dict[str, str], buckets: list[tuple[str, float]], count: float, total: float) -> None:
        """As :class:`FamilySet` adds them, a bucket's labels written from the histogram's own text and its ``le``: no
        label set is made or kept per bucket (a target's buckets would be most of its label sets)."""
        block = self._blocks.get(name) or self._block(name, HISTOGRAM, help_)
        text = self._labels(labels)
        head = f"{name}_bucket{text[:-1]}," if text else f"{name}_bucket{{"
        lines = [f'{head}le="{_label_value(bound)}"}} {_number(value)}\n' for bound, value in buckets]
        lines += (f'{head}le="+Inf"}} {_number(count)}\n', f"{name}_sum{text} {_number(total)}\n", f"{name}_count{text} {_number(count)}\n")
        self._extend(name, block, lines)

    def add_summary(
        self, name: str, help_: str, labels: dict[str, str], quantiles: list[tuple[str, float]], count: float | None, total: float | None
    ) -> None:
        """As :class:`FamilySet` adds them, each quantile's labels written from the summary's own text, as a bucket's."""
        block = self._blocks.get(name) or self._block(name, SUMMARY, help_)
        text = self._labels(labels)
        head = f"{name}{text[:-1]}," if text else f"{name}{{"
        lines = [f'{head}quantile="{_label_value(quantile)}"}} {_number(value)}\n' for quantile, value in quantiles]
        if count is not None and total is not None:
            lines += (f"{name}_sum{text} {_number(total)}\n", f"{name}_count{text} {_number(count)}\n")
        self._extend(name, block, lines)

    def _extend(self, name: str, block: list[str], lines: list[str]) -> None:
        block += lines
        if self._journal is not None:
            header = block[0]
            for line in lines:
                self._journal += (name, header, line)

    def encode(self) -> bytes:
        if self._compacted:
            return bytes(self._written(list(self._blocks.items()), False, release=False))
        return "".join([line for block in self._blocks.values() for line in block]).encode("utf-8")

    def encode_openmetrics(self) -> bytes:
        """The same lines as OpenMetrics text 1.0.0: only each family's HELP and TYPE lines and the end differ."""
        if self._compacted:
            return bytes(self._written(list(self._blocks.items()), True, release=False))
        lines: list[str] = []
        append = lines.append
        headers = _OPENMETRICS_HEADERS
        for block in self._blocks.values():
            header = block[0]
            append(headers.get(header) or openmetrics_header(header))
            if len(block) == 2:  # most families: one sample, added without a slice
                append(block[1])
            else:
                lines += block[1:]
        append("# EOF\n")
        return "".join(lines).encode("utf-8")

    def body(self, openmetrics: bool = False) -> bytes | bytearray:
        """:meth:`encode` (or :meth:`encode_openmetrics`); the set is empty after. A fleet's body (compacted, or past
        RELEASE_LINES) goes into a bytearray family by family as each family's lines are let go: it is tens of MiB of
        lines and as much again in bytes, never both whole at once, nor a heap of medium-sized chunks the allocator
        would keep."""
        if not self._compacted and sum(map(len, self._blocks.values())) < RELEASE_LINES:  # one node's: one join is quicker
            encoded = self.encode_openmetrics() if openmetrics else self.encode()
            self._blocks, self._compacted = {}, {}
            return encoded
        return self._written(list(self._blocks.items()), openmetrics, release=True)

    def _written(self, blocks: list[tuple[str, list[Any]]], openmetrics: bool, *, release: bool) -> bytearray:
        """The blocks in one bytearray, family by family: each block's header, the runs compact() joined (UTF-8
        already), then its lines since; with ``release``, the set is emptied first and each block let go once written."""
        compacted = self._compacted
        if release:
            self._blocks, self._compacted = {}, {}
        body = bytearray()
        for name, block in blocks:
            start = compacted.get(name, 1)
            body += (openmetrics_header(block[0]) if openmetrics else block[0]).encode("utf-8")
            for run in block[1:start]:
                body += run
            body += "".join(block[start:]).encode("utf-8")
            if release:
                block.clear()
        if openmetrics:
            body += b"# EOF\n"
        return body


class StaticLabels(RenderingFamilySet):
    """A rendering set for a page where some targets have static labels (``targets[].labels``): ``static`` holds them by
    target name. A target's root set carries them already; every other sample whose labels name that ``instance`` (the
    replication and heartbeat series, the profilers', the baselines') gets them after it, as the root's children have
    them. Made only where some target has labels: a page without any renders with the plain sets, at no cost. Mixed in
    before the set it labels (:class:`LabelledTextFamilySet`, ``protobuf.LabelledProtobufFamilySet``)."""

    def __init__(self, static: Mapping[str, Mapping[str, str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._static = static

    def add(self, name: str, kind: str, help_: str, labels: dict[str, str], value: float) -> None:
        super().add(name, kind, help_, static_labels(self._static, labels), value)

    def add_numbers(self, labels: dict[str, str], samples: list[tuple[str, str, str, float | str]]) -> None:
        super().add_numbers(static_labels(self._static, labels), samples)

    def add_sample(self, family: str, kind: str, help_: str, sample: str, labels: dict[str, str], value: float) -> None:
        super().add_sample(family, kind, help_, sample, static_labels(self._static, labels), value)

    def add_histogram(self, name: str, help_: str, labels: dict[str, str], buckets: list[tuple[str, float]], count: float, total: float) -> None:
        super().add_histogram(name, help_, static_labels(self._static, labels), buckets, count, total)

    def add_summary(
        self, name: str, help_: str, labels: dict[str, str], quantiles: list[tuple[str, float]], count: float | None, total: float | None
    ) -> None:
        super().add_summary(name, help_, static_labels(self._static, labels), quantiles, count, total)

    def add_shared(self, part: str, source: Hashable, base: dict[str, str], render: Callable[[dict[str, str], FamilySet], None]) -> None:
        # a labelled target's root has more than its instance: TextFamilySet renders it afresh, not from the shared lines
        super().add_shared(part, source, static_labels(self._static, base), render)


class LabelledTextFamilySet(StaticLabels, TextFamilySet):
    """:class:`TextFamilySet` with targets' static labels (:class:`StaticLabels`)."""


def encode_text(families: Iterable[Any], *, drop_instance: bool = False) -> bytes:
    """Families are prometheus_client ``Metric`` objects or :class:`~exporter.common.families.Family` (same attributes)."""
    out = TextFamilySet(drop_instance=drop_instance)
    for family in families:
        name = family.name
        if family.type == "counter" and not isinstance(family, Family):
            name += "_total"  # prometheus_client keeps a counter's name without _total
        for sample in family.samples:
            out.add_sample(name, family.type, family.documentation, sample[0], sample[1], sample[2])
    return out.encode()


def _keep_rendered(labels: LabelSet, drop_instance: bool, pairs: dict[tuple[str, str], str]) -> str:
    text = _render_labels(labels, drop_instance, pairs)
    if drop_instance:
        labels.text_without_instance = text
    else:
        labels.text = text
    return text


def _rendered(labels: dict[str, str], drop_instance: bool, pairs: dict[tuple[str, str], str]) -> str:
    items = tuple(labels.items())
    if len(items) > 1 and items[0][0] == "instance":
        key = (None, items[1:])  # the labels after the instance, rendered as they follow it: ',a="b",c="d"}'
        tail = RENDERED.young.get(key) or RENDERED.recall(key)
        if tail is None:
            tail = "," + _render_labels(dict(items[1:]), drop_instance, pairs)[1:]
            RENDERED.put(key, tail)
        if drop_instance:
            return "{" + tail[1:]
        instance = pairs.get(items[0]) or pairs.setdefault(items[0], _label_pair(*items[0]))
        return "{" + instance + tail
    whole = (drop_instance, items)
    text = RENDERED.young.get(whole) or RENDERED.recall(whole)
    if text is None:
        text = _render_labels(labels, drop_instance, pairs)
        RENDERED.put(whole, text)
    return text
