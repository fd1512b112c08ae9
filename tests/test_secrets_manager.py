"""Passwords from AWS Secrets Manager (moto, in process) against real redis-servers: read at start-up, read again
after the server refused one (a rotation), at most once per interval, for targets, /scrape allow rules and JSON
secrets; errors name the secret and never show its value."""

from __future__ import annotations

import logging
import time

import boto3
import pytest
from helpers import call, make_app, sample
from moto import mock_aws
from servers import start_redis, wait_until

from exporter.common.errors import RuntimeFailure

FIRST, SECOND = "first-pass-4b1d", "second-pass-9c2e"


@pytest.fixture
def secrets(aws_credentials):
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="eu-west-1")


@pytest.fixture
def protected():
    server = start_redis(password=FIRST)
    yield server
    server.stop()


def password_of(app, name: str = "orders"):
    return app.targets.resolve(name).node.credentials.password


def rotate(server, secrets, secret_id: str) -> None:
    """As a rotation does it: the server takes the new password, existing connections go, the secret holds the new one."""
    client = server.client()
    client.config_set("requirepass", SECOND)
    client.execute_command("CLIENT", "KILL", "TYPE", "normal")
    secrets.put_secret_value(SecretId=secret_id, SecretString=SECOND)


def test_a_rotated_secret_is_read_again_after_one_refusal(secrets, protected, caplog):
    arn = secrets.create_secret(Name="prod/orders-redis", SecretString=FIRST)["ARN"]
    app = make_app({"targets": [{"name": "orders", "addr": protected.addr, "password_secret": arn}]})
    try:
        password = password_of(app)
        assert password.fetches == 1  # at start-up
        assert sample(call(app, "/metrics").samples(), "redis_up", instance="orders") == 1
        password.refetch_interval = 1.0  # a minute in production
        time.sleep(1.1)
        rotate(protected, secrets, arn)
        with caplog.at_level(logging.DEBUG):
            # the killed connection, then the old password refused; the fetch runs in the background
            assert sample(call(app, "/metrics").samples(), "redis_up", instance="orders") == 0
            wait_until(
                lambda: sample(call(app, "/metrics").samples(), "redis_up", instance="orders") == 1,
                timeout=10,
                what="a scrape with the rotated password",
            )
        samples = call(app, "/metrics").samples()
        assert sample(samples, "elasticache_exporter_target_scrape_errors_total", instance="orders", kind="auth") >= 1
        assert password.fetches == 2
        page = call(app, "/metrics").text + call(app, "/").text
        for secret in (FIRST, SECOND):
            assert secret not in page
            assert secret not in caplog.text
        assert "prod/orders-redis" in caplog.text  # the log line names the secret that changed
    finally:
        app.close()


def test_refusals_within_the_interval_fetch_nothing_more(secrets, protected):
    arn = secrets.create_secret(Name="prod/orders-redis", SecretString=FIRST)["ARN"]
    app = make_app({"targets": [{"name": "orders", "addr": protected.addr, "password_secret": arn}]})
    try:
        password = password_of(app)
        assert sample(call(app, "/metrics").samples(), "redis_up", instance="orders") == 1
        rotate(protected, secrets, arn)
        for _ in range(5):  # each scrape is refused (the first meets the killed connection); the secret is not a minute old
            assert sample(call(app, "/metrics").samples(), "redis_up", instance="orders") == 0
        assert sample(call(app, "/metrics").samples(), "elasticache_exporter_target_last_error", instance="orders", kind="auth") == 1
        time.sleep(0.2)
        assert password.fetches == 1
        password._last_fetch -= 60  # a minute on
        call(app, "/metrics")
        wait_until(
            lambda: password.fetches == 2 and sample(call(app, "/metrics").samples(), "redis_up", instance="orders") == 1,
            timeout=10,
            what="the secret read again a minute on",
        )
    finally:
        app.close()


def test_a_key_of_a_json_secret_and_an_acl_user(secrets):
    server = start_redis()
    try:
        server.client().execute_command("ACL", "SETUSER", "monitor", "on", ">acl-pass-77", "+@all", "~*")
        secrets.create_secret(Name="orders/monitor", SecretString='{"username": "monitor", "password": "acl-pass-77"}')
        app = make_app(
            {
                "targets": [
                    {"name": "orders", "addr": server.addr, "user": "monitor", "password_secret": "orders/monitor", "password_secret_key": "password"}
                ]
            }
        )
        try:
            assert sample(call(app, "/metrics").samples(), "redis_up", instance="orders") == 1
        finally:
            app.close()
    finally:
        server.stop()


def test_scrape_allow_rules_take_their_password_from_a_secret(secrets, protected):
    secrets.create_secret(Name="fleet/redis", SecretString=FIRST)
    app = make_app({"redis": {"addr": ""}, "scrape": {"allow": [{"hosts": ["127.0.0.1"], "password_secret": "fleet/redis"}]}})
    try:
        samples = call(app, "/scrape", f"target=redis://127.0.0.1:{protected.port}").samples()
        assert sample(samples, "redis_up") == 1
    finally:
        app.close()


@pytest.mark.parametrize(
    ("secret", "settings", "problem"),
    [
        (None, {"password_secret": "missing/one"}, "cannot read secret 'missing/one' from Secrets Manager: ResourceNotFoundException"),
        ("not json", {"password_secret": "plain", "password_secret_key": "password"}, "the secret is not JSON"),
        ('{"user": "x"}', {"password_secret": "plain", "password_secret_key": "password"}, "no string under 'password'"),
    ],
)
def test_a_secret_that_cannot_be_read_stops_the_start_naming_it(secrets, secret, settings, problem):
    if secret is not None:
        secrets.create_secret(Name="plain", SecretString=secret)
    with pytest.raises(RuntimeFailure) as raised:
        make_app({"targets": [{"name": "orders", "addr": "redis://127.0.0.1:1", **settings}]})
    message = str(raised.value)
    assert message.startswith("targets[0].password_secret: ")
    assert problem in message
    assert "\n" not in message
    if secret is not None:
        assert secret not in message
