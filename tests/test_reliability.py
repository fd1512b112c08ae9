"""Reliability, bounded in count and time, loopback only: chaos, concurrency, a soak, hostile input.

Each test prints its figures (run with -s); docs/reliability.md records them.
"""

from __future__ import annotations

import http.client
import random
import statistics
import threading
import time
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fake_resp import FakeRespServer, bulk
from helpers import call, exact_samples, make_app, parse_samples, sample
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import free_port, start_exporter, start_redis, wait_until
from test_http import CountingListener

from exporter.common.exposition import TextFamilySet
from exporter.redis.node import RedisNode
from exporter.redis.pipeline import ScrapeResult
from exporter.service.collectors.redis import RedisCollector
from exporter.service.pool import ScrapePool


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def thread_count(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


class Client:
    """A kept-alive HTTP connection that reconnects when the server closes it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def get(self, path: str) -> tuple[int, str, float]:
        started = time.monotonic()
        for attempt in range(2):
            try:
                self.connection.request("GET", path)
                response = self.connection.getresponse()
                return response.status, response.read().decode(), time.monotonic() - started
            except (http.client.HTTPException, ConnectionError):
                self.connection.close()
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                if attempt:
                    raise
        raise AssertionError("unreachable")


def _chaos(victim, stop: threading.Event, transitions: list[str]) -> None:
    """Pause, resume, stop and start the victim in turn, every 0.4 s until ``stop``."""
    actions = ["pause", "resume", "stop", "start"]
    index = 0
    while not stop.wait(0.4):
        action = actions[index % 4]
        index += 1
        getattr(victim, action)()
        transitions.append(action)


def _comes_up(client, instance: str, within: float) -> bool:
    """Whether ``redis_up`` of ``instance`` reads 1 on a scrape within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if sample(parse_samples(client.get("/metrics")[1]), "redis_up", instance=instance) == 1:
            return True
        time.sleep(0.1)
    return False


def test_1000_scrapes_while_a_target_is_killed_restarted_hung_and_recovered(plain_redis, tmp_path):
    victim = start_redis()
    config = tmp_path / "config.yml"
    config.write_text(
        f"targets:\n  - name: stable\n    addr: {plain_redis.addr}\n  - name: victim\n    addr: {victim.addr}\n    timeout: 300ms\n"
        f"  - name: down\n    addr: redis://127.0.0.1:{free_port()}\n    timeout: 300ms\n"
    )
    exporter = start_exporter("--config.file", str(config))
    stop = threading.Event()
    transitions: list[str] = []
    chaos_thread = threading.Thread(target=_chaos, args=(victim, stop, transitions), daemon=True)
    client = Client(exporter.port)
    durations, victim_states = [], {0.0: 0, 1.0: 0}
    try:
        chaos_thread.start()
        deadline = time.monotonic() + 240
        for _ in range(1000):
            assert time.monotonic() < deadline, "the chaos run took too long"
            status, text, elapsed = client.get("/metrics")
            assert status == 200
            samples = parse_samples(text)
            assert sample(samples, "redis_up", instance="stable") == 1
            assert sample(samples, "redis_up", instance="down") == 0
            victim_states[sample(samples, "redis_up", instance="victim")] += 1
            durations.append(elapsed)
    finally:
        stop.set()
        chaos_thread.join(timeout=10)
        if victim.process is None:
            victim.start()
        else:
            victim.resume()
    try:
        assert _comes_up(client, "victim", within=5.0)
        assert victim_states[0.0] > 0
        assert victim_states[1.0] > 0
        assert max(durations) < 1.5, max(durations)  # one hung target never holds a scrape past its timeout
        errors = {
            k: v
            for k, v in parse_samples(client.get("/metrics")[1]).items()
            if k[0] == "elasticache_exporter_target_scrape_errors_total" and ("target", "victim") in k[1]
        }
        print(
            f"\nchaos: 1000 scrapes, {len(transitions)} transitions of the victim, victim up in {victim_states[1.0]}, "
            f"down in {victim_states[0.0]}; wall p50 {statistics.median(durations) * 1000:.1f} ms, "
            f"max {max(durations) * 1000:.0f} ms; errors {sorted((dict(k[1])['kind'], v) for k, v in errors.items())}"
        )
        assert exporter.stop() == 0
    finally:
        victim.stop()


def test_50_concurrent_metrics_clients(plain_redis):
    exporter = start_exporter("--redis.addr", plain_redis.addr)
    failures: list[str] = []
    durations: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        client = Client(exporter.port)
        for _ in range(10):
            try:
                status, text, elapsed = client.get("/metrics")
                assert status == 200
                assert sample(parse_samples(text), "redis_up", instance=f"127.0.0.1:{plain_redis.port}") == 1
                with lock:
                    durations.append(elapsed)
            except Exception as err:
                with lock:
                    failures.append(repr(err))

    try:
        threads = [threading.Thread(target=worker) for _ in range(50)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        wall = time.monotonic() - started
        assert failures == []
        assert len(durations) == 500
        print(
            f"\nconcurrency: 50 clients x 10 scrapes in {wall:.1f} s, p50 {statistics.median(durations) * 1000:.1f} ms, "
            f"max {max(durations) * 1000:.0f} ms"
        )
    finally:
        exporter.stop()


def test_soak_10000_scrapes_memory_stays_flat(plain_redis):
    exporter = start_exporter("--redis.addr", plain_redis.addr)
    client = Client(exporter.port)
    try:
        for _ in range(1000):
            assert client.get("/metrics")[0] == 200
        baseline, threads = rss_kib(exporter.process.pid), thread_count(exporter.process.pid)
        started = time.monotonic()
        for count in range(10_000):
            assert client.get("/metrics")[0] == 200
            assert count < 100 or time.monotonic() - started < 300, "the soak took too long"
        final = rss_kib(exporter.process.pid)
        growth = (final - baseline) / baseline
        print(
            f"\nsoak: 10000 scrapes in {time.monotonic() - started:.1f} s; RSS {baseline / 1024:.1f} → {final / 1024:.1f} MiB ({growth * 100:+.2f} %)"
        )
        assert growth < 0.05
        assert thread_count(exporter.process.pid) == threads  # one client asking in turn never needs a second thread
    finally:
        exporter.stop()


def test_random_resp_garbage_never_breaks_the_exporter():
    rng = random.Random(1234)
    replies = []
    for _ in range(60):
        kind = rng.randrange(4)
        if kind == 0:
            replies.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))))
        elif kind == 1:
            body = "".join(rng.choice("abc:#=,\r\n0123456789_ ") for _ in range(rng.randrange(0, 400)))
            replies.append(bulk(body))
        elif kind == 2:
            replies.append(b"*" + str(rng.randrange(-1, 5)).encode() + b"\r\n" + bulk("x") * rng.randrange(0, 5))
        else:
            replies.append(b"$" + str(rng.randrange(-1, 10**6)).encode() + b"\r\nshort\r\n")
    position = {"i": 0}

    def next_reply() -> bytes:
        position["i"] += 1
        return replies[position["i"] % len(replies)]

    server = FakeRespServer({("INFO", "ALL"): next_reply, ("INFO", "CLUSTER"): bulk("")}, default=b"*-1\r\n")
    app = make_app({"targets": [{"name": "garbage", "addr": server.addr, "timeout": "200ms"}], "heartbeat": {"read": False}})
    try:
        ups = 0
        for _ in range(len(replies)):
            response = call(app, "/metrics")
            assert response.code == 200
            ups += sample(response.samples(), "redis_up", instance="garbage") == 1
        print(f"\nmalformed RESP: {len(replies)} random replies, all answered 200; {ups} parsed as INFO")
    finally:
        app.close()
        server.close()


