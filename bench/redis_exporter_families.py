"""Record the metric families redis_exporter serves by default, with their types and label names, as test data.

    python bench/redis_exporter_families.py --redis-exporter /path/to/redis_exporter [--out tests/data/redis_exporter_families.tsv]

Runs the real redis_exporter (multi-target mode, default flags) against real servers started here: a primary with
keys in two databases, a slow command in its slowlog and a latency event, its replica, a node of a 3-master
cluster, and a primary on each other engine the tests run (Valkey 8.1, Redis 8.2; see tests/servers.py); writes
one line per family: name, TYPE, label names (instance and job excluded: Prometheus adds them).
With --values it also prints, for the families both exporters serve, the samples whose values differ by more than
the drift between two scrapes allows, to compare values side by side.
"""

from __future__ import annotations

import argparse
import http.client
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import servers  # noqa: E402
from helpers import exact_samples, exposition_types  # noqa: E402
from servers import ENGINES, WATCHED_KEYS, free_port, seed_reference_primary, seed_watched_keys, start_exporter, start_redis, wait_until  # noqa: E402


def get(port: int, path: str) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path)
    return connection.getresponse().read().decode()


def families(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """{family: (TYPE, label names)} exactly as served (prometheus_client's parser would append _total to the samples
    of a counter named without it, such as redis_total_error_replies)."""
    types = exposition_types(text)
    labels: dict[str, set[str]] = {name: set() for name in types}
    for (name, pairs), _ in exact_samples(text).items():
        family = name if name in types else next((f for f in types if name in (f + "_bucket", f + "_sum", f + "_count")), name)
        labels.setdefault(family, set()).update(key for key, _ in pairs)
    return {name: (types.get(name, "untyped"), frozenset(found - {"instance", "job", "quantile", "le"})) for name, found in labels.items()}


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return exact_samples(text)


def start_cluster(engine: str = "redis-7.0"):
    """Three primaries, no replica: the cluster both exporters read."""
    return servers.start_cluster(engine, node_timeout_ms=2000, replicas=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-exporter", required=True)
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "redis_exporter_families.tsv"))
    parser.add_argument(
        "--keys-out",
        default=str(ROOT / "tests" / "data" / "redis_exporter_key_families.tsv"),
        help="where the families its key and stream flags add are written (tests' WATCHED_KEYS)",
    )
    parser.add_argument("--values", action="store_true", help="also compare values of shared families with this exporter")
    parser.add_argument(
        "--source",
        help="redis_exporter's source tree: also list the INFO fields its maps name (metricMapGauges,"
        " metricMapCounters) that the servers here did not show (AOF rewrites, syncs in progress, ...)",
    )
    args = parser.parse_args()
    primary = start_redis()
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    cluster = start_cluster()
    engines = [start_redis(engine=engine) for engine, binary in sorted(ENGINES.items()) if binary and engine != "redis-7.0"]
    servers = [primary, replica, *cluster, *engines]
    for server in (primary, *engines):
        seed_reference_primary(server.client())
    wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link up")
    port = free_port()
    upstream = subprocess.Popen(
        [args.redis_exporter, "--web.listen-address", f"127.0.0.1:{port}", "--redis.addr", ""], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    allow = Path(tempfile.mkdtemp()) / "allow.yml"
    allow.write_text("scrape:\n  allow:\n    - hosts: ['127.0.0.1']\n")
    ours = start_exporter("--redis.addr", "", "--config.file", str(allow))
    try:
        wait_until(lambda: _answers(port), timeout=20, what="redis_exporter answering")
        found: dict[str, tuple[str, set[str]]] = {}
        for server in servers:
            for name, (kind, labels) in families(get(port, f"/scrape?target={server.addr}")).items():
                found.setdefault(name, (kind, set()))[1].update(labels)
            if args.values:
                _compare(get(port, f"/scrape?target={server.addr}"), ours.get(f"/scrape?target={server.addr}")[1], server.addr)
        if args.source:
            for name, kind in mapped_families(Path(args.source)).items():
                found.setdefault(name, (kind, set()))
        write_families(found, Path(args.out))
        write_families(key_families(args.redis_exporter, primary), Path(args.keys_out))
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)
        ours.stop()
        for server in servers:
            server.stop()


def write_families(found: dict[str, tuple[str, set[str]]], out: Path) -> None:
    lines = ["# name\ttype\tlabels (written by bench/redis_exporter_families.py from a real redis_exporter)"]
    lines += [f"{name}\t{kind}\t{','.join(sorted(labels))}" for name, (kind, labels) in sorted(found.items())]
    out.write_text("\n".join(lines) + "\n")
    print(f"{len(found)} families written to {out}")


def key_families(binary: str, primary) -> dict[str, tuple[str, set[str]]]:
    """The families redis_exporter adds for tests' WATCHED_KEYS (its own flags, the same values) on the primary."""
    seed_watched_keys(primary.client())
    port = free_port()
    flags = [f"--{option.replace('_', '-')}={value}" for option, value in WATCHED_KEYS.items()]
    upstream = subprocess.Popen(
        [binary, "--web.listen-address", f"127.0.0.1:{port}", "--redis.addr", primary.addr, *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _answers(port), timeout=20, what="redis_exporter answering")
        served = families(get(port, "/metrics"))
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)
    return {name: (kind, set(labels)) for name, (kind, labels) in served.items() if name.startswith(("redis_key_", "redis_keys_", "redis_stream"))}


def mapped_families(source: Path) -> dict[str, str]:
    """redis_<name> for every "field": "name" entry of the gauge and counter maps in exporter/exporter.go."""
    text = (source / "exporter" / "exporter.go").read_text()
    families: dict[str, str] = {}
    for block, kind in (("metricMapGauges: map[string]string{", "gauge"), ("metricMapCounters: map[string]string{", "counter")):
        body = text.split(block, 1)[1].split("\n\t\t},", 1)[0]
        for match in re.finditer(r'^\s*"[^"]+":\s*"([a-z0-9_]+)"', body, re.M):
            families["redis_" + match.group(1)] = kind
    return families


def _answers(port: int) -> bool:
    try:
        return "redis_exporter_build_info" in get(port, "/metrics")
    except OSError:
        return False


def _compare(theirs_text: str, ours_text: str, where: str) -> None:
    theirs = samples(theirs_text)
    ours = {(name, tuple(item for item in labels if item[0] != "instance")): value for (name, labels), value in samples(ours_text).items()}
    for key, value in sorted(theirs.items()):
        if key in ours and abs(ours[key] - value) > max(1.0, abs(value) * 0.05) and not key[0].startswith(("redis_exporter", "go_", "process_")):
            print(f"{where}: {key[0]}{dict(key[1])}: redis_exporter {value}, ours {ours[key]}")
    time.sleep(0)


if __name__ == "__main__":
    main()
