"""Instructions one /scrape of an idle node costs, counted by valgrind's callgrind, for one or more checkouts: on a
shared, noisy machine a count of instructions tells a few per cent apart where CPU time cannot.

    python bench/instructions_bench.py --tree /path/to/checkout [--tree /path/to/another] [--rounds 30] [--targets 20]

``--targets`` empty redis-servers stand idle (nothing but the exporter reaches them). Each tree runs in process
(``PYTHONPATH=<tree>``, the app answering requests without its HTTP front end) under callgrind twice: 5 warm-up rounds,
then ``--rounds`` rounds, then twice as many, each round one ``/scrape?target=`` of every server in OpenMetrics, as
Prometheus 3 asks. The difference of the two counts over the rounds added is a /scrape's instructions without the
start-up. Prints each tree's count and its ratio to the first tree's. Needs valgrind (``apt-get install valgrind``);
about two minutes a tree at the defaults.
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

from scrape_bench import start_redis

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


def instructions(tree: Path, rounds: int, ports: list[int]) -> int:
    """callgrind's count of the instructions of ``rounds`` rounds after the warm-up, start-up included."""
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", CHILD, str(rounds), ",".join(map(str, ports))],
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, action="append", required=True, help="a checkout of the exporter (repeat to compare)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--targets", type=int, default=20)
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    workdir = Path(tempfile.mkdtemp(prefix="ecx-instructions-"))
    servers = [start_redis(workdir) for _ in range(args.targets)]
    try:
        ports = [port for _, port in servers]
        counts = []
        for given in args.tree:
            tree = given.resolve()
            short, long = instructions(tree, args.rounds, ports), instructions(tree, 2 * args.rounds, ports)
            counts.append((long - short) / (args.rounds * args.targets))
            print(f"{tree}: {counts[-1]:,.0f} instructions a /scrape, {counts[-1] / counts[0]:.3f}x the first", flush=True)
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
