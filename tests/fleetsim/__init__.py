"""A simulated fleet over days, judged as on-call judges alerts: pages per incident, false pages, minutes to the page.

The fleet is composed from what the live exporter serves, never from hand-written series: the Redis side from one shard
of real redis-servers captured in each state an incident brings (capture, compose), the CloudWatch side from moto polled
by the real monitor through its tiers and served by a real app (cloudwatch). The minute-by-minute samples go through
promtool with the rendered rules (replay), then through the rendered Alertmanager inhibitions and grouping, and each
page is attributed to the incident whose node or shard it names (oncall). A page that names no incident's node, or one
for an incident that expects none, is a false page.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from .capture import State, capture_states
from .compose import compose_redis
from .oncall import Report, judge, notifications, notified
from .plan import plan
from .replay import firing_alerts


def simulate(workdir: Path, *, days: int = 1, shards: int = 25, polled: int = 6, seed: int = 11, states: dict[str, State] | None = None) -> Report:
    """``shards`` shards of two Redis nodes and ``polled`` CloudWatch-polled nodes for ``days`` days, ending now. Runs
    moto in this process: the caller gives fake credentials."""
    from moto import mock_aws

    from .cloudwatch import compose_cloudwatch

    timings: dict[str, float] = {}
    mark = time.monotonic()

    def took(part: str) -> None:
        nonlocal mark
        timings[part], mark = time.monotonic() - mark, time.monotonic()

    the_plan = plan(days, shards, polled, seed)
    states = states or capture_states(workdir)
    took("capture")
    down = the_plan.minutes_of("exporter restart")
    end = math.floor(time.time() / 60) * 60
    series = compose_redis(states, the_plan, down, end - 60 * the_plan.minutes)
    took("Redis series")
    with mock_aws():
        series.update(compose_cloudwatch(the_plan, down, end))
    took("CloudWatch polls")
    firing = firing_alerts(series, the_plan.minutes, end - 60 * the_plan.minutes, workdir)
    took("promtool")
    verdicts, unexplained = judge(the_plan, notifications(notified(firing), the_plan.minutes))
    return Report(verdicts, unexplained, timings, firing)
