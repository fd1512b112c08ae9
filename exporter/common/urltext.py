"""Percent-decoding of the bits of URLs the exporter reads: a request's path and query, an address's user and
password, a watched key. ``urllib.parse`` would do it, at about half a MiB of resident memory a Redis-only exporter
otherwise does without; these decode as it does (``%XX`` runs as UTF-8, an undecodable byte replaced, a ``%`` not
followed by two hex digits kept)."""

from __future__ import annotations

_HEX = frozenset("0123456789abcdefABCDEF")


def unquote(text: str) -> str:
    if "%" not in text:
        return text
    first, *parts = text.split("%")
    out = [first]
    escaped = bytearray()  # a run of %XX, decoded together: a character may take several bytes
    for part in parts:
        if len(part) >= 2 and part[0] in _HEX and part[1] in _HEX:
            escaped.append(int(part[:2], 16))
            if len(part) == 2:
                continue
            plain = part[2:]
        else:
            plain = "%" + part
        if escaped:
            out.append(escaped.decode("utf-8", "replace"))
            escaped.clear()
        out.append(plain)
    if escaped:
        out.append(escaped.decode("utf-8", "replace"))
    return "".join(out)


def unquote_plus(text: str) -> str:
    """As a form value: ``+`` is a space."""
    return unquote(text.replace("+", " "))


def query_values(query: str, name: str) -> list[str]:
    """The values of ``name`` in a query string, in order (``name`` alone is an empty value)."""
    values = []
    for pair in query.split("&"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        if unquote_plus(key) == name:
            values.append(unquote_plus(value))
    return values
