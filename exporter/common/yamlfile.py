"""Reading a YAML file strictly, with one-line errors that name the file and the line or key.

Refused, each in one line: a file that is not UTF-8 (UTF-16/32 byte order marks are named; a UTF-8 one is
allowed), duplicate keys in a mapping, aliases that expand past ``MAX_NODES`` nodes (a "billion laughs"
document is a few lines), recursive aliases, nesting deeper than ``MAX_DEPTH``, and files over ``MAX_BYTES``.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable
from typing import Any

PathLike = str | os.PathLike[str]

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 200_000  # after aliases are expanded, as code walking the document would see it

_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def decode_utf8(data: bytes, path: PathLike) -> str:
    """The text of a UTF-8 file (a UTF-8 byte order mark is dropped); a one-line ``ValueError`` for anything else."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise ValueError(f"{path}: the file is {name} (it starts with a {name} byte order mark); save it as UTF-8")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path}: line {line}: not UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}); save it as UTF-8") from err


def _loader_class() -> type:
    import yaml

    class StrictLoader(yaml.SafeLoader):
        """SafeLoader that refuses duplicate keys."""

        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:
                    continue  # an unhashable key: SafeLoader reports it
                if duplicate:
                    mark = key_node.start_mark
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r} (first at line {seen[key].line + 1})", mark)
                seen[key] = key_node.start_mark
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _check_shape(document: Any) -> str | None:
    """A problem with the document's shape once aliases are counted as copies, or None."""
    sizes: dict[int, int] = {}
    open_ids: set[int] = set()
    # Iterative post-order walk; a size is memoised per object, so shared (aliased) parts cost nothing to count.
    stack: list[tuple[Any, int, bool]] = [(document, 1, False)]
    while stack:
        value, depth, done = stack.pop()
        if not isinstance(value, dict | list):
            continue
        ident = id(value)
        children = value.values() if isinstance(value, dict) else value
        if done:
            open_ids.discard(ident)
            total = 1 + sum(sizes.get(id(child), 1) for child in children)
            sizes[ident] = total
            if total > MAX_NODES:
                return f"aliases expand the document past {MAX_NODES} nodes"
            continue
        if ident in sizes:
            continue
        if ident in open_ids:
            return "a recursive alias (a node that contains itself)"
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        open_ids.add(ident)
        stack.append((value, depth, True))
        stack.extend((child, depth + 1, False) for child in children)
    return None


def parse_yaml(text: str, path: PathLike) -> Any:
    """The document of ``text``; a one-line ``ValueError`` naming ``path`` and the line for anything wrong."""
    import yaml

    try:
        document = yaml.load(text, Loader=_loader_class())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f": line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ValueError(f"{path}{where}: {getattr(err, 'problem', None) or 'invalid YAML'}") from err
    except RecursionError as err:
        raise ValueError(f"{path}: nested deeper than {MAX_DEPTH} levels") from err
    problem = _check_shape(document)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return document


def read_text(path: PathLike, error: Callable[[str], Exception]) -> str:
    """A UTF-8 text file of at most ``MAX_BYTES``; ``error(message)`` builds what is raised otherwise."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as err:
        raise error(f"{path}: cannot read: {err.strerror or err}") from err
    if len(data) > MAX_BYTES:
        raise error(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        return decode_utf8(data, path)
    except ValueError as err:
        raise error(str(err)) from err


def read_yaml(path: PathLike, error: Callable[[str], Exception]) -> Any:
    """The parsed document; ``error(message)`` builds what is raised when the file cannot be read or parsed."""
    text = read_text(path, error)
    try:
        return parse_yaml(text, path)
    except ValueError as err:
        raise error(str(err)) from err
