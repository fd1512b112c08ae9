"""The error every part of the baselines raises for input it cannot use."""

from __future__ import annotations

from exporter.common.errors import ExporterError


class BaselineError(ExporterError):
    """A baseline table or benchmark input that cannot be used; the message names the file and place."""

    exit_code = 2
