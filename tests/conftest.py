from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from servers import RedisProcess, make_certificates, start_redis

# The layer of each module's tests that are not marked unit (a test marked unit starts nothing: checked below);
# a module not named here starts servers.
LAYERS = {
    "test_aws": "aws", "test_aws_fleet": "aws", "test_capacity": "aws", "test_fleet_events": "aws", "test_iam_auth": "aws",
    "test_secrets_manager": "aws", "test_aws_lifecycle": "aws", "test_fleet_shards": "aws", "test_aws_tiers": "aws",
    "test_minutes_over_time": "aws", "test_alarm_twins": "tools", "test_fleet_day": "tools", "test_alarm_bill": "tools",
    "test_fleet_alarms": "tools", "test_promql_api": "tools", "test_otel_source": "tools", "test_backtest": "tools",
    "test_rules": "tools", "test_rule_guards": "tools", "test_deploy": "tools", "test_helm": "tools", "test_alertmanager": "tools",
    "test_browser": "e2e", "test_docker_replay": "e2e", "test_packaging": "e2e", "test_e2e_cluster_alerts": "e2e",
    "test_e2e_dashboard": "e2e", "test_e2e_prometheus": "e2e", "test_e2e_upstream_queries": "e2e", "test_e2e_alertmanager": "e2e",
    "test_e2e_scrape_examples": "e2e", "test_e2e_native_histograms": "e2e",
}  # fmt: skip
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("unit") is None:
            item.add_marker(LAYERS.get(item.path.stem, "servers"))


@pytest.fixture(autouse=True)
def _a_unit_test_starts_nothing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The unit marker, checked: no process is started and no socket reaches past loopback."""
    if request.node.get_closest_marker("unit") is None:
        return

    def no_process(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a unit test starts no process: {args[1:2]}")

    connect = socket.socket.connect

    def loopback_only(sock: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if host not in LOOPBACK:
            raise AssertionError(f"a unit test opens no socket but to a loopback fake: {address}")
        connect(sock, address)

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    monkeypatch.setattr(socket.socket, "connect", loopback_only)


ADMIN_COMMANDS = ("CONFIG", "LATENCY", "SLOWLOG", "DEBUG", "MONITOR", "SHUTDOWN", "BGSAVE", "CLUSTER", "REPLICAOF", "SLAVEOF", "ACL")


@pytest.fixture(scope="session")
def plain_redis():
    server = start_redis()
    server.client().set("greeting", "hello")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def elasticache_like_redis():
    """CONFIG and other admin commands renamed away, as ElastiCache does."""
    renames: list[str] = []
    for command in ADMIN_COMMANDS:
        renames += ["--rename-command", command, ""]
    server = start_redis(*renames)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def acl_redis():
    """A password for the default user and an ACL user allowed INFO and PING only."""
    server = start_redis(password="default-secret-pw")
    server.client().execute_command("ACL", "SETUSER", "monitor", "on", ">monitor-secret-pw", "+info", "+ping", "+command|info")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def certificates():
    return make_certificates(Path(tempfile.mkdtemp(prefix="ecx-tls-")))


@pytest.fixture(scope="session")
def tls_redis(certificates):
    server = start_redis(tls=certificates)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def replicated_redis():
    primary = start_redis()
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    from servers import wait_until

    wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link up")
    primary.client().set("replicated", "1")
    yield primary, replica
    replica.stop()
    primary.stop()


@pytest.fixture
def fresh_redis():
    server: RedisProcess = start_redis()
    yield server
    server.stop()


@pytest.fixture
def moto_server():
    """moto as a separate HTTP server on loopback, for code that runs in another process or makes raw requests."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    _reset_moto(url)  # the server shares moto's in-process state: each test starts from none
    yield url
    _reset_moto(url)
    server.stop()


def _reset_moto(url: str) -> None:
    import urllib.request

    with urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10) as reply:
        assert reply.status == 200


@pytest.fixture
def aws_credentials(monkeypatch):
    """moto's test credentials in eu-west-1, and no endpoint left over from a moto server."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
