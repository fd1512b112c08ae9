"""What the catalog says about silencing: an alert's ``inhibits`` (the alerts it silences while it fires, and the labels
that must be equal) and its ``join`` (labels joined into its expression so that an inhibition can match them). Pure."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from typing import Any

from exporter.common.records import record

# labels an alert's expression can be given, by where they come from:
#   shard: replication_group, shard and shard_source of the node's shard (elasticache_shard_member_info: the exporter
#          serves a node's shard while it is down too, as it is configured or discovered in or last answered in; the
#          recording rule keeps it 10 minutes more for an exporter that restarted meanwhile), joined on instance;
#   node:  account_id, region and replication_group of a discovered node (elasticache_node_info), joined on instance
#          (Redis series) or on the node's CloudWatch dimensions.
JOINS = ("shard", "node")
JOINED_LABELS = {"shard": ("replication_group", "shard", "shard_source"), "node": ("account_id", "region", "replication_group")}

# Where an inhibition holds: the labels its source and targets must share. A node is its instance (for the exporter's
# own alerts, the exporter's instance); a shard is its name within its replication group, or its name alone where the
# name is unique by itself: a cluster-mode shard named by its primary's node id (shard_source cluster) and a shard learnt
# from replication by its replication id (as the exporter serves it), so a self-managed cluster without a configured
# group is matched too. A shard named by its slot ranges (shard_source slots: 0-5460 is in every cluster) is matched
# within its group only.
SCOPES = {"node": ("instance",), "shard": ("replication_group", "shard"), "exporter": ("instance",)}
UNIQUE_SHARD_SOURCES = ("cluster", "replication")
# the data an alert is computed from: the exporter's reads of the node (redis), CloudWatch, AWS's records of the fleet
# as the exporter's discovery keeps them (aws), the exporter's own state, or the node's INFO where the exporter reads it
# and CloudWatch where it does not (one-source: the utilization selectors, catalog.one_source), the same for every alert
DATA = ("redis", "cloudwatch", "aws", "exporter", "one-source")
LADDER_WHY = (
    "one saturation of the node's {signal}, told first by this alert ({level} % of the baseline for {wait} minutes): the"
    " alerts on the same signal and baseline that would tell it later or at a lower level are its echoes"
)


@record(frozen=True)
class Inhibition:
    """While the alert fires, the alerts matched by ``alerts`` (catalog names, ``*`` globs) are silenced in the same
    ``scope`` (SCOPES); ``data`` is the source the alert and every target are computed from, and ``why`` says why the
    alert explains them (docs/runbooks.md lists it). A target never outranks its source (checked when rendered)."""

    alerts: tuple[str, ...]
    scope: str
    data: str
    why: str


INHIBITION_KEYS = ("alerts", "scope", "data", "why")


def parse_inhibits(raw: Any, where: str, error: Callable[[str], Exception]) -> tuple[Inhibition, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise error(f"{where}: must be a list of {{alerts: [...], scope: ..., data: ..., why: ...}}")
    parsed = []
    for index, item in enumerate(raw):
        place = f"{where}[{index}]"
        if not isinstance(item, dict) or set(item) != set(INHIBITION_KEYS):
            raise error(f"{place}: must be a mapping of {', '.join(INHIBITION_KEYS)}, each given")
        alerts, scope, data, why = (item[key] for key in INHIBITION_KEYS)
        if not isinstance(alerts, list) or not alerts or not all(isinstance(name, str) and name for name in alerts):
            raise error(f"{place}.alerts: must be a non-empty list of alert names or globs")
        if scope not in SCOPES:
            raise error(f"{place}.scope: must be one of {', '.join(SCOPES)}, not {scope!r}")
        if data not in DATA:
            raise error(f"{place}.data: must be one of {', '.join(DATA)}, not {data!r}")
        if not isinstance(why, str) or not why.strip():
            raise error(f"{place}.why: must say why the alert explains its targets")
        parsed.append(Inhibition(tuple(alerts), scope, data, " ".join(why.split())))
    return tuple(parsed)


def parse_join(raw: Any, where: str, error: Callable[[str], Exception]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(item in JOINS for item in raw) or len(set(raw)) != len(raw):
        raise error(f"{where}: must be a list of {', '.join(JOINS)}")
    return tuple(item for item in JOINS if item in raw)  # shard first: node's replication_group then wins


@record(frozen=True)
class InhibitRule:
    """One Alertmanager inhibit rule: ``source`` silences ``targets`` where ``equal`` match and the source's labels
    match ``source_labels`` (label, regular expression) too; ``inhibition`` is the catalog's entry it renders."""

    source: str
    targets: tuple[str, ...]
    equal: tuple[str, ...]
    inhibition: Inhibition
    source_labels: tuple[tuple[str, str], ...] = ()


def resolve(source: str, inhibition: Inhibition, names: Iterable[str], where: str, error: Callable[[str], Exception]) -> tuple[InhibitRule, ...]:
    """The rules of an inhibition with its globs expanded to the catalog's names (the source itself left out); a glob or
    name that matches no other alert is an error, as a typo would silence nothing. A shard's inhibition is two rules:
    within the replication group, and by the shard's name alone where that name is unique."""
    names = list(names)
    targets: set[str] = set()
    for pattern in inhibition.alerts:
        matched = {name for name in fnmatch.filter(names, pattern) if name != source}
        if not matched:
            raise error(f"{where}: {pattern!r} names no other alert of the catalog")
        targets |= matched
    ordered = tuple(sorted(targets))
    rule = InhibitRule(source, ordered, SCOPES[inhibition.scope], inhibition)
    if inhibition.scope != "shard":
        return (rule,)
    unique = InhibitRule(source, ordered, ("shard",), inhibition, (("shard_source", "|".join(UNIQUE_SHARD_SOURCES)),))
    return (rule, unique)


@record(frozen=True)
class SignalAlert:
    """An alert on a baseline signal (``catalog.Alert.signal_level``): its level in percent, how long it waits, its
    severity's rank (0 the highest) and whether it reads the table's baseline (one source: INFO, else CloudWatch) or
    AWS's (CloudWatch)."""

    name: str
    signal: str
    level: int
    wait_seconds: int
    rank: int
    data: str


def signal_ladder(alerts: Iterable[SignalAlert]) -> tuple[InhibitRule, ...]:
    """The inhibitions the catalog's structure gives: one saturation of a node's signal is told by one alert. Of two
    alerts on the same signal against the same baseline, the one of at least the other's severity that fires first (a
    shorter wait, or the same wait at a higher level) silences the other on the same node: the table's 90 % its 80 %,
    AWS's 100 % its 90 and 80 %. Never both ways. (Of the two baselines, AWS's alerts are silent by their expression
    where the table's alert fired in the last 20 minutes: an inhibition would end with the table's alert, before AWS's
    slower minutes do.)"""
    alerts = list(alerts)
    rules = []
    for source in alerts:
        targets = tuple(
            sorted(
                target.name
                for target in alerts
                if (target.signal, target.data) == (source.signal, source.data)
                and target.name != source.name
                and target.rank >= source.rank
                and (source.wait_seconds, -source.level) < (target.wait_seconds, -target.level)
            )
        )
        if targets:
            why = LADDER_WHY.format(signal=source.signal, level=source.level, wait=source.wait_seconds // 60)
            inhibition = Inhibition(targets, "node", source.data, why)
            rules.append(InhibitRule(source.name, targets, SCOPES["node"], inhibition))
    return tuple(rules)
