"""Inputs you can trust: every malformed input is one line and exit 2; AWS failures are one line and exit 1;
basic auth leaks nothing by timing."""

from __future__ import annotations

import base64
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import bcrypt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers import free_port

from exporter.common.errors import ConfigError
from exporter.common.yamlfile import parse_yaml
from exporter.config import build_config
from exporter.service.webconfig import load_web_config

CORPUS = Path(__file__).parent / "bad_inputs"
COMMANDS = {
    "config": lambda f: ["serve", "--config.file", f],
    "webconfig": lambda f: ["serve", "--redis.addr", "", "--web.config-file", f],
    "baselines": lambda f: ["render", "prometheus", "--baselines", f],
    "catalog": lambda f: ["render", "prometheus", "--catalog", f],
    "benchmark": lambda f: ["baseline", "derive", "--from", f],
}
# file -> what its one line must say (besides naming the file)
EXPECTED = {
    "config/typo.yml": "'targets[0].adr': unknown key (did you mean 'addr'?)",
    "config/wrong_name.yml": "'redis.password_path': unknown key (did you mean 'password_env' or 'password_secret'?)",
    "config/wrong_type.yml": "'scrape.timeout': must be a positive duration",
    "config/bare_duration.yml": "'scrape.timeout': not a valid duration: 500 has no unit (500ms, 5s, 1m, 2h)",
    "config/out_of_range.yml": "'scrape.concurrency': must be between 1 and 256",
    "config/bad_port.yml": "'targets[0].addr': invalid port",
    "config/duplicate_key.yml": "line 3, column 3: duplicate key 'timeout' (first at line 2)",
    "config/utf16.yml": "the file is UTF-16",
    "config/latin1.yml": "line 2: not UTF-8 (byte 0xe9",
    "config/binary.yml": "not UTF-8",
    "config/alias_bomb.yml": "aliases expand the document past",
    "config/recursive_alias.yml": "a recursive alias",
    "config/deep.yml": "nested deeper than 64 levels",
    "config/truncated.yml": "line 3, column 1: found unexpected end of stream",
    "config/top_level_list.yml": "the top level must be a mapping",
    "webconfig/typo_client_auth.yml": "'tls_server_config.client_auth_typ': unknown key (did you mean 'client_auth_type'",
    "webconfig/plaintext_password.yml": "'basic_auth_users.admin': must be a bcrypt hash",
    "webconfig/cipher_suites.yml": "'tls_server_config.cipher_suites': Go cipher suite names",
    "webconfig/rate_limit.yml": "'rate_limit': not supported by this exporter",
    "webconfig/latin1.yml": "not UTF-8",
    "webconfig/unknown_top.yml": "'basic_auth_user': unknown key (did you mean 'basic_auth_users'?)",
    "webconfig/header_typo.yml": "did you mean 'X-Frame-Options'?",
    "webconfig/bad_cost.yml": "the bcrypt cost must be between 04 and 31",
    "webconfig/duplicate_user.yml": "duplicate key 'admin'",
    "baselines/unknown_key.yml": "node_types.cache.x.large.vcpu: unknown key (did you mean 'vcpus'?)",
    "baselines/wrong_type.yml": "bytes_per_second.100: must be a number, got 'fast'",
    "baselines/bad_level.yml": "bytes_per_second.70: unknown key",
    "baselines/duplicate.yml": "duplicate key 'cache.x.large'",
    "baselines/utf16.yml": "the file is UTF-16",
    "baselines/not_a_table.yml": "not a baseline table",
    "catalog/unknown_key.yml": "alerts[0].severty: unknown key (did you mean 'severity'?)",
    "catalog/cloudwatch_typo.yml": "alerts[0].cloudwatch.treshold: unknown key (did you mean 'threshold'?)",
    "catalog/alias_bomb.yml": "aliases expand the document past",
    "benchmark/latin1.csv": "line 2: not UTF-8",
    "benchmark/utf16.csv": "the file is UTF-16",
    "benchmark/broken.jsonl": "invalid JSON",
    "benchmark/empty.csv": "empty file",
}


