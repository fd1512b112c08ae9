"""A family's HELP and TYPE lines as the text format writes them, read back: the OpenMetrics and protobuf encoders
start from those lines."""

from __future__ import annotations


def split_header(text_header: str) -> tuple[str, str, str]:
    """A family's name, help text (as escaped in the text format) and type, from its HELP and TYPE lines."""
    help_line, type_line = text_header.split("\n", 1)
    name, kind = type_line[len("# TYPE ") :].rstrip("\n").rsplit(" ", 1)
    return name, help_line[len("# HELP ") + len(name) + 1 :], kind
