"""What the catalog says about silencing: an alert's ``inhibits`` (the alerts it silences while it fires, and the labels
that must be equal) and its ``join`` (labels joined into its expression so that an inhibition can match them). Pure."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from typing import Any

from exporter.common.records import record

# labels an alert's expression can be given, by where they come from:
#   shard: replication_group and shard of the node's shard (elasticache_shard_member_info, as it was in the last
#          10 minutes, so a node that is down keeps the shard it had), joined on instance;
#   node:  account_id, region and replication_group of a discovered node (elasticache_node_info), joined on instance
#          (Redis series) or on the node's CloudWatch dimensions.
JOINS = ("shard", "node")
JOINED_LABELS = {"shard": ("replication_group", "shard"), "node": ("account_id", "region", "replication_group")}


@record(frozen=True)
class Inhibition:
    """While the alert fires, the alerts matched by ``alerts`` (catalog names, ``*`` globs) are silenced where every
    label of ``equal`` has the same value on both."""

    alerts: tuple[str, ...]
    equal: tuple[str, ...]


def parse_inhibits(raw: Any, where: str, error: Callable[[str], Exception]) -> tuple[Inhibition, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise error(f"{where}: must be a list of {{alerts: [...], equal: [...]}}")
    parsed = []
    for index, item in enumerate(raw):
        place = f"{where}[{index}]"
        if not isinstance(item, dict) or set(item) - {"alerts", "equal"}:
            raise error(f"{place}: must be a mapping of alerts (names or globs) and equal (labels)")
        alerts, equal = item.get("alerts"), item.get("equal", [])
        if not isinstance(alerts, list) or not alerts or not all(isinstance(name, str) and name for name in alerts):
            raise error(f"{place}.alerts: must be a non-empty list of alert names or globs")
        if not isinstance(equal, list) or not all(isinstance(label, str) and label.isidentifier() for label in equal):
            raise error(f"{place}.equal: must be a list of label names")
        parsed.append(Inhibition(tuple(alerts), tuple(equal)))
    return tuple(parsed)


def parse_join(raw: Any, where: str, error: Callable[[str], Exception]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(item in JOINS for item in raw) or len(set(raw)) != len(raw):
        raise error(f"{where}: must be a list of {', '.join(JOINS)}")
    return tuple(item for item in JOINS if item in raw)  # shard first: node's replication_group then wins


@record(frozen=True)
class InhibitRule:
    """One Alertmanager inhibit rule: ``source`` silences ``targets`` where ``equal`` match."""

    source: str
    targets: tuple[str, ...]
    equal: tuple[str, ...]


def resolve(source: str, inhibition: Inhibition, names: Iterable[str], where: str, error: Callable[[str], Exception]) -> InhibitRule:
    """The rule with its globs expanded to the catalog's names (the source itself left out); a glob or name that matches
    no other alert is an error, as a typo would silence nothing."""
    names = list(names)
    targets: set[str] = set()
    for pattern in inhibition.alerts:
        matched = {name for name in fnmatch.filter(names, pattern) if name != source}
        if not matched:
            raise error(f"{where}: {pattern!r} names no other alert of the catalog")
        targets |= matched
    return InhibitRule(source, tuple(sorted(targets)), inhibition.equal)
