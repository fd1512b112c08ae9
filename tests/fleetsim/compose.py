"""The fleet's Redis side, minute by minute: every shard is the captured shard, renamed, in the state its incidents put
it in; counters carry on at the rates measured in the state, scaled by the daily wave."""

from __future__ import annotations

import re
from pathlib import Path

from .capture import CAPTURED, CAPTURED_GROUP, EXPORTER, Sample, State, node_of, renamed
from .plan import STATES, Plan, wave

RULES = Path(__file__).resolve().parents[2] / "rules" / "prometheus" / "elasticache-exporter.rules.yml"
Series = dict[Sample, list[float | None]]  # a value each minute; None: no sample that minute


def read_by_rules(rules_text: str) -> set[str]:
    """Every name the rules could read: a series no rule reads changes no alert."""
    return set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rules_text))


def shard_timelines(the_plan: Plan) -> dict[str, list[str]]:
    """Each shard's captured state at each minute."""
    timelines = {name: ["healthy"] * the_plan.minutes for name in the_plan.shards}
    for incident in the_plan.incidents:
        if incident.kind in STATES:
            walk, timeline = STATES[incident.kind], timelines[incident.scope]
            for m in range(incident.start, min(incident.end, the_plan.minutes)):
                timeline[m] = walk[min(m - incident.start, len(walk) - 1)]
    return timelines


def _kept(state: State, healthy: State, start: float, read: set[str]) -> list[tuple[Sample, float, float | None, bool]]:
    """Each sample the rules read: its value, the rate it rises at (a counter's), and whether it is a moment near the
    capture (a last save, a start), which keeps its age as the simulated time goes (moved to minute 0's time)."""
    kept = []
    for sample, value in state.samples.items():
        if sample[0] not in read:
            continue
        moment = sample[0].endswith("_timestamp_seconds") and abs(value - state.captured_at) < 30 * 86400
        rate = None if moment else state.rates.get(sample, healthy.rates.get(sample))
        kept.append((sample, value - state.captured_at + start if moment else value, rate, moment))
    return kept


def compose_redis(states: dict[str, State], the_plan: Plan, down: set[int], start: float, rules: Path = RULES) -> Series:
    """``down``: the minutes the exporter is not scraped (a restart); ``start``: the Unix time of minute 0. A node that
    was down starts its counters again from what the capture read, as a restarted server does; Redis counts on while
    the exporter restarts. The exporter's own ``up`` is 0 while it is down, as Prometheus records a failed scrape."""
    read = read_by_rules(rules.read_text())
    kept = {name: _kept(state, states["healthy"], start, read) for name, state in states.items()}
    series: Series = {}
    for shard, timeline in shard_timelines(the_plan).items():
        names = {CAPTURED_GROUP: shard, CAPTURED[0]: f"{shard}-001", CAPTURED[1]: f"{shard}-002"}
        ours = {name: [(renamed(s, names), *rest) for s, *rest in samples if node_of(s)] for name, samples in kept.items()}
        running: dict[Sample, float] = {}  # each counter's value at the last minute it was served
        for minute, state_name in enumerate(timeline):
            if minute in down:
                continue
            served = {}
            for sample, captured, rate, moment in ours[state_name]:
                value = captured + 60.0 * minute if moment else captured
                if rate is not None:
                    if sample in running:
                        value = running[sample] + rate * 60 * wave(minute)
                    served[sample] = value
                series.setdefault(sample, [None] * the_plan.minutes)[minute] = value
            running = served
    for sample, value, _rate, moment in kept["healthy"]:
        if not node_of(sample):  # the exporter's own series, once
            series[sample] = [None if m in down else value + (60.0 * m if moment else 0.0) for m in range(the_plan.minutes)]
    up = ("up", tuple(sorted(EXPORTER.items())))
    series[up] = [0.0 if m in down else 1.0 for m in range(the_plan.minutes)]
    return series
