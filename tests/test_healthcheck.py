"""The container's health check (`healthcheck`, the image's HEALTHCHECK) against a real exporter behind each kind of web
config: none, basic auth, TLS with basic auth, TLS that requires a client certificate. It finds the listen address and
web config as the image gives them to serve (serve's flags from its command line, or the environment), and answers 0;
nothing is opened to a peer beyond loopback."""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from servers import free_port, wait_until

from exporter.cli.healthcheck import health_url, serve_words
from exporter.config import flag_to_env
from exporter.service.webconfig import is_loopback, load_web_config

PASSWORD = "scrape-secret"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["/opt/elasticache-exporter/bin/python", "/opt/elasticache-exporter/bin/elasticache-exporter", "serve", "--web.config-file", "/w.yml"],
            ["--web.config-file", "/w.yml"],
        ),
        (["/sbin/docker-init", "--", "/opt/elasticache-exporter/bin/elasticache-exporter", "serve"], []),
        (["python3", "-m", "exporter", "serve", "--web.listen-address", ":9100"], ["--web.listen-address", ":9100"]),
        (["elasticache-exporter", "--config.file", "/c.yml"], ["--config.file", "/c.yml"]),  # serve where no command is named
        (["elasticache-exporter", "render", "prometheus"], None),
        (["/usr/lib/systemd/systemd", "--switched-root"], None),
    ],
)
def test_serve_flags_are_read_from_the_command_line_of_serve_only(argv, words):
    assert serve_words(argv) == words


@pytest.mark.unit
def test_wildcard_listen_addresses_are_asked_on_loopback():
    assert health_url(":9769", tls=False) == "http://127.0.0.1:9769/-/healthy"
    assert health_url("0.0.0.0:9769", tls=True) == "https://127.0.0.1:9769/-/healthy"
    assert health_url("[::]:9769", tls=False) == "http://[::1]:9769/-/healthy"
    assert health_url("127.0.0.1:9100", tls=False) == "http://127.0.0.1:9100/-/healthy"


@pytest.mark.unit
def test_only_loopback_asks_health_without_credentials(tmp_path):
    assert [is_loopback(host) for host in ("127.0.0.1", "127.8.0.1", "::1", "::ffff:127.0.0.1")] == [True] * 4
    assert [is_loopback(host) for host in ("192.0.2.2", "::ffff:192.0.2.2", "fd00::2", "0.0.0.0", "", "localhost")] == [False] * 6
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()}'\n")
    config = load_web_config(str(web))
    assert config.allows("/-/healthy", None, "127.0.0.1")
    assert not config.allows("/-/healthy", None, "192.0.2.2")
    assert not config.allows("/health", None, "127.0.0.1")  # the alias is no way around the credentials
    assert not config.allows("/metrics", None, "127.0.0.1")
    assert not config.allows("/-/healthy/../metrics", None, "127.0.0.1")
    good = "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
    assert config.allows("/metrics", good, "192.0.2.2")


