"""``serve`` and ``demo``: the long-running exporter."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from exporter.service.collectors.exporter import ConfigReloads

from exporter import __version__
from exporter.common.errors import ConfigErrors, ExporterError
from exporter.config import Config

log = logging.getLogger("exporter")


def tune_garbage_collector() -> None:
    """A scrape of many targets allocates hundreds of thousands of short-lived, acyclic objects (samples, label
    dicts), which reference counting frees. At the default threshold of 700 allocations the cyclic collector
    would run hundreds of times per scrape and walk the whole heap several times; measured, it cost a fifth
    of the scrape's CPU. Objects of start-up are frozen out of its walks, and it runs every 50,000 allocations."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


STARTUP_TARGETS_SHOWN = 5  # a fleet of 200 is named by its count and first few, not in 10 KB of one line


def targets_summary(targets: Any) -> str:
    """The configured targets for the start-up line: their count and the first few, the rest counted."""
    shown = ", ".join(f"{t.name} ({t.display})" for t in targets[:STARTUP_TARGETS_SHOWN]) or "none"
    more = len(targets) - STARTUP_TARGETS_SHOWN
    return f"{len(targets)} configured target(s): {shown}" + (f" and {more} more (/discovery lists them)" if more > 0 else "")


def run_server(config: Config, reload: Callable[[], Config] | None = None) -> int:
    """Serve until SIGTERM or SIGINT (exit 0 within a few seconds, whatever targets do); SIGHUP reloads the
    configuration through ``reload``: a new file that does not validate is logged in one line and the running
    configuration stays."""
    from exporter.service.collectors.exporter import ConfigReloads
    from exporter.service.server import ExporterApp, make_http_server

    reloads = ConfigReloads(time.time())
    web_config = None
    if config.web_config_file:  # loads ssl, hashlib and bcrypt: about 6 MiB a plain exporter does without
        from exporter.service.webconfig import load_web_config

        web_config = load_web_config(config.web_config_file)
    app = ExporterApp(config, reloads=reloads)
    try:
        server = make_http_server(app, config.listen_address, web_config)
    except OSError as err:
        app.close()
        raise ExporterError(f"cannot listen on {config.listen_address}: {err.strerror or err}") from err
    tune_garbage_collector()
    _reload = _reloader(server, reload, reloads)

    def _stop(signum: int, _frame: Any) -> None:
        server.shutdown()  # sets a flag and wakes the loop: safe in a signal handler

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGHUP, lambda signum, frame: threading.Thread(target=_reload, name="reload", daemon=True).start())
    host, port = server.server_address[:2]
    log.info("elasticache-exporter %s listening on %s:%s; %s", __version__, host, port, targets_summary(config.targets))
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        server.app.close()
    log.info("stopped")
    return 0


def _reloader(server: Any, reload: Callable[[], Config] | None, reloads: ConfigReloads) -> Callable[[], None]:
    """What SIGHUP runs (in a thread of its own): a new app from the reloaded configuration in place of the running one,
    or the running one kept when the new configuration does not validate (logged in one line); ``reloads`` records
    which, for the metrics. One reload at a time."""
    from exporter.service.server import ExporterApp

    reloading = threading.Lock()

    def _reload() -> None:
        if reload is None or not reloading.acquire(blocking=False):
            return
        reloaded = False
        try:
            try:
                new_config = reload()
                new_app = ExporterApp(new_config, reloads=reloads, running=server.app)
            except ConfigErrors as err:  # every problem, on the one log line
                log.error("reload: configuration not changed: %s", " | ".join(str(error) for error in err.errors))
                return
            except (ExporterError, OSError) as err:
                log.error("reload: configuration not changed: %s", err)
                return
            if (new_config.listen_address, new_config.web_config_file) != (server.app.config.listen_address, server.app.config.web_config_file):
                log.warning("reload: the listen address and web config file take effect at the next start")
            new_app.http = server
            old, server.app = server.app, new_app
            old.close()
            reloaded = True
            reloads.succeeded(time.time())
            log.info("reload: configuration reloaded; %d configured target(s)", len(new_config.targets))
        finally:
            if not reloaded:
                reloads.failed()
            reloading.release()

    return _reload


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """``serve``, ``demo`` and ``cost``: the configuration's flags (``exporter.config.declared``) and the file."""
    from .config_flags import add_config_flags

    add_config_flags(parser)
    if command == "cost":
        parser.add_argument(
            "--alarms",
            choices=("per-node", "fleet", "none"),
            default="per-node",
            help="the CloudWatch alarms priced beside the polling: per-node, what `alarms plan` and the CloudFormation "
            "templates make for the discovered nodes (default); fleet, as `alarms plan --alarms fleet`; none, polling only",
        )
        parser.add_argument("--network-alarms", choices=("percentage", "bytes"), default="percentage", help="as `alarms plan` takes it")
        parser.add_argument("--baselines", metavar="FILE", help="baseline table the alarms read (default: the shipped one)")
        parser.add_argument("--catalog", metavar="FILE", help="alert catalog (default: the shipped one)")
        parser.add_argument("--promql-endpoint", metavar="URL", help="--alarms fleet: as `alarms plan` takes it")
