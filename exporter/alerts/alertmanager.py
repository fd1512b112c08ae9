"""The catalog as Alertmanager routing: a route for the catalog's alerts by severity, grouped by where they are, and the
inhibit rules of the catalog's ``inhibits``; as a fragment of alertmanager.yml and as a Prometheus Operator
``AlertmanagerConfig``. The route and both sides of every inhibit rule match the source label the rendered rules set
(``catalog.SOURCE_LABEL``), so alerts of the same names from other rule sets are neither routed nor silenced by ours,
and ours are not silenced by theirs. Pure: alerts in, text out."""

from __future__ import annotations

from typing import Any

import yaml

from .catalog import DEFAULT_SOURCE, SEVERITIES, SOURCE_LABEL, Alert, RenderError, checked_source
from .inhibitions import InhibitRule, SignalAlert, resolve, signal_ladder

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
    """Every inhibit rule of the catalog; a target of a higher severity than its source is an error (a lower alert
    would keep the page of a higher one from its receiver)."""
    routed = {alert.name for alert in routed_alerts(alerts)}
    rank = {alert.name: SEVERITIES.index(alert.severity) for alert in alerts}
    rules: list[InhibitRule] = []
    for alert in alerts:
        if alert.name not in routed:
            continue
        for index, inhibition in enumerate(alert.inhibits):
            where = f"catalog: {alert.name}.inhibits[{index}]"
            resolved = resolve(alert.name, inhibition, routed, where, RenderError)
            outranking = [target for target in resolved[0].targets if rank[target] < rank[alert.name]]
            if outranking:
                raise RenderError(f"{where}: a {alert.severity} alert may not silence the higher {', '.join(outranking)}")
            rules += resolved
    on_signals = [
        SignalAlert(alert.name, *level, alert.wait_seconds, rank[alert.name], "one-source" if alert.baseline else "cloudwatch")
        for alert in alerts
        if alert.name in routed and (level := alert.signal_level) is not None
    ]
    return rules + list(signal_ladder(on_signals))


Matcher = tuple[str, str, str]  # label, operator, value
MATCHER_KEYS = ("matchers", "source_matchers", "target_matchers")


def source_matchers(rule: InhibitRule, source: str = DEFAULT_SOURCE) -> list[Matcher]:
    """The source alert, ours, with every ``equal`` label present: Alertmanager counts a label missing on both sides as
    equal, so a source without it would silence every target that lacks it too."""
    return [
        ("alertname", "=", rule.source),
        (SOURCE_LABEL, "=", source),
        *((label, "=~", ".+") for label in rule.equal),
        *((k, "=~", v) for k, v in rule.source_labels),
    ]


def target_matchers(rule: InhibitRule, source: str = DEFAULT_SOURCE) -> list[Matcher]:
    return [("alertname", "=~" if len(rule.targets) > 1 else "=", "|".join(rule.targets)), (SOURCE_LABEL, "=", source)]


def _tree(alerts: list[Alert], tags: tuple[str, ...], source: str) -> dict[str, Any]:
    """The routing with its matchers as (label, operator, value): what both renderings format."""
    source = checked_source(source)
    if not routed_alerts(alerts):
        raise RenderError("catalog: no alert for Prometheus, so nothing to route")
    route = {
        "receiver": receiver(DEFAULT_SEVERITY),
        "matchers": [(SOURCE_LABEL, "=", source)],
        "group_by": [*GROUP_BY, *tags],
        **TIMING,
        "repeat_interval": REPEAT[DEFAULT_SEVERITY],
        "routes": [
            {"receiver": receiver(severity), "matchers": [("severity", "=", severity)], "repeat_interval": REPEAT[severity]}
            for severity in SEVERITIES
        ],
    }
    rules = [
        {"source_matchers": source_matchers(rule, source), "target_matchers": target_matchers(rule, source), "equal": list(rule.equal)}
        for rule in inhibit_rules(alerts)
    ]
    return {"route": route, "receivers": [{"name": receiver(severity)} for severity in SEVERITIES], "inhibit_rules": rules}


