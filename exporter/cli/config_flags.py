"""The flags and environment variables of ``serve``, ``demo`` and ``cost``, made from the config declarations
(``exporter.config.declared``), and the configuration they make with the file: flags over environment over file over
defaults."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from exporter.common.errors import ConfigError, ConfigErrors
from exporter.config import Config, build_config, flag_to_env, load_yaml, overlay
from exporter.config.declared import serve_flags
from exporter.config.upstream import refuse_unsupported
from exporter.redis.addresses import AddressError, parse_address


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config.file", dest="config.file", metavar="FILE", help=f"YAML configuration file [{flag_to_env('config.file')}]")
    for flag in serve_flags():
        if flag.env_only:
            continue
        if flag.switch:
            parser.add_argument(f"--{flag.name}", dest=flag.name, action="store_const", const="true", default=None, help=f"{flag.help} [{flag.env}]")
        else:
            parser.add_argument(f"--{flag.name}", dest=flag.name, metavar="VALUE", default=None, help=f"{flag.help} [{flag.env}]")


def load_config(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    """Flags over environment over file over defaults; an error in a key the file sets names the file. redis_exporter's
    variable of a setting counts where this exporter's own is not set, so that its users' deployments carry over."""
    values = vars(args)
    refuse_unsupported(environ)
    config_file = values.get("config.file") or environ.get(flag_to_env("config.file"))
    file_raw: dict[str, Any] = load_yaml(config_file) if config_file else {}
    from_env: dict[str, Any] = {}
    env_names: dict[str, str] = {}
    from_flags: dict[str, Any] = {}
    flag_names: dict[str, str] = {}
    for flag in serve_flags():
        for variable in (flag.upstream_env, flag.env):  # the exporter's own name last: it wins
            if variable is not None and variable in environ:
                from_env[flag.key] = environ[variable]
                env_names[flag.key] = variable
        if values.get(flag.name) is not None:
            from_flags[flag.key] = values[flag.name]
            flag_names[flag.key] = flag.name
    _refuse_password_in_address(from_flags.get("redis.addr"), "the flag --redis.addr")
    _refuse_password_in_address(from_env.get("redis.addr"), f"the environment variable {env_names.get('redis.addr')}")
    raw = overlay(overlay(file_raw, from_env), from_flags)
    try:
        return build_config(raw, source_file=config_file, environ=environ)
    except ConfigError as err:
        sources = {key: f"flag --{name}" for key, name in flag_names.items()}
        sources.update({key: f"environment variable {env_names[key]}" for key in from_env if key not in from_flags})

        def with_source(error: ConfigError) -> ConfigError:
            source = sources.get(error.key)
            if source is None and config_file and key_is_set(file_raw, error.key):
                source = config_file
            return error if error.source is not None or source is None else ConfigError(error.key, error.problem, source=source)

        errors = [with_source(error) for error in (err.errors if isinstance(err, ConfigErrors) else (err,))]
        raise (ConfigErrors(errors) if len(errors) > 1 else errors[0]) from None


def _refuse_password_in_address(value: Any, where: str) -> None:
    """A flag is visible to every local user in the process list, and environments leak into crash reports."""
    if not isinstance(value, str) or not value:
        return
    try:
        has_password = parse_address(value).password is not None
    except AddressError:
        return  # build_config names what is wrong with it
    if has_password:
        raise ConfigError(
            "redis.addr",
            f"a password inside the address given by {where} is refused: put it in a file given by --redis.password-file, "
            f"in {flag_to_env('redis.password')}, or in the config file's password_file / password_env",
        )


def key_is_set(raw: Mapping[str, Any], key: str) -> bool:
    """Whether the dotted key path (``targets[0].addr``) exists in ``raw``."""
    node: Any = raw
    for part in key.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("[") and part.endswith("]") and part[1:-1].isascii() and part[1:-1].isdigit():
            index = int(part[1:-1])
            if not isinstance(node, list) or index >= len(node):
                return False
            node = node[index]
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return False
    return True
