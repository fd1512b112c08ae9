"""Memory over a long run under a target that restarts: RSS every 1,000 scrapes and the growth after the warm-up.

    python bench/soak_bench.py [--scrapes 8000] [--clients 5] [--python /tmp/ecx/bin/python]

Three redis-servers on loopback: one stable, one killed and restarted on the same port every 2 s (each start gives it a
new run_id, process id and replication id), one stopped with SIGSTOP for the whole run. The exporter scrapes the three
through /metrics with a 200 ms scrape timeout; ``--clients`` threads scrape it at once until ``--scrapes`` answers are
in. Prints RSS after the 200-scrape warm-up and at every 1,000 scrapes, and the growth from scrape 1,000 to the end.
"""

from __future__ import annotations

import argparse
import http.client
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


def restart_loop(workdir: Path, port: int, stop: threading.Event) -> None:
    """Kills the redis-server on ``port`` and starts a new one there, every RESTART_SECONDS."""
    process = None
    directory = workdir / "restarting"
    directory.mkdir()
    while not stop.is_set():
        process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                    "--dir", str(directory)], stdout=subprocess.DEVNULL)  # fmt: skip
        stop.wait(RESTART_SECONDS)
        process.kill()
        process.wait(timeout=10)


def soak(python: str, scrapes: int, clients: int, report_every: int = 1000, warmup: int = 200) -> list[tuple[int, float]]:
    """[(scrapes answered, RSS MiB)]: after the warm-up, then every ``report_every``."""
    workdir = Path(tempfile.mkdtemp(prefix="ecx-soak-"))
    stop = threading.Event()
    stable, stable_port = start_redis(workdir)
    stopped, stopped_port = start_redis(workdir)
    restarting_port = free_port()
    restarter = threading.Thread(target=restart_loop, args=(workdir, restarting_port, stop), daemon=True)
    restarter.start()
    stopped.send_signal(signal.SIGSTOP)
    config = workdir / "targets.yml"
    config.write_text("scrape:\n  timeout: 200ms\ntargets:\n" + "".join(
        f"  - name: {name}\n    addr: redis://127.0.0.1:{port}\n"
        for name, port in (("stable", stable_port), ("restarting", restarting_port), ("stopped", stopped_port))))  # fmt: skip
    port = free_port()
    exporter = subprocess.Popen([python, "-m", "exporter", "serve", "--config.file", str(config), "--web.listen-address", f"127.0.0.1:{port}",
                                 "--log.level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    done = 0
    lock = threading.Lock()
    readings: list[tuple[int, float]] = []
    marks = [warmup, *range(report_every, scrapes + 1, report_every)]

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
                    print(f"{readings[-1][0]:6d} scrapes: RSS {readings[-1][1]:.1f} MiB", flush=True)

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
    args = parser.parse_args()
    if not shutil.which("redis-server"):
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    started = time.monotonic()
    readings = dict(soak(args.python, args.scrapes, args.clients))
    base = readings.get(1000) or readings[min(readings)]
    end = readings[max(readings)]
    print(f"\n{args.scrapes} scrapes in {time.monotonic() - started:.0f} s; RSS {base:.1f} MiB at 1,000 -> {end:.1f} MiB at the end: "
          f"{(end / base - 1) * 100:+.1f} %")


if __name__ == "__main__":
    main()
