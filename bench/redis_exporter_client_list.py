"""Record what redis_exporter serves for a CLIENT LIST with its ``--export-client-list --export-client-port``, so that a
test can compare this exporter's per-connection families with it.

    python bench/redis_exporter_client_list.py --redis-exporter /path/to/redis_exporter [--out tests/data/upstream_values]

On Redis 7.0, Valkey 8.1 and Redis 8.2 (tests/servers.py), a server is given connections of every kind CLIENT LIST
tells apart: named ones in another database, a subscriber to channels, patterns and a shard channel, one in MULTI that
watches keys, a RESP3 one, one of an ACL user, one with half a command in its query buffer and one that does not read
a large reply. redis_exporter scrapes the server through a recording proxy (bench/redis_exporter_values.py), this
exporter scrapes it too (its COMMAND INFO probes), and the kept replies are replayed to redis_exporter.
``client_list_<engine>.json`` (the replies) and ``client_list_<engine>.prom`` (redis_exporter's
redis_connected_client_* samples and TYPE lines, after a line with the Unix time before and after its scrape) are written.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_resp import FakeRespServer  # noqa: E402
from redis_exporter_families import get  # noqa: E402
from redis_exporter_values import both_exporters, record, write_recording  # noqa: E402
from servers import ENGINES, start_redis, wait_until  # noqa: E402

ENGINE_NAMES = ("redis-7.0", "valkey-8.1", "redis-8.2")


def command(*parts: str | bytes) -> bytes:
    encoded = [part.encode() if isinstance(part, str) else part for part in parts]
    return b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in encoded)


def open_connections(port: int) -> list[socket.socket]:
    """Connections of every kind CLIENT LIST tells apart, each left open (their replies read where it matters)."""

    def connect(*commands: bytes) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"".join(commands))
        return sock

    kinds = [
        connect(command("CLIENT", "SETNAME", "orders-api"), command("SELECT", "3")),
        connect(command("CLIENT", "SETNAME", "orders-api")),
        connect(command("CLIENT", "SETNAME", "events"), command("SUBSCRIBE", "a", "b"), command("PSUBSCRIBE", "p*"), command("SSUBSCRIBE", "shard")),
        connect(command("CLIENT", "SETNAME", "checkout"), command("WATCH", "k1", "k2"), command("MULTI")),
        connect(command("HELLO", "3", "SETNAME", "resp3-client")),
        connect(command("AUTH", "app", "app-password"), command("CLIENT", "SETNAME", "as-app")),
        connect(b"*3\r\n$3\r\nSET\r\n$5\r\nhalf"),  # a command not yet whole: in the query buffer
    ]
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(("127.0.0.1", port))
    slow.sendall(command("CLIENT", "SETNAME", "slow-reader") + command("GET", "big") * 8)  # replies never read: omem
    return [*kinds, slow]


def record_engine(engine: str, upstream: int, ours) -> dict[tuple[str, ...], bytes]:
    """The replies of a server with connections of every kind, recorded as both exporters scrape it."""
    server = start_redis(engine=engine)
    client = server.client()
    client.acl_setuser("app", enabled=True, passwords=["+app-password"], keys=["*"], channels=["*"], commands=["+@all"])
    client.set("big", "x" * 1_000_000)
    sockets = open_connections(server.port)
    try:
        wait_until(lambda: len(client.client_list()) >= len(sockets) + 1, what="every connection listed")
        time.sleep(1.5)  # ages and idle times of a second and more
        return record(upstream, ours, {engine: server.port})[engine]
    finally:
        for sock in sockets:
            sock.close()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-exporter", required=True)
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "upstream_values"))
    args = parser.parse_args()
    out = Path(args.out)
    with both_exporters(args.redis_exporter, out, "--export-client-list", "--export-client-port") as (port, ours):
        for engine in ENGINE_NAMES:
            if not ENGINES.get(engine):
                raise SystemExit(f"{engine} is not installed: pip install -e '.[test]'")
            table = record_engine(engine, port, ours)
            replay = FakeRespServer(table)
            try:
                before = time.time()
                text = get(port, f"/scrape?target={replay.addr}")
                after = time.time()
            finally:
                replay.close()
            name = "client_list_" + engine.replace("-", "_").replace(".", "_")
            kept = [line for line in text.splitlines() if line.startswith(("redis_connected_client_", "# TYPE redis_connected_client_"))]
            if not kept:
                raise SystemExit(f"{engine}: redis_exporter served no redis_connected_client_* sample")
            write_recording(out, name, kept, table, first_line=f"# scraped {before:.3f} {after:.3f}\n")


if __name__ == "__main__":
    main()
