"""The exporter's error classes; ``main()`` catches :class:`ExporterError` once."""


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
