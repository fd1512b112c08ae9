"""Scrape cost with 0, 100 and 10,000 watched keys (lists, found by one --check-keys pattern) on one real redis-server.

    python bench/key_probes_bench.py [--scrapes 30]

Prints, per key count, the median wall time of a /metrics scrape (in-process app, no HTTP) and the server's own CPU
per scrape (INFO used_cpu_sys + used_cpu_user), as medians over the scrapes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers import call, make_app  # noqa: E402
from servers import start_redis  # noqa: E402


def server_cpu(client) -> float:
    info = client.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=30)
    args = parser.parse_args()
    server = start_redis()
    client = server.client()
    try:
        pipe = client.pipeline(transaction=False)
        for i in range(10_000):
            pipe.rpush(f"watched:{i:05d}", "a", "b", "c")
        for i in range(20_000):
            pipe.set(f"other:{i}", "x")
        pipe.execute()
        for count, pattern in ((0, None), (100, "watched:000*"), (10_000, "watched:*")):
            keys = {"check_keys": pattern, "max_keys": 10_000} if pattern else {}
            app = make_app({"redis": {"addr": server.addr}, "keys": keys, "scrape": {"timeout": "20s"}})
            try:
                call(app, "/metrics")  # connect and probe once
                walls, cpus = [], []
                for _ in range(args.scrapes):
                    cpu_before, started = server_cpu(client), time.perf_counter()
                    text = call(app, "/metrics").text
                    walls.append(time.perf_counter() - started)
                    cpus.append(server_cpu(client) - cpu_before)
                served = text.count("redis_key_size{")
            finally:
                app.close()
            print(
                f"{count:>6} watched keys ({served} served): scrape wall {statistics.median(walls) * 1e3:8.2f} ms, "
                f"server CPU {statistics.median(cpus) * 1e3:7.2f} ms  (median of {args.scrapes})"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
