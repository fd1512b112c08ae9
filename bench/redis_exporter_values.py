"""Record what redis_exporter serves for fixed server replies, so that a test can compare values side by side.

    python bench/redis_exporter_values.py --redis-exporter /path/to/redis_exporter [--out tests/data/upstream_values]
        [--engine valkey-7.2=/path/to/valkey-server ...]

1. Real servers are started here (a seeded primary, its replica, a node of a 3-master cluster), on Redis 7.0, on
   each other engine the tests run (Valkey 8.1, Redis 8.2: tests/servers.py) and on those given with ``--engine``
   (their files are named after the engine, ``primary_valkey_8_1``). Both exporters scrape each through a recording proxy (this one twice, as the
   test does); the first reply to every distinct command is kept.
2. The kept replies are served by a replay server (tests/fake_resp.py), and the old-INFO fixtures of tests/data
   are added as a Redis 2.6 primary and replica. redis_exporter scrapes each replay once.
3. For each server, ``<server>.json`` (the replies, latin-1 text) and ``<server>.prom`` (redis_exporter's redis_*
   samples) are written. tests/test_compat_values.py replays the same replies to this exporter and compares.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from fake_resp import FakeRespServer, bulk  # noqa: E402
from redis_exporter_families import _answers, get, start_cluster  # noqa: E402
from servers import ENGINES, free_port, seed_reference_primary, start_exporter, start_redis, wait_until  # noqa: E402

OLD_INFO = {"redis_2_6_primary": "info_redis_2_6_primary.txt", "redis_2_6_replica": "info_redis_2_6_replica.txt"}


def read_reply(reader) -> bytes:
    """One whole RESP2 reply, as bytes."""
    line = reader.readline()
    if not line:
        raise EOFError
    kind = line[:1]
    if kind == b"$":
        length = int(line[1:])
        return line + (reader.read(length + 2) if length >= 0 else b"")
    if kind == b"*":
        count = int(line[1:])
        return line + b"".join(read_reply(reader) for _ in range(max(count, 0)))
    return line


def read_command(reader) -> tuple[bytes, tuple[str, ...]] | None:
    line = reader.readline()
    if not line.startswith(b"*"):
        return None
    raw, parts = [line], []
    for _ in range(int(line[1:])):
        header = reader.readline()
        body = reader.read(int(header[1:]) + 2)
        raw += [header, body]
        parts.append(body[:-2].decode())
    return b"".join(raw), tuple(parts)


class RecordingProxy:
    """Forwards each command to the real server and keeps the first reply to every distinct command."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.replies: dict[tuple[str, ...], bytes] = {}
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        client_reader, upstream_reader = conn.makefile("rb"), upstream.makefile("rb")
        try:
            while (command := read_command(client_reader)) is not None:
                raw, parts = command
                upstream.sendall(raw)
                reply = read_reply(upstream_reader)
                self.replies.setdefault(tuple(part.upper() for part in parts), reply)
                conn.sendall(reply)
        except (OSError, EOFError):
            pass
        finally:
            conn.close()
            upstream.close()


def record(upstream: int, ours, servers: dict[str, int]) -> dict[str, dict[tuple[str, ...], bytes]]:
    tables = {}
    for name, port in servers.items():
        proxy = RecordingProxy(port)
        for exporter_port in (upstream, ours.port, ours.port):  # ours twice: the second asks for latency histograms
            get(exporter_port, f"/scrape?target=redis://127.0.0.1:{proxy.port}")
        # this exporter names the commands it wants histograms of: the test answers from redis_exporter's reply
        tables[name] = {command: reply for command, reply in proxy.replies.items() if command[:2] != ("LATENCY", "HISTOGRAM") or len(command) == 2}
    return tables


