"""Configuration: sources and their precedence, validation errors, addresses and the allow-list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from exporter.cli.config_flags import load_config
from exporter.cli.main import build_parser
from exporter.common.errors import ConfigError
from exporter.config import DEFAULT_REDIS_ADDR, build_config
from exporter.redis.addresses import AddressError, HostPattern, parse_address


def config_from(argv: list[str], environ: dict[str, str] | None = None, yaml_text: str | None = None, tmp_path=None):
    if yaml_text is not None:
        path = tmp_path / "config.yml"
        path.write_text(yaml_text)
        argv = ["--config.file", str(path), *argv]
    args = build_parser().parse_args(["serve", *argv])
    return load_config(args, environ or {})


@pytest.mark.unit
def test_defaults_scrape_localhost():
    config = config_from([])
    assert [t.display for t in config.targets] == [DEFAULT_REDIS_ADDR.replace("localhost", "localhost")]
    assert config.listen_address == ":9769"
    assert config.targets[0].name == "localhost:6379"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ({"aws": {"regions": ["eu-west-1"]}}, []),  # the README's discovery example: a fleet, no localhost
        ({"aws": {"accounts": [{"role_arn": "arn:aws:iam::222222222222:role/x", "regions": ["eu-west-1"]}]}}, []),
        ({"scrape": {"allow": [{"hosts": ["10.0.0.0/8"]}]}}, []),  # /scrape alone
        ({"targets": [{"name": "orders", "addr": "redis://orders:6379", "discover": "cluster"}]}, ["orders"]),
        ({"aws": {"regions": ["eu-west-1"]}, "redis": {"addr": "redis://cache:6379"}}, ["cache:6379"]),
        ({"aws": {"discovered": {"user": "exporter"}}}, ["localhost:6379"]),  # no region: AWS is off
        ({}, ["localhost:6379"]),
    ],
)
def test_the_default_address_applies_only_where_nothing_else_says_what_to_scrape(raw, names):
    assert [target.name for target in build_config(raw, environ={}).targets] == names


@pytest.mark.unit
def test_a_region_flag_alone_scrapes_no_localhost():
    assert config_from(["--aws.region", "eu-west-1"]).targets == ()
    assert config_from([], {"ELASTICACHE_EXPORTER_AWS_REGION": "eu-west-1"}).targets == ()


@pytest.mark.unit
def test_flags_override_environment_override_file(tmp_path):
    yaml_text = "web:\n  listen_address: ':1111'\nredis:\n  addr: redis://file-host:6379\nscrape:\n  timeout: 3s\n"
    from_file = config_from([], {}, yaml_text, tmp_path)
    assert from_file.listen_address == ":1111"
    assert from_file.targets[0].endpoint.host == "file-host"
    assert from_file.scrape_timeout == 3
    env = {"ELASTICACHE_EXPORTER_REDIS_ADDR": "redis://env-host:6380", "ELASTICACHE_EXPORTER_WEB_LISTEN_ADDRESS": ":2222"}
    from_env = config_from([], env, yaml_text, tmp_path)
    assert from_env.listen_address == ":2222"
    assert from_env.targets[0].endpoint.host == "env-host"
    assert from_env.scrape_timeout == 3
    from_flags = config_from(["--redis.addr", "flag-host:7000", "--scrape.timeout", "2s"], env, yaml_text, tmp_path)
    assert from_flags.targets[0].endpoint.host == "flag-host"
    assert from_flags.targets[0].endpoint.port == 7000
    assert from_flags.listen_address == ":2222"
    assert from_flags.scrape_timeout == 2


@pytest.mark.unit
def test_config_file_from_environment(tmp_path):
    path = tmp_path / "c.yml"
    path.write_text("targets:\n  - name: a\n    addr: redis://a:6379\n")
    config = load_config(build_parser().parse_args(["serve"]), {"ELASTICACHE_EXPORTER_CONFIG_FILE": str(path)})
    assert [t.name for t in config.targets] == ["a"]  # a file with targets has no default single target


@pytest.mark.unit
def test_empty_redis_addr_means_multi_target_only():
    assert config_from(["--redis.addr", ""]).targets == ()


@pytest.mark.unit
def test_targets_with_credentials(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    yaml_text = f"""
targets:
  - name: orders
    addr: rediss://orders.abc.cache.amazonaws.com:6379
    user: exporter
    password_file: {secret}
    timeout: 2s
  - addr: redis://:inline-pw@10.0.0.5:6380/2
  - name: env
    addr: 10.0.0.6
    password_env: ORDERS_PW
