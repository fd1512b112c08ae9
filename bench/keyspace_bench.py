"""What the keyspace sampler costs the server: redis-server CPU per sample of a database, and as a share of one core
at the sampling interval.

    python bench/keyspace_bench.py [--keys 200000] [--sample 2000] [--runs 5] [--interval 300]

One redis-server with ``--keys`` keys in five prefixes; the profiler samples it ``--runs`` times (RANDOMKEY, TYPE,
PTTL, MEMORY USAGE SAMPLES 5 for ``--sample`` keys, pipelined). Prints the server's CPU per sample (median) and what
that is of one core when a sample runs every ``--interval`` seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis
from scrape_bench import cpu_seconds, start_redis

from exporter.config import build_config
from exporter.redis.keyspace import KeyspaceProfiler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--interval", type=float, default=300.0)
    args = parser.parse_args()
    server, port = start_redis(Path(tempfile.mkdtemp(prefix="ecx-keyspace-")))
    try:
        client = redis.Redis(port=port)
        pipe = client.pipeline(transaction=False)
        for i in range(args.keys):
            pipe.set(f"{('session:user', 'cache:page', 'queue:job', 'feature:flag', 'tmp:lock')[i % 5]}:{i}", "v" * 100, ex=3600 if i % 2 else None)
            if len(pipe) >= 10_000:
                pipe.execute()
        pipe.execute()
        config = build_config(
            {"targets": [{"name": "node", "addr": f"redis://127.0.0.1:{port}"}], "keyspace": {"enabled": True, "sample": args.sample}}, environ={}
        )
        profiler = KeyspaceProfiler(config.keyspace, list(config.targets), config.scrape_max_reply_bytes)
        profiler.visit_all()  # the connection and COMMAND INFO, outside the figures
        costs, walls = [], []
        for _ in range(args.runs):
            before, started = cpu_seconds(server.pid), time.perf_counter()
            profiler.visit_all()
            walls.append(time.perf_counter() - started)
            costs.append(cpu_seconds(server.pid) - before)
        profiler.stop()
        cost = statistics.median(costs)
        print(f"{args.keys:,} keys, {args.sample:,} sampled, {args.runs} runs (medians)")
        print(f"redis-server CPU per sample: {cost * 1e3:.1f} ms; wall per sample: {statistics.median(walls) * 1e3:.0f} ms")
        print(f"at one sample every {args.interval:.0f} s: {cost / args.interval * 100:.4f} % of one core")
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
