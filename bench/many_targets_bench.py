"""CPU per target-scrape with many targets on one /metrics, and the same list split over shard processes.

    python bench/many_targets_bench.py [--targets 1000] [--rounds 5] [--runs 3] [--shards 2]

Starts N empty redis-servers on loopback (about 3 MiB of RSS each), one exporter with all of them as configured
targets, and scrapes its /metrics (every target scraped concurrently by the scrape pool) over one kept-alive
connection. Prints the exporter's CPU per target-scrape, the wall time of a full /metrics and its RSS; then the
same with --shards exporters, each given `--scrape.shard i/n`, scraped at the same time.
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from scrape_bench import cpu_seconds, free_port, print_medians, record_run, rss_mib, start_exporter, wait_for


def start_servers(count: int, workdir: Path, processes: list[subprocess.Popen]) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port in ports:  # the kernel hands a freed port out again: a second server there would not start
            continue
        directory = workdir / f"r{port}"
        directory.mkdir()
        processes.append(
            subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(directory)],
                stdout=subprocess.DEVNULL,
            )
        )
        ports.append(port)

    def all_listening() -> bool:
        text = Path("/proc/net/tcp").read_text()
        return all(f":{port:04X} 00000000:0000 0A" in text for port in ports)

    wait_for(all_listening, timeout=120)
    return ports


def stop_servers(processes: list[subprocess.Popen], workdir: Path) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(timeout=30)
    shutil.rmtree(workdir, ignore_errors=True)


def scrape(port: int) -> tuple[float, int]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    connection.request("GET", "/metrics", headers={"X-Prometheus-Scrape-Timeout-Seconds": "60"})
    body = connection.getresponse().read()
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed, sum(1 for line in body.splitlines() if line.startswith(b"redis_up{") and line.endswith(b" 1.0"))


def measure(config: Path, targets: int, rounds: int, shards: int) -> dict[str, float]:
    shard_args = [["--scrape.shard", f"{i}/{shards}"] for i in range(shards)] if shards > 1 else [[]]
    exporters = [start_exporter(["--config.file", str(config), "--scrape.timeout", "60s", *args]) for args in shard_args]
    try:
        for _, port in exporters:
            scrape(port)  # connections opened, first INFO parsed
        cpu_before = sum(cpu_seconds(process.pid) for process, _ in exporters)
        walls, ups = [], []
        for _ in range(rounds):
            results: list[tuple[float, int]] = [(0.0, 0)] * len(exporters)

            def one(index: int, port: int, results: list[tuple[float, int]] = results) -> None:
                results[index] = scrape(port)

            threads = [threading.Thread(target=one, args=(i, port)) for i, (_, port) in enumerate(exporters)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            walls.append(time.perf_counter() - started)
            ups.append(sum(up for _, up in results))
        cpu = sum(cpu_seconds(process.pid) for process, _ in exporters) - cpu_before
        if min(ups) != targets:
            raise SystemExit(f"expected {targets} targets up in every round, got {ups}")
        return {
            "cpu_per_target_ms": cpu / (rounds * targets) * 1e3,
            "metrics_wall_s": statistics.median(walls),
            "rss_mib_per_process": statistics.median(rss_mib(process.pid) for process, _ in exporters),
        }
    finally:
        for process, _ in exporters:
            process.terminate()
            process.wait(timeout=20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shards", type=int, default=2)
    args = parser.parse_args()
    if not shutil.which("redis-server"):
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    workdir = Path(tempfile.mkdtemp(prefix="ecx-many-"))
    started = time.perf_counter()
    processes: list[subprocess.Popen] = []
    try:
        ports = start_servers(args.targets, workdir, processes)
        print(f"{args.targets} redis-servers up in {time.perf_counter() - started:.1f} s", flush=True)
        config = workdir / "targets.yml"
        config.write_text("targets:\n" + "".join(f"  - name: node{i:04d}\n    addr: redis://127.0.0.1:{p}\n" for i, p in enumerate(ports)))
        results: dict[str, list[float]] = {}
        for run in range(args.runs):
            figures = {f"one.{k}": v for k, v in measure(config, args.targets, args.rounds, 1).items()}
            if args.shards > 1:
                figures.update({f"shards{args.shards}.{k}": v for k, v in measure(config, args.targets, args.rounds, args.shards).items()})
            record_run(results, run, figures, digits=3)
        print(f"\n{args.targets} targets, {args.rounds} rounds of /metrics per run; median (min-max) over {args.runs} runs")
        print_medians(results, width=36, digits=3)
    finally:
        stop_servers(processes, workdir)


if __name__ == "__main__":
    main()
