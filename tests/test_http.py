"""The HTTP side: /scrape and its allow-list, the status page, secrets, and the exporter as a process."""

from __future__ import annotations

import contextlib
import socket
import statistics
import threading
import time
from urllib.parse import quote

import pytest
from helpers import call, make_app, parse_samples, sample
from servers import free_port, start_exporter, wait_until


class CountingListener:
    """A TCP port that records every connection and the first bytes sent on it."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.received = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.settimeout(0.5)
            with contextlib.suppress(OSError):
                self.received += conn.recv(4096)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def listener():
    counting = CountingListener()
    yield counting
    counting.close()


def test_scrape_a_configured_target_by_name_and_by_address(plain_redis):
    app = make_app({"targets": [{"name": "cache-a", "addr": plain_redis.addr}]})
    try:
        by_name = call(app, "/scrape", "target=cache-a").samples()
        assert sample(by_name, "redis_up") == 1
        by_address = call(app, "/scrape", f"target=127.0.0.1:{plain_redis.port}").samples()
        assert sample(by_address, "redis_up") == 1
        # one node per reply: no series names its node, Prometheus' relabelling gives the scrape its instance
        assert not any("instance" in dict(labels) for _, labels in [*by_name, *by_address])
        assert not any(name.startswith("process_") for name, _ in by_name)
    finally:
        app.close()


def test_unknown_targets_are_refused_without_a_connection(listener, plain_redis):
    app = make_app(
        {
            "targets": [{"name": "known", "addr": plain_redis.addr, "password": "known-target-pw"}],
            "scrape": {"allow": [{"hosts": ["*.cache.amazonaws.com", "10.0.0.0/8"], "password": "allow-rule-pw"}]},
        }
    )
    try:
        refused = [
            f"127.0.0.1:{listener.port}",
            f"redis://127.0.0.1:{listener.port}",
            f"redis://user:pw@127.0.0.1:{listener.port}",
            f"known@127.0.0.1:{listener.port}",
            f"x.cache.amazonaws.com@127.0.0.1:{listener.port}",
            f"unix:///tmp/redis.sock?port={listener.port}",
            "file:///etc/passwd",
            f"http://127.0.0.1:{listener.port}/",
            f"[::ffff:127.0.0.1]:{listener.port}",
            f"[::1]:{listener.port}",
            f"127.0.0.1.cache.amazonaws.com.evil:{listener.port}",
            f"localhost:{listener.port}",
            f"0x7f.0.0.1:{listener.port}",
            f"2130706433:{listener.port}",
            "",
        ]
        for target in refused:
            response = call(app, "/scrape", "target=" + quote(target, safe=""))
            assert response.code == 400, (target, response.text)
        assert call(app, "/scrape", "").code == 400
        assert call(app, "/scrape", "target=a&target=b").code == 400
        time.sleep(0.3)
        assert listener.accepted == 0
        assert listener.received == b""
    finally:
        app.close()


def test_allow_rule_sends_its_own_credentials_only_to_matching_hosts(acl_redis, listener):
    app = make_app({"scrape": {"allow": [{"hosts": ["127.0.0.0/8"], "password": "default-secret-pw", "timeout": "1s"}]}, "redis": {"addr": ""}})
    try:
        samples = call(app, "/scrape", f"target=127.0.0.1:{acl_redis.port}").samples()
        assert sample(samples, "redis_up") == 1
    finally:
        app.close()
    other = make_app({"scrape": {"allow": [{"hosts": ["10.0.0.0/8"], "password": "not-for-you"}]}, "redis": {"addr": ""}})
    try:
        assert call(other, "/scrape", f"target=127.0.0.1:{listener.port}").code == 400
        assert listener.accepted == 0
    finally:
        other.close()


def test_status_page_lists_targets_without_secrets(acl_redis):
    app = make_app({"targets": [{"name": "protected", "addr": f"redis://:default-secret-pw@127.0.0.1:{acl_redis.port}"}], "redis": {"addr": ""}})
    try:
        call(app, "/metrics")
        page = call(app, "/")
        assert page.code == 200
        assert "protected" in page.text
        assert f"redis://127.0.0.1:{acl_redis.port}" in page.text
        assert ">up<" in page.text
        assert "default-secret-pw" not in page.text
        assert "default-secret-pw" not in call(app, "/metrics").text
        assert call(app, "/-/healthy").code == 200
        assert call(app, "/nope").code == 404
        assert app._baselines is None  # no target has a node type: the baseline table (1.5 MiB) was never read
    finally:
        app.close()


def test_exporter_process_end_to_end(plain_redis, acl_redis, tmp_path):
    password_file = tmp_path / "pw"
    password_file.write_text("default-secret-pw\n")
    config = tmp_path / "config.yml"
    down_port = free_port()
    config.write_text(
        f"""
