"""A cluster found from one endpoint: for each target with ``discover: cluster``, one background thread reads its
cluster's nodes at start, every ``cluster.refresh``, and soon after one of them fails a scrape (it may have left the
cluster or failed over; at most every EARLIEST seconds), and makes them the target set's members."""

from __future__ import annotations

import logging
import threading

from exporter.redis.cluster_members import read_members
from exporter.redis.failures import classify
from exporter.redis.node import RedisNode

from .targets import TargetSet

log = logging.getLogger(__name__)
EARLIEST = 5.0  # seconds between two reads of the clusters, however often a node fails


class ClusterDiscovery:
    def __init__(self, targets: TargetSet, interval: float) -> None:
        self._targets = targets
        self._interval = interval
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._seeds = [(seed, RedisNode(seed.endpoint, seed.credentials)) for seed in targets.cluster_seeds]
        self._logged: set[tuple[str, str]] = set()
        self._thread = threading.Thread(target=self._run, name="cluster-discovery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Read the clusters again soon: one of their nodes failed a scrape."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=2)
        for _, node in self._seeds:
            node.close()

    def refresh(self) -> None:
        """Read every seed's cluster once; a seed that fails keeps its last members (and is logged once per kind). A
        cluster in flux (a node loading, syncing or failed) or a seed that failed is read again soon."""
        for seed, node in self._seeds:
            try:
                view = read_members(node)
            except Exception as err:  # noqa: BLE001 - a failing seed must not stop the others, nor the exporter
                self._wake.set()
                kind = classify(err)
                if (seed.name, kind) not in self._logged:
                    self._logged.add((seed.name, kind))
                    log.warning("cluster discovery from %s (%s) failed (%s): %.200s", seed.name, seed.display, kind, err)
                continue
            if view is None:
                if (seed.name, "not a cluster") not in self._logged:
                    self._logged.add((seed.name, "not a cluster"))
                    log.warning("cluster discovery from %s (%s): not a cluster node (or CLUSTER is renamed away)", seed.name, seed.display)
                continue
            members, settled = view
            if not settled:
                self._wake.set()
            self._targets.set_cluster_members(seed, members)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            if self._stop.wait(EARLIEST):
                return
            self._wake.wait(max(0.0, self._interval - EARLIEST))
            self._wake.clear()
