"""What the client profiler costs: one CLIENT LIST read of a node with many connections, on the server and here.

    python bench/clients_bench.py [--connections 15000] [--runs 5] [--extrapolate 65000]

One redis-server with ``--connections`` open connections under 20 client names. The profiler reads it ``--runs``
times (aggregates and, in a second pass, per-connection series as ``--export-client-list``). Prints per read (medians):
the reply's size, the redis-server CPU, the wall time, and this process's CPU for parsing and counting. Then the same
parsing and counting on a synthetic CLIENT LIST of ``--extrapolate`` lines (the real lines repeated with new ids):
a machine whose file-descriptor limit stops short of that many connections can still time the exporter's side.
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis
from scrape_bench import cpu_seconds, free_port

from exporter.config import build_config
from exporter.redis.clients import ClientProfiler, parse_client_list, parse_connections, profile


def open_connections(port: int, count: int) -> list[socket.socket]:
    sockets = []
    for index in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        name = f"service-{index % 20}".encode()
        sock.sendall(b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$%d\r\n%s\r\n" % (len(name), name))
        sockets.append(sock)
    for sock in sockets:
        sock.recv(16)
    return sockets


def wait_for_server(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis(port=port).ping()
            return
        except redis.RedisError:
            if time.monotonic() > deadline:
                raise SystemExit("redis-server did not start") from None
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=15_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--extrapolate", type=int, default=65_000)
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < args.connections + 1000:
        raise SystemExit(f"--connections {args.connections} needs more file descriptors than this machine allows ({hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port = free_port()
    server = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxclients",
            str(args.connections + 100),
            "--dir",
            tempfile.mkdtemp(prefix="ecx-clients-"),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for_server(port)
        sockets = open_connections(port, args.connections)
        reply = b""
        for per_connection in (False, True):
            config = build_config(
                {
                    "targets": [{"name": "node", "addr": f"redis://127.0.0.1:{port}"}],
                    "clients": {"enabled": True, "per_connection": per_connection, "max_connections": 1_000_000},
                },
                environ={},
            )
            profiler = ClientProfiler(config.clients, list(config.targets))
            profiler.visit_all()  # the connection and COMMAND INFO, outside the figures
            server_cpu, walls, ours = [], [], []
            for _ in range(args.runs):
                before, started, mine = cpu_seconds(server.pid), time.perf_counter(), time.process_time()
                profiler.visit_all()
                walls.append(time.perf_counter() - started)
                ours.append(time.process_time() - mine)
                server_cpu.append(cpu_seconds(server.pid) - before)
            result = profiler.snapshot()[0]["node"]
            profiler.stop()
            reply = reply if reply else redis.Redis(port=port).execute_command("CLIENT", "LIST")
            kind = "per connection" if per_connection else "aggregates"
            print(
                f"{result.total:,} connections, {kind}: reply {len(reply) / 1e6:.1f} MB; redis-server CPU "
                f"{statistics.median(server_cpu) * 1e3:.0f} ms, wall {statistics.median(walls) * 1e3:.0f} ms, "
                f"exporter CPU {statistics.median(ours) * 1e3:.0f} ms per read"
            )
        for sock in sockets:
            sock.close()
        lines = reply.decode().rstrip("\n").split("\n")
        synthetic = (
            "\n".join(
                line.replace(line.split(" ", 1)[0], f"id={index}", 1) for index, line in ((i, lines[i % len(lines)]) for i in range(args.extrapolate))
            ).encode()
            + b"\n"
        )
        started = time.process_time()
        counted = profile(parse_client_list(synthetic), 20)
        aggregates = time.process_time() - started
        started = time.process_time()
        connections = sorted(parse_connections(synthetic), key=lambda connection: int(connection.id))
        per_connection_cost = time.process_time() - started
        print(
            f"synthetic {counted.total:,} lines ({len(synthetic) / 1e6:.1f} MB): parse and count {aggregates * 1e3:.0f} ms, "
            f"per-connection parse {per_connection_cost * 1e3:.0f} ms for {len(connections):,} connections"
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
