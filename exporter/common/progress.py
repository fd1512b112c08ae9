"""Progress of a long run: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
from collections.abc import Callable


class Progress:
    """A bar on a terminal, plain lines otherwise."""

    def __init__(self, total: float, stream=None, command: str = "benchmark") -> None:
        stream = sys.stderr if stream is None else stream  # looked up now: stderr may have been replaced since import
        self.total = total
        self.command = command  # the command's own word at the start of each plain line
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.done = 0.0
        self._last_line = -1

    def update(self, done: float, label: str) -> None:
        self.done = min(done, self.total)
        fraction = self.done / self.total if self.total else 1.0
        if self.tty:
            filled = int(fraction * 30)
            self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {fraction * 100:5.1f}% {label[:50]:<50}")
            self.stream.flush()
        elif int(fraction * 10) != self._last_line:
            self._last_line = int(fraction * 10)
            self.stream.write(f"{self.command}: {fraction * 100:3.0f}% {label}\n")
            self.stream.flush()

    def counter(self, label: str) -> Callable[[int, int], None]:
        """A callback for work counted in items done out of a total."""

        def update(done: int, _total: int) -> None:
            self.update(done, label)

        return update

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
