"""The calls behind fleet_events: DescribeEvents every poll, DescribeUpdateActions and DescribeServiceUpdates every
discovery, per account and region, each call counted in the account's API stats (and so in ``cost``)."""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping

from .api import AwsApi, AwsCallError
from .fleet_events import EventLog, FleetEvent, UpdateAction, parse_events, parse_update_actions
from .settings import AwsAccount

log = logging.getLogger(__name__)

# every status of an update action that is not done (DescribeUpdateActions lists only what is asked for)
OPEN_ACTION_STATUSES = ["not-applied", "waiting-to-start", "in-progress", "stopping", "stopped", "scheduling", "scheduled"]


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


class FleetWatch:
    """Events and service updates of every account and region, kept between polls."""

    def __init__(
        self, apis: Mapping[AwsAccount, AwsApi], account_of: Callable[[AwsAccount, str], str], clock: Callable[[], float] = time.time
    ) -> None:
        self._apis = apis
        self._account_of = account_of  # an account's id where its API knows none (the default credentials): from its nodes
        self._clock = clock
        self._lock = threading.Lock()
        self.events = EventLog()
        self._updates: dict[tuple[AwsAccount, str], list[UpdateAction]] = {}

    def poll_events(self) -> list[tuple[str, AwsCallError]]:
        failures = []
        for account, api in self._apis.items():
            for region in account.regions:
                account_id = api.account_id or self._account_of(account, region)
                now = self._clock()
                with self._lock:
                    start, end = self.events.window(account_id, region, now)
                try:
                    client = api.client("elasticache", region)
                    items = api.paginate(client, "describe_events", "Events", StartTime=_utc(start), EndTime=_utc(end), MaxRecords=100)
                except AwsCallError as err:
                    failures.append((f"{region} of account {account_id or 'default'}", err))
                    continue
                with self._lock:
                    self.events.add(account_id, region, end, parse_events(items, account_id, region))
        return failures

    def poll_updates(self) -> list[tuple[str, AwsCallError]]:
        failures = []
        for account, api in self._apis.items():
            for region in account.regions:
                account_id = api.account_id or self._account_of(account, region)
                try:
                    client = api.client("elasticache", region)
                    services = api.paginate(client, "describe_service_updates", "ServiceUpdates", ServiceUpdateStatus=["available"])
                    actions = api.paginate(
                        client, "describe_update_actions", "UpdateActions", ServiceUpdateStatus=["available"], UpdateActionStatus=OPEN_ACTION_STATUSES
                    )
                except AwsCallError as err:
                    failures.append((f"{region} of account {account_id or 'default'}", err))
                    continue
                auto = {str(s.get("ServiceUpdateName")): bool(s.get("AutoUpdateAfterRecommendedApplyByDate")) for s in services}
                with self._lock:
                    self._updates[(account, region)] = parse_update_actions(actions, account_id, region, auto)
        return failures

    def update_actions(self) -> list[UpdateAction]:
        with self._lock:
            return [action for actions in self._updates.values() for action in actions]

    def event_counts(self) -> list[tuple[tuple[str, str, str, str, str], int, float]]:
        """((account, region, source type, source, category), events counted, newest date)."""
        with self._lock:
            return [(key, total, self.events.last[key]) for key, total in sorted(self.events.totals.items())]

    def newest_events(self) -> list[FleetEvent]:
        with self._lock:
            return sorted(self.events.newest.values(), key=lambda event: -event.date)
