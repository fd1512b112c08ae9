"""Where a command's text goes."""

from __future__ import annotations

import sys


def emit(text: str, out: str | None) -> None:
    """To standard output, or atomically to ``out``."""
    if out:
        from pathlib import Path

        from exporter.common.files import write_atomically

        write_atomically(Path(out), text)
    else:
        sys.stdout.write(text)
