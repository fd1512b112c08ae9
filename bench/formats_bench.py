"""The cost of each exposition format for the same node: CPU and bytes of a /metrics in text 0.0.4, OpenMetrics (what
Prometheus asks for by default) and protobuf with native histograms (what Prometheus 3 asks for with
``scrape_native_histograms: true``), in one run, one exporter.

    python bench/formats_bench.py [--passes 5] [--scrapes 100] [--gzip]

One redis-server with the data set of scrape_bench.py; production-like traffic (``traffic.py``) reaches it before
every scrape, so its commandstats and latency histograms move between scrapes as they do in production. Per pass,
``--scrapes`` rounds of one scrape in each format, the formats in turn (each scrape a fresh read of the node, over one
kept-alive connection per format). CPU is the exporter's, over all its threads (``/proc/PID/task/*/schedstat``), per
scrape. Prints the medians over the passes: CPU per scrape, bytes, the CPU per sample served (every format carries the
same samples: protobuf a histogram's buckets, sum and count in one message), the series Prometheus stores (for
protobuf, what a Prometheus that keeps only the native histograms stores) and the CPU per stored series, with each
format's ratio to text. With ``--gzip`` every request also sends ``Accept-Encoding: gzip``, as Prometheus does unless
a scrape config turns ``enable_compression`` off: each answer is compressed (bytes are then the compressed sizes).
With ``--exporter-per-format`` each format is asked of an exporter of its own, all of the same node: a Prometheus asks
in one format, and a target keeps one render memo a way of rendering (text and OpenMetrics share one), so from one
exporter protobuf's memo is three traffic pipelines old at each of its scrapes where the text formats' is one.
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from ab_bench import cpu_seconds
from scrape_bench import load_data_set, start_exporter, start_redis
from traffic import Traffic

PROMETHEUS_3 = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)
PROMETHEUS_3_NATIVE = (
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,"
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
)
FORMATS = {"text 0.0.4": "text/plain;version=0.0.4", "OpenMetrics": PROMETHEUS_3, "protobuf, native": PROMETHEUS_3_NATIVE}
LATENCY = "redis_commands_latencies_usec"


def fetch(connection: http.client.HTTPConnection, accept: str, gzip: bool = False) -> bytes:
    connection.request("GET", "/metrics", headers={"Accept": accept, **({"Accept-Encoding": "gzip"} if gzip else {})})
    response = connection.getresponse()
    body = response.read()
    assert response.status == 200, response.status
    assert (response.getheader("Content-Encoding") == "gzip") == gzip, response.getheader("Content-Encoding")
    return body


def text_series(body: bytes) -> tuple[int, int]:
    """Samples, and those of the latency family."""
    lines = [line for line in body.decode().splitlines() if line and not line.startswith("#")]
    return len(lines), sum(1 for line in lines if line.startswith(LATENCY))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--scrapes", type=int, default=100)
    parser.add_argument("--gzip", action="store_true", help="ask for gzip, as Prometheus does by default")
    parser.add_argument(
        "--exporter-per-format", action="store_true", help="each format from an exporter of its own, as each Prometheus asks in one format"
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ecx-formats-"))
    server, port = start_redis(workdir)
    started: list[tuple[subprocess.Popen, int]] = []
    try:
        load_data_set(port)
        traffic = Traffic(port)
        exporters = {}
        for name in FORMATS:
            if args.exporter_per_format or not started:
                started.append(start_exporter(["--redis.addr", f"redis://127.0.0.1:{port}"]))
            exporters[name] = started[-1]
        connections = {name: http.client.HTTPConnection("127.0.0.1", exporters[name][1], timeout=10) for name in FORMATS}
        for _ in range(10):  # warm-up: connections, CONFIG, the histograms' command list
            traffic.send()
            for name, accept in FORMATS.items():
                fetch(connections[name], accept)
        figures: dict[str, dict[str, list[float]]] = {name: {} for name in FORMATS}
        for _ in range(args.passes):
            cpu = dict.fromkeys(FORMATS, 0.0)
            sizes: dict[str, list[int]] = {name: [] for name in FORMATS}
            for _ in range(args.scrapes):
                for name, accept in FORMATS.items():
                    traffic.send()
                    pid = exporters[name][0].pid
                    before = cpu_seconds(pid)
                    sizes[name].append(len(fetch(connections[name], accept, args.gzip)))
                    cpu[name] += cpu_seconds(pid) - before
            for name in FORMATS:
                figures[name].setdefault("cpu_ms", []).append(cpu[name] / args.scrapes * 1e3)
                figures[name].setdefault("bytes", []).append(statistics.median(sizes[name]))
        text = fetch(connections["text 0.0.4"], FORMATS["text 0.0.4"])
        samples, latency = text_series(text)
        commands = sum(1 for line in text.decode().splitlines() if line.startswith(LATENCY + "_count"))
        stored = {"text 0.0.4": samples, "OpenMetrics": samples, "protobuf, native": samples - latency + commands}
        text_cpu = statistics.median(figures["text 0.0.4"]["cpu_ms"])
        compressed = ", gzip" if args.gzip else ""
        histograms = f"{latency} of {commands} latency histograms"
        print(f"{args.passes} passes of {args.scrapes} scrapes a format{compressed}; medians; {samples} samples, {histograms}")
        for name in FORMATS:
            cpu_ms = statistics.median(figures[name]["cpu_ms"])
            size = statistics.median(figures[name]["bytes"])
            print(
                f"{name:18} CPU {cpu_ms:6.3f} ms ({cpu_ms / text_cpu:4.2f}x)  bytes {size:8.0f}  "
                f"CPU per sample served {cpu_ms / samples * 1e3:5.2f} us ({cpu_ms / text_cpu:4.2f}x)  series stored {stored[name]:5d}  "
                f"CPU per stored series {cpu_ms / stored[name] * 1e3:5.2f} us ({cpu_ms / stored[name] / (text_cpu / samples):4.2f}x)"
            )
    finally:
        for exporter, _ in started:
            exporter.terminate()
            exporter.wait(timeout=20)
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
