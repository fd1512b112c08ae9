"""ElastiCache IAM authentication against a TLS front that verifies each token as ElastiCache does (tests/iam_front.py),
in front of a real redis-server: tokens signed per connect, refused ones reported as `auth` without the token ever
showing, connections renewed before the server's age limit cuts them, and the start-up refusals."""

from __future__ import annotations

import datetime
import logging
import os
import subprocess
import sys
import time

import pytest
from helpers import call, make_app, sample
from iam_front import IamFront, TokenRejected, verify_token
from servers import start_redis

from exporter.aws.discovery import SERVERLESS, Node
from exporter.aws.iam_auth import IamAuth, IamToken, presign
from exporter.config import build_config
from exporter.service.targets import TargetSet

EXPECT = {"user": "exporter-iam", "cache": "orders", "region": "eu-west-1", "access_key": "testing", "secret_key": "testing"}


@pytest.fixture(scope="module")
def upstream():
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def front(upstream, certificates, aws_credentials):
    fronts = []

    def make(**overrides) -> IamFront:
        front = IamFront(upstream.port, certificates, **{**EXPECT, **overrides})
        fronts.append(front)
        return front

    yield make
    for front in fronts:
        front.close()


def target(front: IamFront, certificates, **iam) -> dict:
    return {
        "name": "orders",
        "addr": front.addr,
        "user": "exporter-iam",
        "tls_ca_file": certificates["ca"],
        "iam_auth": {"cache": "orders", "region": "eu-west-1", **iam},
    }


def scrape(app) -> dict:
    return call(app, "/metrics").samples()


def test_a_token_signed_for_the_cache_and_user_is_accepted(front, certificates):
    server = front()
    app = make_app({"targets": [target(server, certificates)]})
    try:
        samples = scrape(app)
        assert sample(samples, "redis_up", instance="orders") == 1
        assert sample(samples, "redis_connected_clients", instance="orders") >= 1  # INFO came through the front
        assert server.accepted == 1
        assert server.rejected == []
        (token,) = server.tokens
        assert token.startswith("orders/?")
        assert "Action=connect" in token
        assert "User=exporter-iam" in token
        assert "X-Amz-Expires=900" in token
        assert "http" not in token
    finally:
        app.close()


def test_a_serverless_cache_signs_its_resource_type(front, certificates):
    server = front(serverless=True)
    app = make_app({"targets": [target(server, certificates, serverless=True)]})
    plain = make_app({"targets": [target(server, certificates)]})  # the same cache as a replication group: refused
    try:
        assert sample(scrape(app), "redis_up", instance="orders") == 1
        assert "ResourceType=ServerlessCache" in server.tokens[0]
        assert sample(scrape(plain), "redis_up", instance="orders") == 0
        assert server.rejected == ["ResourceType does not match the cache"]
    finally:
        app.close()
        plain.close()


@pytest.mark.parametrize(
    ("front_settings", "reason"),
    [
        ({"user": "someone-else"}, "AUTH as 'exporter-iam'"),
        ({"cache": "payments"}, "signed for cache 'orders'"),
        ({"region": "us-east-1"}, "signed for elasticache in eu-west-1"),
        ({"clock_skew": 901.0}, "expired"),  # the front's clock 901 s on: the token is past its 900 s
        ({"secret_key": "another"}, "bad signature"),
    ],
)
def test_refused_tokens_are_auth_failures_and_never_shown(front, certificates, caplog, front_settings, reason):
    server = front(**front_settings)
    app = make_app({"targets": [target(server, certificates)]})
    try:
        with caplog.at_level(logging.DEBUG):
            response = call(app, "/metrics")
            status = call(app, "/")
        samples = response.samples()
        assert sample(samples, "redis_up", instance="orders") == 0
        assert sample(samples, "elasticache_exporter_target_last_error", instance="orders", kind="auth") == 1
        assert server.rejected == [reason]
        (token,) = server.tokens
        signature = token.rsplit("X-Amz-Signature=", 1)[1]
        for text in (response.text, status.text, caplog.text):
            assert signature not in text
            assert "X-Amz-Credential" not in text
        assert "Traceback" not in caplog.text
    finally:
        app.close()


def test_each_connect_signs_a_new_token(front, certificates, monkeypatch):
    from exporter.aws import iam_auth

    signed = []
    presign = iam_auth.presign
    monkeypatch.setattr(iam_auth, "presign", lambda *args: signed.append(presign(*args)) or signed[-1])
    server = front()
    app = make_app({"targets": [target(server, certificates, max_connection_age="1s")]})
    now = [1000.0]
    app.targets.on_metrics()[0].node.clock = lambda: now[0]  # the connection's age, on a clock of the test's
    try:
        assert sample(scrape(app), "redis_up", instance="orders") == 1
        now[0] += 1.1  # past the connection's age: the next scrape connects anew
        assert sample(scrape(app), "redis_up", instance="orders") == 1
        assert server.accepted == 2
        assert server.tokens == signed  # each connect signed its own (SigV4 signs to the second: they may be equal)
    finally:
        app.close()


