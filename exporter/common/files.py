"""Writing files so that a failure never leaves a half-written one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o644  # as a file written by hand: a Prometheus running as another user reads the rules


def write_atomically(path: Path, text: str) -> None:
    """Write next to the target and rename over it, so a failure leaves no half-written file. The file keeps the mode
    it had; a new one gets NEW_FILE_MODE less the umask (a temporary file's own 0600 would make rules unreadable to
    another user, and change a committed file's mode)."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = NEW_FILE_MODE & ~_umask()
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process' umask, read without setting it (os.umask would change it for every thread a moment)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022
