"""This exporter and redis_exporter side by side, in one run on one machine, their requests interleaved.

    python bench/side_by_side_bench.py --redis-exporter /path/to/redis_exporter [--python /tmp/ecx/bin/python]
        [--passes 4] [--scrapes 75] [--rounds 5] [--targets 20]

One redis-server loaded with the data set of scrape_bench.py (about 63,000 keys) and ``--targets`` empty ones. Both
exporters run at once. Per pass, ``--scrapes`` sequential ``/metrics`` scrapes of each over a kept-alive connection
(ours, then redis_exporter's, block by block, so the redis-server's CPU can be told apart), then ``--rounds`` rounds of
``--targets`` parallel ``/scrape?target=`` requests to each (to a second instance of this exporter, whose config file
allows /scrape of those servers). Prints each figure of each exporter (medians over the
passes) and the ratio ours / redis_exporter, and how many series each serves for the same server.
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

from footprint_bench import command_for, first_answer
from scrape_bench import cpu_seconds, free_port, get, load_data_set, parallel_round, percentile, rss_mib, start_redis

OURS, THEIRS = "elasticache-exporter", "redis_exporter"


def start(kind: str, redis_exporter: str, redis_port: int, python: str, workdir: Path, allow: bool = False) -> tuple[subprocess.Popen, int, float]:
    """The exporter, its port and its RSS 1 s after it first answered."""
    port = free_port()
    command = command_for(kind, redis_exporter, redis_port, port, python)
    if allow:  # /scrape may reach the loopback servers of the round, as redis_exporter's /scrape may
        config = workdir / "allow.yml"
        config.write_text("scrape:\n  allow:\n    - hosts: ['127.0.0.1']\n")
        command += ["--config.file", str(config)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first_answer(port)
    time.sleep(1.0)
    return process, port, rss_mib(process.pid)


def series(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/metrics")
    return sum(1 for line in connection.getresponse().read().decode().splitlines() if line and not line.startswith("#"))


def scrape_block(process: subprocess.Popen, port: int, connection, redis_pid: int, scrapes: int) -> dict[str, float]:
    cpu, server_cpu = cpu_seconds(process.pid), cpu_seconds(redis_pid)
    walls = [get(port, "/metrics", None, connection)[0] for _ in range(scrapes)]
    return {
        "wall_p50_ms": percentile(walls, 0.5) * 1e3,
        "cpu_per_scrape_ms": (cpu_seconds(process.pid) - cpu) / scrapes * 1e3,
        "redis_cpu_per_scrape_ms": (cpu_seconds(redis_pid) - server_cpu) / scrapes * 1e3,
    }


def round_of_scrapes(port: int, target_ports: list[int]) -> float:
    return parallel_round(port, [f"/scrape?target=redis://127.0.0.1:{p}" for p in target_ports])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-exporter", required=True, help="path to a redis_exporter binary")
    parser.add_argument("--python", default=sys.executable, help="interpreter with this exporter installed (a clean venv, as deployed)")
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--scrapes", type=int, default=75, help="per pass and exporter (4 x 75: RSS after 300 scrapes)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of parallel /scrape per pass and exporter")
    parser.add_argument("--targets", type=int, default=20)
    args = parser.parse_args()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        raise SystemExit("needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)")
    workdir = Path(tempfile.mkdtemp(prefix="ecx-side-by-side-"))
    servers, exporters, round_ports = [], {}, {}
    try:
        main_server, main_port = start_redis(workdir)
        servers.append(main_server)
        load_data_set(main_port)
        empty = [start_redis(workdir) for _ in range(args.targets)]
        servers += [process for process, _ in empty]
        figures: dict[str, dict[str, list[float]]] = {OURS: {}, THEIRS: {}}
        for kind in (OURS, THEIRS):
            process, port, idle = start(kind, args.redis_exporter, main_port, args.python, workdir)
            exporters[kind] = (process, port, http.client.HTTPConnection("127.0.0.1", port, timeout=10))
            figures[kind]["idle_rss_mib"] = [idle]
        # ours needs an allow-list (a config file, which loads the YAML reader) before /scrape reaches other servers:
        # the rounds go to an instance of its own, so that the /metrics figures are those of a --redis.addr exporter
        round_ports = {OURS: start(OURS, args.redis_exporter, main_port, args.python, workdir, allow=True), THEIRS: exporters[THEIRS]}
        for _, port, connection in exporters.values():
            for _ in range(5):  # warm-up: connections, CONFIG and the histograms' command list
                get(port, "/metrics", None, connection)
        for number in range(args.passes):
            for kind, (process, port, connection) in exporters.items():
                for key, value in scrape_block(process, port, connection, main_server.pid, args.scrapes).items():
                    figures[kind].setdefault(key, []).append(value)
            print(f"pass {number + 1}: " + ", ".join(f"{kind} {figures[kind]['wall_p50_ms'][-1]:.2f} ms" for kind in exporters), flush=True)
        for kind, (process, _, _) in exporters.items():
            figures[kind]["rss_after_scrapes_mib"] = [rss_mib(process.pid)]
            figures[kind]["series"] = [series(exporters[kind][1])]
        for _ in range(args.passes):
            for kind, (_, port, _) in round_ports.items():
                round_of_scrapes(port, [p for _, p in empty])  # warm-up of the pass
                figures[kind].setdefault("round_ms", []).extend(round_of_scrapes(port, [p for _, p in empty]) * 1e3 for _ in range(args.rounds))
        print(f"\n{args.passes} passes of {args.scrapes} scrapes and {args.rounds} rounds of {args.targets} /scrape, interleaved; medians")
        print(f"{'figure':28s} {OURS:>22s} {THEIRS:>16s} {'ratio':>7s}")
        for key in figures[OURS]:
            ours, theirs = statistics.median(figures[OURS][key]), statistics.median(figures[THEIRS][key])
            print(f"{key:28s} {ours:22.2f} {theirs:16.2f} {ours / theirs if theirs else float('nan'):7.2f}")
    finally:
        round_ports.pop(THEIRS, None)
        for process, _, _ in [*exporters.values(), *round_ports.values()]:
            process.terminate()
        for process in servers:
            process.terminate()
        for process in [*servers, *(p for p, _, _ in [*exporters.values(), *round_ports.values()])]:
            process.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
