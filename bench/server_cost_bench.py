"""What a scrape costs the server: redis-server's CPU per /metrics of several builds of this exporter, their scrapes
interleaved on one server, in one run.

    python bench/server_cost_bench.py --tree /tmp/before --tree /tmp/after [--scrapes 400]

Each ``--tree`` is a checkout of this exporter, run as ``python -m exporter`` from it. One redis-server holds the data
set of scrape_bench.py; production-like traffic (``traffic.py``) reaches it before every scrape, so its commandstats and
latency histograms move between scrapes as they do in production. The builds scrape in turn, one /metrics each over a
kept-alive connection; the server's CPU (``/proc/PID/task/*/schedstat``) is counted from the end of the traffic to the
end of the scrape. Prints each build's median and mean per scrape.
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from scrape_bench import load_data_set, start_exporter, start_redis
from side_by_side_bench import cpu_ns
from traffic import Traffic


def start(tree: str, redis_port: int) -> tuple[subprocess.Popen, http.client.HTTPConnection]:
    process, port = start_exporter(["--redis.addr", f"redis://127.0.0.1:{redis_port}"], tree)
    return process, http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def scrape(connection: http.client.HTTPConnection) -> None:
    connection.request("GET", "/metrics")
    response = connection.getresponse()
    response.read()
    assert response.status == 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="a checkout of this exporter (repeat)")
    parser.add_argument("--scrapes", type=int, default=400, help="scrapes of each build")
    args = parser.parse_args()
    if not shutil.which("redis-server"):
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    workdir = Path(tempfile.mkdtemp(prefix="ecx-server-cost-"))
    server, redis_port = start_redis(workdir)
    exporters: list[tuple[subprocess.Popen, http.client.HTTPConnection]] = []
    try:
        load_data_set(redis_port)
        traffic = Traffic(redis_port)
        exporters = [start(tree, redis_port) for tree in args.tree]
        for _ in range(20):  # connections opened, the most called commands learnt
            for _, connection in exporters:
                traffic.send()
                scrape(connection)
        costs: list[list[int]] = [[] for _ in exporters]
        for _ in range(args.scrapes):
            for (_, connection), cost in zip(exporters, costs, strict=True):
                traffic.send()
                before = cpu_ns(server.pid)
                scrape(connection)
                cost.append(cpu_ns(server.pid) - before)
        print(f"redis-server CPU per /metrics, {args.scrapes} scrapes of each build, interleaved, traffic before each")
        for tree, cost in zip(args.tree, costs, strict=True):
            print(f"{tree:40s} median {statistics.median(cost) / 1e3:7.1f} us   mean {statistics.mean(cost) / 1e3:7.1f} us")
    finally:
        for process, _ in exporters:
            process.terminate()
        server.terminate()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