HOSTILE = st.one_of(
    st.text(max_size=80),
    st.builds(
        lambda scheme, userinfo, host, port: f"{scheme}{userinfo}{host}{port}",
        st.sampled_from(["", "redis://", "rediss://", "unix://", "file://", "http://", "gopher://", "//", "valkey://"]),
        st.sampled_from(["", "user@", "user:pw@", "known@", "@", "a:b@c@"]),
        st.sampled_from(
            [
                "127.0.0.1",
                "localhost",
                "[::1]",
                "[::ffff:127.0.0.1]",
                "0x7f000001",
                "2130706433",
                "127.1",
                "0",
                "169.254.169.254",
                "[fe80::1%25lo]",
                "example.com",
                "",
                "127.0.0.1.nip.io",
            ]
        ),
        st.sampled_from(["", ":{port}", ":0", ":65536", ":-1", ":6379/0", ":{port}?x=1", ":{port}#f", ":{port}/../etc"]),
    ),
)


@pytest.fixture(scope="module")
def probe():
    listener = CountingListener()
    app = make_app({"redis": {"addr": "redis://127.0.0.1:1", "password": "never-leaked"}, "scrape": {"allow": []}})
    yield app, listener
    app.close()
    listener.close()


@settings(max_examples=300, deadline=None)
@given(target=HOSTILE)
def test_scrape_refuses_arbitrary_targets_without_connecting(probe, target):
    app, listener = probe
    response = call(app, "/scrape", "target=" + quote(target.replace("{port}", str(listener.port)), safe=""))
    assert response.code == 400, target
    assert "never-leaked" not in response.text
    assert listener.accepted == 0


