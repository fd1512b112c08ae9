"""``cluster plan`` on real clusters: ElastiCache recognized from its names (a node's announced hostname, the target's
own), where it gets rebalance advice instead of slot moves; on a self-managed cluster that wants a password and TLS,
the bash script it prints moves the slots with their keys (names the shell would split or glob among them), and it
stops with a message on a key that will not move instead of trying forever."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import redis
from servers import ENGINES, RedisProcess, make_certificates, start_cluster, wait_until
from tools import missing, require

from exporter.cli.main import main
from exporter.redis.cluster_members import parse_cluster_nodes, parse_cluster_shards
from exporter.redis.cluster_plan import CliOptions, Move, migrate_script, on_elasticache
from exporter.redis.slots import key_slot

ELASTICACHE_HOST = "my-cluster-{:04d}-001.my-cluster.abc123.euw1.cache.amazonaws.com"
# names the shell would split, glob or unquote, and a newline
HOSTILE = ["user 1", "*", "?", 'quo"te', "it's", "back\\slash", "new\nline", "$(touch pwned)", "-n", "tab\there"]


@pytest.mark.unit
def test_elasticache_is_recognized_from_the_target_or_any_announced_name_without_resolving_it():
    assert on_elasticache(["clustercfg.my-cluster.abc123.euw1.cache.amazonaws.com"])  # a configuration endpoint, as --target
    assert on_elasticache(["127.0.0.1", "10.0.0.7", ELASTICACHE_HOST.format(1)])  # the IPs, and one hostname announced
    assert on_elasticache(["my-cluster.abc123.cnn1.cache.amazonaws.com.cn"])
    assert on_elasticache(["MY-CLUSTER.ABC123.EUW1.CACHE.AMAZONAWS.COM."])
    assert not on_elasticache(["127.0.0.1", "", "redis.internal", "cache.amazonaws.com.evil.example"])


@pytest.mark.unit
def test_cluster_nodes_and_cluster_shards_keep_the_announced_hostname_and_a_primary_s_slots():
    nodes = (
        f"aaa 10.0.0.1:6379@16379,{ELASTICACHE_HOST.format(1)} myself,master - 0 0 1 connected 0-100 200\n"
        "bbb 10.0.0.2:6379@16379, slave aaa 0 0 1 connected\n"
        "ccc 10.0.0.3:6379@16379 master - 0 0 2 connected 101-199\n"
    )
    members = {member.node_id: member for member in parse_cluster_nodes(nodes)}
    assert (members["aaa"].host, members["aaa"].hostname) == ("10.0.0.1", ELASTICACHE_HOST.format(1))
    assert members["aaa"].slots == frozenset([*range(0, 101), 200])
    assert (members["bbb"].hostname, members["bbb"].slots) == ("", frozenset())
    assert members["ccc"].slots == frozenset(range(101, 200))
    shards = [
        [b"slots", [0, 100, 200, 200], b"nodes", [
            [b"id", b"aaa", b"port", 6379, b"ip", b"10.0.0.1", b"endpoint", b"10.0.0.1", b"hostname", ELASTICACHE_HOST.format(1).encode(),
             b"role", b"master", b"health", b"online"],
            [b"id", b"bbb", b"port", 6379, b"ip", b"10.0.0.2", b"endpoint", b"10.0.0.2", b"role", b"replica", b"health", b"online"],
        ]],
    ]  # fmt: skip
    primary, replica = parse_cluster_shards(shards, tls=False)
    assert (primary.host, primary.hostname, primary.slots) == ("10.0.0.1", ELASTICACHE_HOST.format(1), frozenset([*range(0, 101), 200]))
    assert (replica.hostname, replica.slots) == ("", frozenset())


@pytest.mark.unit
def test_the_script_takes_the_password_from_redis_cli_s_variable_and_reaches_the_nodes_as_the_plan_did():
    options = CliOptions(tls=True, ca_file="/etc/ca dir/ca.pem", user="ops", password=True, server_name="redis.test")
    script = migrate_script([Move(5, 7, "a" * 40, "b" * 40, 3.0)], {"a" * 40: "10.0.0.1:6379", "b" * 40: "10.0.0.2:6380"}, options)
    assert "cli=(redis-cli --tls --cacert '/etc/ca dir/ca.pem' --sni redis.test --user ops)" in script
    assert ': "${REDISCLI_AUTH:?' in script
    assert 'migrate_auth=" AUTH2 $(quoted ops) $(quoted "$REDISCLI_AUTH")"' in script
    assert "for slot in $(seq 5 7); do" in script
    plain = migrate_script([], {}, CliOptions())
    assert "cli=(redis-cli)" in plain
    assert "REDISCLI_AUTH" not in plain


def primaries_of(node: RedisProcess) -> dict[str, tuple[int, frozenset[int]]]:
    """node id → (port, slots) of every primary, as ``node`` sees the cluster."""
    text = node.client().execute_command("CLUSTER", "NODES").decode()
    return {m.node_id: (m.port, m.slots) for m in parse_cluster_nodes(text) if m.role == "primary" and m.slots}


def keys_in_slots(node_slots: frozenset[int], per_slot: int, prefix: str, count: int) -> dict[int, list[str]]:
    """``count`` slots of ``node_slots`` with ``per_slot`` keys each, by hash tag."""
    chosen: dict[int, list[str]] = {}
    for i in range(100000):
        tag = f"{prefix}{i}"
        slot = key_slot(tag.encode())
        if slot in node_slots and slot not in chosen:
            chosen[slot] = [f"{{{tag}}}:{n}" for n in range(per_slot)]
            if len(chosen) == count:
                return chosen
    raise AssertionError("no slots found")


def test_an_elasticache_cluster_known_by_its_announced_hostnames_gets_rebalance_advice(tmp_path, capsys):
    engine = "valkey-8.1"
    if ENGINES.get(engine) is None:
        missing(engine)
    nodes = start_cluster(engine, replicas=0)
    try:
        for index, node in enumerate(nodes, start=1):  # announced only: the test still connects to 127.0.0.1
            node.client().config_set("cluster-announce-hostname", ELASTICACHE_HOST.format(index))
        target = nodes[0]
        hostnames = {ELASTICACHE_HOST.format(index) for index in range(1, 4)}

        def announced() -> bool:
            text = target.client().execute_command("CLUSTER", "NODES").decode()
            return {m.hostname for m in parse_cluster_nodes(text)} == hostnames

        wait_until(announced, timeout=30, what="every node's hostname gossiped")
        slots = next(iter(primaries_of(target).values()))[1]
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=target.port)
        for keys in keys_in_slots(slots, 200, "hot", 10).values():
            client.mset({key: "x" for key in keys})
        client.close()
        args = ["cluster", "plan", "--target", f"redis://127.0.0.1:{target.port}", "--resource", "keys"]
        assert main(args) == 0
        text = capsys.readouterr().out
        assert main([*args, "--format", "json", "--out", str(tmp_path / "plan.json")]) == 0
        refused = main([*args, "--format", "script"])
        error = capsys.readouterr().err
    finally:
        for node in nodes:
            node.stop()
    assert "ElastiCache spreads slots evenly by count" in text
    assert "SETSLOT" not in text
    assert "MIGRATE" not in text
    assert json.loads((tmp_path / "plan.json").read_text())["on_elasticache"] is True
    assert refused == 2
    assert "ElastiCache cannot move chosen slots" in error


@pytest.fixture
def secured_cluster(tmp_path):
    """Three primaries of Redis 7.0 (no SLOT-STATS: the plan counts keys per slot) behind a password and TLS only."""
    certificates = make_certificates(tmp_path)
    password = 'pa ss"wo\\rd'
    nodes = start_cluster("redis-7.0", replicas=0, password=password, tls=certificates)
    try:
        yield nodes, password, certificates
    finally:
        for node in nodes:
            node.stop()


def cluster_client(node: RedisProcess) -> redis.cluster.RedisCluster:
    return redis.cluster.RedisCluster(
        host="127.0.0.1",
        port=node.port,
        password=node.password,
        ssl=True,
        ssl_ca_certs=node.tls["ca"],
        ssl_certfile=node.tls["cert"],
        ssl_keyfile=node.tls["key"],
    )


def run_script(script: str, workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    (workdir / "move.sh").write_text(script)
    (workdir / "a file the shell would glob").write_text("")
    path = os.pathsep.join([str(Path(require("redis-cli")).parent), os.environ["PATH"]])
    return subprocess.run(
        [require("bash"), "move.sh"], cwd=workdir, env={"PATH": path, **env}, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_printed_script_moves_the_slots_with_their_keys_over_tls_and_a_password(secured_cluster, tmp_path, monkeypatch):
    nodes, password, certificates = secured_cluster
    target = nodes[0]
    before = primaries_of(target)
    hot_id, (_, hot_slots) = next(iter(before.items()))
    piled = keys_in_slots(hot_slots, 150, "hot", 4)
    first = next(iter(piled))
    tag = piled[first][0][1:].split("}")[0]
    piled[first] += [f"{{{tag}}}{name}" for name in HOSTILE]
    values = {key: f"value of {key}" for keys in piled.values() for key in keys}
    client = cluster_client(target)
    for keys in piled.values():
        client.mset({key: values[key] for key in keys})
    workdir = tmp_path / "run"
    workdir.mkdir()
    args = ["cluster", "plan", "--target", f"rediss://default@127.0.0.1:{target.port}", "--resource", "keys", "--format", "script"]
    args += ["--redis.tls-ca-file", certificates["ca"], "--redis.tls-cert-file", certificates["cert"], "--redis.tls-key-file", certificates["key"]]
    args += ["--out", str(workdir / "plan.sh")]
    monkeypatch.setenv("ELASTICACHE_EXPORTER_REDIS_PASSWORD", password)
    assert main(args) == 0
    script = (workdir / "plan.sh").read_text()
    assert password not in script
    assert "wo\\rd" not in script
    assert "--tls --cacert" in script
    assert "--user default" in script
    moved = [line.split()[2:] for line in script.splitlines() if line.startswith("  move_slot")]
    assert moved, script
    assert all(slot_range for slot_range in moved)
    done = run_script(script, workdir, {"REDISCLI_AUTH": password})
    assert done.returncode == 0, done.stderr
    assert password not in done.stdout + done.stderr
    assert not (workdir / "pwned").exists()
    after = primaries_of(target)
    moves = [line for line in script.splitlines() if line.startswith("for slot in $(seq ")]
    moved_slots = {slot for line in moves for slot in range(int(line.split()[4]), int(line.split()[5].rstrip(");")) + 1)}
    assert first in moved_slots  # the heaviest slot, with the hostile names, moved first
    assert not moved_slots & after[hot_id][1]  # the hot primary no longer serves them
    assert all(any(slot in slots for _, slots in after.values()) for slot in moved_slots)
    client = cluster_client(target)  # a fresh client: the slots' new owners
    assert {key: client.get(key).decode() for key in values} == values  # every key moved with its slot, value intact
    for slot in moved_slots:
        owner = next(port for port, slots in after.values() if slot in slots)
        node = next(n for n in nodes if n.port == owner)
        assert node.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == len(piled.get(slot, []))
    client.close()


def test_the_script_stops_with_a_message_when_a_pass_moves_nothing_and_resumes_when_run_again(tmp_path):
    nodes = start_cluster("redis-7.0", replicas=0)
    try:
        layout = primaries_of(nodes[0])
        (source_id, (source_port, source_slots)), (target_id, (target_port, _)) = list(layout.items())[:2]
        slot, keys = next(iter(keys_in_slots(source_slots, 3, "busy", 1).items()))
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port)
        client.mset({key: "x" for key in keys})
        target = next(n for n in nodes if n.port == target_port)
        tag = keys[0].split("}")[0] + "}"
        assert target.client().execute_command("DEBUG", "POPULATE", 1, tag) == b"OK"  # the same name on the target: BUSYKEY
        assert target.client().execute_command("DBSIZE") == 1
        addresses = {source_id: f"127.0.0.1:{source_port}", target_id: f"127.0.0.1:{target_port}"}
        script = migrate_script([Move(slot, slot, source_id, target_id, 3.0)], addresses, CliOptions())
        source = next(n for n in nodes if n.port == source_port)
        stuck = run_script(script, tmp_path, {})
        left = source.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)
        # the cause removed (the target's key of that name, reached with ASKING while it imports the slot), the same
        # script finishes the slot; run once more, it finds every slot moved
        importing = target.client(single_connection_client=True)
        importing.execute_command("ASKING")
        assert importing.delete(f"{tag}:0") == 1
        importing.close()
        resumed = run_script(script, tmp_path, {})
        again = run_script(script, tmp_path, {})
        moved = target.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)
        assert slot in primaries_of(source)[target_id][1]
        assert {key: client.get(key) for key in keys} == {key: b"x" for key in keys}
        client.close()
    finally:
        for node in nodes:
            node.stop()
    assert stuck.returncode == 1
    assert f"slot {slot}: 1 key(s) did not move" in stuck.stderr, stuck.stderr
    assert "BUSYKEY" in stuck.stderr
    assert "CLUSTER SETSLOT" in stuck.stderr
    assert "STABLE" in stuck.stderr
    assert left == 1  # the two that could move did
    assert resumed.returncode == 0, resumed.stderr
    assert moved == 3
    assert again.returncode == 0, again.stderr
    assert f"slot {slot}: already on 127.0.0.1:{target_port}" in again.stdout


def test_a_node_that_wants_a_password_is_one_line_naming_the_password_flag(tmp_path, capsys, monkeypatch):
    from servers import start_redis

    server = start_redis(password="pw-s3cret")
    target = ["cluster", "plan", "--target", f"redis://127.0.0.1:{server.port}"]
    monkeypatch.delenv("ELASTICACHE_EXPORTER_REDIS_PASSWORD", raising=False)
    try:
        assert main(target) == 1
        err = capsys.readouterr().err
        assert err == (
            f"elasticache-exporter: cluster plan: --target: 127.0.0.1:{server.port} wants a password: give it in a file with "
            "--redis.password-file, or in ELASTICACHE_EXPORTER_REDIS_PASSWORD\n"
        )
        monkeypatch.setenv("ELASTICACHE_EXPORTER_REDIS_PASSWORD", "not-it")
        assert main(target) == 1
        err = capsys.readouterr().err
        assert "refused user default with the password of ELASTICACHE_EXPORTER_REDIS_PASSWORD (WRONGPASS)" in err
        assert "not-it" not in err
        monkeypatch.delenv("ELASTICACHE_EXPORTER_REDIS_PASSWORD")
        password_file = tmp_path / "pw"
        password_file.write_text("pw-s3cret\n")
        assert main([*target, "--redis.password-file", str(password_file)]) == 2  # in: the node is no cluster node
        assert "is no cluster node" in capsys.readouterr().err
    finally:
        server.stop()
