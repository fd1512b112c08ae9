"""The exporter's error classes; ``main()`` catches :class:`ExporterError` once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ExporterError(Exception):
    """Root of every error the CLI reports as one line with a non-zero exit."""

    exit_code = 1


class RuntimeFailure(ExporterError):
    """A runtime failure: AWS or Redis unreachable, throttled past retries, a partial apply."""

    exit_code = 1


class UsageError(ExporterError):
    """A usage or input error that is not a config key: an unknown --node, a bad flag value."""

    exit_code = 2


class ConfigError(ExporterError):
    """Invalid configuration: the message names the key and the problem."""

    exit_code = 2

    def __init__(self, key: str, problem: str, source: str | None = None) -> None:
        where = f"{source}: " if source else ""
        super().__init__(f"{where}config key '{key}': {problem}")
        self.key = key
        self.problem = problem
        self.source = source


class ConfigErrors(ConfigError):
    """Every problem of a configuration at once, each a :class:`ConfigError` on a line of its own: a user fixes them in
    one go rather than one per run. Its key, problem and source are the first's."""

    def __init__(self, errors: list[ConfigError]) -> None:
        first = errors[0]
        super().__init__(first.key, first.problem, first.source)
        self.errors = tuple(errors)

    def __str__(self) -> str:
        return f"{len(self.errors)} problems in the configuration:\n" + "\n".join(f"  {error}" for error in self.errors)


class Problems:
    """Config errors gathered while every part of a configuration is read: ``take`` runs a reader and keeps its
    errors (its result, or ``default`` where it failed); ``raise_any`` raises them, one as itself, more as one
    :class:`ConfigErrors`."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def take(self, read: Callable[[], Any], default: Any) -> Any:
        try:
            return read()
        except ConfigErrors as err:
            self.errors.extend(err.errors)
        except ConfigError as err:
            self.errors.append(err)
        return default

    def raise_any(self) -> None:
        """Each problem once (a mapping read by two parts names its unknown key once)."""
        errors = list({str(error): error for error in self.errors}.values())
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ConfigErrors(errors)