"""
    config = config_from(["--redis.addr", ""], {"ORDERS_PW": "from-env"}, yaml_text, tmp_path)
    orders, inline, env = config.targets
    assert orders.endpoint.tls
    assert orders.credentials.username == "exporter"
    assert orders.credentials.password.reveal() == "from-file"
    assert orders.credentials.timeout == 2
    assert orders.display == "rediss://exporter@orders.abc.cache.amazonaws.com:6379"
    assert inline.name == "10.0.0.5:6380"
    assert inline.credentials.password.reveal() == "inline-pw"
    assert "inline-pw" not in inline.display
    assert "inline-pw" not in repr(inline)
    assert inline.endpoint.db == 2
    assert env.credentials.password.reveal() == "from-env"


@pytest.mark.unit
def test_redis_password_from_environment_only():
    config = config_from([], {"ELASTICACHE_EXPORTER_REDIS_PASSWORD": "s3cret"})
    assert config.targets[0].credentials.password.reveal() == "s3cret"
    assert "s3cret" not in repr(config)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--redis.password", "x"])


@pytest.mark.unit
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["serve", "--redis.password", "s3cret"],
            "unknown flag --redis.password (a secret is no flag, as the process list shows it: use --redis.password-file "
            "or ELASTICACHE_EXPORTER_REDIS_PASSWORD)",
        ),
        (["demo", "--redis.password=s3cret"], "demo: error: unknown flag --redis.password (a secret is no flag"),
        (["serve", "--redis.pasword-file", "s3cret"], "serve: error: unknown flag --redis.pasword-file (did you mean --redis.password-file?)"),
        (["serve", "--redis.user", "u", "s3cret"], "serve: error: 1 unexpected argument (not shown: it may be a secret)"),
        (["render", "prometheus", "--ot", "s3cret"], "render: error: unknown flag --ot (did you mean --out?)"),
    ],
)
def test_unknown_flags_are_named_without_their_values(argv, says, capsys):
    from exporter.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "s3cret" not in err
    assert says in err
    assert err.count("\n") == 1


@pytest.mark.unit
def test_redis_exporters_environment_variables_are_honoured(tmp_path):
    """A redis_exporter deployment's environment carries over: each variable with an equivalent sets it."""
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    environ = {
        "REDIS_ADDR": "rediss://cache:6380",
        "REDIS_USER": "exporter",
        "REDIS_EXPORTER_WEB_LISTEN_ADDRESS": ":9121",
        "REDIS_EXPORTER_WEB_TELEMETRY_PATH": "/redis-metrics",
        "REDIS_EXPORTER_LOG_LEVEL": "WARNING",
        "REDIS_EXPORTER_LOG_FORMAT": "txt",
        "REDIS_EXPORTER_CONNECTION_TIMEOUT": "4s",
        "REDIS_EXPORTER_TLS_CA_CERT_FILE": str(ca),
        "REDIS_EXPORTER_TLS_SERVER_NAME": "cache.internal",
        "REDIS_EXPORTER_SKIP_TLS_VERIFICATION": "true",
        "REDIS_EXPORTER_CHECK_KEYS": "db0=queue:*",
        "REDIS_EXPORTER_SERVICE_HOST": "10.0.0.1",  # Kubernetes' link to a Service named redis-exporter: not refused
        "REDIS_EXPORTER_SCRIPT": "",  # empty: asks for nothing
    }
    config = config_from([], environ)
    (target,) = config.targets
    assert (target.endpoint.host, target.endpoint.port, target.endpoint.tls) == ("cache", 6380, True)
    assert target.credentials.username == "exporter"
    assert (target.credentials.tls.ca_file, target.credentials.tls.server_name) == (str(ca), "cache.internal")
    assert target.credentials.tls.insecure_skip_verify
    assert (config.listen_address, config.telemetry_path, config.log_level, config.log_format) == (":9121", "/redis-metrics", "warn", "text")
    assert config.scrape_timeout == 4
    assert [(spec.db, spec.key) for spec in config.keys.check_keys] == [(0, "queue:*")]
    password = config_from([], {"REDIS_PASSWORD": "s3cret"}).targets[0].credentials.password
    assert password.reveal() == "s3cret"
    # the exporter's own variable wins over redis_exporter's, and a flag over both
    both = {"REDIS_ADDR": "redis://theirs:6379", "ELASTICACHE_EXPORTER_REDIS_ADDR": "redis://ours:6379"}
    assert config_from([], both).targets[0].endpoint.host == "ours"
    assert config_from(["--redis.addr", "flag:6379"], both).targets[0].endpoint.host == "flag"


