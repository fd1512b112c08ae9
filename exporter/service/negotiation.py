"""Which exposition format answers a scrape: the ``Accept`` header read as RFC 9110 (section 12.5.1) says, and the
best text format both sides support, with the exact Content-Type it requires.

The exporter writes Prometheus' protobuf format (delimited ``io.prometheus.client.MetricFamily`` messages), OpenMetrics
text 1.0.0, Prometheus text 1.0.0 and Prometheus text 0.0.4. A client that accepts none of them gets text 0.0.4, as
when the header is missing, malformed or refuses everything (q=0): like client_golang's ``expfmt.NegotiateAccept``,
never a 406. Protobuf is only ever named: a wildcard (``*/*``, ``application/*``) never chooses it, nor a protobuf
range whose ``proto`` or ``encoding`` is another than the one written. A media range without ``version``
(``text/plain``, ``*/*``) leaves the version to the exporter, which answers text 0.0.4 first, the format every client
reads; a range naming a version gets it. Between formats the client weighs alike, Prometheus' own order decides
(``DefaultProtoFirstScrapeProtocols``: protobuf, OpenMetrics 1.0.0, text 1.0.0, text 0.0.4).

``escaping=`` (allow-utf-8, underscores, dots, values) tells how names outside the legacy character set are written.
Every metric and label name this exporter serves is legacy-valid, and client_golang escapes only names that are not
(``model.EscapeMetricFamily``), so each value leaves them as they are; the formats that take the parameter (the 1.0.0
ones and protobuf) echo in their Content-Type the escaping the client asked for (else ``underscores``, client_golang's
default), as client_golang does.
"""

from __future__ import annotations

import re

OPENMETRICS = "application/openmetrics-text"
TEXT = "text/plain"
PROTOBUF = "application/vnd.google.protobuf"
PROTOBUF_PARAMS = (("proto", "io.prometheus.client.MetricFamily"), ("encoding", "delimited"))
ESCAPINGS = frozenset({"allow-utf-8", "underscores", "dots", "values"})
DEFAULT_ESCAPING = "underscores"  # client_golang's model.NameEscapingScheme


class Format:
    """One exposition format the exporter writes."""

    __slots__ = ("media_type", "params", "prometheus_rank", "takes_escaping", "unversioned_rank", "version")

    def __init__(
        self,
        media_type: str,
        version: str | None,
        takes_escaping: bool,
        prometheus_rank: int,
        unversioned_rank: int,
        params: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.media_type = media_type
        self.version = version  # None: a binary format, which has no version and no charset
        self.params = params  # parameters a range must name, with these values, to choose this format
        self.takes_escaping = takes_escaping
        self.prometheus_rank = prometheus_rank  # higher first, among ranges that name a version
        self.unversioned_rank = unversioned_rank  # higher first, among ranges that leave the version to us

    def content_type(self, escaping: str) -> str:
        parts = [self.media_type, *(f"{name}={value}" for name, value in self.params)]
        if self.version is not None:
            parts += [f"version={self.version}", "charset=utf-8"]
        if self.takes_escaping:
            parts.append(f"escaping={escaping}")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return f"Format({self.media_type}; version={self.version})" if self.version else f"Format({self.media_type})"


PROTOBUF_DELIMITED = Format(PROTOBUF, None, True, prometheus_rank=4, unversioned_rank=0, params=PROTOBUF_PARAMS)
OPENMETRICS_1_0_0 = Format(OPENMETRICS, "1.0.0", True, prometheus_rank=3, unversioned_rank=1)
TEXT_1_0_0 = Format(TEXT, "1.0.0", True, prometheus_rank=2, unversioned_rank=2)
TEXT_0_0_4 = Format(TEXT, "0.0.4", False, prometheus_rank=1, unversioned_rank=3)
FORMATS = (PROTOBUF_DELIMITED, OPENMETRICS_1_0_0, TEXT_1_0_0, TEXT_0_0_4)


class Choice:
    """The format that answers and the Content-Type that says so."""

    __slots__ = ("content_type", "format")

    def __init__(self, format: Format, content_type: str) -> None:
        self.format = format
        self.content_type = content_type

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Choice) and (self.format, self.content_type) == (other.format, other.content_type)

    def __hash__(self) -> int:
        return hash((self.format, self.content_type))

    def __repr__(self) -> str:
        return f"Choice({self.content_type!r})"


DEFAULT = Choice(TEXT_0_0_4, TEXT_0_0_4.content_type(DEFAULT_ESCAPING))


class MediaRange:
    """One element of ``Accept``: type and subtype lower-cased (``*`` for a wildcard), parameters by lower-cased name
    (values unquoted; q taken out), and the weight."""

    __slots__ = ("params", "q", "subtype", "type")

    def __init__(self, type: str, subtype: str, params: dict[str, str], q: float) -> None:
        self.type = type
        self.subtype = subtype
        self.params = params
        self.q = q

    def __repr__(self) -> str:
        return f"MediaRange({self.type}/{self.subtype}, {self.params}, q={self.q})"