def test_connections_are_renewed_before_the_server_cuts_them(front, certificates):
    """The front cuts every connection 2 s after it opens (ElastiCache: 12 hours); renewed at 1 s, no scrape fails.
    A renewing scrape takes about 0.2 s here (TLS, the token signed): a second of slack, not half of one, so a busy
    machine's slow scrape is not taken for a missed renewal; 5.5 s hold four connections even at 1.5 s apart."""
    server = front(max_age=2.0)
    app = make_app({"targets": [target(server, certificates, max_connection_age="1s")]})
    try:
        ups = []
        deadline = time.monotonic() + 5.5
        while time.monotonic() < deadline:
            ups.append(sample(scrape(app), "redis_up", instance="orders"))
            time.sleep(0.1)
        assert len(ups) >= 10
        assert all(up == 1 for up in ups), ups
        assert server.accepted >= 4  # a new connection, and a new token, every second
        node = app.targets.on_metrics()[0].node
        assert node.renewals >= 3
    finally:
        app.close()
    # without the renewal the cut is seen: the same front, connections kept for 12 hours
    server = front(max_age=1.0)
    app = make_app({"targets": [target(server, certificates)]})
    try:
        assert sample(scrape(app), "redis_up", instance="orders") == 1
        time.sleep(1.3)
        assert sample(scrape(app), "redis_up", instance="orders") == 0  # the failure the renewal avoids
    finally:
        app.close()


def test_the_front_rejects_what_elasticache_would(aws_credentials):
    """The verifier itself: a token of botocore's signer passes, one changed in any signed part fails."""
    from botocore.credentials import Credentials

    credentials = Credentials("testing", "testing")
    token = presign(IamAuth("orders", "exporter-iam", "eu-west-1"), credentials)
    now = datetime.datetime.now(datetime.timezone.utc)
    verify_token(token, now=now, serverless=False, **EXPECT)
    for changed in (token.replace("User=exporter-iam", "User=exporter-iam2"), "http://" + token, token.replace("orders/", "order/")):
        with pytest.raises(TokenRejected):
            verify_token(changed, now=now, serverless=False, **{**EXPECT, "user": "exporter-iam"})
    with pytest.raises(TokenRejected, match="expired"):
        verify_token(token, now=now + datetime.timedelta(seconds=901), serverless=False, **EXPECT)


def test_discovered_nodes_sign_for_their_own_group_or_serverless_cache(aws_credentials):
    config = build_config({"redis": {"addr": ""}, "aws": {"discovered": {"user": "exporter-iam", "iam_auth": True}}}, environ={})
    targets = TargetSet(config)
    group = Node(
        region="eu-west-1",
        cluster_id="orders-0001-001",
        node_id="0001",
        node_type="cache.r6g.large",
        engine="valkey",
        engine_version="8.1",
        replication_group="orders",
        address="orders-0001-001.abc.euw1.cache.amazonaws.com",
        tls=True,
    )
    cache = Node(
        region="us-east-1",
        cluster_id="carts",
        node_id="",
        node_type=SERVERLESS,
        engine="valkey",
        engine_version="8",
        address="carts-abc.serverless.use1.cache.amazonaws.com",
        tls=True,
    )
    targets.set_discovered([("orders-0001-001", group), ("carts", cache)])
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        for name, expect in (
            ("orders-0001-001", {"cache": "orders", "serverless": False}),
            ("carts", {"cache": "carts", "region": "us-east-1", "serverless": True}),
        ):
            credentials = targets.resolve(name).node.credentials
            assert isinstance(credentials.password, IamToken)
            assert credentials.max_connection_age == 11 * 3600
            verify_token(credentials.password.reveal(), now=now, **{**EXPECT, **expect})
    finally:
        targets.close()


def _serve(config: str, tmp_path, env: dict[str, str]) -> subprocess.CompletedProcess:
    path = tmp_path / "exporter.yml"
    path.write_text(config)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ELASTICACHE_EXPORTER_"))}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--config.file", str(path), "--web.listen-address", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        check=False,
    )


IAM_TARGET = "targets:\n  - name: orders\n    addr: {addr}\n    user: exporter-iam\n    iam_auth: {{cache: orders, region: eu-west-1}}\n"


def test_iam_without_tls_is_refused_at_start_up(tmp_path):
    result = _serve(IAM_TARGET.format(addr="redis://127.0.0.1:6399"), tmp_path, {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "targets[0].iam_auth" in lines[0]
    assert "TLS" in lines[0]


def test_iam_without_credentials_is_refused_at_start_up(tmp_path):
    nowhere = str(tmp_path / "none")
    env = {"AWS_SHARED_CREDENTIALS_FILE": nowhere, "AWS_CONFIG_FILE": nowhere, "AWS_EC2_METADATA_DISABLED": "true"}
    result = _serve(IAM_TARGET.format(addr="rediss://127.0.0.1:6399"), tmp_path, env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "targets[0].iam_auth" in lines[0]
    assert "credentials" in lines[0]