@pytest.mark.unit
def test_redis_exporters_variables_without_an_equivalent_are_refused_by_name():
    from exporter.common.errors import UsageError

    environ = {"REDIS_EXPORTER_BASIC_AUTH_PASSWORD": "s3cret", "REDIS_EXPORTER_INCL_SYSTEM_METRICS": "true"}
    with pytest.raises(UsageError) as refused:
        config_from([], environ)
    message = str(refused.value)
    assert "s3cret" not in message
    assert "\n" not in message
    assert "REDIS_EXPORTER_BASIC_AUTH_PASSWORD (--basic-auth-password)" in message
    assert "REDIS_EXPORTER_INCL_SYSTEM_METRICS (--include-system-metrics)" in message
    assert "no equivalent" in message
    assert refused.value.exit_code == 2


@pytest.mark.unit
def test_a_redis_exporter_variable_set_to_its_default_asks_for_nothing_and_passes():
    """Migrated charts set redis_exporter's variables to false, 0, empty or their defaults: none asks for a feature, so
    none is refused; a value that asks for one still is."""
    from exporter.common.errors import UsageError

    quiet = {
        "REDIS_EXPORTER_DEBUG": "false",
        "REDIS_EXPORTER_IS_TILE38": "0",
        "REDIS_EXPORTER_IS_CLUSTER": "",
        "REDIS_EXPORTER_SET_CLIENT_NAME": "true",  # on by default there
        "REDIS_EXPORTER_NAMESPACE": "redis",
        "REDIS_EXPORTER_CONFIG_COMMAND": "CONFIG",
        "REDIS_EXPORTER_INCL_METRICS_FOR_EMPTY_DATABASES": "True",
    }
    assert config_from([], quiet).targets
    for name, value in (
        ("REDIS_EXPORTER_DEBUG", "true"),
        ("REDIS_EXPORTER_SET_CLIENT_NAME", "false"),
        ("REDIS_EXPORTER_NAMESPACE", "cache"),
        ("REDIS_EXPORTER_IS_TILE38", "yes"),
    ):
        with pytest.raises(UsageError) as refused:
            config_from([], {**quiet, name: value})
        assert name in str(refused.value)
        assert str(refused.value).count("REDIS_EXPORTER_") == 1


@pytest.mark.unit
def test_redis_exporters_password_file_a_map_of_addresses_is_refused_not_read_as_one_password(tmp_path):
    """redis_exporter's REDIS_PASSWORD_FILE is a JSON map of address to password; read as the password it would fail
    every AUTH without a word, so it is refused by name, its content never shown."""
    from exporter.common.errors import UsageError

    passwords = tmp_path / "pwd.json"
    passwords.write_text('{"redis://localhost:6390": "s3cret"}')
    with pytest.raises(UsageError) as refused:
        config_from([], {"REDIS_ADDR": "redis://localhost:6390", "REDIS_PASSWORD_FILE": str(passwords)})
    assert "REDIS_PASSWORD_FILE (--redis.password-file)" in str(refused.value)
    assert "s3cret" not in str(refused.value)