def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.unit
def test_the_corpus_is_covered():
    files = {str(path.relative_to(CORPUS)) for path in CORPUS.rglob("*") if path.is_file()}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_bad_input_is_one_line_and_exit_2(case):
    path = str(CORPUS / case)
    result = _run(*COMMANDS[case.split("/")[0]](path), timeout=30)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert path in lines[0]
    assert EXPECTED[case] in lines[0]
    assert "Traceback" not in result.stderr
    assert "hunter2" not in result.stderr  # a plain-text password where a hash belongs is not echoed


@pytest.mark.unit
def test_a_utf8_byte_order_mark_is_accepted():
    assert parse_yaml("\ufeffa: 1".encode("utf-8-sig").decode("utf-8").lstrip("\ufeff"), "x") == {"a": 1}
    from exporter.common.yamlfile import decode_utf8

    assert decode_utf8(b"\xef\xbb\xbfa: 1\n", "x") == "a: 1\n"


KEYS = st.sampled_from(
    [
        "web",
        "log",
        "scrape",
        "redis",
        "targets",
        "heartbeat",
        "aws",
        "baselines",
        "addr",
        "timeout",
        "name",
        "password_file",
        "regions",
        "accounts",
        "cloudwatch",
        "metrics",
        "allow",
        "hosts",
        "level",
        "key",
        "interval",
        "ttl",
        "concurrency",
        "max_reply_size",
        "node_type",
        "tls_ca_file",
        "adr",
        "x",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 100000),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["1s", "redis://127.0.0.1:6379", "eu-west-1", "4MiB", "cache.r6g.large", "-1"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)


@pytest.mark.unit
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, VALUES, max_size=5))
def test_config_loader_fuzz_gives_a_config_or_one_line_a_problem(raw):
    message = _error_of(lambda: build_config(raw, environ={}), ConfigError)
    if message is not None:
        lines = message.split("\n")
        if len(lines) > 1:
            assert lines[0] == f"{len(lines) - 1} problems in the configuration:"
            lines = [line.removeprefix("  ") for line in lines[1:]]
        assert all(line.startswith("config key '") for line in lines)


@pytest.mark.unit
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_yaml_reader_fuzz_gives_a_document_or_one_line(text):
    message = _error_of(lambda: parse_yaml(text, "fuzz.yml"), ValueError)
    if message is not None:
        assert "\n" not in message
        assert message.startswith("fuzz.yml")


def _error_of(call, kind: type[Exception]) -> str | None:
    """The message of the ``kind`` error ``call`` raises, or None; any other exception fails the test."""
    try:
        call()
    except kind as err:
        return str(err)
    return None


def test_password_inside_redis_addr_flag_or_environment_is_refused():
    flag = _run("serve", "--redis.addr", "redis://:s3cret-pw@127.0.0.1:6379", timeout=30)
    env = _run("serve", timeout=30, env={"ELASTICACHE_EXPORTER_REDIS_ADDR": "redis://user:s3cret-pw@127.0.0.1:6379"})
    for result, where in ((flag, "the flag --redis.addr"), (env, "ELASTICACHE_EXPORTER_REDIS_ADDR")):
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1
        assert where in result.stderr
        assert "--redis.password-file" in result.stderr
        assert "s3cret" not in result.stderr + result.stdout