_TCHARS = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"'
# an element ends at a comma outside a quoted string; one left open runs to the end (and fails to parse) at once, so
# splitting stays linear
_ELEMENTS = re.compile(r'((?:[^,"]|"(?:[^"\\]|\\.)*(?:"|\\?$))*)(?:,|$)')
# every space has one place to go, so a malformed element fails in linear time
_RANGE = re.compile(rf"[ \t]*({_TCHARS})/({_TCHARS})[ \t]*((?:;[ \t]*(?:{_TCHARS}=(?:{_TCHARS}|{_QUOTED})[ \t]*)?)*)")
_PARAMETER = re.compile(rf"({_TCHARS})=({_TCHARS}|{_QUOTED})")
_QVALUE = re.compile(r"0(?:\.[0-9]*)?|1(?:\.0*)?")
_UNQUOTE = re.compile(r"\\(.)")


def parse_accept(header: str) -> list[MediaRange]:
    """The media ranges of an ``Accept`` value, in order. An empty element is skipped (RFC 9110's lists allow them);
    a malformed one (no ``type/subtype``, ``*/subtype``, a bad parameter, a weight outside 0 to 1) is left out, never
    raised: the rest of the header still counts."""
    ranges: list[MediaRange] = []
    for element in _ELEMENTS.finditer(header):
        media_range = _media_range(element.group(1))
        if media_range is not None:
            ranges.append(media_range)
    return ranges


def _media_range(element: str) -> MediaRange | None:
    matched = _RANGE.fullmatch(element)
    if matched is None:
        return None
    type_, subtype = matched.group(1).lower(), matched.group(2).lower()
    if type_ == "*" and subtype != "*":
        return None
    params: dict[str, str] = {}
    q = 1.0
    for parameter in _PARAMETER.finditer(matched.group(3)):
        name, value = parameter.group(1).lower(), parameter.group(2)
        if value.startswith('"'):
            value = _UNQUOTE.sub(r"\1", value[1:-1])
        if name != "q":
            params[name] = value
        elif _QVALUE.fullmatch(value) is None:
            return None
        else:
            q = float(value)
    return MediaRange(type_, subtype, params, q)


def _matches(media_range: MediaRange, format: Format) -> bool:
    """Whether the range covers the format. Only the parameters the format has must agree (version; charset, which is
    utf-8); others (escaping, which is a wish about names, or an unknown extension) are ignored, as client_golang
    ignores them."""
    if media_range.type != "*":
        media_type = f"{media_range.type}/{media_range.subtype}"
        if media_range.subtype == "*":
            if not format.media_type.startswith(media_range.type + "/"):
                return False
        elif media_type != format.media_type:
            return False
    if format.params and (media_range.subtype == "*" or any(media_range.params.get(name) != value for name, value in format.params)):
        return False  # protobuf is chosen only by name, with the message type and framing written here
    version = media_range.params.get("version")
    if version is not None and version != format.version:
        return False
    charset = media_range.params.get("charset")
    return charset is None or charset.lower() == "utf-8"


def _precision(media_range: MediaRange) -> int:
    """How specific a range is, for RFC 9110's rule that the most specific range matching a format gives its weight."""
    if media_range.type == "*":
        return 0
    if media_range.subtype == "*":
        return 1
    return 2 + ("version" in media_range.params) + ("charset" in media_range.params)  # the parameters that constrain


def choose_format(header: str | None) -> Choice:
    """The format that answers a request with this ``Accept`` value (None: the header was not sent)."""
    if not header:
        return DEFAULT
    ranges = parse_accept(header)
    best: tuple[float, int, int] | None = None
    chosen = DEFAULT
    for format in FORMATS:
        matching = [media_range for media_range in ranges if _matches(media_range, format)]
        if not matching:
            continue
        top = max(_precision(media_range) for media_range in matching)
        media_range = max((r for r in matching if _precision(r) == top), key=lambda r: r.q)
        if media_range.q <= 0:
            continue  # refused
        named = media_range.type != "*" and media_range.subtype != "*"
        rank = format.prometheus_rank if "version" in media_range.params or format.params else format.unversioned_rank
        key = (media_range.q, 1 if named else 0, rank)
        if best is None or key > best:
            escaping = media_range.params.get("escaping", DEFAULT_ESCAPING)
            if escaping not in ESCAPINGS:
                escaping = DEFAULT_ESCAPING  # an unknown escaping is ignored, as client_golang ignores it
            best, chosen = key, Choice(format, format.content_type(escaping))
    return chosen


def accepts_gzip(header: str | None) -> bool:
    """Whether ``Accept-Encoding`` (RFC 9110, 12.5.3) takes gzip: named (or ``x-gzip``) with a weight above 0, or, not
    named, covered by ``*`` above 0; case-insensitive, as client_golang negotiates it. No header: no gzip."""
    if not header:
        return False
    weights: dict[str, float] = {}
    for element in header.split(","):
        coding, _, params = element.strip().partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        weight = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value.strip())
                except ValueError:
                    weight = 0.0
        weights[coding] = weight
    for name in ("gzip", "x-gzip"):
        if name in weights:
            return weights[name] > 0
    return weights.get("*", 0.0) > 0


class FormatCache:
    """:func:`choose_format` by ``Accept`` value, kept: Prometheus sends the same header every scrape. Bounded; a full
    cache starts again. One dict whose single get and set are atomic, so threads share it without a lock (two threads
    that miss together compute the same answer)."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._choices: dict[str | None, Choice] = {}

    def choose(self, header: str | None) -> Choice:
        choice = self._choices.get(header)
        if choice is None:
            choice = choose_format(header)
            if len(self._choices) >= self._size:
                self._choices.clear()
            self._choices[header] = choice
        return choice
