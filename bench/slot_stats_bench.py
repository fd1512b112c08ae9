"""The cost of one CLUSTER SLOT-STATS read of every slot, on a node that holds all 16,384: the server's CPU per call
(its own commandstats), the reply's size, and the time the exporter's RESP client takes to read and parse it.

    python bench/slot_stats_bench.py --server /path/to/valkey-server --keys 200000 --reads 20
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time

from exporter.redis.addresses import parse_address
from exporter.redis.node import RedisNode
from exporter.redis.settings import Credentials
from exporter.redis.slot_stats import ALL_SLOTS, GATE, parse_slot_stats, profile


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def resp_size(port: int, command: tuple[str, ...]) -> int:
    """The bytes of the command's reply as they come off the socket (read until the server has sent nothing for 0.5 s)."""
    import socket

    payload = f"*{len(command)}\r\n".encode() + b"".join(f"${len(part)}\r\n{part}\r\n".encode() for part in command)
    with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
        sock.sendall(payload)
        total = 0
        while True:
            try:
                chunk = sock.recv(1 << 20)
            except TimeoutError:
                return total
            if not chunk:
                return total
            total += len(chunk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=shutil.which("valkey-server") or "valkey-server", help="valkey-server 8.0+ or redis-server 8.2+")
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--reads", type=int, default=20)
    args = parser.parse_args()
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="ecx-slot-stats-")
    server = subprocess.Popen(
        [args.server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir,
         "--cluster-enabled", "yes", "--cluster-slot-stats-enabled", "yes"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        cli = ["redis-cli", "-p", str(port)]
        deadline = time.monotonic() + 10
        while subprocess.run([*cli, "ping"], capture_output=True, check=False).stdout.strip() != b"PONG":
            if time.monotonic() > deadline:
                raise SystemExit("the server did not start")
            time.sleep(0.05)
        subprocess.run([*cli, "cluster", "addslotsrange", "0", "16383"], check=True, capture_output=True)
        while b"cluster_state:ok" not in subprocess.run([*cli, "cluster", "info"], capture_output=True, check=True).stdout:
            time.sleep(0.05)
        subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set", "-n", str(args.keys), "-r", str(args.keys), "-q"],
                       check=True, capture_output=True)  # fmt: skip
        node = RedisNode(parse_address(f"redis://127.0.0.1:{port}").endpoint, Credentials(), max_reply_bytes=16 * 1024 * 1024)
        walls, sizes = [], []
        for _ in range(args.reads):
            started = time.perf_counter()
            reply = node.call_if_allowed(GATE, ALL_SLOTS)
            stats = parse_slot_stats(reply)
            profile(stats, "x", 20, time.time())
            walls.append(time.perf_counter() - started)
            sizes.append(len(stats))
        size = resp_size(port, ALL_SLOTS)
        stats_line = subprocess.run([*cli, "info", "commandstats"], capture_output=True, check=True).stdout.decode()
        line = next(line for line in stats_line.splitlines() if line.startswith("cmdstat_cluster|slot-stats:"))
        fields = dict(part.split("=") for part in line.split(":", 1)[1].split(","))
        node.close()
        print(f"{args.keys:,} keys over 16,384 slots; {args.reads} reads")
        print(f"slots per reply: {statistics.median(sizes):,.0f}")
        print(f"server CPU per read (commandstats usec_per_call): {float(fields['usec_per_call']) / 1000:.2f} ms")
        print(f"reply size: {size / 1e6:.2f} MB of RESP")
        print(f"exporter: read, parse and rank, median {statistics.median(walls) * 1000:.1f} ms")
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
