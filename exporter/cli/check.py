"""``check-config FILE``: the configuration file validated as ``serve`` would read it (with the environment), and the
files it names (web config, baseline table), without starting anything: exit 0 when it is fine, 2 with every problem."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    from .config_flags import add_config_flags

    parser.add_argument("file", metavar="FILE", help="the YAML configuration file, as --config.file takes it")
    add_config_flags(parser)  # the file is checked with the flags it will run with


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
    from exporter.baselines.table import load_table

    try:
        table = load_table(config.baselines.file, config.baselines.basis)
    except ExporterError as err:
        problems.append(str(err))
    else:
        problems += [f"{args.file}: {problem}" for problem in _misspelt_node_types(config, set(table.node_types))]
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


def _misspelt_node_types(config: object, known: set[str]) -> list[str]:
    """A target's node type the baseline table does not know but nearly does (``cache.r7g.larg``): a typo that would
    leave the node without a baseline, said with the nearest known type. One near none is a type the table lacks (a
    new one), which serve warns of."""
    import difflib

    problems = []
    for index, target in enumerate(getattr(config, "targets", ())):
        node_type = getattr(target, "node_type", None)
        if not node_type or node_type in known or f"cache.{node_type}" in known:
            continue
        near = difflib.get_close_matches(node_type, sorted(known), n=1, cutoff=0.85)
        if near:
            problems.append(
                f"config key 'targets[{index}].node_type': {node_type!r} is no node type the baseline table knows (did you mean {near[0]!r}?)"
            )
    return problems