def test_a_hung_target_first_in_the_list_holds_back_no_other_targets_scrape():
    """Targets are rendered as their scrapes come in, a few times the scrape workers under way at once: a hung node
    first in a long list (more targets than the scrape workers, many times over) holds one place until its timeout
    only, and every node after it is up in the same /metrics."""
    healthy, hung = start_redis(), start_redis()
    hung.pause()
    targets = [{"name": "hung", "addr": hung.addr}, *({"name": f"node{i:03d}", "addr": healthy.addr} for i in range(80))]
    app = make_app({"targets": targets, "scrape": {"concurrency": 2, "timeout": "2s"}})
    try:
        samples = exact_samples(call(app, "/metrics").text)
        up = {dict(labels)["instance"]: value for (name, labels), value in samples.items() if name == "redis_up"}
        assert up.pop("hung") == 0
        assert up == {f"node{i:03d}": 1 for i in range(80)}
    finally:
        app.close()
        hung.resume()
        hung.stop()
        healthy.stop()


def test_a_fleets_metrics_holds_no_more_replies_than_its_window_however_slow_the_render(monkeypatch):
    """The render of the first target waits until the scrape workers have nothing left to do: every reply scraped
    meanwhile is held until it is rendered. Scrapes start only as targets are rendered (a few times the workers
    ahead), so however slow the render, a /metrics of 200 targets holds no more replies than that window."""
    server = start_redis()
    app = make_app({"targets": [{"name": f"node{i:03d}", "addr": server.addr} for i in range(200)], "scrape": {"concurrency": 2}})
    replies: list[weakref.ref[ScrapeResult]] = []
    held: list[int] = []
    windows: list[int] = []
    scrape, record = RedisNode.scrape, RedisCollector._record

    def scrape_kept(node: RedisNode, deadline: float) -> ScrapeResult:
        result = scrape(node, deadline)
        replies.append(weakref.ref(result))
        return result

    def record_slowly(collector: RedisCollector, *args: Any) -> None:
        if not held:  # the first render waits for the scrape workers to run out of work
            windows.append(collector.window())
            pool = collector._pool
            wait_until(lambda: pool.busy == 0 and pool.queued == 0, timeout=10)
        held.append(sum(reply() is not None for reply in replies))
        record(collector, *args)

    monkeypatch.setattr(RedisNode, "scrape", scrape_kept)
    monkeypatch.setattr(RedisCollector, "_record", record_slowly)
    try:
        samples = exact_samples(call(app, "/metrics").text)
        assert sum(value for (name, _), value in samples.items() if name == "redis_up") == 200
        assert len(held) == 200
        assert max(held) <= windows[0] + 1, max(held)  # the window, and the reply of the target being rendered
    finally:
        app.close()
        server.stop()


def test_a_render_too_slow_for_the_window_costs_no_target_its_scrape(monkeypatch):
    """300 targets whose render takes 15 ms each, 4.5 s in all, against a deadline of 4 s: in the window, the last
    scrapes would start near the deadline. Past half the time, every scrape left starts at once (within a render of
    it), and every target is up, its reply in before the deadline and rendered after it. A target whose deadline passed
    before its /metrics began is recorded late, and nothing is started for it."""
    server = start_redis()
    targets = [{"name": f"node{i:03d}", "addr": server.addr} for i in range(300)]
    app = make_app({"targets": targets, "scrape": {"concurrency": 16, "timeout": "4s"}})
    record, submit = RedisCollector._record, ScrapePool.submit
    submitted: list[float] = []

    def record_slowly(collector: RedisCollector, *args: Any) -> None:
        time.sleep(0.015)  # a CPU-starved render, not a wait for anything
        record(collector, *args)

    def submit_timed(pool: ScrapePool, *args: Any) -> Any:
        submitted.append(time.monotonic())
        return submit(pool, *args)

    monkeypatch.setattr(RedisCollector, "_record", record_slowly)
    monkeypatch.setattr(ScrapePool, "submit", submit_timed)
    try:
        asked = time.monotonic()
        samples = exact_samples(call(app, "/metrics").text)
        up = {dict(labels)["instance"]: value for (name, labels), value in samples.items() if name == "redis_up"}
        assert up == {f"node{i:03d}": 1 for i in range(300)}
        assert len(submitted) == 300
        assert max(submitted) - asked < 2.5, max(submitted) - asked  # half of the 4 s, a render and some slack
        monkeypatch.setattr(RedisCollector, "_record", record)
        submitted.clear()
        out = TextFamilySet()
        RedisCollector(app.targets.on_metrics(), app.pool, time.monotonic() - 1).write(out)
        assert submitted == []
        assert "redis_up" in out.names()
        late = parse_samples(out.encode().decode())
        assert sum(value for (name, _), value in late.items() if name == "redis_up") == 0
    finally:
        app.close()
        server.stop()
