"""``elasticache-exporter demo``: the exporter against a local Redis, started if none answers."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable

from exporter.common.errors import ExporterError
from exporter.common.processes import stop_process
from exporter.config import Config

log = logging.getLogger(__name__)
DEMO_PORT = 6379


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
    except OSError:
        return False
    return reply.startswith((b"+PONG", b"-NOAUTH"))


def run_demo(config: Config, run_server: Callable[[Config], int]) -> int:
    if _answers(DEMO_PORT):
        log.info("a Redis answers on 127.0.0.1:%d; exporting it", DEMO_PORT)
        return run_server(config)
    binary = shutil.which("redis-server") or shutil.which("valkey-server")
    if binary is None:
        raise ExporterError("no Redis answers on 127.0.0.1:6379 and no redis-server is installed (apt-get install redis-server)")
    workdir = tempfile.mkdtemp(prefix="elasticache-exporter-demo-")
    process = subprocess.Popen(
        [binary, "--port", str(DEMO_PORT), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not _answers(DEMO_PORT):
            if process.poll() is not None or time.monotonic() > deadline:
                raise ExporterError("the demo redis-server did not start on 127.0.0.1:6379")
            time.sleep(0.05)
        log.info("started a throwaway redis-server on 127.0.0.1:%d (pid %d); it stops with the exporter", DEMO_PORT, process.pid)
        return run_server(config)
    finally:
        stop_process(process, timeout=5)
        shutil.rmtree(workdir, ignore_errors=True)
