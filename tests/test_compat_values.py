"""Values side by side with redis_exporter: the replies real servers gave (a seeded primary, its replica, a cluster
node; on Redis 7.0, Valkey 8.1 and Redis 8.2) and two Redis 2.6 INFO captures are replayed to this exporter, and every
redis_* sample redis_exporter served for the same replies (tests/data/upstream_values, written by
bench/redis_exporter_values.py from a real redis_exporter) must be served here with the same name, labels and value."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fake_resp import FakeRespServer
from helpers import call, exact_samples, make_app

from exporter.redis.compat import UPSTREAM_DIFFERENCES
from exporter.redis.latency import SCRAPE_READS

DATA = Path(__file__).parent / "data" / "upstream_values"
HISTOGRAM = "redis_commands_latencies_usec"
ENGINE_SUFFIXES = ["", "_valkey_7_2", "_valkey_8_0", "_valkey_8_1", "_redis_8_2"]  # 7.2 and 8.0: built from source, replayed only
SERVERS = [f"{role}{suffix}" for suffix in ENGINE_SUFFIXES for role in ("primary", "replica", "cluster_node")]
SERVERS += ["redis_2_6_primary", "redis_2_6_replica"]


def replay(name: str) -> FakeRespServer:
    entries = json.loads((DATA / f"{name}.json").read_text())
    replies = {tuple(entry["command"]): entry["reply"].encode("latin-1") for entry in entries}
    every_histogram = replies.get(("LATENCY", "HISTOGRAM"))
    # COMMAND INFO answers one entry per name asked, in the order asked: the recorded entries, by name
    documented = {
        entry[0].decode().lower(): entry
        for command, reply in replies.items()
        if command[:2] == ("COMMAND", "INFO")
        for entry in parse_resp(reply)[0]
        if entry is not None
    }

    def histograms_of_some(command: tuple[str, ...]) -> bytes | None:
        """LATENCY HISTOGRAM <commands>: what the server answered redis_exporter's LATENCY HISTOGRAM (all of them)
        at the same moment, kept to the commands asked for, as the server would answer. COMMAND INFO <names>: the
        recorded entries of those names, nil for a name the server did not know."""
        if [part.upper() for part in command[:2]] == ["COMMAND", "INFO"]:
            return encode_resp([documented.get(name.lower()) for name in command[2:]])
        if every_histogram is None or [part.upper() for part in command[:2]] != ["LATENCY", "HISTOGRAM"] or len(command) == 2:
            return None
        flat, _ = parse_resp(every_histogram)
        wanted = {part.lower() for part in command[2:]}
        kept = [item for i in range(0, len(flat), 2) if flat[i].decode().lower() in wanted for item in flat[i : i + 2]]
        return encode_resp(kept)

    return FakeRespServer(replies, answer=histograms_of_some)


def parse_resp(data: bytes, at: int = 0):
    """One RESP2 value from ``data`` at ``at``: (value, the offset after it)."""
    end = data.index(b"\r\n", at)
    kind, head = data[at : at + 1], data[at + 1 : end]
    if kind == b":":
        return int(head), end + 2
    if kind == b"$":
        length = int(head)
        if length < 0:
            return None, end + 2
        return data[end + 2 : end + 2 + length], end + 4 + length
    if kind == b"*":
        items, at = [], end + 2
        for _ in range(int(head)):
            item, at = parse_resp(data, at)
            items.append(item)
        return items, at
    return head, end + 2


def encode_resp(value) -> bytes:
    if value is None:
        return b"$-1\r\n"
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, bytes):
        return b"$%d\r\n%s\r\n" % (len(value), value)
    return b"*%d\r\n" % len(value) + b"".join(encode_resp(item) for item in value)


def upstream_samples(name: str) -> dict[tuple[str, tuple], float]:
    return exact_samples((DATA / f"{name}.prom").read_text())


def same(key: tuple[str, tuple], theirs: float, ours: float, server: str) -> bool:
    name, labels = key
    if name == "redis_start_time_seconds":
        # redis_exporter: its clock at the scrape minus the uptime (recorded then); here the server's clock where INFO
        # has server_time_usec (Redis 5 and later), else ours at the reply as there (the replay is later)
        return server.startswith("redis_2_6") or abs(theirs - ours) < 2
    if name == f"{HISTOGRAM}_sum" and "-" in dict(labels)["cmd"] and theirs == 0:
        return True  # redis_exporter's commandstats pattern stops at "-" (cluster|set-config-epoch): its sum is 0
    return theirs == ours or (math.isnan(theirs) and math.isnan(ours)) or math.isclose(theirs, ours, rel_tol=1e-12)


@pytest.mark.parametrize("server", SERVERS)
def test_every_redis_exporter_sample_is_served_alike(server):
    theirs = upstream_samples(server)
    node = replay(server)
    app = make_app({"targets": [{"name": "node", "addr": node.addr}], "heartbeat": {"read": True}})
    try:
        call(app, "/scrape", "target=node")  # the first scrape learns the most called commands
        ours = exact_samples(call(app, "/scrape", "target=node").text)
    finally:
        app.close()
        node.close()
    assert ours[("redis_up", ())] == 1
    # latency histograms: this exporter asks for the most called commands of commandstats only (at most 32)
    histogram_commands = {dict(labels)["cmd"] for name, labels in ours if name == f"{HISTOGRAM}_count"}
    compared, missing, different = 0, [], []
    for key, value in sorted(theirs.items()):
        name = key[0]
        family = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        if name.startswith("redis_exporter_") or name in UPSTREAM_DIFFERENCES or family in UPSTREAM_DIFFERENCES:
            continue
        if family == HISTOGRAM and dict(key[1])["cmd"] not in histogram_commands:
            continue
        if key not in ours:
            missing.append(key)
        elif not same(key, value, ours[key], server):
            different.append((key, value, ours[key]))
        else:
            compared += 1
    assert not missing, f"{server}: redis_exporter serves these, this exporter does not: {missing}"
    assert not different, f"{server}: (sample, redis_exporter's value, ours) {different}"
    assert compared >= 0.8 * len(theirs), f"{server}: only {compared} of {len(theirs)} samples compared"
    # every histogram of theirs but those of the scrape's own reads (INFO, SLOWLOG, LATENCY, ...), which measure the
    # exporter and are not asked for
    their_commands = {dict(labels)["cmd"] for name, labels in theirs if name == f"{HISTOGRAM}_count"}
    assert their_commands - SCRAPE_READS == histogram_commands, f"{server}: histograms of {histogram_commands} only"
    if their_commands:
        assert len(histogram_commands) >= 2
