"""The backtest's cost: a week of a fleet's redis_exporter history at a 1-minute evaluation interval, through the
rendered rules (89 alerts) and Alertmanager routing.

    python bench/backtest_bench.py [--nodes 200] [--days 7] [--parallel 4]

Writes the history (redis_up, memory used and max, connected clients, evictions, and each replica's link) as OpenMetrics
with an incident now and then, backfills it into a real Prometheus 3 (promtool tsdb create-blocks-from openmetrics),
then times `elasticache-exporter backtest` in this process and reads its peak memory (and the Prometheus' own).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from promql_front import start_backfilled_prometheus

MEASURED = (
    "import resource, sys\n"
    "from exporter.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


def _values(name: str, minutes: int, mine: list[tuple[str, int, int]], replica_link: list[tuple[int, int]]) -> list[float]:
    """A series' value each minute, in the incidents of its node (``mine``) and of its replica's link."""

    def during(kind: str, m: int) -> bool:
        return any(k == kind and first <= m < last for k, first, last in mine)

    if name == "redis_evicted_keys_total":
        counts, evicted = [], 0.0
        for m in range(minutes):
            evicted += 300.0 if during("full", m) else 0.0
            counts.append(evicted)
        return counts
    each: dict[str, Callable[[int], float]] = {
        "redis_up": lambda m: 0.0 if during("down", m) else 1.0,
        "redis_instance_info": lambda m: 1.0,
        "redis_connected_slaves": lambda m: 0.0 if any(first <= m < last for first, last in replica_link) else 1.0,
        "redis_memory_used_bytes": lambda m: 1e9 if during("full", m) else 4e8 + (m % 1440) * 1e4,
        "redis_memory_max_bytes": lambda m: 1e9,
        "redis_connected_clients": lambda m: 100.0 + (m % 60),
        "redis_master_link_up": lambda m: 0.0 if during("link", m) else 1.0,
    }
    return [each[name](m) for m in range(minutes)]


NAMES = (
    "redis_up",
    "redis_instance_info",
    "redis_connected_slaves",
    "redis_memory_used_bytes",
    "redis_memory_max_bytes",
    "redis_connected_clients",
    "redis_evicted_keys_total",
    "redis_master_link_up",
)


def write_history(path: Path, nodes: int, minutes: int, start: int, seed: int) -> int:
    """The fleet's series, a series' samples together: primaries and their replicas (odd nodes), a node down, a replica's
    link down or a memory full now and then."""
    rng = random.Random(seed)
    incidents: dict[int, list[tuple[str, int, int]]] = {}
    for _ in range(max(1, nodes * minutes // 20_000)):
        node, kind, at = rng.randrange(nodes), rng.choice(["down", "link", "full"]), rng.randrange(minutes - 120)
        kind = kind if kind != "link" or node % 2 == 1 else "down"
        incidents.setdefault(node, []).append((kind, at, at + rng.randint(3, 90)))
    lines = 0
    with path.open("w") as out:
        for name in NAMES:
            for node in range(nodes):
                replica = node % 2 == 1
                if (name == "redis_master_link_up" and not replica) or (name == "redis_connected_slaves" and replica):
                    continue
                labels = f'instance="node-{node:04d}:6379",job="redis"'
                if name == "redis_instance_info":
                    labels += f',role="{"slave" if replica else "master"}"'
                link = [(first, last) for kind, first, last in incidents.get(node + 1, []) if kind == "link"]
                for m, value in enumerate(_values(name, minutes, incidents.get(node, []), link)):
                    out.write(f"{name}{{{labels}}} {value} {start + 60 * m}\n")
                    lines += 1
        out.write("# EOF\n")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seed", type=int, default=67)
    parser.add_argument("--parallel", type=int, default=4, help="the backtest's --parallel")
    args = parser.parse_args()
    minutes = args.days * 1440
    start = int(time.time()) // 3600 * 3600 - minutes * 60
    with tempfile.TemporaryDirectory(prefix="backtest-bench-") as workdir:
        began = time.monotonic()
        samples = write_history(Path(workdir) / "history.om", args.nodes, minutes, start, args.seed)
        written = time.monotonic()
        prometheus = start_backfilled_prometheus(Path(workdir), Path(workdir) / "history.om")
        loaded = time.monotonic()
        try:
            end = start + 60 * (minutes - 1)
            argv = ["backtest", "--prometheus", f"http://127.0.0.1:{prometheus.port}", "--start", str(start), "--end", str(end)]
            argv += ["--format", "json", "--parallel", str(args.parallel)]
            before = time.monotonic()
            # its own process, so its peak memory is its own
            run = subprocess.run([sys.executable, "-c", MEASURED, *argv], capture_output=True, text=True, check=False)
            took = time.monotonic() - before
            code = run.returncode
            if code != 0:
                raise SystemExit(f"backtest exited {code}: {run.stderr.strip()[-2000:]}")
            report = json.loads(run.stdout)
            peak_mib = int(run.stderr.strip().splitlines()[-1]) / 1024
            status = Path(f"/proc/{prometheus.process.pid}/status").read_text()
            prometheus_peak = next((line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")), "?")
        finally:
            prometheus.stop()
    ours = report["rule_sets"][0]
    print(f"{args.nodes} nodes, {args.days} days, {samples:,} samples: written in {written - began:.0f} s, backfilled in {loaded - written:.0f} s")
    print(f"backtest: {took:.1f} s, {report['requests']} requests, peak memory {peak_mib:.0f} MiB (Prometheus {int(prometheus_peak) // 1024} MiB)")
    print(f"pages {ours['pages']}, warnings {ours['warnings']}, notifications {ours['notifications']}, not evaluable {len(ours['not_evaluable'])}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
