"""This exporter and redis_exporter side by side, in one run on one machine, as production scrapes them.

    python bench/side_by_side_bench.py --redis-exporter /path/to/redis_exporter [--python /tmp/ecx/bin/python]
        [--passes 4] [--scrapes 75] [--rounds 5] [--targets 20] [--idle-round-targets]

One redis-server loaded with the data set of scrape_bench.py (about 63,000 keys) and ``--targets`` empty ones. Both
exporters run at once, and their requests alternate scrape by scrape (A B, then B A), never a block of one exporter's
scrapes on a server that stands still: before every scrape one pipeline of production-like traffic (``traffic.py``,
about 25 kinds of command) reaches the server, so its commandstats, latencystats, keyspace and byte counters move
between scrapes as they do in production. Per pass, ``--scrapes`` such pairs of ``/metrics`` scrapes over kept-alive
connections, then ``--rounds`` pairs of rounds of ``--targets`` parallel ``/scrape?target=`` requests (traffic to every
one of those servers before each round, none with ``--idle-round-targets``; ours from a second instance whose config
file allows /scrape of them): each round once with a new connection per request (``round_ms``) and once over one
kept-alive connection per target, as Prometheus scrapes them (``round_keepalive_ms``), with each exporter's context
switches (voluntary and not, every thread's, from /proc/PID/task/*/status) a request of those rounds
(``round_keepalive_switches``): the hand-offs between threads a request costs.

Measured per scrape: wall time; the exporter's CPU (every thread's time on a CPU, from /proc/PID/task/*/schedstat, in
nanoseconds) over the pass divided by its scrapes; the redis-server's CPU during each scrape (the traffic's is not
counted: it is done before the scrape starts). Prints each figure of each exporter (medians over the passes), the ratio
ours / redis_exporter, and how many series each serves for the same server.

Every scrape sends ``--accept``: by default the header of a Prometheus 3 with its default ``scrape_protocols``
(OpenMetrics 1.0.0 first), which redis_exporter answers with text 0.0.4 and this exporter with OpenMetrics; ``--accept
''`` sends none (both answer text 0.0.4).
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
from scrape_bench import free_port, get, load_data_set, parallel_round, percentile, rss_mib, start_redis
from traffic import Traffic

OURS, THEIRS = "elasticache-exporter", "redis_exporter"


def cpu_ns(pid: int) -> int:
    """Time every thread of ``pid`` spent on a CPU, in nanoseconds (a thread that ended no longer counts)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return total


SWITCHES = ("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")


def context_switches(pid: int, kinds: tuple[str, ...] = SWITCHES) -> dict[str, int]:
    """Context switches of each thread of ``pid``, by thread id: voluntary and not, or those of ``kinds``."""
    counts: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue  # a thread that ended meanwhile
        counts[task.name] = sum(int(line.split()[1]) for line in status.splitlines() if line.startswith(kinds))
    return counts


def switches_since(pid: int, before: dict[str, int], kinds: tuple[str, ...] = SWITCHES) -> int:
    """The switches since ``before`` of the threads alive now (one started since counts whole; one that ended since
    is left out, never subtracted)."""
    return sum(count - before.get(thread, 0) for thread, count in context_switches(pid, kinds).items())


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


# what Prometheus 3 sends with its default scrape_protocols (scrape.acceptHeader over config.DefaultScrapeProtocols)
PROMETHEUS_3_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)


def scrape_pass(
    exporters: dict[str, tuple[subprocess.Popen, int, http.client.HTTPConnection]],
    traffic: Traffic,
    redis_pid: int,
    scrapes: int,
    headers: dict[str, str],
) -> dict[str, dict[str, float]]:
    """``scrapes`` pairs of /metrics scrapes, the two exporters alternating (A B, B A), traffic before each scrape."""
    kinds = list(exporters)
    walls: dict[str, list[float]] = {kind: [] for kind in kinds}
    server_ns = dict.fromkeys(kinds, 0)
    cpu_before = {kind: cpu_ns(process.pid) for kind, (process, _, _) in exporters.items()}
    for number in range(scrapes):
        for kind in kinds if number % 2 == 0 else reversed(kinds):
            _, port, connection = exporters[kind]
            traffic.send()
            server_before = cpu_ns(redis_pid)
            walls[kind].append(get(port, "/metrics", headers, connection)[0])
            server_ns[kind] += cpu_ns(redis_pid) - server_before
    return {
        kind: {
            "wall_p50_ms": percentile(walls[kind], 0.5) * 1e3,
            "cpu_per_scrape_ms": (cpu_ns(process.pid) - cpu_before[kind]) / scrapes / 1e6,
            "redis_cpu_per_scrape_ms": server_ns[kind] / scrapes / 1e6,
        }
        for kind, (process, _, _) in exporters.items()
    }


def round_pass(
    round_ports: dict[str, int],
    round_pids: dict[str, int],
    empty_traffic: list[Traffic],
    target_ports: list[int],
    rounds: int,
    headers: dict[str, str],
    kept: dict[str, list[http.client.HTTPConnection]],
) -> dict[str, dict[str, list[float]]]:
    """``rounds`` pairs of rounds of parallel /scrape, alternating, traffic to every server before each round: each
    round once with a new connection per request (``round_ms``, the figure of earlier runs) and once over one
    kept-alive connection per target, as Prometheus scrapes (``round_keepalive_ms``)."""
    kinds = list(round_ports)
    paths = [f"/scrape?target=redis://127.0.0.1:{p}" for p in target_ports]
    times: dict[str, dict[str, list[float]]] = {kind: {"round_ms": [], "round_keepalive_ms": [], "round_keepalive_switches": []} for kind in kinds}
    for number in range(rounds):
        for kind in kinds if number % 2 == 0 else reversed(kinds):
            for traffic in empty_traffic:
                traffic.send()
            times[kind]["round_ms"].append(parallel_round(round_ports[kind], paths, headers) * 1e3)
            for traffic in empty_traffic:
                traffic.send()
            switches = context_switches(round_pids[kind])
            times[kind]["round_keepalive_ms"].append(parallel_round(round_ports[kind], paths, headers, kept[kind]) * 1e3)
            times[kind]["round_keepalive_switches"].append(switches_since(round_pids[kind], switches) / len(paths))
    return times