targets:
  - name: plain
    addr: {plain_redis.addr}
  - name: protected
    addr: {acl_redis.addr}
    password_file: {password_file}
  - name: down
    addr: redis://127.0.0.1:{down_port}
    timeout: 500ms
  - name: wrongpw
    addr: {acl_redis.addr}
    password_env: WRONG_PW
scrape:
  allow:
    - hosts: ["127.0.0.1"]
"""
    )
    exporter = start_exporter("--config.file", str(config), env={"WRONG_PW": "wrong-secret-pw"})
    try:
        status, text = exporter.get("/metrics")
        assert status == 200
        samples = parse_samples(text)
        assert sample(samples, "redis_up", instance="plain") == 1
        assert sample(samples, "redis_up", instance="protected") == 1
        assert sample(samples, "redis_up", instance="down") == 0
        assert sample(samples, "redis_up", instance="wrongpw") == 0
        assert sample(samples, "elasticache_exporter_target_last_error", instance="wrongpw", kind="auth") == 1
        status, text = exporter.get(f"/scrape?target=127.0.0.1:{plain_redis.port}")
        assert status == 200
        assert "redis_up 1.0" in text
        status, page = exporter.get("/")
        assert status == 200
        assert "protected" in page
        for secret in ("default-secret-pw", "wrong-secret-pw"):
            assert secret not in text
            assert secret not in page
            assert secret not in exporter.log()
        assert exporter.get("/scrape?target=127.0.0.2:1")[0] == 400
    finally:
        assert exporter.stop() == 0
    for secret in ("default-secret-pw", "wrong-secret-pw"):
        assert secret not in exporter.log()


def test_exporter_starts_when_its_target_is_unreachable():
    port = free_port()
    exporter = start_exporter("--redis.addr", f"redis://127.0.0.1:{port}")
    try:
        status, text = exporter.get("/metrics")
        assert status == 200
        assert sample(parse_samples(text), "redis_up", instance=f"127.0.0.1:{port}") == 0
        assert exporter.get("/-/healthy")[0] == 200
    finally:
        assert exporter.stop() == 0


def test_a_node_that_appears_later_is_picked_up(fresh_redis):
    exporter = start_exporter("--redis.addr", fresh_redis.addr)
    try:
        target = f"127.0.0.1:{fresh_redis.port}"
        assert sample(parse_samples(exporter.get("/metrics")[1]), "redis_up", instance=target) == 1
        fresh_redis.stop()
        assert sample(parse_samples(exporter.get("/metrics")[1]), "redis_up", instance=target) == 0
        fresh_redis.start()
        wait_until(lambda: sample(parse_samples(exporter.get("/metrics")[1]), "redis_up", instance=target) == 1, what="recovery")
    finally:
        exporter.stop()


def test_http_keep_alive_head_and_methods(plain_redis):
    import http.client

    exporter = start_exporter("--redis.addr", plain_redis.addr)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=5)
        durations = []
        for _ in range(9):
            started = time.monotonic()
            connection.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
            response = connection.getresponse()
            body = response.read()
            assert response.status == 200
            assert response.getheader("Content-Encoding") == "gzip"
            assert len(body) == int(response.getheader("Content-Length"))
            durations.append(time.monotonic() - started)
        # no delayed-ACK stall on a kept-alive connection: a stall holds every reply of the same shape 40 ms or more,
        # while a reply here takes about 2 ms; the median, so one request a busy machine delays does not fail the test
        assert statistics.median(durations) < 0.035, durations
        connection.request("HEAD", "/-/healthy")
        response = connection.getresponse()
        assert response.status == 200
        assert response.read() == b""
        connection.request("POST", "/metrics", body=b"x")
        response = connection.getresponse()
        response.read()
        assert response.status == 405
        connection.request("GET", "/-/healthy")
        assert connection.getresponse().read() == b"OK\n"
    finally:
        exporter.stop()
