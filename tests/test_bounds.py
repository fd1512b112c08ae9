"""A scrape that cannot hang: hostile nodes, slow HTTP clients, signals and reload, against the real process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from helpers import call, make_app, parse_samples, sample
from hostile_resp import HostileServer
from servers import start_exporter, wait_until

from exporter.redis.resp import RespConnection, RespFailure

EXPECTED_KIND = {
    "trickle": "timeout",
    "silent": "timeout",
    "huge_bulk": "reply_too_large",
    "endless_line": "reply_too_large",
    "ok": "protocol",
    "error": "error_reply",
    "garbage": "protocol",
    "reset": "connection",
    "deep": "protocol",
}


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


def _unread_bytes(port: int) -> int:
    """Bytes the kernel holds for a server on ``port`` that it has not read (it is paused): what was sent to it."""
    total = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # local port, ESTABLISHED
            total += int(fields[4].split(":")[1], 16)  # rx_queue
    return total


@pytest.fixture(scope="module")
def hostile_servers():
    servers = {behaviour: HostileServer(behaviour, lifetime=300) for behaviour in EXPECTED_KIND}
    yield servers
    for server in servers.values():
        server.close()


def _config(tmp_path: Path, healthy: str, hostile: dict[str, HostileServer], timeout: str = "1s") -> Path:
    lines = ["scrape:", f"  timeout: {timeout}", "targets:", f"  - {{name: healthy, addr: '{healthy}'}}"]
    lines += [f"  - {{name: {name}, addr: '{server.addr}'}}" for name, server in hostile.items()]
    path = tmp_path / "exporter.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_hostile_targets_end_within_their_deadline_and_spare_the_others(tmp_path, plain_redis, hostile_servers):
    exporter = start_exporter("--config.file", str(_config(tmp_path, plain_redis.addr, hostile_servers)))
    try:
        idle_rss = _status(exporter.process.pid, "VmRSS")
        durations = []
        for _ in range(4):
            started = time.monotonic()
            status, text = exporter.get("/metrics", timeout=10)
            durations.append(time.monotonic() - started)
            assert status == 200
            samples = parse_samples(text)
            assert sample(samples, "redis_up", instance="healthy") == 1
            assert sample(samples, "redis_db_keys", instance="healthy", db="db0") >= 1
            for name, kind in EXPECTED_KIND.items():
                assert sample(samples, "redis_up", instance=name) == 0, name
                assert sample(samples, "elasticache_exporter_target_last_error", instance=name, kind=kind) == 1, name
        # the whole reply is bounded by the 1 s scrape timeout, not by how long hostile nodes keep talking
        assert max(durations) < 1.8, durations
        pid = exporter.process.pid
        assert _status(pid, "VmRSS") - idle_rss < 48 * 1024, "RSS grew by more than the reply bounds allow"  # KiB
        assert _status(pid, "Threads") <= 16 + 32 + 8
        # a prompt exit on SIGTERM, with hostile targets still connected
        exporter.get("/metrics", timeout=10)
        started = time.monotonic()
        exporter.process.send_signal(signal.SIGTERM)
        assert exporter.process.wait(timeout=10) == 0
        assert time.monotonic() - started < 4
    finally:
        exporter.stop()


def test_prometheus_timeout_header_bounds_a_single_target(hostile_servers):
    app = make_app({"targets": [{"name": "slow", "addr": hostile_servers["trickle"].addr, "timeout": "10s"}]})
    try:
        started = time.monotonic()
        response = call(app, "/scrape", "target=slow", headers={"X-Prometheus-Scrape-Timeout-Seconds": "0.6"})
        assert time.monotonic() - started < 1.0
        assert sample(response.samples(), "elasticache_exporter_target_last_error", kind="timeout") == 1
    finally:
        app.close()


def test_reply_bounds_refuse_before_reading(hostile_servers):
    for behaviour in ("huge_bulk", "endless_line"):
        deadline = time.monotonic() + 5
        conn = RespConnection.open("127.0.0.1", hostile_servers[behaviour].port, deadline, max_reply_bytes=1024 * 1024)
        started = time.monotonic()
        with pytest.raises(RespFailure) as failure:
            conn.call([("INFO",)], deadline)
        assert failure.value.kind == "reply_too_large"
        assert time.monotonic() - started < 2  # refused on the announced length or at the bound, not at the deadline
        assert conn.closed


def test_slow_and_idle_http_clients_cannot_exhaust_the_exporter(plain_redis):
    exporter = start_exporter("--redis.addr", plain_redis.addr)
    sockets: list[socket.socket] = []
    try:
        pid = exporter.process.pid
        for i in range(600):  # more than the 512-connection bound: the longest-waiting ones make room
            sock = socket.create_connection(("127.0.0.1", exporter.port), timeout=5)
            if i % 2:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # a head that never ends
            sockets.append(sock)
        wait_until(lambda: _status(pid, "Threads") < 60, what="bounded threads")
        for _ in range(10):
            status, text = exporter.get("/metrics", timeout=5)
            assert status == 200
            assert sample(parse_samples(text), "redis_up", instance=f"127.0.0.1:{plain_redis.port}") == 1
        assert _status(pid, "Threads") < 60
        assert _status(pid, "VmRSS") < 120 * 1024
        assert exporter.get("/-/ready", timeout=5)[0] == 200
    finally:
        for sock in sockets:
            sock.close()
        exporter.stop()


def _reload_state(exporter) -> tuple[float, float]:
    samples = parse_samples(exporter.get("/metrics")[1])
    return (
        sample(samples, "elasticache_exporter_config_last_reload_successful"),
        sample(samples, "elasticache_exporter_config_last_reload_success_timestamp_seconds"),
    )


def test_sighup_reloads_and_keeps_the_old_configuration_when_the_new_one_is_bad(tmp_path, plain_redis, fresh_redis):
    """Each reload's outcome is served as Prometheus serves its own: successful 1 or 0, and when it last succeeded."""
    config = tmp_path / "exporter.yml"
    config.write_text(f"targets:\n  - {{name: first, addr: '{plain_redis.addr}'}}\n")
    before_start = time.time()
    exporter = start_exporter("--config.file", str(config))
    try:
        assert 'instance="first"' in exporter.get("/metrics")[1]
        successful, started = _reload_state(exporter)
        assert successful == 1
        assert before_start <= started <= time.time()
        config.write_text(f"targets:\n  - {{name: first, addr: '{plain_redis.addr}'}}\n  - {{name: second, addr: '{fresh_redis.addr}'}}\n")
        exporter.process.send_signal(signal.SIGHUP)
        wait_until(lambda: 'redis_up{instance="second"} 1' in exporter.get("/metrics")[1], what="reloaded target")
        successful, reloaded = _reload_state(exporter)
        assert successful == 1
        assert reloaded > started
        config.write_text("targets:\n  - {name: broken, adr: nowhere}\n  - {name: worse, addr: 'x:99999'}\n")
        exporter.process.send_signal(signal.SIGHUP)
        wait_until(lambda: _reload_state(exporter) == (0, reloaded), what="the refused reload served")
        text = exporter.get("/metrics")[1]
        assert 'redis_up{instance="second"} 1' in text
        assert "broken" not in text
        assert exporter.process.poll() is None
        line = next(line for line in exporter.log().splitlines() if "reload: configuration not changed" in line)
        assert "targets[0].adr" in line  # every problem on the one line
        assert "targets[1].addr" in line
        config.write_text(f"targets:\n  - {{name: first, addr: '{plain_redis.addr}'}}\n")
        exporter.process.send_signal(signal.SIGHUP)
        wait_until(lambda: _reload_state(exporter)[0] == 1, what="a good reload after a refused one")
        assert _reload_state(exporter)[1] > reloaded
    finally:
        assert exporter.stop() == 0


