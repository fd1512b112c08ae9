"""``check-config FILE``: the configuration file validated as ``serve`` would read it (with the environment), and the
files it names (web config, baseline table), without starting anything: exit 0 when it is fine, 2 with every problem."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the YAML configuration file, as --config.file takes it")


def run_check_config(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from exporter.common.errors import ConfigError, ConfigErrors, ExporterError

    from .config_flags import load_config

    setattr(args, "config.file", args.file)
    try:
        config = load_config(args, environ)
    except ConfigErrors as err:
        return _problems([str(error) for error in err.errors])
    except ConfigError as err:
        return _problems([str(err)])
    problems = []
    if config.web_config_file:
        from exporter.service.webconfig import load_web_config

        try:
            load_web_config(config.web_config_file)
        except ExporterError as err:
            problems.append(str(err))
    if config.baselines.file:
        from exporter.baselines.table import load_table

        try:
            load_table(config.baselines.file, config.baselines.basis)
        except ExporterError as err:
            problems.append(str(err))
    if problems:
        return _problems(problems)
    regions = sorted({region for account in config.aws.accounts for region in account.regions})
    print(
        f"{args.file}: valid; {len(config.targets)} configured target(s)"
        + (f", AWS discovery in {', '.join(regions)}" if regions else "")
        + f"; listens on {config.listen_address}"
    )
    return 0


def _problems(lines: list[str]) -> int:
    header = "1 problem" if len(lines) == 1 else f"{len(lines)} problems"
    print(f"elasticache-exporter: check-config: {header}:", *(f"  {line}" for line in lines), sep="\n", file=sys.stderr)
    return 2
