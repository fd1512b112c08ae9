"""The catalog as Alertmanager routing: a route for the catalog's alerts by severity, grouped by where they are, and the
inhibit rules of the catalog's ``inhibits``; as a fragment of alertmanager.yml and as a Prometheus Operator
``AlertmanagerConfig``. Pure: alerts in, text out."""

from __future__ import annotations

from typing import Any

import yaml

from .catalog import SEVERITIES, Alert, RenderError
from .inhibitions import InhibitRule, resolve

GROUP_BY = ("account_id", "region", "replication_group", "alertname")
RECEIVER_PREFIX = "elasticache-"  # a receiver per severity: elasticache-critical, elasticache-warning, elasticache-info
TIMING = {"group_wait": "30s", "group_interval": "5m"}
REPEAT = {"critical": "1h", "warning": "4h", "info": "24h"}
DEFAULT_SEVERITY = "warning"  # the receiver of an alert whose severity label was changed to something else


def receiver(severity: str) -> str:
    return RECEIVER_PREFIX + severity


def routed_alerts(alerts: list[Alert]) -> list[Alert]:
    """The alerts Prometheus raises (a CloudWatch-only alarm notifies through SNS, not Alertmanager)."""
    return [alert for alert in alerts if alert.expr or alert.baseline]


def inhibit_rules(alerts: list[Alert]) -> list[InhibitRule]:
    routed = {alert.name for alert in routed_alerts(alerts)}
    return [
        resolve(alert.name, inhibition, routed, f"catalog: {alert.name}.inhibits[{index}]", RenderError)
        for alert in alerts
        if alert.name in routed
        for index, inhibition in enumerate(alert.inhibits)
    ]


def _names(names: list[str] | tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else "|".join(names)


def _matcher(label: str, op: str, value: str) -> str:
    return f'{label}{op}"{value}"'


def source_matchers(rule: InhibitRule) -> list[tuple[str, str, str]]:
    """The source alert, with every ``equal`` label present: Alertmanager counts a label missing on both sides as equal,
    so a source without it would silence every target that lacks it too."""
    return [("alertname", "=", rule.source), *((label, "=~", ".+") for label in rule.equal)]


def target_matchers(rule: InhibitRule) -> list[tuple[str, str, str]]:
    return [("alertname", "=~" if len(rule.targets) > 1 else "=", _names(rule.targets))]


def routing(alerts: list[Alert], tags: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fragment as Alertmanager's configuration has it: ``route`` (one route, to put under the root route),
    ``receivers`` and ``inhibit_rules``. ``tags``: ``tag_*`` labels that group notifications further (per team, say)."""
    routed = routed_alerts(alerts)
    if not routed:
        raise RenderError("catalog: no alert for Prometheus, so nothing to route")
    names = sorted(alert.name for alert in routed)
    route = {
        "receiver": receiver(DEFAULT_SEVERITY),
        "matchers": [_matcher("alertname", "=~", _names(names))],
        "group_by": [*GROUP_BY, *tags],
        **TIMING,
        "repeat_interval": REPEAT[DEFAULT_SEVERITY],
        "routes": [
            {"receiver": receiver(severity), "matchers": [_matcher("severity", "=", severity)], "repeat_interval": REPEAT[severity]}
            for severity in SEVERITIES
        ],
    }
    rules = [
        {
            "source_matchers": [_matcher(*m) for m in source_matchers(rule)],
            "target_matchers": [_matcher(*m) for m in target_matchers(rule)],
            "equal": list(rule.equal),
        }
        for rule in inhibit_rules(alerts)
    ]
    return {"route": route, "receivers": [{"name": receiver(severity)} for severity in SEVERITIES], "inhibit_rules": rules}


def _dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=1_000_000, default_flow_style=False)


HEADER = """\
# elasticache-exporter's Alertmanager routing, rendered from rules/catalog.yml by `elasticache-exporter render alertmanager`.
# Merge it into alertmanager.yml: put `route` under your root route's `routes` (first, or before any route that would
# catch these alerts), give the three receivers your integrations (email_configs, slack_configs, webhook_configs, ...)
# and append `inhibit_rules` to yours. Notifications are grouped by account, region, replication group and alert;
# the inhibit rules silence the alerts that another one explains while it fires (docs/runbooks.md says which).
"""


def render_alertmanager(alerts: list[Alert], tags: tuple[str, ...] = ()) -> str:
    return HEADER + _dump(routing(alerts, tags))


def _operator_matchers(matchers: list[str]) -> list[dict[str, str]]:
    result = []
    for text in matchers:
        for op in ("=~", "!~", "!=", "="):
            label, found, value = text.partition(op)
            if found:
                result.append({"name": label, "value": value[1:-1], "matchType": op})
                break
    return result


def _operator_route(route: dict[str, Any]) -> dict[str, Any]:
    keys = {"group_by": "groupBy", "group_wait": "groupWait", "group_interval": "groupInterval", "repeat_interval": "repeatInterval"}
    result: dict[str, Any] = {}
    for key, value in route.items():
        if key == "matchers":
            result["matchers"] = _operator_matchers(value)
        elif key == "routes":
            result["routes"] = [_operator_route(child) for child in value]
        else:
            result[keys.get(key, key)] = value
    return result


def render_alertmanager_config(alerts: list[Alert], tags: tuple[str, ...] = (), name: str = "elasticache-exporter") -> str:
    """The same routing as a Prometheus Operator ``AlertmanagerConfig`` (monitoring.coreos.com/v1alpha1)."""
    fragment = routing(alerts, tags)
    document = {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "elasticache-exporter"}},
        "spec": {
            "route": _operator_route(fragment["route"]),
            "receivers": fragment["receivers"],
            "inhibitRules": [
                {
                    "sourceMatch": _operator_matchers(rule["source_matchers"]),
                    "targetMatch": _operator_matchers(rule["target_matchers"]),
                    "equal": rule["equal"],
                }
                for rule in fragment["inhibit_rules"]
            ],
        },
    }
    head = (
        "# elasticache-exporter's Alertmanager routing as a Prometheus Operator AlertmanagerConfig, rendered from\n"
        "# rules/catalog.yml by `elasticache-exporter render prometheus-operator` (the same routes and inhibit rules as\n"
        "# `render alertmanager`). The operator scopes it to its namespace: alerts must carry that namespace label, or the\n"
        "# Alertmanager resource sets alertmanagerConfigMatcherStrategy: {type: None}. Give the receivers their integrations.\n"
    )
    return head + _dump(document)
