"""The least-privilege ACL user of docs/configuration.md, exactly as documented, against real servers: a primary with its replica, a
cluster node, Valkey 8.1 with its COMMANDLOG addition, and the profilers with theirs. Every family of the scrape is
served and the server records no refusal (ACL LOG) and no error reply."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from helpers import call, make_app
from servers import start_redis, wait_until
from tools import require

DOCUMENTED = Path(__file__).parent.parent / "docs" / "configuration.md"
PASSWORD = "exporter-password"


def documented_acl() -> tuple[list[str], dict[str, list[str]]]:
    """The ACL line of docs/configuration.md, and the additions it names (by what they are for)."""
    text = DOCUMENTED.read_text()
    section = text[text.index("A least-privilege ACL user for the exporter") :]
    section = section.split("\n\n", 1)[0]
    spans = re.findall(r"`([^`]+)`", section)
    base = next(span for span in spans if span.startswith("on >PASSWORD"))
    additions = {"clients": [], "keyspace": [], "valkey": []}
    for span in spans:
        rules = span.split()
        if all(rule.startswith(("+", "~", "-", "&")) for rule in rules):
            commandlog = any("commandlog" in rule for rule in rules)
            key = "clients" if "+client|list" in rules else "keyspace" if "+randomkey" in rules else "valkey" if commandlog else ""
            if key:
                additions[key] += rules
    additions["keyspace"] += [span for span in spans if span == "~*"]
    return shlex.split(base.replace(">PASSWORD", ">" + PASSWORD)), additions


class Admin:
    """One connection of the default user for the whole check: redis-py's own greeting (CLIENT SETINFO, an error
    reply before Redis 7.2) happens once, before the count starts."""

    def __init__(self, server) -> None:
        self.client = server.client(single_connection_client=True)

    def with_user(self, rules: list[str]) -> None:
        self.client.execute_command("ACL", "SETUSER", "exporter", "reset", *rules)
        self.client.execute_command("ACL", "LOG", "RESET")

    def refusals(self) -> list[str]:
        return [f"{entry[b'object'].decode()} ({entry[b'reason'].decode()})" for entry in self.client.execute_command("ACL", "LOG")]

    def error_replies(self) -> int:
        return self.client.info("stats")["total_error_replies"]


def scrape_as_exporter(server, extra: dict | None = None, rounds: int = 3) -> str:
    config = {
        "targets": [{"name": "node", "addr": server.addr, "user": "exporter", "password_env": "EXPORTER_PW"}],
        "heartbeat": {"read": True},
        **(extra or {}),
    }
    app = make_app(config, environ={"EXPORTER_PW": PASSWORD})
    try:
        for _ in range(rounds):
            call(app, "/metrics")
        if app.client_profiler is not None:
            app.client_profiler.visit_all()
        if getattr(app, "keyspace_profiler", None) is not None:
            app.keyspace_profiler.visit_all()
        return call(app, "/metrics").text
    finally:
        app.close()


def test_the_documented_line_scrapes_a_primary_and_its_replica_without_a_refusal():
    base, _ = documented_acl()
    primary = start_redis()
    replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    try:
        wait_until(lambda: replica.info().get("master_link_status") == "up", what="replica link")
        for server in (primary, replica):
            admin = Admin(server)
            admin.with_user(base)
            before = admin.error_replies()
            text = scrape_as_exporter(server)
            assert 'redis_up{instance="node"} 1.0' in text
            assert "redis_commands_latencies_usec_bucket" in text  # LATENCY HISTOGRAM
            assert "redis_config_io_threads" in text or "redis_config_" in text  # CONFIG GET
            assert admin.refusals() == []
            assert admin.error_replies() == before
    finally:
        replica.stop()
        primary.stop()


def test_the_documented_line_scrapes_a_cluster_node_without_a_refusal():
    base, _ = documented_acl()
    node = start_redis("--cluster-enabled", "yes")
    try:
        subprocess.run(
            [require("redis-cli"), "-p", str(node.port), "CLUSTER", "ADDSLOTSRANGE", "0", "16383"], check=True, capture_output=True, timeout=30
        )
        wait_until(lambda: b"cluster_state:ok" in node.client().execute_command("CLUSTER", "INFO"), what="cluster state ok")
        admin = Admin(node)
        admin.with_user(base)
        before = admin.error_replies()
        text = scrape_as_exporter(node)
        assert "redis_cluster_state" in text or "redis_cluster_enabled" in text
        assert admin.refusals() == []
        assert admin.error_replies() == before
    finally:
        node.stop()


def test_valkeys_addition_reads_the_command_logs_without_a_refusal():
    base, additions = documented_acl()
    assert additions["valkey"]
    server = start_redis(engine="valkey-8.1")
    try:
        admin = Admin(server)
        admin.with_user(base + additions["valkey"])
        before = admin.error_replies()
        text = scrape_as_exporter(server)
        assert 'redis_commandlog_large_reply_length{instance="node"}' in text
        assert 'elasticache_commandlog_last_id{instance="node",log="large-reply"}' in text
        assert admin.refusals() == []
        assert admin.error_replies() == before
    finally:
        server.stop()


def test_the_profilers_additions_read_clients_and_keys_without_a_refusal():
    base, additions = documented_acl()
    assert additions["clients"]
    assert additions["keyspace"]
    server = start_redis()
    try:
        admin = Admin(server)
        for index in range(200):
            admin.client.set(f"session:{index}", "x" * 100, ex=3600)
        admin.with_user(base + additions["clients"] + additions["keyspace"])
        before = admin.error_replies()
        text = scrape_as_exporter(server, {"clients": {"enabled": True}, "keyspace": {"enabled": True, "sample": 100}})
        assert "elasticache_clients_connected{" in text
        assert 'prefix="session"' in text
        assert admin.refusals() == []
        assert admin.error_replies() == before
    finally:
        server.stop()
