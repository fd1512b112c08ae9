"""Cost of a scrape: single target (/metrics) and a round of 20 parallel /scrape requests.

    python bench/scrape_bench.py [--runs 3] [--scrapes 300] [--rounds 10]

Starts its own redis-servers on loopback, loads the data set of
shared/reference/redis_exporter.md §6 (redis-benchmark -t set -n 100000 -r 100000 -d 100),
starts the exporter as a process and prints medians over the runs.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for a process to start")
        time.sleep(0.05)


def start_redis(workdir: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    directory = workdir / f"redis-{port}"
    directory.mkdir()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(directory)],
        stdout=subprocess.DEVNULL,
    )

    def answers() -> bool:
        try:
            return bool(redis.Redis(port=port, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    wait_for(answers)
    return process, port


def start_exporter(args: list[str], tree: str | None = None) -> tuple[subprocess.Popen, int]:
    """This exporter, installed or (``tree``) from a checkout, once it answers."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "serve", "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "warn", *args],
        cwd=tree,
        env=None if tree is None else {**os.environ, "PYTHONPATH": tree},
    )

    def healthy() -> bool:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/-/healthy")
            return connection.getresponse().status == 200
        except OSError:
            return False

    wait_for(healthy)
    return process, port


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def get(port: int, path: str, headers: dict[str, str] | None = None, connection: http.client.HTTPConnection | None = None):
    """(seconds, status, body bytes); with ``connection`` the request reuses it (keep-alive, as Prometheus scrapes)."""
    own = connection is None
    connection = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    started = time.perf_counter()
    connection.request("GET", path, headers=headers or {})
    response = connection.getresponse()
    body = response.read()
    elapsed = time.perf_counter() - started
    if own:
        connection.close()
    return elapsed, response.status, len(body)


def load_data_set(port: int) -> None:
    """The data set of the reference measurement: redis-benchmark -t set -n 100000 -r 100000 -d 100."""
    subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", "set", "-n", "100000", "-r", "100000", "-d", "100", "-q"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def record_run(results: dict[str, list[float]], run: int, figures: dict[str, float], digits: int = 2) -> None:
    """Adds one run's figures to ``results`` and prints them on one line."""
    for key, value in figures.items():
        results.setdefault(key, []).append(value)
    print(f"run {run + 1}: " + ", ".join(f"{k}={v:.{digits}f}" for k, v in figures.items()), flush=True)


def print_medians(results: dict[str, list[float]], width: int = 40, digits: int = 2) -> None:
    """One line per figure: the median over runs and the range."""
    for key, values in results.items():
        print(f"{key:{width}s} {statistics.median(values):9.{digits}f}  ({min(values):.{digits}f}-{max(values):.{digits}f})")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def parallel_round(
    port: int, paths: list[str], headers: dict[str, str] | None = None, connections: list[http.client.HTTPConnection] | None = None
) -> float:
    """Seconds for one request to each path, all at once: each over a new connection, or over its own of
    ``connections`` (kept alive, as Prometheus scrapes)."""
    kept: list[http.client.HTTPConnection | None] = list(connections) if connections is not None else [None] * len(paths)
    threads = [threading.Thread(target=get, args=(port, path, headers, connection)) for path, connection in zip(paths, kept, strict=True)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def single_target(redis_port: int, scrapes: int, gzip: bool) -> dict[str, float]:
    exporter, port = start_exporter(["--redis.addr", f"redis://127.0.0.1:{redis_port}"])
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    try:
        keep_alive = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for _ in range(5):
            get(port, "/metrics", headers, keep_alive)
        _, _, size = get(port, "/metrics", headers)
        text_connection = http.client.HTTPConnection("127.0.0.1", port)
        text_connection.request("GET", "/metrics")
        series = sum(1 for line in text_connection.getresponse().read().decode().splitlines() if line and not line.startswith("#"))
        cpu_before = cpu_seconds(exporter.pid)
        walls = [get(port, "/metrics", headers, keep_alive)[0] for _ in range(scrapes)]
        cpu = (cpu_seconds(exporter.pid) - cpu_before) / scrapes
        return {
            "p50_ms": percentile(walls, 0.5) * 1e3,
            "p90_ms": percentile(walls, 0.9) * 1e3,
            "p99_ms": percentile(walls, 0.99) * 1e3,
            "cpu_ms": cpu * 1e3,
            "rss_mib": rss_mib(exporter.pid),
            "series": series,
            "bytes": size,
        }
    finally:
        exporter.terminate()
        exporter.wait(timeout=10)


def info_floor(redis_port: int, scrapes: int) -> float:
    connection = redis.Redis(port=redis_port).connection_pool.get_connection()
    walls = []
    for _ in range(scrapes):
        started = time.perf_counter()
        connection.send_command("INFO", "ALL")
        connection.read_response()
        walls.append(time.perf_counter() - started)
    return percentile(walls, 0.5) * 1e3


def multi_target(ports: list[int], rounds: int, workdir: Path) -> dict[str, float]:
    config = workdir / "targets.yml"
    config.write_text("targets:\n" + "".join(f"  - name: node{i}\n    addr: redis://127.0.0.1:{p}\n" for i, p in enumerate(ports)))
    exporter, port = start_exporter(["--config.file", str(config)])
    try:
        paths = [f"/scrape?target=node{i}" for i in range(len(ports))]

        def round_of_requests() -> float:
            return parallel_round(port, paths)

        for _ in range(2):
            round_of_requests()
        cpu_before = cpu_seconds(exporter.pid)
        walls = [round_of_requests() for _ in range(rounds)]
        cpu = (cpu_seconds(exporter.pid) - cpu_before) / (rounds * len(ports))
        get(port, "/metrics")
        cpu_before = cpu_seconds(exporter.pid)
        all_walls = [get(port, "/metrics")[0] for _ in range(rounds)]
        cpu_all = (cpu_seconds(exporter.pid) - cpu_before) / (rounds * len(ports))
        return {
            "round_ms": statistics.median(walls) * 1e3,
            "cpu_per_target_ms": cpu * 1e3,
            "metrics_all_ms": statistics.median(all_walls) * 1e3,
            "metrics_all_cpu_per_target_ms": cpu_all * 1e3,
            "rss_mib": rss_mib(exporter.pid),
        }
    finally:
        exporter.terminate()
        exporter.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--targets", type=int, default=20)
    args = parser.parse_args()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        raise SystemExit("needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)")
    workdir = Path(tempfile.mkdtemp(prefix="ecx-bench-"))
    servers = []
    try:
        main_server, main_port = start_redis(workdir)
        servers.append(main_server)
        load_data_set(main_port)
        keys = redis.Redis(port=main_port).dbsize()
        empty = [start_redis(workdir) for _ in range(args.targets)]
        servers += [process for process, _ in empty]
        results: dict[str, list[float]] = {}
        for run in range(args.runs):
            figures = {f"single.{k}": v for k, v in single_target(main_port, args.scrapes, gzip=False).items()}
            figures.update({f"single_gzip.{k}": v for k, v in single_target(main_port, args.scrapes, gzip=True).items()})
            figures["floor.info_all_ms"] = info_floor(main_port, args.scrapes)
            figures.update({f"multi.{k}": v for k, v in multi_target([p for _, p in empty], args.rounds, workdir).items()})
            record_run(results, run, figures)
        print(f"\ndata set: {keys} keys; {args.runs} runs, {args.scrapes} scrapes each; median (min-max) over runs")
        print_medians(results)
    finally:
        for process in servers:
            process.terminate()
        for process in servers:
            process.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
