"""Two builds of this exporter side by side, their requests interleaved: the figures of a change, measured in one run.

    python bench/ab_bench.py --a /tmp/ecx-before/bin/python --b /tmp/ecx-after/bin/python [--passes 4] [--instances 2]

Each interpreter has one build installed (``python -m venv DIR && DIR/bin/pip install .`` at each commit). One
redis-server holds the data set of scrape_bench.py (about 63,000 keys) and 20 are empty. ``--instances`` exporters of
each build run at once (a process's own layout moves its figures by several per cent, so each side is more than one
process); per pass, each instance in turn serves 150 sequential ``/metrics`` of the loaded server over one kept-alive
connection and 6 rounds of 20 parallel ``/scrape`` of the empty ones, with production-like traffic (``traffic.py``)
reaching the server before each scrape and every server before each round (``--still``: none, a hot loop on servers
that stand still). CPU is the sum over the process's threads (``/proc/PID/task/*/schedstat``, nanoseconds). Prints
the medians of each side and the ratio b / a.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from footprint_bench import first_answer
from scrape_bench import free_port, load_data_set, parallel_round, rss_mib, start_redis
from traffic import Traffic


def cpu_seconds(pid: int) -> float:
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except OSError:  # a thread that ended meanwhile
            continue
    return total / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="interpreter with the first build installed")
    parser.add_argument("--b", required=True, help="interpreter with the second build installed")
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--instances", type=int, default=2, help="exporter processes per build")
    parser.add_argument("--still", action="store_true", help="no traffic between scrapes")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ecx-ab-"))
    servers, exporters = [], {}
    try:
        main_server, main_port = start_redis(workdir)
        servers.append(main_server)
        load_data_set(main_port)
        empty = [start_redis(workdir) for _ in range(20)]
        servers += [process for process, _ in empty]
        main_traffic = Traffic(main_port)
        empty_traffic = [Traffic(port, seed=i + 2) for i, (_, port) in enumerate(empty)]
        main_clients, empty_clients = ([], []) if args.still else ([main_traffic], empty_traffic)
        config = workdir / "allow.yml"
        config.write_text("scrape:\n  allow:\n    - hosts: ['127.0.0.1']\n")
        for instance in range(args.instances):
            for side, python in (("a", args.a), ("b", args.b)):
                exporters[(side, instance)] = start_exporter(python, main_port, config, workdir)
        paths = [f"/scrape?target=redis://127.0.0.1:{port}" for _, port in empty]
        for exporter in exporters.values():
            warm_up(exporter, paths)
        figures: dict[str, dict[str, list[float]]] = {"a": {}, "b": {}}
        for _ in range(args.passes):
            for (side, _), exporter in exporters.items():
                for key, value in measure(exporter, paths, lambda: send(main_clients), lambda: send(empty_clients)).items():
                    figures[side].setdefault(key, []).append(value)
        for (side, _), (process, _, _) in exporters.items():
            figures[side].setdefault("rss_mib", []).append(rss_mib(process.pid))
        print(f"{args.passes} passes, {args.instances} processes a build; medians")
        print_figures(figures)
    finally:
        processes = [*(p for p, _, _ in exporters.values()), *servers]
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def start_exporter(python: str, redis_port: int, config: Path, workdir: Path) -> tuple[subprocess.Popen, int, http.client.HTTPConnection]:
    port = free_port()
    process = subprocess.Popen(
        [
            python,
            "-m",
            "exporter",
            "serve",
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--log.level",
            "warn",
            "--redis.addr",
            f"redis://127.0.0.1:{redis_port}",
            "--config.file",
            str(config),
        ],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    first_answer(port)
    return process, port, http.client.HTTPConnection("127.0.0.1", port, timeout=10)


def send(clients: list[Traffic]) -> None:
    for client in clients:
        client.send()


def warm_up(exporter: tuple[subprocess.Popen, int, http.client.HTTPConnection], paths: list[str]) -> None:
    """Connections, CONFIG, histograms and memos, before anything is measured."""
    _, port, connection = exporter
    for _ in range(30):
        connection.request("GET", "/metrics")
        connection.getresponse().read()
    for _ in range(3):
        parallel_round(port, paths)


def measure(exporter: tuple[subprocess.Popen, int, http.client.HTTPConnection], paths: list[str], before_scrape, before_round) -> dict[str, float]:
    """One exporter's figures of a pass: 150 /metrics, then 6 rounds of parallel /scrape, traffic before each."""
    process, port, connection = exporter
    cpu, walls = cpu_seconds(process.pid), []
    for _ in range(150):
        before_scrape()
        started = time.perf_counter()
        connection.request("GET", "/metrics")
        connection.getresponse().read()
        walls.append(time.perf_counter() - started)
    figures = {"metrics_cpu_us": (cpu_seconds(process.pid) - cpu) / 150 * 1e6, "metrics_wall_p50_us": statistics.median(walls) * 1e6}
    cpu = cpu_seconds(process.pid)
    rounds = []
    for _ in range(6):
        before_round()
        rounds.append(parallel_round(port, paths) * 1e3)
    figures["round_ms"] = statistics.median(rounds)
    figures["round_cpu_per_scrape_us"] = (cpu_seconds(process.pid) - cpu) / (6 * len(paths)) * 1e6
    return figures


def print_figures(figures: dict[str, dict[str, list[float]]]) -> None:
    print(f"{'figure':26s} {'a':>10s} {'b':>10s} {'b / a':>7s}")
    for key in figures["a"]:
        a, b = statistics.median(figures["a"][key]), statistics.median(figures["b"][key])
        print(f"{key:26s} {a:10.1f} {b:10.1f} {b / a:7.3f}")


if __name__ == "__main__":
    main()
