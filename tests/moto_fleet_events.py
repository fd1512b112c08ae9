"""DescribeEvents, DescribeUpdateActions and DescribeServiceUpdates for moto, which lacks them, added to moto's
ElastiCache responses for the duration of a test (as tests/moto_serverless.py adds serverless caches).

Replies go through moto's serializer and botocore's parser, shaped by botocore's model of these operations, so the
exporter reads them as it reads AWS's. Tests put events and updates in with :func:`add_event`, :func:`add_service_update`
and :func:`add_update_action`; pages are small (a reader that drops the Marker loses items).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from moto.core.responses import ActionResult
from moto.elasticache.models import elasticache_backends
from moto.elasticache.responses import ElastiCacheResponse

PAGE = 2  # items per page, whatever MaxRecords asks (AWS pages at 100; small pages show a reader that drops the Marker)


def _store(account: str, region: str, name: str) -> list[dict[str, Any]]:
    return elasticache_backends[account][region].__dict__.setdefault(name, [])


def add_event(account: str, region: str, source_type: str, source_id: str, message: str, date: datetime.datetime) -> None:
    _store(account, region, "_test_events").append({"SourceIdentifier": source_id, "SourceType": source_type, "Message": message, "Date": date})


def add_service_update(account: str, region: str, **update: Any) -> None:
    _store(account, region, "_test_service_updates").append(update)


def add_update_action(account: str, region: str, **action: Any) -> dict[str, Any]:
    _store(account, region, "_test_update_actions").append(action)
    return action


def _time(value: str | datetime.datetime | None) -> datetime.datetime | None:
    """A timestamp parameter, as moto hands it on (parsed, or the wire's ISO text)."""
    if not value:
        return None
    moment = value if isinstance(value, datetime.datetime) else datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def _listed(params: dict[str, Any], name: str) -> list[str]:
    value = params.get(name)
    if isinstance(value, dict):  # the query protocol's Name.member.N
        value = value.get("member", list(value.values()))
    if isinstance(value, str):
        value = [value]
    return list(value or [])


def _page(items: list[dict[str, Any]], params: dict[str, Any], key: str) -> ActionResult:
    start = int(params.get("Marker") or 0)
    result: dict[str, Any] = {key: items[start : start + PAGE]}
    if start + PAGE < len(items):
        result["Marker"] = str(start + PAGE)
    return ActionResult(result)


def _describe_events(self: ElastiCacheResponse) -> ActionResult:
    params = self._get_params()
    now = datetime.datetime.now(datetime.timezone.utc)
    end = _time(params.get("EndTime")) or now
    start = _time(params.get("StartTime")) or end - datetime.timedelta(minutes=int(params.get("Duration") or 60))
    events = [
        event
        for event in _store(self.current_account, self.region, "_test_events")
        if start <= event["Date"] <= end
        and params.get("SourceType") in (None, event["SourceType"])
        and params.get("SourceIdentifier") in (None, event["SourceIdentifier"])
    ]
    return _page(sorted(events, key=lambda event: event["Date"], reverse=True), params, "Events")  # newest first, as AWS lists


def _describe_service_updates(self: ElastiCacheResponse) -> ActionResult:
    params = self._get_params()
    wanted = _listed(params, "ServiceUpdateStatus")
    updates = [u for u in _store(self.current_account, self.region, "_test_service_updates") if not wanted or u["ServiceUpdateStatus"] in wanted]
    return _page(updates, params, "ServiceUpdates")


def _describe_update_actions(self: ElastiCacheResponse) -> ActionResult:
    params = self._get_params()
    services = {u["ServiceUpdateName"]: u for u in _store(self.current_account, self.region, "_test_service_updates")}
    service_statuses, action_statuses = _listed(params, "ServiceUpdateStatus"), _listed(params, "UpdateActionStatus")
    actions = []
    for action in _store(self.current_account, self.region, "_test_update_actions"):
        service = services.get(action["ServiceUpdateName"], {})
        if service_statuses and service.get("ServiceUpdateStatus") not in service_statuses:
            continue
        if action_statuses and action["UpdateActionStatus"] not in action_statuses:
            continue
        actions.append(
            {
                **{
                    k: service[k]
                    for k in ("ServiceUpdateSeverity", "ServiceUpdateType", "ServiceUpdateStatus", "ServiceUpdateRecommendedApplyByDate")
                    if k in service
                },
                **action,
            }
        )
    return _page(actions, params, "UpdateActions")


@contextmanager
def fleet_events_in_moto() -> Iterator[None]:
    added = {
        "describe_events": _describe_events,
        "describe_service_updates": _describe_service_updates,
        "describe_update_actions": _describe_update_actions,
    }
    missing = [name for name in added if not hasattr(ElastiCacheResponse, name)]
    for name in missing:
        setattr(ElastiCacheResponse, name, added[name])
    try:
        yield
    finally:
        for name in missing:
            delattr(ElastiCacheResponse, name)
