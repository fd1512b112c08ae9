"""A Redis-only exporter loads only what it uses: nothing of the AWS side, the template engine, the web config's
TLS and bcrypt, or the other commands, after serving a real scrape."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from servers import free_port

# runs `serve` in the main thread (it installs signal handlers) while a helper thread scrapes /metrics
# over a plain socket (urllib or socket.create_connection would themselves load ssl or the IDNA codec)
_PROBE = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})  # run with -S: no site, so no editable install's finder (which loads pathlib and urllib)
    import os, socket, threading, time

    def probe():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                sock = socket.socket()
                sock.connect(("127.0.0.1", {port}))
                break
            except OSError:
                time.sleep(0.05)
        sock.sendall(b"GET /metrics HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        up = any(line.startswith(b"redis_up") and line.endswith(b" 1.0") for line in reply.splitlines())
        status = reply.split(b" ", 2)[1].decode()
        print(status, up, *sorted(sys.modules), flush=True)  # not json: the probe must not load what it looks for
        os._exit(0)

    threading.Thread(target=probe, daemon=True).start()
    from exporter.cli.main import main
    main(["serve", "--redis.addr", "redis://127.0.0.1:{redis_port}", "--web.listen-address", "127.0.0.1:{port}"])
    """
)

NOT_LOADED = (
    "boto3",
    "botocore",
    "jinja2",
    "prometheus_client",
    "ssl",
    "bcrypt",
    "yaml",
    "hashlib",
    "json",
    "ctypes",
    "urllib",
    "ipaddress",
    "exporter.aws.api",
    "exporter.aws.cloudwatch",
    "exporter.aws.discovery",
    "exporter.aws.monitor",
    "exporter.alerts",
    "exporter.capacity",
    "exporter.baselines.derive",
    "exporter.cli.aws",
    "exporter.cli.baseline",
    "exporter.cli.render",
    "exporter.service.webconfig",
    "exporter.service.status",
    "exporter.service.collectors.aws",
)


def test_redis_only_serve_loads_neither_aws_nor_templates(plain_redis) -> None:
    port = free_port()
    script = _PROBE.format(port=port, redis_port=plain_redis.port, root=str(Path(__file__).resolve().parent.parent))
    result = subprocess.run([sys.executable, "-S", "-c", script], check=False, capture_output=True, text=True, timeout=60)
    status, up, *modules = result.stdout.strip().splitlines()[-1].split()
    assert status == "200", result.stderr[-2000:]
    assert up == "True"
    loaded = [name for name in modules if any(name == bad or name.startswith(bad + ".") for bad in NOT_LOADED)]
    assert loaded == []