def _formatted(value: Any, matcher: Any, keys: dict[str, str]) -> Any:
    """The tree with each matcher written by ``matcher`` and each key renamed by ``keys``."""
    if isinstance(value, list):
        return [_formatted(item, matcher, keys) for item in value]
    if not isinstance(value, dict):
        return value
    return {keys.get(k, k): [matcher(*m) for m in v] if k in MATCHER_KEYS else _formatted(v, matcher, keys) for k, v in value.items()}


def routing(alerts: list[Alert], tags: tuple[str, ...] = (), source: str = DEFAULT_SOURCE) -> dict[str, Any]:
    """The fragment as Alertmanager's configuration has it: ``route`` (one route, to put under the root route),
    ``receivers`` and ``inhibit_rules``. ``tags``: ``tag_*`` labels that group notifications further (per team, say);
    ``source``: the value of the source label the rules were rendered with."""
    return dict(_formatted(_tree(alerts, tags, source), lambda label, op, value: f'{label}{op}"{value}"', {}))


def _dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=1_000_000, default_flow_style=False)


HEADER = """\
# elasticache-exporter's Alertmanager routing, rendered from rules/catalog.yml by `elasticache-exporter render alertmanager`.
# Merge it into alertmanager.yml: put `route` under your root route's `routes` (first, or before any route that would
# catch these alerts), give the three receivers your integrations (email_configs, slack_configs, webhook_configs, ...)
# and append `inhibit_rules` to yours. Notifications are grouped by account, region, replication group and alert;
# the inhibit rules silence the alerts that another one explains while it fires (docs/runbooks.md says which). The route
# and every inhibit rule match alert_source, the label the rendered rules set: other rule sets' alerts of the same
# names (RedisDown of redis_exporter's mixin, say) are neither routed here nor silenced (docs/alerts.md).
"""


def inhibitions_table(alerts: list[Alert]) -> str:
    """docs/runbooks.md's table of what each alert silences, where, from which data and why (generated)."""
    lines = ["| alert | silences | where equal | data | why |", "|---|---|---|---|---|"]
    for rule in inhibit_rules(alerts):
        only = "".join(f" (where the source's {label} is {value.replace('|', ' or ')})" for label, value in rule.source_labels)
        where = ", ".join(rule.equal) + only
        targets = ", ".join(rule.targets)
        lines.append(f"| {rule.source} | {targets} | {where} | {rule.inhibition.data} | {rule.inhibition.why} |")
    return "\n".join(lines) + "\n"


def render_alertmanager(alerts: list[Alert], tags: tuple[str, ...] = (), source: str = DEFAULT_SOURCE) -> str:
    return HEADER + _dump(routing(alerts, tags, source))


OPERATOR_KEYS = {
    "group_by": "groupBy",
    "group_wait": "groupWait",
    "group_interval": "groupInterval",
    "repeat_interval": "repeatInterval",
    "inhibit_rules": "inhibitRules",
    "source_matchers": "sourceMatch",
    "target_matchers": "targetMatch",
}


def render_alertmanager_config(
    alerts: list[Alert], tags: tuple[str, ...] = (), name: str = "elasticache-exporter", source: str = DEFAULT_SOURCE
) -> str:
    """The same routing as a Prometheus Operator ``AlertmanagerConfig`` (monitoring.coreos.com/v1alpha1)."""
    spec = _formatted(_tree(alerts, tags, source), lambda label, op, value: {"name": label, "value": value, "matchType": op}, OPERATOR_KEYS)
    document = {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "elasticache-exporter"}},
        "spec": spec,
    }
    head = (
        "# elasticache-exporter's Alertmanager routing as a Prometheus Operator AlertmanagerConfig, rendered from\n"
        "# rules/catalog.yml by `elasticache-exporter render prometheus-operator` (the same routes and inhibit rules as\n"
        "# `render alertmanager`). The operator scopes it to its namespace: alerts must carry that namespace label, or the\n"
        "# Alertmanager resource sets alertmanagerConfigMatcherStrategy: {type: None}. Give the receivers their integrations.\n"
    )
    return head + _dump(document)
