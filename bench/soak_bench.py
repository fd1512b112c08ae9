"""Memory over a long run under a target that restarts: RSS every 1,000 scrapes and the growth after the warm-up.

    python bench/soak_bench.py [--scrapes 8000] [--clients 5] [--python /tmp/ecx/bin/python] [--tracemalloc DIR] [--image-env]

Three redis-servers on loopback: one stable, one killed and restarted on the same port every 2 s (each start gives it a
new run_id, process id and replication id), one stopped with SIGSTOP for the whole run. The exporter scrapes the three
through /metrics with a 200 ms scrape timeout; ``--clients`` threads scrape it at once until ``--scrapes`` answers are
in. Prints RSS after the 200-scrape warm-up and at every 1,000 scrapes, and the growth from scrape 1,000 to the end.
With ``--image-env`` the exporter gets the malloc settings the container image sets (``MALLOC_ARENA_MAX=2
MALLOC_MMAP_THRESHOLD_=262144``, see the Dockerfile): without them each thread that starts late may get a malloc arena
of its own.

With ``--tracemalloc DIR`` the exporter runs under tracemalloc (slower, and its RSS includes the tracer's own tables) and
writes a snapshot to DIR at every mark; the bench then prints the allocation sites that grew most from scrape 1,000 to
the end, which tells a slow warm-up (sizes that level off) from a leak (sizes that keep growing).
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from footprint_bench import first_answer
from scrape_bench import free_port, rss_mib, start_redis

RESTART_SECONDS = 2.0
IMAGE_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "262144"}  # as the Dockerfile sets them
TRACED_START = """
import signal, sys, tracemalloc
tracemalloc.start(12)
marks = iter(sys.argv.pop(1).split(","))
signal.signal(signal.SIGUSR2, lambda *_: tracemalloc.take_snapshot().dump(next(marks)))
from exporter.cli.main import main
sys.exit(main())
"""


def restart_loop(workdir: Path, port: int, stop: threading.Event) -> None:
    """Kills the redis-server on ``port`` and starts a new one there, every RESTART_SECONDS."""
    process = None
    directory = workdir / "restarting"
    directory.mkdir()
    while not stop.is_set():
        process = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(directory)],
            stdout=subprocess.DEVNULL,
        )
        stop.wait(RESTART_SECONDS)
        process.kill()
        process.wait(timeout=10)


def thread_count(pid: int) -> int:
    """The process's threads now: a worker pool that grows shows here before it shows in RSS."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def soak(
    python: str, scrapes: int, clients: int, report_every: int = 1000, warmup: int = 200, traces: Path | None = None, image_env: bool = False
) -> list[tuple[int, float]]:
    """[(scrapes answered, RSS MiB)]: after the warm-up, then every ``report_every``; with ``traces``, a snapshot at each."""
    workdir = Path(tempfile.mkdtemp(prefix="ecx-soak-"))
    stop = threading.Event()
    stable, stable_port = start_redis(workdir)
    stopped, stopped_port = start_redis(workdir)
    restarting_port = free_port()
    restarter = threading.Thread(target=restart_loop, args=(workdir, restarting_port, stop), daemon=True)
    restarter.start()
    stopped.send_signal(signal.SIGSTOP)
    config = workdir / "targets.yml"
    config.write_text(
        "scrape:\n  timeout: 200ms\ntargets:\n"
        + "".join(
            f"  - name: {name}\n    addr: redis://127.0.0.1:{port}\n"
            for name, port in (("stable", stable_port), ("restarting", restarting_port), ("stopped", stopped_port))
        )
    )
    port = free_port()
    marks = [warmup, *range(report_every, scrapes + 1, report_every)]
    launcher = ["-m", "exporter"] if traces is None else ["-c", TRACED_START, ",".join(str(traces / f"{mark}.trace") for mark in marks)]
    environment = {**os.environ, **(IMAGE_ENV if image_env else {})}
    exporter = subprocess.Popen(
        [python, *launcher, "serve", "--config.file", str(config), "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment,
    )
    done = 0
    lock = threading.Lock()
    readings: list[tuple[int, float]] = []

    def client() -> None:
        nonlocal done
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while True:
            with lock:
                if done >= scrapes:
                    return
            connection.request("GET", "/metrics")
            connection.getresponse().read()
            with lock:
                done += 1
                if marks and done >= marks[0]:
                    readings.append((marks.pop(0), rss_mib(exporter.pid)))
                    if traces is not None:
                        exporter.send_signal(signal.SIGUSR2)
                    print(f"{readings[-1][0]:6d} scrapes: RSS {readings[-1][1]:.1f} MiB, {thread_count(exporter.pid)} threads", flush=True)

    try:
        first_answer(port)
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return readings
    finally:
        stop.set()
        exporter.terminate()
        exporter.wait(timeout=10)
        stopped.send_signal(signal.SIGCONT)
        for process in (stable, stopped):
            process.terminate()
            process.wait(timeout=10)
        restarter.join(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=8000)
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--python", default=sys.executable, help="interpreter with the exporter installed (a clean venv, as deployed)")
    parser.add_argument("--tracemalloc", type=Path, metavar="DIR", help="run the exporter under tracemalloc, a snapshot in DIR at each mark")
    parser.add_argument("--image-env", action="store_true", help="the container image's malloc settings")
    args = parser.parse_args()
    if not shutil.which("redis-server"):
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    started = time.monotonic()
    if args.tracemalloc:
        args.tracemalloc.mkdir(parents=True, exist_ok=True)
    readings = dict(soak(args.python, args.scrapes, args.clients, traces=args.tracemalloc, image_env=args.image_env))
    base = readings.get(1000) or readings[min(readings)]
    end = readings[max(readings)]
    print(
        f"\n{args.scrapes} scrapes in {time.monotonic() - started:.0f} s; RSS {base:.1f} MiB at 1,000 -> {end:.1f} MiB at the end: "
        f"{(end / base - 1) * 100:+.1f} %"
    )
    if args.tracemalloc:
        time.sleep(1.0)
        print_growth(args.tracemalloc, min(readings, key=lambda mark: abs(mark - 1000)), max(readings))


def print_growth(directory: Path, first: int, last: int, lines: int = 15) -> None:
    """The allocation sites whose traced size grew most between two snapshots, with their size at every mark."""
    import tracemalloc

    snapshots = {int(path.stem): tracemalloc.Snapshot.load(str(path)) for path in sorted(directory.glob("*.trace"))}
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap*>")]
    for mark, snapshot in snapshots.items():
        snapshots[mark] = snapshot.filter_traces(ignore)
        print(f"traced at {mark:6d}: {sum(stat.size for stat in snapshots[mark].statistics('filename')) / 1024:8.1f} KiB")
    growth = snapshots[last].compare_to(snapshots[first], "traceback")
    by_mark = {mark: {stat.traceback: stat.size for stat in snapshot.statistics("traceback")} for mark, snapshot in sorted(snapshots.items())}
    for stat in growth[:lines]:
        frame = next((frame for frame in reversed(stat.traceback) if "/exporter/" in frame.filename), stat.traceback[0])
        sizes = [f"{sites.get(stat.traceback, 0) / 1024:.1f}" for sites in by_mark.values()]
        print(f"{stat.size_diff / 1024:+8.1f} KiB {stat.count_diff:+6d} blocks  {frame.filename}:{frame.lineno}  KiB by mark: {' '.join(sizes)}")


if __name__ == "__main__":
    main()