@contextlib.contextmanager
def both_exporters(redis_exporter: str, out: Path, *flags: str) -> Iterator[tuple[int, Any]]:
    """redis_exporter (with ``flags``) on a free port and this exporter allowed to /scrape loopback: (its port, ours)."""
    port = free_port()
    upstream = subprocess.Popen(
        [redis_exporter, "--web.listen-address", f"127.0.0.1:{port}", "--redis.addr", "", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    allow = out / ".allow.yml"
    allow.write_text("scrape:\n  allow:\n    - hosts: ['127.0.0.1']\n")
    ours = start_exporter("--redis.addr", "", "--config.file", str(allow))
    try:
        wait_until(lambda: _answers(port), timeout=20, what="redis_exporter answering")
        yield port, ours
    finally:
        allow.unlink()
        upstream.terminate()
        upstream.wait(timeout=10)
        ours.stop()


def write_recording(out: Path, name: str, kept: list[str], table: dict[tuple[str, ...], bytes], first_line: str = "") -> None:
    """``<name>.prom`` (redis_exporter's lines kept, after ``first_line``) and ``<name>.json`` (the replies)."""
    (out / f"{name}.prom").write_text(first_line + "\n".join(kept) + "\n")
    replies = [{"command": list(command), "reply": reply.decode("latin-1")} for command, reply in sorted(table.items())]
    (out / f"{name}.json").write_text(json.dumps(replies, indent=1) + "\n")
    print(f"{name}: {len(table)} replies, {sum(1 for line in kept if not line.startswith('#'))} samples of redis_exporter")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-exporter", required=True)
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "upstream_values"))
    parser.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="NAME=SERVER",
        help="one more engine to record, by its server binary (a Valkey 7.2 built from source: valkey-7.2=/path/valkey-server)",
    )
    args = parser.parse_args()
    for engine in args.engine:
        name, _, binary = engine.partition("=")
        if not binary:
            raise SystemExit(f"--engine {engine}: expected NAME=SERVER")
        ENGINES[name] = binary
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    servers: dict[str, int] = {}
    started = []
    for engine in ["redis-7.0", *sorted(name for name, binary in ENGINES.items() if binary and name != "redis-7.0")]:
        suffix = "" if engine == "redis-7.0" else "_" + engine.replace("-", "_").replace(".", "_")
        primary = start_redis(engine=engine)
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port), engine=engine)
        cluster = start_cluster(engine)
        started += [primary, replica, *cluster]
        seed_reference_primary(primary.client())
        wait_until(lambda replica=replica: replica.info().get("master_link_status") == "up", what="replica link up")
        servers.update({f"primary{suffix}": primary.port, f"replica{suffix}": replica.port, f"cluster_node{suffix}": cluster[0].port})
    try:
        with both_exporters(args.redis_exporter, out) as (port, ours):
            record_all(port, ours, servers, out)
    finally:
        for server in started:
            server.stop()


def record_all(port: int, ours, servers: dict[str, int], out: Path) -> None:
    """Every server recorded, then replayed to redis_exporter at once, and written."""
    tables = {}
    for name, fixture in OLD_INFO.items():
        info = bulk((ROOT / "tests" / "data" / fixture).read_text().replace("\n", "\r\n"))
        # as Redis 2.6 answers: no COMMAND, and an empty text for a section it does not have
        tables[name] = {("INFO",): info, ("INFO", "ALL"): info, ("INFO", "CLUSTER"): bulk(""), ("PING",): b"+PONG\r\n"}
    for name in [*servers, *tables]:
        # each server's replay right after its recording: redis_exporter's start time is its clock at the replay
        # minus the recorded uptime, which the test compares with the server's own clock within 2 s
        table = tables[name] if name in tables else record(port, ours, {name: servers[name]})[name]
        replay = FakeRespServer(table)
        try:
            text = get(port, f"/scrape?target={replay.addr}")
        finally:
            replay.close()
        kept = [line for line in text.splitlines() if line.startswith("redis_") or line.startswith(("# HELP redis_", "# TYPE redis_"))]
        write_recording(out, name, kept, table)


if __name__ == "__main__":
    main()
