"""The / page: the targets and their state, with no secrets (addresses are shown redacted)."""

from __future__ import annotations

import time
from functools import lru_cache
from typing import TYPE_CHECKING

from .. import __version__

if TYPE_CHECKING:
    import jinja2

    from ..config import Config
    from ..targets import Target


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("exporter", "web"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render_status_page(config: Config, targets: list[Target], started: float) -> str:
    now = time.time()
    rows = []
    for target in targets:
        with target.lock:
            state = target.state
            rows.append(
                {
                    "name": target.name,
                    "address": target.display,
                    "state": "up" if state.up else ("down" if state.scraped else "not scraped yet"),
                    "role": state.role,
                    "version": state.version,
                    "last_error": state.last_error,
                    "duration_ms": round(state.last_duration * 1000, 1),
                    "last_success_ago": round(now - state.last_success) if state.last_success else None,
                }
            )
    return _environment().get_template("status.html").render(
        version=__version__,
        telemetry_path=config.telemetry_path,
        uptime=round(now - started),
        rows=rows,
    )
