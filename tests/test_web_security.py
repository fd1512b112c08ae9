"""TLS and basic auth on the exporter's own endpoints, from an exporter-toolkit web-config file."""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import bcrypt
import pytest
from servers import free_port, start_exporter, wait_until


def fetch(url: str, context: ssl.SSLContext | None, auth: tuple[str, str] | None = None) -> tuple[int, str]:
    headers = {}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_tls_and_basic_auth(tmp_path, certificates, plain_redis):
    hashed = bcrypt.hashpw(b"scrape-secret", bcrypt.gensalt(rounds=6)).decode().replace("$2b$", "$2y$")
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {certificates['server_cert']}\n  key_file: {certificates['server_key']}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "serve",
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--web.config-file",
            str(web),
            "--redis.addr",
            plain_redis.addr,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    context = ssl.create_default_context(cafile=certificates["ca"])
    url = f"https://127.0.0.1:{port}"
    try:

        def listening() -> bool:
            try:
                return fetch(url + "/metrics", context)[0] == 401
            except OSError:
                return False

        wait_until(listening, what="the TLS listener")
        assert fetch(url + "/metrics", context, ("prometheus", "wrong"))[0] == 401
        assert fetch(url + "/metrics", context, ("nobody", "scrape-secret"))[0] == 401
        status, text = fetch(url + "/metrics", context, ("prometheus", "scrape-secret"))
        assert status == 200
        assert "redis_up" in text
        assert fetch(url + "/metrics", context, ("prometheus", "scrape-secret"))[0] == 200  # the cached verification
        with pytest.raises((ConnectionError, urllib.error.URLError)):
            fetch(f"http://127.0.0.1:{port}/-/healthy", None)
        assert fetch(url + "/", context, ("prometheus", "scrape-secret"))[0] == 200
    finally:
        process.terminate()
        output = process.communicate(timeout=10)[0]
    assert "scrape-secret" not in output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("basic_auth_users:\n  alice: plaintext\n", "basic_auth_users.alice"),
        ("tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent.pem\n", "tls_server_config.cert_file"),
        ("surprise: 1\n", "unknown key"),
    ],
)
def test_invalid_web_config_is_exit_2(tmp_path, content, message):
    web = tmp_path / "web.yml"
    web.write_text(content)
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--web.listen-address", f"127.0.0.1:{free_port()}", "--web.config-file", str(web)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_plain_exporter_still_answers_without_web_config(plain_redis):
    exporter = start_exporter("--redis.addr", plain_redis.addr)
    try:
        assert exporter.get("/-/healthy")[0] == 200
    finally:
        exporter.stop()


REFUSED_TLS = [
    ("key without a certificate", {"key": "-----BEGIN PRIVATE KEY-----\nsecret-key-material\n-----END PRIVATE KEY-----\n"},
     "tls_server_config.cert_file"),
    ("certificate and key that do not load", {"cert": "-----BEGIN CERTIFICATE-----\nnot-a-cert\n-----END CERTIFICATE-----\n",
     "key": "-----BEGIN PRIVATE KEY-----\nsecret-key-material\n-----END PRIVATE KEY-----\n"}, "cannot load the certificate and key"),
    ("key beside an unreadable cert_file", {"cert_file": "{dir}",
     "key": "-----BEGIN PRIVATE KEY-----\nsecret-key-material\n-----END PRIVATE KEY-----\n"}, "tls_server_config.cert_file"),
]  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize(("case", "tls", "message"), REFUSED_TLS, ids=[case for case, _, _ in REFUSED_TLS])
def test_refused_inline_key_leaves_nothing_on_disk(tmp_path, monkeypatch, case, tls, message):
    import tempfile

    import yaml

    from exporter.common.errors import ConfigError
    from exporter.service.webconfig import load_web_config

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    tls = {name: value.replace("{dir}", str(tmp_path)) for name, value in tls.items()}
    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump({"tls_server_config": tls}))
    with pytest.raises(ConfigError) as raised:
        load_web_config(str(web))
    text = str(raised.value)
    assert message in text, case
    assert "\n" not in text
    assert "secret-key-material" not in text
    assert list(scratch.iterdir()) == []