def outside_address() -> str | None:
    """An address of this machine beyond loopback (the one its default route leaves from), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: the kernel only picks the route
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if is_loopback(address) else address


def web_config(kind: str, directory: Path, certificates: dict[str, str]) -> Path | None:
    if kind == "none":
        return None
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$")
    text = f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    if kind in ("tls", "mtls"):
        text += f"tls_server_config:\n  cert_file: {certificates['server_cert']}\n  key_file: {certificates['server_key']}\n"
    if kind == "mtls":
        text += f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {certificates['ca']}\n"
    path = directory / "web-config.yml"
    path.write_text(text)
    return path


@contextlib.contextmanager
def exporter_on_every_address(*args: str) -> Iterator[tuple[subprocess.Popen, int]]:
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ELASTICACHE_EXPORTER_")}
    command = [sys.executable, "-m", "exporter", "serve", "--web.listen-address", f"0.0.0.0:{port}", "--redis.addr", "", *args]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment)
    try:
        yield process, port
    finally:
        process.terminate()
        process.wait(timeout=10)


def healthcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ELASTICACHE_EXPORTER_")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "exporter", "healthcheck", *args], capture_output=True, text=True, timeout=30, env=environment, check=False
    )


def status(url: str, certificates: dict[str, str], client_certificate: bool = False, password: str | None = None) -> int | str:
    """The status ``url`` answers, or the name of the error that ended the exchange."""
    context = ssl.create_default_context(cafile=certificates["ca"])
    context.check_hostname = False
    if client_certificate:
        context.load_cert_chain(certificates["cert"], certificates["key"])
    headers = {"Authorization": "Basic " + base64.b64encode(f"prometheus:{password}".encode()).decode()} if password else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5, context=context) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code
    except (OSError, ssl.SSLError) as err:
        return type(getattr(err, "reason", err)).__name__


@pytest.mark.parametrize("kind", ["none", "basic", "tls", "mtls"])
def test_the_health_check_passes_behind_every_web_config(kind, tmp_path, certificates):
    web = web_config(kind, tmp_path, certificates)
    flags = ["--web.config-file", str(web)] if web else []
    with exporter_on_every_address(*flags) as (process, port):
        scheme = "https" if kind in ("tls", "mtls") else "http"
        local = f"{scheme}://127.0.0.1:{port}"

        def answering() -> bool:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            return isinstance(status(local + "/-/healthy", certificates), int)

        wait_until(answering, timeout=20, what="the exporter's listener")
        # as in the image: serve's flags read from its command line
        found = healthcheck("--serve-pid", str(process.pid))
        assert found.returncode == 0, found.stderr
        assert found.stdout.strip() == f"{local}/-/healthy: OK"
        # as a container environment gives them to both
        given = {flag_to_env("web.listen-address"): f":{port}", **({flag_to_env("web.config-file"): str(web)} if web else {})}
        assert healthcheck("--serve-pid", "0", env=given).returncode == 0

        # loopback asks /-/healthy alone without credentials or client certificate; the rest stays closed
        if kind != "none":
            assert status(local + "/metrics", certificates) == (403 if kind == "mtls" else 401)
            assert status(local + "/health", certificates, client_certificate=True) == 401  # the alias needs credentials
            assert status(local + "/metrics", certificates, client_certificate=True, password=PASSWORD) == 200
        outside = outside_address()
        if outside is not None and kind != "none":
            remote = f"{scheme}://{outside}:{port}"
            if kind == "mtls":
                assert isinstance(status(remote + "/-/healthy", certificates), str)  # no handshake without a certificate
                assert status(remote + "/-/healthy", certificates, client_certificate=True) == 401
            else:
                assert status(remote + "/-/healthy", certificates) == 401
            assert status(remote + "/-/healthy", certificates, client_certificate=True, password=PASSWORD) == 200
    stopped = healthcheck("--serve-pid", "0", env=given)
    assert stopped.returncode == 1
    assert f"127.0.0.1:{port}/-/healthy" in stopped.stderr


def test_a_reload_refused_for_a_typo_leaves_the_container_healthy(tmp_path):
    """A typo sent with SIGHUP is refused and the running configuration kept: the health check reads only the listen
    address and web config it needs, so Docker and ECS keep the working container."""
    import signal

    config = tmp_path / "config.yml"
    config.write_text("scrape:\n  timeout: 2s\n")
    with exporter_on_every_address("--config.file", str(config)) as (process, port):
        wait_until(lambda: healthcheck("--serve-pid", str(process.pid)).returncode == 0, timeout=20, what="healthy")
        config.write_text("scrape:\n  timeot: 2s\n")  # the typo
        process.send_signal(signal.SIGHUP)
        # the refusal is served (elasticache_exporter_config_last_reload_successful 0) before the health is asked
        url = f"http://127.0.0.1:{port}/metrics"

        def refused() -> bool:
            with urllib.request.urlopen(url, timeout=5) as response:
                return b"elasticache_exporter_config_last_reload_successful 0" in response.read()

        wait_until(refused, timeout=20, what="the reload refused")
        found = healthcheck("--serve-pid", str(process.pid))
        assert found.returncode == 0, found.stderr
        config.write_text("web: [not, a, mapping\n")  # not even YAML: the defaults and serve's flags still find it
        assert healthcheck("--serve-pid", str(process.pid)).returncode == 0
