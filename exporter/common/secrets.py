"""A password read when it is needed, from wherever it lives: a value, a file, or (subclasses in ``exporter.aws``) a
Secrets Manager secret or an IAM token signed on each connect. Never printed: its repr names the source only."""

from __future__ import annotations


class SecretUnavailable(Exception):
    """A password that cannot be had now (an IAM token without credentials, a secret not yet fetched): the node's
    scrape fails with the ``auth`` kind. The message names the source, never a value."""


class Secret:
    """A password read when needed: from a file (re-read on each connect) or a value. Other sources (an IAM token, a
    secret of AWS Secrets Manager) are subclasses: ``prepare`` runs once at start-up, ``reveal`` on each connect (it
    may raise :class:`SecretUnavailable`), ``refused`` when the server refused what ``reveal`` gave."""

    def __init__(self, *, value: str | None = None, file: str | None = None, source: str = "") -> None:
        self._value = value
        self.file = file
        self.source = source

    def reveal(self) -> str:
        if self.file is not None:
            with open(self.file, encoding="utf-8") as handle:
                return handle.read().rstrip("\r\n")
        return self._value or ""

    def prepare(self) -> None:
        """At start-up: fetch or check what each connect needs; raises an ExporterError naming the source."""

    def refused(self) -> None:
        """The server refused the password: a source that can change (a rotated secret) is asked again, in the background."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(source={self.source!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and (self._value, self.file) == (other._value, other.file)

    def __hash__(self) -> int:
        return hash((self._value, self.file))