@pytest.mark.unit
def test_a_password_inside_redis_addr_is_refused_naming_the_variable():
    with pytest.raises(ConfigError, match="the environment variable REDIS_ADDR is refused") as refused:
        config_from([], {"REDIS_ADDR": "redis://:s3cret@cache:6379"})
    assert "s3cret" not in str(refused.value)


@pytest.mark.unit
def test_every_variable_of_redis_exporter_is_honoured_or_refused():
    """The upstream variables known here: those declared with a setting and those refused never overlap."""
    from exporter.config.declared import GROUPS
    from exporter.config.upstream import NO_EQUIVALENT

    honoured = [setting.upstream_env for group in GROUPS for setting in group.settings if setting.upstream_env]
    assert len(honoured) == len(set(honoured))
    assert not set(honoured) & set(NO_EQUIVALENT)
    assert len(honoured) + len(NO_EQUIVALENT) == 58  # every getEnv of redis_exporter's main.go


def test_redis_exporters_password_variables_reach_a_protected_server(acl_redis):
    from helpers import call, sample

    from exporter.service.server import ExporterApp

    environ = {"REDIS_ADDR": f"redis://127.0.0.1:{acl_redis.port}", "REDIS_USER": "monitor", "REDIS_PASSWORD": "monitor-secret-pw"}
    app = ExporterApp(config_from([], environ))
    try:
        assert sample(call(app, "/metrics").samples(), "redis_up", instance=f"127.0.0.1:{acl_redis.port}") == 1
    finally:
        app.close()


@pytest.mark.unit
@pytest.mark.parametrize("given", ["flag", "environment", "file"])
def test_a_duration_without_a_unit_is_refused_wherever_it_is_given(given, tmp_path):
    """``--scrape.timeout 500`` was 500 seconds where 500 ms was meant: a bare number is refused, as Prometheus does."""
    argv, environ, yaml_text = [], {}, None
    if given == "flag":
        argv = ["--scrape.timeout", "500"]
    elif given == "environment":
        environ = {"ELASTICACHE_EXPORTER_SCRAPE_TIMEOUT": "500"}
    else:
        yaml_text = "scrape:\n  timeout: 500\n"
    with pytest.raises(ConfigError, match=r"'scrape.timeout': not a valid duration: '?500'? has no unit \(500ms, 5s, 1m, 2h\)"):
        config_from(argv, environ, yaml_text, tmp_path)
    assert config_from(["--scrape.timeout", "500ms"]).scrape_timeout == 0.5


@pytest.mark.unit
@pytest.mark.parametrize("value", [2, 0.5, "2", "2.5", " 7 "])
def test_every_duration_key_refuses_a_bare_number(value):
    with pytest.raises(ConfigError, match="has no unit"):
        build_config({"heartbeat": {"interval": value}}, environ={})
    with pytest.raises(ConfigError, match="has no unit"):
        build_config({"targets": [{"addr": "x", "timeout": value}]}, environ={})
    with pytest.raises(ConfigError, match="has no unit"):
        build_config({"aws": {"regions": ["eu-west-1"], "cloudwatch": {"delay": value}}}, environ={})


