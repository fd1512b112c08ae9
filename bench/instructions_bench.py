"""Instructions a request costs, counted by valgrind's callgrind, for one or more checkouts: on a shared, noisy machine a
count of instructions tells a few per cent apart where CPU time cannot.

    python bench/instructions_bench.py --tree /path/to/checkout [--tree /path/to/another] [--rounds 30] [--targets 20]
    python bench/instructions_bench.py --tree /path/to/checkout --formats [--rounds 20]

Each tree runs in process (``PYTHONPATH=<tree>``, the app answering requests without its HTTP front end) under
callgrind twice: a warm-up, then ``--rounds`` rounds, then twice as many; the difference of the two counts over the
rounds added is a round's instructions without the start-up.

- By default ``--targets`` empty redis-servers stand idle (nothing but the exporter reaches them), and a round is one
  ``/scrape?target=`` of every server in OpenMetrics, as Prometheus 3 asks: prints each tree's instructions a /scrape
  and its ratio to the first tree's.
- ``--formats``: one redis-server with scrape_bench.py's data set, and traffic.py's pipeline before every scrape (sent
  from the same process, with the same seed in every run, and counted alone to be taken off); a round is one
  ``/metrics`` in text 0.0.4, OpenMetrics or protobuf with native histograms (what formats_bench.py times): prints each
  format's instructions a scrape and its ratio to text's, for each tree.

Needs valgrind (``apt-get install valgrind``); about two minutes a tree and format at the defaults.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from formats_bench import FORMATS
from scrape_bench import load_data_set, start_redis

WARMUP = 5
CHILD = """
import sys
from exporter.config import build_config
from exporter.service.http_request import Request
from exporter.service.server import ExporterApp

rounds, ports = int(sys.argv[1]), sys.argv[2].split(",")
app = ExporterApp(build_config({"targets": [{"name": f"t{i}", "addr": f"redis://127.0.0.1:{port}"} for i, port in enumerate(ports)]}))
headers = {"accept": "application/openmetrics-text;version=1.0.0"}
for _ in range(WARMUP + rounds):
    for i in range(len(ports)):
        status, _, _ = app.handle(Request("GET", f"/scrape?target=t{i}", "HTTP/1.1", headers))
        assert status == 200, status
app.close()
""".replace("WARMUP", str(WARMUP))


FORMATS_CHILD = """
import sys
sys.path.insert(0, BENCH)
from traffic import Traffic
from exporter.config import build_config
from exporter.service.http_request import Request
from exporter.service.server import ExporterApp

rounds, port, accept = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
app = ExporterApp(build_config({"redis": {"addr": f"redis://127.0.0.1:{port}"}}))
traffic = Traffic(port)
for _ in range(10 + rounds):
    traffic.send()
    if accept:
        status, _, _ = app.handle(Request("GET", "/metrics", "HTTP/1.1", {"accept": accept}))
        assert status == 200, status
app.close()
""".replace("BENCH", repr(str(Path(__file__).resolve().parent)))
TRAFFIC_ONLY = ""


def instructions(tree: Path, rounds: int, child_args: list[str], child: str = CHILD) -> int:
    """callgrind's count of the instructions of ``rounds`` rounds after the warm-up, start-up included."""
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", child, str(rounds), *child_args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=tree,
        check=False,
    )
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"{tree}: the run under callgrind failed: {run.stderr.strip()[-500:]}")
    return int(found.group(1))


def per_round(tree: Path, rounds: int, child_args: list[str], child: str = CHILD) -> float:
    return (instructions(tree, 2 * rounds, child_args, child) - instructions(tree, rounds, child_args, child)) / rounds


def idle_scrapes(trees: list[Path], rounds: int, targets: int, workdir: Path) -> None:
    servers = [start_redis(workdir) for _ in range(targets)]
    try:
        ports = ",".join(str(port) for _, port in servers)
        counts = []
        for tree in trees:
            counts.append(per_round(tree, rounds, [ports]) / targets)
            print(f"{tree}: {counts[-1]:,.0f} instructions a /scrape, {counts[-1] / counts[0]:.3f}x the first", flush=True)
    finally:
        stop(servers)


def formats(trees: list[Path], rounds: int, workdir: Path) -> None:
    server = start_redis(workdir)
    try:
        load_data_set(server[1])
        port = str(server[1])
        for tree in trees:
            traffic = per_round(tree, rounds, [port, TRAFFIC_ONLY], FORMATS_CHILD)
            counts = {name: per_round(tree, rounds, [port, accept], FORMATS_CHILD) - traffic for name, accept in FORMATS.items()}
            text = counts["text 0.0.4"]
            for name, count in counts.items():
                print(f"{tree}: {name:17} {count:,.0f} instructions a scrape, {count / text:.3f}x text", flush=True)
    finally:
        stop([server])


def stop(servers: list[tuple[subprocess.Popen, int]]) -> None:
    for process, _ in servers:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, action="append", required=True, help="a checkout of the exporter (repeat to compare)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of the shorter run (30 idle, 20 with --formats)")
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--formats", action="store_true", help="a busy node's /metrics in each format")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    workdir = Path(tempfile.mkdtemp(prefix="ecx-instructions-"))
    trees = [tree.resolve() for tree in args.tree]
    try:
        if args.formats:
            formats(trees, args.rounds or 20, workdir)
        else:
            idle_scrapes(trees, args.rounds or 30, args.targets, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
