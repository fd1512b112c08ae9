"""Child processes the exporter starts (a demo redis-server, a benchmark load)."""

from __future__ import annotations

import subprocess


def stop_process(process: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)