@pytest.mark.unit
def test_every_problem_is_reported_at_once_each_on_a_line_naming_its_key_and_source(tmp_path, capsys, monkeypatch):
    from exporter.cli.main import main

    path = tmp_path / "config.yml"
    path.write_text("scrape:\n  concurrency: 1000\ntargets:\n  - adr: x\n  - addr: 'x:99999'\nheartbeat:\n  interval: soon\n")
    monkeypatch.setenv("ELASTICACHE_EXPORTER_LOG_LEVEL", "loud")
    assert main(["serve", "--config.file", str(path), "--scrape.timeout", "500"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "elasticache-exporter: 6 problems in the configuration:",
        "  environment variable ELASTICACHE_EXPORTER_LOG_LEVEL: config key 'log.level': must be one of debug, info, warn, error, got 'loud'",
        "  flag --scrape.timeout: config key 'scrape.timeout': not a valid duration: '500' has no unit (500ms, 5s, 1m, 2h), as Prometheus refuses it",
        f"  {path}: config key 'scrape.concurrency': must be between 1 and 256, got 1000",
        f"  {path}: config key 'targets[0].adr': unknown key (did you mean 'addr'?)",
        f"  {path}: config key 'targets[1].addr': invalid port '99999'",
        f"  {path}: config key 'heartbeat.interval': must be a positive duration such as 500ms, 5s or 1m, at most 1h, got 'soon'",
    ]


@pytest.mark.unit
def test_check_config_validates_a_file_without_starting(tmp_path, capsys, monkeypatch):
    from exporter.cli.main import main

    monkeypatch.delenv("ELASTICACHE_EXPORTER_LOG_LEVEL", raising=False)
    good = tmp_path / "good.yml"
    good.write_text("aws:\n  regions: [eu-west-1]\nscrape:\n  timeout: 2s\n")
    assert main(["check-config", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: valid; 0 configured target(s), AWS discovery in eu-west-1; listens on :9769\n"
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  admin: hunter2\n")
    bad = tmp_path / "bad.yml"
    bad.write_text(f"web:\n  config_file: {web}\nscrape:\n  timeout: 5\n  concurrency: 0\n")
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "elasticache-exporter: check-config: 2 problems:"
    assert err[1:] == [
        f"  {bad}: config key 'scrape.timeout': not a valid duration: 5 has no unit (500ms, 5s, 1m, 2h), as Prometheus refuses it",
        f"  {bad}: config key 'scrape.concurrency': must be between 1 and 256, got 0",
    ]
    bad.write_text(f"web:\n  config_file: {web}\n")  # the file is fine; the web config it names is not
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "'basic_auth_users.admin': must be a bcrypt hash" in err
    assert "hunter2" not in err


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "targets:\n  - addr: localhost:6379\n    node_type: cache.r7g.larg\n",
            "'cache.r7g.larg' is no node type the baseline table knows (did you mean 'cache.r7g.large'?)",
        ),
        ("aws:\n  regions: [eu-wset-1]\n", "no ElastiCache region 'eu-wset-1' in botocore's partition data (did you mean 'eu-west-1'?)"),
        ("aws:\n  regions: [eu-west-9]\n", "no ElastiCache region 'eu-west-9' in botocore's partition data"),
        ("aws:\n  regions: []\n  scrape_discovered: true\n", "config key 'aws.regions': is empty"),
    ],
)
def test_check_config_catches_what_would_hurt_later(tmp_path, capsys, text, said):
    """A node type one letter off, a region no partition has, an empty region list where AWS is clearly meant: each a
    problem, not a valid file that serve runs without a baseline, polls nothing or scrapes localhost."""
    from exporter.cli.main import main

    path = tmp_path / "config.yml"
    path.write_text(text)
    assert main(["check-config", str(path)]) == 2
    assert said in capsys.readouterr().err


@pytest.mark.unit
def test_check_config_checks_a_file_with_the_flags_it_will_run_with(tmp_path, capsys):
    from exporter.cli.main import main

    path = tmp_path / "config.yml"
    path.write_text("targets:\n  - addr: localhost:6379\n")
    assert main(["check-config", str(path), "--scrape.timeout", "5s", "--aws.region", "eu-west-1"]) == 0
    assert "AWS discovery in eu-west-1" in capsys.readouterr().out
    assert main(["check-config", str(path), "--scrape.timeout", "5"]) == 2
    assert "scrape.timeout" in capsys.readouterr().err


