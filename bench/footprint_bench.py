"""Footprint side by side with redis_exporter: start-up time, idle RSS, RSS and CPU after N scrapes.

    python bench/footprint_bench.py --redis-exporter /path/to/redis_exporter [--runs 3] [--scrapes 1000]

Both exporters scrape the same redis-server (loaded with the data set of scrape_bench.py) through
`/metrics` over one kept-alive connection, one exporter at a time. Start-up is the time from exec until
the first `/metrics` answers 200 (both exporters scrape Redis for it); idle RSS is read 1 s after that
first scrape. Without --redis-exporter only this exporter is measured. Measure the exporter as it is deployed:
installed from its wheel into a clean venv (--python), without site-wide .pth hooks of the build machine.
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scrape_bench import cpu_seconds, free_port, get, load_data_set, print_medians, record_run, rss_mib, start_redis


def first_answer(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/metrics")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.002)
    raise SystemExit(f"no answer on port {port} within {timeout:.0f} s")


def command_for(kind: str, redis_exporter: str | None, redis_port: int, port: int, python: str) -> list[str]:
    address = f"redis://127.0.0.1:{redis_port}"
    if kind == "redis_exporter":
        return [redis_exporter or "", "--redis.addr", address, "--web.listen-address", f"127.0.0.1:{port}", "--log-format", "txt"]
    return [python, "-m", "exporter", "serve", "--redis.addr", address, "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "warn"]


def measure(kind: str, redis_exporter: str | None, redis_port: int, scrapes: int, python: str) -> dict[str, float]:
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(command_for(kind, redis_exporter, redis_port, port, python), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        first_answer(port)
        startup = time.perf_counter() - started
        time.sleep(1.0)
        idle = rss_mib(process.pid)
        keep_alive = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        cpu_before = cpu_seconds(process.pid)
        walls = [get(port, "/metrics", None, keep_alive)[0] for _ in range(scrapes)]
        cpu = (cpu_seconds(process.pid) - cpu_before) / scrapes
        return {
            "startup_ms": startup * 1e3,
            "idle_rss_mib": idle,
            "rss_after_mib": rss_mib(process.pid),
            "wall_p50_ms": statistics.median(walls) * 1e3,
            "cpu_per_scrape_ms": cpu * 1e3,
        }
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-exporter", help="path to a redis_exporter binary to measure beside this one")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter with the exporter installed, e.g. a clean venv's (as in the Docker image); default: this one",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scrapes", type=int, default=1000)
    args = parser.parse_args()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        raise SystemExit("needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)")
    kinds = ["elasticache-exporter"] + (["redis_exporter"] if args.redis_exporter else [])
    workdir = Path(tempfile.mkdtemp(prefix="ecx-footprint-"))
    server, redis_port = start_redis(workdir)
    try:
        load_data_set(redis_port)
        results: dict[str, list[float]] = {}
        for run in range(args.runs):
            figures = {}
            for kind in kinds:
                figures.update({f"{kind}.{k}": v for k, v in measure(kind, args.redis_exporter, redis_port, args.scrapes, args.python).items()})
            record_run(results, run, figures)
        print(f"\n{args.runs} runs, {args.scrapes} scrapes each; median (min-max) over runs")
        print_medians(results)
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
