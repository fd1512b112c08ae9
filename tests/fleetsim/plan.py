"""What happens over the simulated range: the incident classes, what on-call expects of each, and when each falls."""

from __future__ import annotations

import dataclasses
import math
import random


@dataclasses.dataclass(frozen=True)
class IncidentClass:
    name: str
    expect: str  # "page", "warning" or "quiet": what on-call expects to be told
    minutes: int
    side: str  # "redis" (a shard), "cloudwatch" (a polled node) or "exporter"
    promise: int = 0  # minutes within which the page must come, for "page": the rules' ``for`` and the data's delay
    warnings: int = 0  # the warnings it should notify, for "warning"


CLASSES = {
    c.name: c
    for c in (
        IncidentClass("primary down 70 min", "page", 70, "redis", promise=5),
        IncidentClass("replica link down 25 min", "page", 25, "redis", promise=5),
        IncidentClass("memory full, evicting 40 min", "warning", 40, "redis", warnings=1),
        IncidentClass("replica restart, 3 min resync", "quiet", 4, "redis"),
        IncidentClass("planned failover and back 2 h later", "warning", 120, "redis", warnings=2),
        IncidentClass("network over baseline 60 min", "page", 60, "cloudwatch", promise=20),
        IncidentClass("allowance shaping 10 min", "page", 10, "cloudwatch", promise=15),
        IncidentClass("one shaped minute", "quiet", 1, "cloudwatch"),
        IncidentClass("CloudWatch gap 20 min", "quiet", 20, "cloudwatch"),
        IncidentClass("exporter restart", "quiet", 2, "exporter"),
        IncidentClass("exporter reload", "quiet", 1, "exporter"),
        IncidentClass("failed poll", "quiet", 1, "exporter"),
        IncidentClass("clock step of 3 min", "quiet", 60, "exporter"),
    )
}
# the captured states an incident walks a shard through, a minute each; the last one lasts to the incident's end
STATES = {
    "primary down 70 min": ["primary_down"],
    "replica link down 25 min": ["link_down"],
    "memory full, evicting 40 min": ["memory_full"],
    "replica restart, 3 min resync": ["replica_down", "resyncing", "resyncing", "resyncing"],
    "planned failover and back 2 h later": ["swapped"],
}


@dataclasses.dataclass(frozen=True)
class Incident:
    kind: str
    start: int  # minute
    scope: str  # the shard's replication group, the polled node's id, or "" for the exporter

    @property
    def end(self) -> int:
        return self.start + CLASSES[self.kind].minutes


@dataclasses.dataclass(frozen=True)
class Plan:
    minutes: int
    shards: list[str]
    polled: list[str]
    incidents: list[Incident]

    def minutes_of(self, kind: str) -> set[int]:
        return {m for i in self.incidents if i.kind == kind for m in range(i.start, i.end)}


def plan(days: int, shards: int, polled: int, seed: int) -> Plan:
    """Each day, every incident class once, at a random minute on a node that is quiet around it (two quiet hours
    between two incidents of a node, half an hour between two of the exporter), none in the first two hours of a day."""
    rng = random.Random(seed)
    names = [f"shop-{i:02d}" for i in range(shards)]
    nodes = [f"cache-{i:02d}" for i in range(polled)]
    busy: dict[str, list[tuple[int, int]]] = {}
    incidents = []
    for day in range(days):
        for kind, cls in CLASSES.items():
            pool = names if cls.side == "redis" else nodes if cls.side == "cloudwatch" else [""]
            gap = 30 if cls.side == "exporter" else 120
            for _ in range(1000):
                start = day * 1440 + rng.randrange(120, 1440 - cls.minutes - 60)
                scope = rng.choice(pool)
                if all(start + cls.minutes + gap <= a or b + gap <= start for a, b in busy.get(scope, [])):
                    busy.setdefault(scope, []).append((start, start + cls.minutes))
                    incidents.append(Incident(kind, start, scope))
                    break
    return Plan(days * 1440, names, nodes, sorted(incidents, key=lambda i: i.start))


def wave(minute: int) -> float:
    """The daily traffic wave: 0.4 at night, 1.0 in the afternoon."""
    return 0.7 - 0.3 * math.cos(2 * math.pi * ((minute / 1440.0) - 0.1))