def _median_seconds(config, header: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        assert not config.authorized(header)
        times.append(time.perf_counter() - started)
        config._verified.clear()  # every attempt is a first attempt, as an attacker trying names would make it
    return statistics.median(times)


@pytest.mark.unit
def test_unknown_user_and_wrong_password_cost_the_same(tmp_path):
    hashed = bcrypt.hashpw(b"right-password", bcrypt.gensalt(8)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  admin: '{hashed}'\n")
    config = load_web_config(str(path))

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    assert config.authorized(header("admin", "right-password"))
    ratios = []
    for _ in range(3):  # interleaved, so drift of the machine's speed hits both alike
        unknown = _median_seconds(config, header("nobody", "whatever"), 15)
        wrong = _median_seconds(config, header("admin", "whatever"), 15)
        ratios.append(unknown / wrong)
    assert 0.7 < statistics.median(ratios) < 1.4, ratios


@pytest.mark.unit
def test_failed_basic_auth_is_logged_without_the_password(tmp_path, caplog):
    hashed = bcrypt.hashpw(b"right-password", bcrypt.gensalt(4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  admin: '{hashed}'\n")
    config = load_web_config(str(path))
    caplog.set_level("WARNING")
    assert not config.authorized("Basic " + base64.b64encode(b"admin:guess-pw-123").decode(), "127.0.0.1")
    assert "basic auth failed for user 'admin' from 127.0.0.1" in caplog.text
    assert "guess-pw-123" not in caplog.text


# --- AWS failure paths: exit 1, one line in the command's own words --------------------------------


def _aws_env(**extra: str) -> dict[str, str]:
    base = {"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
    return {**base, **extra}


def _without_credentials() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


@pytest.mark.parametrize("command", [["alarms", "plan"], ["alarms", "apply"], ["capacity"], ["cost"]])
def test_no_credentials_is_exit_1_in_the_commands_words(command):
    result = subprocess.run(
        [sys.executable, "-m", "exporter", *command, "--aws.region", "eu-west-1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**_without_credentials(), **_aws_env()},
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"elasticache-exporter: {' '.join(command)}: ")
    assert "no AWS credentials found" in lines[0]
    assert "serving" not in lines[0]


@pytest.mark.parametrize("command", [["alarms", "plan"], ["capacity"]])
def test_unreachable_aws_is_exit_1(command):
    dead = f"http://127.0.0.1:{free_port()}"
    env = _aws_env(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=dead)
    started = time.monotonic()
    result = _run(*command, "--aws.region", "eu-west-1", env=env)
    assert result.returncode == 1, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "cannot reach AWS" in result.stderr
    assert time.monotonic() - started < 45


def test_unknown_node_names_the_nearest(moto_server):
    import boto3

    env = _aws_env(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=moto_server)
    client = boto3.client(
        "elasticache", region_name="eu-west-1", endpoint_url=moto_server, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    client.create_cache_cluster(CacheClusterId="sessions-001", Engine="redis", CacheNodeType="cache.r6g.large", NumCacheNodes=1)
    result = _run("capacity", "--aws.region", "eu-west-1", "--node", "sesions-001", env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "elasticache-exporter: capacity: --node sesions-001: no such cache cluster among the 1 discovered; nearest: sessions-001"
    )


def test_persistent_throttling_is_exit_1_in_one_line(moto_server, tmp_path):
    # a CloudWatch that always throttles: moto answers discovery, a small proxy of ours answers 400 Throttling
    import http.server
    import threading
    import urllib.request

    class Throttle(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if b"GetMetricData" in body or "monitoring" in (self.headers.get("Authorization") or ""):
                payload = b'{"__type":"Throttling","message":"Rate exceeded"}'
                self.send_response(400)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                self.send_header("x-amzn-query-error", "Throttling;Sender")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            request = urllib.request.Request(moto_server + self.path, data=body, headers=dict(self.headers), method="POST")
            with urllib.request.urlopen(request, timeout=10) as answer:
                data = answer.read()
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        def log_message(self, *args):
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Throttle)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        import boto3

        client = boto3.client(
            "elasticache", region_name="eu-west-1", endpoint_url=moto_server, aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        client.create_cache_cluster(CacheClusterId="orders-001", Engine="redis", CacheNodeType="cache.r6g.large", NumCacheNodes=1)
        env = _aws_env(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.server_address[1]}")
        result = _run("capacity", "--aws.region", "eu-west-1", "--days", "1", env=env, timeout=120)
        assert result.returncode == 1, result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("elasticache-exporter: capacity: AWS kept throttling get_metric_data")
        assert "Traceback" not in result.stderr
    finally:
        proxy.shutdown()
