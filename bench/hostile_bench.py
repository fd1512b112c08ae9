"""Healthy targets next to hostile ones: does a misbehaving node cost the healthy ones anything?

    python bench/hostile_bench.py [--healthy 8] [--scrapes 30] [--probes 200]

Starts N empty redis-servers and one hostile RESP server per behaviour of tests/hostile_resp.py
(trickle, silence, a 2 GB bulk, an endless line, +OK, errors, noise, resets, deep nesting), then two
exporters with a 1 s scrape timeout: one with the healthy targets only, one with all of them. For each it
prints the healthy targets' own scrape durations (from elasticache_exporter_target_scrape_duration_seconds),
the wall time of `/scrape?target=<healthy>` while another client keeps scraping `/metrics`, and the
exporter's RSS and thread count afterwards.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from scrape_bench import get, percentile, rss_mib, start_exporter, start_redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from hostile_resp import BEHAVIOURS, HostileServer


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def healthy_durations(text: str, names: list[str]) -> list[float]:
    wanted = {f'elasticache_exporter_target_scrape_duration_seconds{{instance="{name}"}}' for name in names}
    values = []
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series in wanted:
            values.append(float(value))
    return values


def scenario(config: Path, names: list[str], scrapes: int, probes: int) -> dict[str, float]:
    exporter, port = start_exporter(["--config.file", str(config)])
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        durations: list[float] = []
        walls = []
        for _ in range(scrapes):
            started = time.perf_counter()
            connection.request("GET", "/metrics")
            text = connection.getresponse().read().decode()
            walls.append(time.perf_counter() - started)
            durations += healthy_durations(text, names)
        stop = threading.Event()

        def background() -> None:
            own = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            while not stop.is_set():
                own.request("GET", "/metrics")
                own.getresponse().read()

        loop = threading.Thread(target=background, daemon=True)
        loop.start()
        probe = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        single = [get(port, f"/scrape?target={names[i % len(names)]}", connection=probe)[0] for i in range(probes)]
        stop.set()
        loop.join(timeout=5)
        return {
            "healthy_scrape_p50_ms": percentile(durations, 0.5) * 1e3,
            "healthy_scrape_p99_ms": percentile(durations, 0.99) * 1e3,
            "metrics_wall_p50_ms": percentile(walls, 0.5) * 1e3,
            "single_scrape_p50_ms": percentile(single, 0.5) * 1e3,
            "single_scrape_p99_ms": percentile(single, 0.99) * 1e3,
            "rss_mib": rss_mib(exporter.pid),
            "threads": threads(exporter.pid),
        }
    finally:
        exporter.terminate()
        exporter.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--healthy", type=int, default=8)
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--probes", type=int, default=200)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ecx-hostile-"))
    servers = [start_redis(workdir) for _ in range(args.healthy)]
    hostile = [HostileServer(behaviour, lifetime=600) for behaviour in BEHAVIOURS]
    try:
        names = [f"node{i}" for i in range(args.healthy)]
        healthy_lines = [f"  - {{name: node{i}, addr: 'redis://127.0.0.1:{port}'}}\n" for i, (_, port) in enumerate(servers)]
        hostile_lines = [f"  - {{name: {server.behaviour}, addr: '{server.addr}'}}\n" for server in hostile]
        head = "scrape:\n  timeout: 1s\nheartbeat:\n  read: false\ntargets:\n"
        alone, mixed = workdir / "alone.yml", workdir / "mixed.yml"
        alone.write_text(head + "".join(healthy_lines))
        mixed.write_text(head + "".join(healthy_lines + hostile_lines))
        results = {
            "healthy only": scenario(alone, names, args.scrapes, args.probes),
            f"with {len(hostile)} hostile": scenario(mixed, names, args.scrapes, args.probes),
        }
        keys = list(next(iter(results.values())))
        print(f"{'':28s}" + "".join(f"{name:>22s}" for name in results))
        for key in keys:
            print(f"{key:28s}" + "".join(f"{figures[key]:22.2f}" for figures in results.values()))
        base, other = results.values()
        print("ratio healthy_scrape_p50 (with/without): " + f"{other['healthy_scrape_p50_ms'] / base['healthy_scrape_p50_ms']:.2f}")
        print("ratio single_scrape_p50 (with/without): " + f"{other['single_scrape_p50_ms'] / base['single_scrape_p50_ms']:.2f}")
        print(f"median healthy scrape over both runs: {statistics.median([r['healthy_scrape_p50_ms'] for r in results.values()]):.2f} ms")
    finally:
        for server in hostile:
            server.close()
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=10)


if __name__ == "__main__":
    main()
