"""A fleet in one process: the RSS a target costs and the CPU a target-scrape costs at N targets, against what
redis_exporter spends per /scrape of the same servers, in one run.

    python bench/fleet_bench.py --redis-exporter /path/to/redis_exporter [--targets 1000] [--rounds 5] [--runs 3]
                                [--python /tmp/ecx/bin/python] [--accept text|openmetrics|protobuf] [--image-env]

Starts N empty redis-servers on loopback. Per run:
- this exporter with one configured target and with all N (each its own process, started the same way), each scraped
  through /metrics ``--rounds`` times over one kept-alive connection: RSS after the rounds; the RSS a target costs is the
  difference over the N - 1 targets added (what the issue's goal of 64 KiB a target measures); CPU per target-scrape
  is the N-target exporter's CPU over the rounds, over N x rounds, and so are its context switches (every thread's;
  voluntary ones are waits, for a reply, a queue or the interpreter lock; involuntary ones, preemption by the servers
  and the bench on the same cores);
- redis_exporter scraped through /scrape?target= once per server per round, 8 requests at a time (Prometheus scrapes
  the multi-target pattern's targets in parallel): its CPU per /scrape;
- this exporter the same way, through /scrape?target=<configured name>, for the like-for-like figure.
CPU is every thread's (``/proc/PID/task/*/schedstat``). Prints each run's figures and the medians with their ranges.
With ``--image-env`` this exporter runs with the malloc settings the container image sets (``MALLOC_ARENA_MAX=2
MALLOC_MMAP_THRESHOLD_=262144``, see the Dockerfile): without them glibc raises its mmap threshold after a large
body is freed, and the next bodies' memory stays in its heap.
``bench/many_targets_bench.py`` stays as it was, for its earlier figures.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from many_targets_bench import start_servers, stop_servers
from scrape_bench import free_port, print_medians, record_run, rss_mib, wait_for
from side_by_side_bench import PROMETHEUS_3_ACCEPT, SWITCHES, context_switches, cpu_ns, switches_since

ACCEPTS = {
    "text": "text/plain;version=0.0.4",
    "openmetrics": PROMETHEUS_3_ACCEPT,
    "protobuf": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6," + PROMETHEUS_3_ACCEPT,
}
PARALLEL = 8


IMAGE_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "262144"}  # as the Dockerfile sets them


def start(command: list[str], port: int, health: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The process, once ``health`` answers 200 (a first /metrics of many targets takes longer than a probe waits)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})

    def healthy() -> bool:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", health)
            return connection.getresponse().status == 200
        except OSError:
            return False

    wait_for(healthy, timeout=60)
    return process


def fetch(connection: http.client.HTTPConnection, path: str, accept: str) -> bytes:
    connection.request("GET", path, headers={"Accept": accept, "X-Prometheus-Scrape-Timeout-Seconds": "60"})
    response = connection.getresponse()
    body = response.read()
    assert response.status == 200, (path, response.status, body[:200])
    return body


def ours(python: str, config: Path, env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    port = free_port()
    command = [python, "-m", "exporter", "serve", "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "warn"]
    return start([*command, "--config.file", str(config), "--scrape.timeout", "60s"], port, "/-/healthy", env), port


def metrics_rounds(port: int, rounds: int, accept: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    for _ in range(rounds):
        fetch(connection, "/metrics", accept)
    connection.close()


def scrape_rounds(port: int, paths: list[str], rounds: int, accept: str) -> None:
    """Every path once per round, PARALLEL at a time, each worker over its own kept-alive connection."""
    chunks = [paths[i::PARALLEL] for i in range(PARALLEL)]

    def worker(chunk: list[str]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for path in chunk:
            fetch(connection, path, accept)
        connection.close()

    with ThreadPoolExecutor(PARALLEL) as pool:
        for _ in range(rounds):
            list(pool.map(worker, chunks))


def write_config(path: Path, ports: list[int]) -> None:
    path.write_text(
        "scrape:\n  allow:\n    - hosts: ['127.0.0.1']\ntargets:\n"
        + "".join(f"  - name: node{i:04d}\n    addr: redis://127.0.0.1:{port}\n" for i, port in enumerate(ports))
    )


def one_run(args: argparse.Namespace, ports: list[int], workdir: Path) -> dict[str, float]:
    accept = ACCEPTS[args.accept]
    figures: dict[str, float] = {}
    rss: dict[int, float] = {}
    for count in (1, len(ports)):
        config = workdir / f"targets-{count}.yml"
        write_config(config, ports[:count])
        process, port = ours(args.python, config, IMAGE_ENV if args.image_env else {})
        try:
            metrics_rounds(port, 1, accept)  # connections opened, first INFO parsed
            before = cpu_ns(process.pid)
            switches = {kind: context_switches(process.pid, (kind,)) for kind in SWITCHES}
            metrics_rounds(port, args.rounds, accept)
            if count > 1:
                figures["ours_cpu_per_target_scrape_ms"] = (cpu_ns(process.pid) - before) / (args.rounds * count) / 1e6
                for kind, counts in switches.items():  # voluntary: waits (for I/O, a queue, the GIL); involuntary: preempted
                    name = kind.removesuffix("_ctxt_switches:")
                    figures[f"ours_{name}_switches_per_target_scrape"] = switches_since(process.pid, counts, (kind,)) / (args.rounds * count)
            rss[count] = rss_mib(process.pid)
            if count > 1:
                paths = [f"/scrape?target=node{i:04d}" for i in range(count)]
                scrape_rounds(port, paths, 1, accept)
                before = cpu_ns(process.pid)
                scrape_rounds(port, paths, args.rounds, accept)
                figures["ours_cpu_per_scrape_request_ms"] = (cpu_ns(process.pid) - before) / (args.rounds * count) / 1e6
        finally:
            process.terminate()
            process.wait(timeout=30)
    figures["ours_rss_mib_one_target"] = rss[1]
    figures[f"ours_rss_mib_{len(ports)}_targets"] = rss[len(ports)]
    figures["ours_rss_kib_per_target"] = (rss[len(ports)] - rss[1]) * 1024 / (len(ports) - 1)
    port = free_port()
    theirs = start([args.redis_exporter, "--web.listen-address", f"127.0.0.1:{port}", "--redis.addr", ""], port, "/health")
    try:
        paths = [f"/scrape?target=redis://127.0.0.1:{p}" for p in ports]
        scrape_rounds(port, paths, 1, accept)
        before = cpu_ns(theirs.pid)
        scrape_rounds(port, paths, args.rounds, accept)
        figures["redis_exporter_cpu_per_scrape_ms"] = (cpu_ns(theirs.pid) - before) / (args.rounds * len(ports)) / 1e6
        figures["redis_exporter_rss_mib"] = rss_mib(theirs.pid)
    finally:
        theirs.terminate()
        theirs.wait(timeout=30)
    figures["ratio_cpu_target_scrape_to_theirs"] = figures["ours_cpu_per_target_scrape_ms"] / figures["redis_exporter_cpu_per_scrape_ms"]
    figures["ratio_cpu_scrape_request_to_theirs"] = figures["ours_cpu_per_scrape_request_ms"] / figures["redis_exporter_cpu_per_scrape_ms"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-exporter", required=True)
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--accept", choices=sorted(ACCEPTS), default="openmetrics")
    parser.add_argument("--image-env", action="store_true", help="this exporter with the container image's malloc settings")
    args = parser.parse_args()
    if not shutil.which("redis-server"):
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    workdir = Path(tempfile.mkdtemp(prefix="ecx-fleet-"))
    processes: list[subprocess.Popen] = []
    started = time.perf_counter()
    try:
        ports = start_servers(args.targets, workdir, processes)
        print(f"{args.targets} redis-servers up in {time.perf_counter() - started:.1f} s", flush=True)
        results: dict[str, list[float]] = {}
        for run in range(args.runs):
            record_run(results, run, one_run(args, ports, workdir), digits=3)
        env = ", the image's malloc settings" if args.image_env else ""
        print(f"\n{args.targets} targets, {args.rounds} rounds, Accept {args.accept}{env}; median (min-max) over {args.runs} runs")
        print_medians(results, width=40, digits=3)
        print(f"median RSS a target: {statistics.median(results['ours_rss_kib_per_target']):.1f} KiB")
    finally:
        stop_servers(processes, workdir)


if __name__ == "__main__":
    main()
