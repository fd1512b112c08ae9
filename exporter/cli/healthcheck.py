"""``healthcheck``: the container's health check. It asks /-/healthy of the exporter that serves beside it, with the listen
address and web config that exporter got: the flags of the serve process (its command line, /proc/PID/cmdline; PID 1 in
the image), the environment (a health check shares the container's) and the configuration file, as serve reads them.
From loopback the exporter answers /-/healthy without credentials (the web config holds only bcrypt hashes) and without
a client certificate; over TLS where the web config sets it, unverified only towards loopback, where no one can stand in
between."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from exporter.common.errors import ExporterError

HEALTH_PATH = "/-/healthy"
_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}  # every address, asked on loopback


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    from .config_flags import add_config_flags

    add_config_flags(parser)
    parser.add_argument(
        "--serve-pid",
        type=int,
        default=1,
        metavar="PID",
        help="the serve process whose flags to read from /proc/PID/cmdline (default 1, the image's entry point; ignored "
        "unless it runs elasticache-exporter serve); flags given here override them",
    )
    parser.add_argument("--timeout", type=float, default=2.0, metavar="SECONDS", help="how long to wait for the answer (default 2)")


def serve_words(argv: Sequence[str]) -> list[str] | None:
    """The words after ``serve`` in a command line of the exporter (``elasticache-exporter serve ...`` or ``python -m
    exporter serve ...``, also behind an init such as tini), or None for any other command line."""
    for index, word in enumerate(argv):
        if word.endswith("elasticache-exporter") or (word == "exporter" and argv[index - 1 : index] == ["-m"]):
            rest = list(argv[index + 1 :])
            if rest[:1] == ["serve"]:
                return rest[1:]
            return rest if not rest or rest[0].startswith("-") else None  # serve is the command where none is named
    return None


def process_arguments(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return serve_words([part.decode(errors="replace") for part in raw.split(b"\0")[:-1]])


def health_url(listen_address: str, tls: bool) -> str:
    """Where to ask: the listen address, an address of every interface asked on loopback."""
    from exporter.config import listen_host_port

    host, port = listen_host_port(listen_address)
    host = _WILDCARDS.get(host, host)
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}{HEALTH_PATH}"


def _serve_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str | None]:
    """The listen address and web config file that serve uses: its flags, then these, over the environment and file.
    Only those two are read, and tolerantly: a configuration file serve refused on a reload (a typo sent with SIGHUP,
    the running configuration kept) must not make the container unhealthy while the exporter serves."""
    from exporter.config import flag_to_env
    from exporter.config.declared import serve_flags

    from .config_flags import add_config_flags

    merged = argparse.Namespace(**vars(args))
    words = process_arguments(args.serve_pid)
    if words is not None:
        serve_parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        add_config_flags(serve_parser)
        served, _ = serve_parser.parse_known_args(words)
        for name in ("config.file", *(flag.name for flag in serve_flags())):
            if getattr(args, name, None) is None and getattr(served, name, None) is not None:
                setattr(merged, name, getattr(served, name))
    flags = {flag.key: flag for flag in serve_flags()}
    config_file = getattr(merged, "config.file", None) or environ.get(flag_to_env("config.file"))
    in_file = _web_section(config_file) if config_file else {}

    def setting(key: str, default: str | None) -> str | None:
        flag = flags.get(key)
        if flag is not None:
            given = getattr(merged, flag.name, None)
            if given is not None:
                return str(given)
            for variable in (flag.env, flag.upstream_env):
                if variable and environ.get(variable):
                    return environ[variable]
        value = in_file.get(key.split(".", 1)[1])
        return str(value) if value not in (None, "") else default

    return setting("web.listen_address", ":9769") or ":9769", setting("web.config_file", None)


def _web_section(path: str) -> dict[str, object]:
    """The file's ``web`` keys as written, or none where the file cannot be read or parsed (the defaults then)."""
    import yaml

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return {}
    web = raw.get("web") if isinstance(raw, dict) else None
    return web if isinstance(web, dict) else {}


def _uses_tls(web_config_file: str | None) -> bool:
    if not web_config_file:
        return False
    from exporter.common.errors import ConfigError
    from exporter.common.yamlfile import read_yaml

    raw = read_yaml(web_config_file, lambda message: ConfigError("web.config_file", message))
    return isinstance(raw, dict) and raw.get("tls_server_config") is not None


def ask(url: str, timeout: float) -> tuple[int, str]:
    """The status and first line of ``url``'s answer; TLS unverified towards loopback only."""
    import http.client
    import urllib.parse

    from exporter.service.webconfig import is_loopback

    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "", parts.port
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        import ssl

        context = ssl.create_default_context()
        if is_loopback(host):  # the exporter's own certificate names its service, not 127.0.0.1
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", parts.path, headers={"User-Agent": "elasticache-exporter-healthcheck"})
        response = connection.getresponse()
        return response.status, response.read(200).decode(errors="replace").strip().split("\n", 1)[0]
    finally:
        connection.close()


def run_healthcheck(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """0 when /-/healthy answers 200, else 1 with one line on stderr (Docker reserves exit code 2)."""
    try:
        listen_address, web_config_file = _serve_settings(args, environ)
        url = health_url(listen_address, _uses_tls(web_config_file))
    except ExporterError as err:
        print(f"elasticache-exporter: healthcheck: {err}", file=sys.stderr)
        return 1
    try:
        status, text = ask(url, args.timeout)
    except OSError as err:  # refused, timed out, TLS failed
        print(f"elasticache-exporter: healthcheck: {url}: {getattr(err, 'reason', None) or err}", file=sys.stderr)
        return 1
    if status != 200:
        hint = " (without credentials only from loopback: listen on every address or on loopback)" if status in (401, 403) else ""
        print(f"elasticache-exporter: healthcheck: {url} answered {status} {text}{hint}", file=sys.stderr)
        return 1
    print(f"{url}: {text}")
    return 0