def test_ready_says_when_every_scrape_worker_is_busy():
    silent = [HostileServer("silent", lifetime=60) for _ in range(3)]
    targets = [{"name": f"s{i}", "addr": server.addr} for i, server in enumerate(silent)]
    app = make_app({"scrape": {"concurrency": 1, "timeout": "1500ms"}, "targets": targets})
    try:
        assert call(app, "/-/ready").code == 200
        worker = threading.Thread(target=call, args=(app, "/metrics"))
        worker.start()
        wait_until(lambda: call(app, "/-/ready").code == 503, what="not ready while saturated")
        assert call(app, "/-/healthy").code == 200
        worker.join(timeout=10)
        wait_until(lambda: call(app, "/-/ready").code == 200, what="ready again")
    finally:
        app.close()
        for server in silent:
            server.close()


def test_a_target_is_not_scraped_twice_at_once(fresh_redis):
    app = make_app({"targets": [{"name": "one", "addr": fresh_redis.addr}], "heartbeat": {"read": False}})
    try:
        call(app, "/metrics")
        before = fresh_redis.info()["total_commands_processed"]
        fresh_redis.pause()
        asked = []
        run_here = app.pool.run_here
        app.pool.run_here = lambda *args: asked.append(1) or run_here(*args)  # type: ignore[method-assign]
        threads = [threading.Thread(target=call, args=(app, "/scrape", "target=one")) for _ in range(5)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(asked) == 5, what="all five requests waiting on the target")
        fresh_redis.resume()
        for thread in threads:
            thread.join(timeout=10)
        # one pipelined scrape of 5 commands (INFO ALL, SLOWLOG LEN/GET, LATENCY LATEST/HISTOGRAM) served all five,
        # plus our INFO
        assert fresh_redis.info()["total_commands_processed"] - before <= 5 + 2
    finally:
        app.close()


def test_exit_on_sigint_while_a_target_hangs(fresh_redis):
    exporter = start_exporter("--redis.addr", fresh_redis.addr, "--scrape.timeout", "30s")
    try:
        fresh_redis.pause()

        def scrape() -> None:
            with contextlib.suppress(OSError):  # the exporter goes away mid-reply: that is the point
                exporter.get("/metrics", timeout=40)

        threading.Thread(target=scrape, daemon=True).start()
        wait_until(lambda: _unread_bytes(fresh_redis.port) > 0, what="the scrape's commands waiting at the paused server")
        started = time.monotonic()
        os.kill(exporter.process.pid, signal.SIGINT)
        assert exporter.process.wait(timeout=10) == 0
        assert time.monotonic() - started < 4
    finally:
        fresh_redis.resume()
        exporter.stop()
