"""Where a target's memory goes: the exporter's Python heap by source line at 1 and at N configured targets.

    python bench/target_memory_bench.py [--targets 1000] [--servers 10] [--scrapes 3] [--top 15]

Starts --servers empty redis-servers on loopback and an exporter app in process (tests/helpers.py make_app) with
--targets configured targets spread over them (each target keeps its own connection, replies and render state, as one
per node would), scrapes /metrics --scrapes times, then takes a tracemalloc snapshot. The same with one target. Prints
the heap per target (the difference over the targets added) and the source lines that hold most of it, per target.
tracemalloc counts Python allocations only (not the interpreter's fixed overhead nor C libraries' own buffers), so the
process RSS per target (bench/many_targets_bench.py) is larger.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from helpers import call, make_app
from servers import start_redis


def heap_after_scrapes(addresses: list[str], targets: int, scrapes: int) -> tracemalloc.Snapshot:
    """The heap of an app with ``targets`` targets over ``addresses``, after ``scrapes`` scrapes of /metrics."""
    gc.collect()
    tracemalloc.start(1)
    listed = [{"name": f"t{i:04d}", "addr": addresses[i % len(addresses)]} for i in range(targets)]
    app = make_app({"targets": listed, "scrape": {"timeout": "120s"}})  # tracemalloc slows every scrape
    try:
        for _ in range(scrapes):
            code = call(app, "/metrics").code  # the body is let go: what the app keeps is measured, not the reply
            assert code == 200, code
        gc.collect()
        return tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--scrapes", type=int, default=3)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    servers = [start_redis() for _ in range(args.servers)]
    try:
        addresses = [server.addr for server in servers]
        one = heap_after_scrapes(addresses, 1, args.scrapes)
        many = heap_after_scrapes(addresses, args.targets, args.scrapes)
    finally:
        for server in servers:
            server.stop()
    added = args.targets - 1
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    one, many = one.filter_traces(ignore), many.filter_traces(ignore)
    total = sum(stat.size for stat in many.statistics("filename")) - sum(stat.size for stat in one.statistics("filename"))
    print(f"Python heap per target, {args.targets} targets over {args.servers} servers, after {args.scrapes} scrapes: {total / added / 1024:.1f} KiB")
    print(f"{'KiB/target':>10} {'blocks/target':>13}  where")
    for stat in many.compare_to(one, "lineno")[: args.top]:
        frame = stat.traceback[0]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        print(f"{stat.size_diff / added / 1024:>10.2f} {stat.count_diff / added:>13.1f}  {where}")
    print(f"{'KiB/target':>10}  file")
    for stat in many.compare_to(one, "filename")[: args.top]:
        print(f"{stat.size_diff / added / 1024:>10.2f}  {Path(stat.traceback[0].filename).name}")


if __name__ == "__main__":
    main()