@pytest.mark.unit
def test_one_problem_is_one_line():
    with pytest.raises(ConfigError) as raised:
        build_config({"scrape": {"concurrency": 0}}, environ={})
    assert str(raised.value) == "config key 'scrape.concurrency': must be between 1 and 256, got 0"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("raw", "key", "problem"),
    [
        ({"targets": [{"addr": "http://x:1"}]}, "targets[0].addr", "unsupported scheme"),
        ({"targets": [{"addr": "x:99999"}]}, "targets[0].addr", "invalid port"),
        ({"targets": [{"addr": "x", "tmeout": "1s"}]}, "targets[0].tmeout", "unknown key"),
        ({"targets": [{"addr": "x", "timeout": "soon"}]}, "targets[0].timeout", "positive duration"),
        ({"targets": [{"addr": "x", "password_file": "/nonexistent/pw"}]}, "targets[0].password_file", "cannot read"),
        ({"targets": [{"addr": "x", "password_env": "NOT_SET_ANYWHERE"}]}, "targets[0].password_env", "is not set"),
        ({"targets": [{"addr": "x", "tls_cert_file": "/etc/hostname"}]}, "targets[0].tls_cert_file", "go together"),
        ({"targets": [{"name": "a", "addr": "x"}, {"name": "a", "addr": "y"}]}, "targets", "used twice"),
        ({"scrape": {"allow": [{"hosts": ["10.0.0.0/33"]}]}}, "scrape.allow[0].hosts[0]", "invalid network"),
        ({"scrape": {"concurrency": 0}}, "scrape.concurrency", "between"),
        ({"web": {"listen_address": "nowhere"}}, "web.listen_address", "host:port"),
        ({"log": {"level": "loud"}}, "log.level", "must be one of"),
        ({"redis": {"addr": "[::1"}}, "redis.addr", "unclosed"),
        ({"surprise": 1}, "surprise", "unknown key"),
    ],
)
def test_invalid_config_names_the_key(raw, key, problem):
    with pytest.raises(ConfigError) as caught:
        build_config(raw, environ={})
    assert caught.value.key == key
    assert problem in str(caught.value)
    assert "\n" not in str(caught.value)