def measure_rounds(
    round_ports: dict[str, int],
    round_pids: dict[str, int],
    empty_traffic: list[Traffic],
    target_ports: list[int],
    args: argparse.Namespace,
    headers: dict[str, str],
    figures: dict[str, dict[str, list[float]]],
) -> None:
    kept = {kind: [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in target_ports] for kind, port in round_ports.items()}
    round_pass(round_ports, round_pids, empty_traffic, target_ports, 1, headers, kept)  # warm-up: connections to every server
    for _ in range(args.passes):
        for kind, times in round_pass(round_ports, round_pids, empty_traffic, target_ports, args.rounds, headers, kept).items():
            for key, values in times.items():
                figures[kind].setdefault(key, []).extend(values)
    for connections in kept.values():
        for connection in connections:
            connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-exporter", required=True, help="path to a redis_exporter binary")
    parser.add_argument("--python", default=sys.executable, help="interpreter with this exporter installed (a clean venv, as deployed)")
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--scrapes", type=int, default=75, help="pairs of scrapes per pass (4 x 75: RSS after 300 scrapes each)")
    parser.add_argument("--rounds", type=int, default=5, help="pairs of rounds of parallel /scrape per pass")
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--accept", default=PROMETHEUS_3_ACCEPT, help="Accept header of every scrape ('': none)")
    parser.add_argument("--idle-round-targets", action="store_true", help="no traffic to the round's servers: each /scrape of an idle, empty server")
    args = parser.parse_args()
    headers = {"Accept": args.accept} if args.accept else {}
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        raise SystemExit("needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)")
    workdir = Path(tempfile.mkdtemp(prefix="ecx-side-by-side-"))
    servers: list[subprocess.Popen] = []
    exporters: dict[str, tuple[subprocess.Popen, int, http.client.HTTPConnection]] = {}
    round_exporter: subprocess.Popen | None = None
    traffic: list[Traffic] = []
    try:
        main_server, main_port = start_redis(workdir)
        servers.append(main_server)
        load_data_set(main_port)
        empty = [start_redis(workdir) for _ in range(args.targets)]
        servers += [process for process, _ in empty]
        main_traffic = Traffic(main_port)
        empty_traffic = [] if args.idle_round_targets else [Traffic(port, seed=i + 2) for i, (_, port) in enumerate(empty)]
        traffic = [main_traffic, *empty_traffic]
        figures: dict[str, dict[str, list[float]]] = {OURS: {}, THEIRS: {}}
        for kind in (OURS, THEIRS):
            process, port, idle = start(kind, args.redis_exporter, main_port, args.python, workdir)
            exporters[kind] = (process, port, http.client.HTTPConnection("127.0.0.1", port, timeout=10))
            figures[kind]["idle_rss_mib"] = [idle]
        # ours needs an allow-list (a config file, which loads the YAML reader) before /scrape reaches other servers:
        # the rounds go to an instance of its own, so that the /metrics figures are those of a --redis.addr exporter
        round_exporter, round_port, _ = start(OURS, args.redis_exporter, main_port, args.python, workdir, allow=True)
        round_ports = {OURS: round_port, THEIRS: exporters[THEIRS][1]}
        round_pids = {OURS: round_exporter.pid, THEIRS: exporters[THEIRS][0].pid}
        for _, port, connection in exporters.values():
            for _ in range(5):  # warm-up: connections, CONFIG and the histograms' command list
                main_traffic.send()
                get(port, "/metrics", headers, connection)
        for number in range(args.passes):
            for kind, values in scrape_pass(exporters, main_traffic, main_server.pid, args.scrapes, headers).items():
                for key, value in values.items():
                    figures[kind].setdefault(key, []).append(value)
            print(f"pass {number + 1}: " + ", ".join(f"{kind} {figures[kind]['wall_p50_ms'][-1]:.2f} ms" for kind in exporters), flush=True)
        for kind, (process, port, _) in exporters.items():
            figures[kind]["rss_after_scrapes_mib"] = [rss_mib(process.pid)]
            figures[kind]["series"] = [series(port)]
        target_ports = [port for _, port in empty]
        measure_rounds(round_ports, round_pids, empty_traffic, target_ports, args, headers, figures)
        print(
            f"\n{args.passes} passes of {args.scrapes} pairs of scrapes and {args.rounds} pairs of rounds of {args.targets} /scrape, "
            "alternating, traffic before each; medians"
        )
        print_figures(figures)
    finally:
        for client in traffic:
            client.close()
        stop_all([process for process, _, _ in exporters.values()] + ([round_exporter] if round_exporter else []) + servers)
        shutil.rmtree(workdir, ignore_errors=True)


def print_figures(figures: dict[str, dict[str, list[float]]]) -> None:
    print(f"{'figure':28s} {OURS:>22s} {THEIRS:>16s} {'ratio':>7s}")
    for key in figures[OURS]:
        ours, theirs = statistics.median(figures[OURS][key]), statistics.median(figures[THEIRS][key])
        print(f"{key:28s} {ours:22.2f} {theirs:16.2f} {ours / theirs if theirs else float('nan'):7.2f}")


def stop_all(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(timeout=10)


if __name__ == "__main__":
    main()
