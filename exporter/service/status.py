"""The / page: the live view per target (state, role, node type, utilization against the baseline,
replication lag, the last CloudWatch poll). No secrets: addresses are shown without credentials."""

from __future__ import annotations

import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from exporter import __version__

from .collectors.baselines import target_utilization

if TYPE_CHECKING:
    from collections.abc import Callable

    import jinja2

    from exporter.baselines.table import BaselineTable
    from exporter.config import Config

    from .targets import Target


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("exporter.service", ""),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def _bar(ratio: float | None) -> dict[str, Any] | None:
    if ratio is None:
        return None
    level = "critical" if ratio >= 0.9 else "warning" if ratio >= 0.8 else "ok"
    return {"percent": round(ratio * 100, 1), "width": round(min(ratio, 1.0) * 100, 1), "level": level}


def _aws_text(shares: dict[str, tuple[float | None, float | None]]) -> str:
    """``out 45 % (busiest second 130 %) · in 3 %``: AWS's own figures, or empty."""
    parts = []
    for direction, (average, peak) in sorted(shares.items(), reverse=True):
        text = f"{direction} {average * 100:.0f} %" if average is not None else f"{direction} -"
        parts.append(text + (f" (busiest second {peak * 100:.0f} %)" if peak is not None else ""))
    return " · ".join(parts)


MAX_EVENTS = 50  # the newest event of each source, newest first: at most this many on the page


def render_status_page(
    config: Config,
    targets: list[Target],
    started: float,
    table: Callable[[], BaselineTable],
    last_poll: float | None = None,
    events: list[Any] | None = None,
    aws_shares: Callable[[str], dict[str, tuple[float | None, float | None]]] | None = None,
    support: list[dict[str, str]] | None = None,
    discovered: list[tuple[str, Any]] | None = None,
) -> str:
    """``table``: gives the baseline table, asked only for a target with a node type (reading it costs 1.5 MiB);
    ``events``: the newest fleet event of each source (FleetEvent records), newest first; ``aws_shares``: a target's
    share of the baseline AWS counts for it, and its busiest second's, per direction (where AWS publishes them);
    ``support``: the clusters past or near their engine's end of standard support (engine_support.affected_rows);
    ``discovered``: the nodes AWS discovery found that no target reads, by name, shown with what CloudWatch says."""
    now = time.time()
    monotonic = time.monotonic()
    rows = []
    for target in targets:
        utilization = target_utilization(target, table(), config.baselines.window, monotonic) if target.node_type else None
        with target.lock:
            state = target.state
            rows.append(
                {
                    "name": target.name,
                    "address": target.display,
                    "state": "up" if state.up else ("down" if state.scraped else "not scraped yet"),
                    "role": state.role,
                    "version": state.version,
                    "node_type": target.node_type,
                    "baseline_known": utilization is not None,
                    "bars": {key: _bar((utilization or {}).get(key)) for key in ("out", "in", "engine_cpu")},
                    "aws": _aws_text(aws_shares(target.name) if aws_shares else {}),
                    "lag": ", ".join(f"{source} {lag:.1f} s" for source, lag in sorted(state.heartbeat_lag.items())),
                    "last_error": state.last_error,
                    "duration_ms": round(state.last_duration * 1000, 1),
                    "last_success_ago": round(now - state.last_success) if state.last_success else None,
                }
            )
    for name, node in discovered or []:
        rows.append(
            {
                "name": name,
                "address": f"{node.address}:{node.port}" if node.address else node.cluster_id,
                "state": "discovered",
                "role": node.role,
                "version": node.engine_version,
                "node_type": node.node_type,
                "baseline_known": False,
                "bars": dict.fromkeys(("out", "in", "engine_cpu")),
                "aws": _aws_text(aws_shares(name) if aws_shares else {}),
                "lag": "",
                "last_error": "not scraped (aws.scrape_discovered off)",
                "duration_ms": None,
                "last_success_ago": None,
            }
        )
    poll_ago = None if not last_poll else round(now - last_poll)
    return (
        _environment()
        .get_template("status.html")
        .render(
            version=__version__,
            telemetry_path=config.telemetry_path,
            uptime=round(now - started),
            rows=rows,
            cloudwatch=config.aws.enabled,
            poll_ago=poll_ago,
            window=round(config.baselines.window),
            events=[
                {
                    "when": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(event.date)),
                    "account": event.account_id or "-",
                    "region": event.region,
                    "source": f"{event.source_type} {event.source_id}",
                    "category": event.category,
                    "message": event.message,
                }
                for event in (events or [])[:MAX_EVENTS]
            ],
            support=support or [],
        )
    )