def test_cli_reports_invalid_config_in_one_line_with_exit_2(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("targets:\n  - addr: ftp://nope\n")
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--config.file", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [f"elasticache-exporter: {path}: config key 'targets[0].addr': unsupported scheme 'ftp' (use redis:// or rediss://)"]


def test_cli_reports_broken_yaml_with_its_position(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("targets:\n  - addr: [unclosed\n")
    result = subprocess.run([sys.executable, "-m", "exporter", "--version"], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0
    assert result.stdout.startswith("elasticache-exporter ")
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--config.file", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 2
    assert "config key 'config.file'" in result.stderr
    assert "line 3" in result.stderr


def test_help_lists_flags_and_environment_variables():
    result = subprocess.run([sys.executable, "-m", "exporter", "serve", "--help"], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0
    assert "--redis.addr" in result.stdout
    assert "ELASTICACHE_EXPORTER_REDIS_ADDR" in result.stdout


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "host", "port", "tls"),
    [
        ("redis://h:1", "h", 1, False),
        ("rediss://h", "h", 6379, True),
        ("valkeys://h:2", "h", 2, True),
        ("h.example.com:7000", "h.example.com", 7000, False),
        ("[::1]:6380", "::1", 6380, False),
        ("redis://[::1]", "::1", 6379, False),
        ("127.0.0.1", "127.0.0.1", 6379, False),
    ],
)
def test_addresses(text, host, port, tls):
    endpoint = parse_address(text).endpoint
    assert (endpoint.host, endpoint.port, endpoint.tls) == (host, port, tls)


@pytest.mark.unit
@pytest.mark.parametrize(
    "text",
    [
        "unix:///var/run/redis.sock",
        "file:///etc/passwd",
        "http://h:80",
        "tcp://h:1",
        "h:0",
        "h:65536",
        "::1",
        "[::1",
        "h:1?x=y",
        "h:1#frag",
        "h h",
        "h\n:1",
        "redis://h:1/x",
        "",
    ],
)
def test_bad_addresses_are_refused(text):
    with pytest.raises(AddressError):
        parse_address(text)


@pytest.mark.unit
def test_userinfo_is_refused_where_credentials_must_not_come_from_the_address():
    with pytest.raises(AddressError):
        parse_address("redis://user:pw@h:1", allow_userinfo=False)
    with pytest.raises(AddressError):
        parse_address("allowed.example.com@evil.example.com:6379", allow_userinfo=False)


@pytest.mark.unit
def test_host_patterns():
    glob = HostPattern.parse("*.cache.amazonaws.com")
    assert glob.matches("a.b.cache.amazonaws.com")
    assert not glob.matches("cache.amazonaws.com.evil.com")
    assert not glob.matches("10.0.0.1")
    net = HostPattern.parse("10.0.0.0/8")
    assert net.matches("10.1.2.3")
    assert not net.matches("11.0.0.1")
    assert not net.matches("10.0.0.1.example.com")
    assert not HostPattern.parse("127.0.0.0/8").matches("::ffff:127.0.0.1")
    assert HostPattern.parse("::1").matches("::1")


@pytest.mark.unit
def test_the_documented_settings_table_is_the_declarations():
    from exporter.config.declared import markdown_table

    page = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    table = page.split("<!-- settings table: begin -->\n", 1)[1].split("<!-- settings table: end -->", 1)[0]
    assert table == markdown_table(), "regenerate it: python3 -m exporter.config"


@pytest.mark.unit
def test_every_declared_flag_is_a_serve_flag_and_reaches_its_key():
    """Each flag of the declarations is in `serve --help` with its variable, and sets the key it is declared for."""
    from exporter.config.declared import serve_flags
    from exporter.config.sources import overlay

    parsed = vars(build_parser().parse_args(["serve"]))
    for flag in serve_flags():
        assert (flag.name in parsed) is not flag.env_only, flag.name
        assert flag.env == "ELASTICACHE_EXPORTER_" + flag.name.replace(".", "_").replace("-", "_").upper()
        path = flag.key.split(".")
        raw = overlay({}, {flag.key: "x"})
        for part in path[:-1]:
            raw = raw[part]
        assert raw[path[-1]] == "x"


@pytest.mark.unit
def test_a_default_is_declared_once_and_read_from_its_record():
    from exporter.config.declared import CLIENTS, SCRAPE, serve_flags
    from exporter.redis.clients import ClientsConfig

    assert SCRAPE.default(SCRAPE.setting("concurrency")) == 16 == build_config({}).scrape_concurrency
    assert CLIENTS.default(CLIENTS.setting("top")) == ClientsConfig().top
    concurrency = next(flag for flag in serve_flags() if flag.name == "scrape.concurrency")
    assert "(default 16)" in concurrency.help


@pytest.mark.unit
def test_a_target_keeps_the_scrape_timeout_and_says_whether_it_set_its_own():
    """A target's timeout is scrape.timeout (or REDIS_EXPORTER_CONNECTION_TIMEOUT, as redis_exporter's per-target one)
    unless it sets its own; only on a page of many is one without its own cut to scrape.target_timeout."""
    raw = {"targets": [{"addr": "a"}, {"addr": "b", "timeout": "4s"}], "scrape": {"timeout": "15s", "allow": [{"hosts": ["10.0.0.0/8"]}]}}
    config = build_config({**raw, "aws": {"regions": ["eu-west-1"]}}, environ={})
    first, second = config.targets
    assert (first.credentials.timeout, first.credentials.own_timeout) == (15, False)
    assert (second.credentials.timeout, second.credentials.own_timeout) == (4, True)
    assert config.allow[0].credentials.timeout == config.discovered_credentials.timeout == 15
    assert config.scrape_target_timeout == 2
    migrated = config_from([], {"REDIS_ADDR": "redis://a:6379", "REDIS_EXPORTER_CONNECTION_TIMEOUT": "15s"})
    assert migrated.targets[0].credentials.timeout == 15
