"""What the read routes serve: the cluster as of now, kept in memory.

Dashboards and scripts poll the summary routes; rebuilding each answer from ZooKeeper (a
read per topology, worker and assignment) and from every worker's ``/metrics`` made them
answer at 36 requests/s. Here ZooKeeper's topologies, workers and assignments are
mirrored by kazoo's ``TreeCache`` (kept current by watches), parsed once per node version;
the workers' metrics are scraped in the background every ``interval_s`` and aggregated per
topology. A read is a dictionary lookup.

Reads on the replica that wrote see the write: :meth:`ClusterView.settle` waits (briefly)
until the mirror holds the version a write produced. Until the mirrors have loaded (or if
they fail), reads go to ZooKeeper as before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from services.api.control import Contender
from services.api.stats import (
    ComponentStats,
    ReportedError,
    Sample,
    Scrape,
    aggregate,
    scrape,
    windowed,
)
from squall.coord import ASSIGNMENTS, TOPOLOGIES, WORKERS
from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.control.endpoints import web_url
from squall.core.control.rolling import WINDOWS, RollingTotals, Window
from squall.endpoint_fetch import Endpoints

log = logging.getLogger("squall.api")


class _Mirror:
    """One ZooKeeper subtree's children, parsed, re-parsed only when a node changes."""

    def __init__(self, zk: Any, path: str, parse: Callable[[bytes, int], Any]) -> None:
        from kazoo.recipe.cache import TreeCache, TreeEvent

        self.path, self.parse = path, parse
        self.ready = threading.Event()
        self._parsed: dict[str, tuple[int, Any]] = {}
        # Bumped by every change the watches bring: items() is rebuilt only after one.
        self._generation = 0
        self._items: tuple[int, dict[str, Any]] = (-1, {})
        self.cache = TreeCache(zk, path)

        def on(event: Any) -> None:
            self._generation += 1
            if event.event_type == TreeEvent.INITIALIZED:
                self.ready.set()

        self.cache.listen(on)
        self.cache.listen_fault(lambda e: log.warning("ZooKeeper mirror of %s: %s", path, e))
        try:
            self.cache.start()
        except Exception as e:  # not ready, ever: the reads go to ZooKeeper instead
            log.warning("no ZooKeeper mirror of %s (reads go to ZooKeeper): %s", path, e)

    def items(self) -> dict[str, Any]:
        """Name -> parsed node (do not change it: it is shared until the next change)."""
        generation = self._generation
        if self._items[0] == generation:
            return self._items[1]
        out: dict[str, Any] = {}
        for name in sorted(self.cache.get_children(self.path, frozenset())):
            node = self.cache.get_data(f"{self.path}/{name}")
            if node is None or node.data is None:
                continue
            version = node.stat.version
            have = self._parsed.get(name)
            if have is None or have[0] != version:
                try:
                    have = (version, self.parse(node.data, version))
                except (ValueError, KeyError, TypeError) as e:
                    log.warning("ignoring malformed node %s/%s: %s", self.path, name, e)
                    continue
                self._parsed[name] = have
            out[name] = have[1]
        for gone in set(self._parsed) - set(out):
            self._parsed.pop(gone, None)
        self._items = (generation, out)
        return out

    def version_of(self, name: str) -> int | None:
        node = self.cache.get_data(f"{self.path}/{name}")
        return None if node is None else int(node.stat.version)

    def close(self) -> None:
        self.cache.close()


class ClusterView:
    def __init__(self, zk: Any, election: str, now_ms: Callable[[], int],
                 interval_s: float = 2.0, scrape_timeout_s: float = 1.0,
                 headers: Mapping[str, str] | None = None) -> None:
        """``headers``: sent with every fetch from a worker (the telemetry token)."""
        self.interval_s, self.scrape_timeout_s, self.now_ms = interval_s, scrape_timeout_s, now_ms
        self.fetch = Endpoints(scrape_timeout_s, headers=dict(headers or {}))
        self.topologies = _Mirror(zk, TOPOLOGIES, TopologyRecord.from_json)
        self.workers_ = _Mirror(zk, WORKERS, lambda raw, _v: WorkerInfo.from_json(raw))
        self.assignments_ = _Mirror(zk, ASSIGNMENTS,
                                    lambda raw, _v: WorkerAssignment.from_json(raw))
        # The API replicas' election: each contender's node holds its URL.
        self.election = _Mirror(zk, election, lambda raw, _v: raw.decode())
        self._stats: dict[str, dict[str, ComponentStats]] = {}
        # Per topology, per metrics endpoint (a process): its own sums per component.
        self._by_endpoint: dict[str, dict[str, dict[str, ComponentStats]]] = {}
        # Per topology: Storm's windows over its counters (squall/core/control/rolling.py), by
        # (process's url, component, statistic): the topology's windows sum the processes;
        # Storm's visualization labels its edges with each process's own.
        self._rolling: dict[str, RollingTotals[tuple[str, str, str]]] = {}
        self._scraped = False
        self._errors: dict[str, list[ReportedError]] = {}
        self._spark_ui: dict[str, str] = {}
        self._stop = threading.Event()
        self._scraper = threading.Thread(target=self._scrape_loop, name="api-stats",
                                         daemon=True)
        self._scraper.start()

    @property
    def ready(self) -> bool:
        return all(m.ready.is_set() for m in self._mirrors())

    def records(self) -> list[TopologyRecord]:
        return list(self.topologies.items().values())

    def record(self, tid: str) -> TopologyRecord | None:
        rec: TopologyRecord | None = self.topologies.items().get(tid)
        return rec

    def workers(self) -> list[WorkerInfo]:
        return list(self.workers_.items().values())

    def assignments(self) -> dict[str, WorkerAssignment]:
        return dict(self.assignments_.items())

    def leader_url(self) -> str | None:
        """The first contender by sequence (kazoo's Election), as ``contenders()`` says."""
        first = next(iter(self.contenders()), None)
        return None if first is None else first.url or None

    def contenders(self) -> list[Contender]:
        """The API replicas, the leader first (by election sequence)."""
        nodes = self.election.items()
        return [Contender.parse(str(nodes[n])) for n in sorted(nodes, key=lambda n: n[-10:])]

    def stats_of(self, tid: str) -> dict[str, ComponentStats]:
        return self._stats.get(tid, {})

    def windows_of(self, tid: str, now_ms: int) -> dict[str, Window[tuple[str, str]]]:
        """The topology's counters over Storm's windows ("600", "10800", "86400") as of
        ``now_ms``, per ``(component, statistic)``; empty windows before a scrape."""
        out: dict[str, Window[tuple[str, str]]] = {}
        for w, win in self._windows(tid, now_ms).items():
            totals: dict[tuple[str, str], float] = {}
            for (_, comp, stat), v in win.totals.items():
                totals[(comp, stat)] = totals.get((comp, stat), 0.0) + v
            out[w] = Window(totals, win.span_s)
        return out

    def endpoint_windows_of(self, tid: str, now_ms: int) -> dict[str, Window[tuple[str, str]]]:
        """Each process's emitted count over Storm's windows, per (url, component)."""
        return {w: Window({(url, comp): v for (url, comp, stat), v in win.totals.items()
                           if stat == "emitted"}, win.span_s)
                for w, win in self._windows(tid, now_ms).items()}

    def _windows(self, tid: str, now_ms: int) -> dict[str, Window[tuple[str, str, str]]]:
        rolling = self._rolling.get(tid)
        return {w: rolling.window(now_ms, int(w)) if rolling
                else Window[tuple[str, str, str]]({}, 0.0) for w in WINDOWS}

    def endpoint_stats_of(self, tid: str) -> dict[str, dict[str, ComponentStats]]:
        """Per metrics endpoint (a process) of the topology: its sums per component."""
        return self._by_endpoint.get(tid, {})

    def errors_of(self, tid: str) -> list[ReportedError]:
        """The topology's processes' last errors, oldest first, with where they ran."""
        return self._errors.get(tid, [])

    def spark_ui_of(self, tid: str) -> str | None:
        """The Spark UI of the topology's running bolts job, if it serves one."""
        return self._spark_ui.get(tid)

    def series_of(self, tid: str, now_ms: int, seconds: int
                  ) -> list[tuple[int, Mapping[tuple[str, str, str], float]]]:
        """The topology's running totals over the last ``seconds`` (its charts)."""
        rolling = self._rolling.get(tid)
        return rolling.series(now_ms, seconds) if rolling else []

    def settle(self, tid: str, version: int | None, timeout_s: float = 2.0) -> None:
        """Wait until the mirror holds topology ``tid`` at ``version`` (None: removed)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.topologies.ready.is_set():
            if self.topologies.version_of(tid) == version:
                return
            time.sleep(0.005)

    def _scrape_loop(self) -> None:
        wait = 0.0
        while not self._stop.wait(wait):
            wait = self.interval_s if self.ready else 0.1
            if not self.ready:
                continue
            try:
                got = scrape({str(e["url"]): w.host for w in self.workers()
                              for e in w.endpoints}, self.fetch)
                now = self.now_ms()
                by_topology: dict[str, list[tuple[str, Sample]]] = {}
                self._errors = _errors_by_topology(self.workers(), got)
                for url, answer in got.items():
                    for sample in answer.samples or ():
                        by_topology.setdefault(sample[1].get("topology", ""), []).append(
                            (url, sample))
                self._stats = {t: aggregate([s for _, s in ss], t)
                               for t, ss in by_topology.items() if t}
                self._spark_ui = {t: ui for t, ss in by_topology.items()
                                  if (ui := _spark_ui(ss)) is not None}
                self._by_endpoint = {t: _per_endpoint(ss, t) for t, ss in by_topology.items()
                                     if t}
                for t, ss in by_topology.items():
                    if t:
                        # A topology that appears after this replica's first scrape has just
                        # started: all its counts are new, none a baseline.
                        self._rolling.setdefault(t, RollingTotals[tuple[str, str, str]](
                            baseline_first=not self._scraped)).observe(now, windowed(ss))
                self._scraped = True
                for gone in set(self._rolling) - set(self.topologies.items()):
                    self._rolling.pop(gone, None)
            except Exception as e:  # never let the scraper die; the next round tries again
                log.warning("metrics scrape failed: %s", e)

    def close(self) -> None:
        self._stop.set()
        self.fetch.close()
        for m in self._mirrors():
            m.close()

    def _mirrors(self) -> tuple[_Mirror, ...]:
        return (self.topologies, self.workers_, self.assignments_, self.election)


def _spark_ui(samples: list[tuple[str, Sample]]) -> str | None:
    """The Spark UI of the bolts job whose queries run (a standby's serves none of them); an
    http(s) URL only: the page links it."""
    active = {url for url, (name, _, v) in samples if name == "squall_bolt_query_active" and v}
    uis = sorted((url not in active, labels.get("url", ""))
                 for url, (name, labels, _) in samples if name == "squall_bolt_spark_ui_info"
                 and web_url(labels.get("url", "")))
    return uis[0][1] if uis else None


def _per_endpoint(samples: list[tuple[str, Sample]], tid: str
                  ) -> dict[str, dict[str, ComponentStats]]:
    by_url: dict[str, list[Sample]] = {}
    for url, sample in samples:
        by_url.setdefault(url, []).append(sample)
    return {url: aggregate(ss, tid) for url, ss in by_url.items()}


def _errors_by_topology(workers: list[WorkerInfo], got: dict[str, Scrape]
                        ) -> dict[str, list[ReportedError]]:
    """Each endpoint's errors, under its topology, with the host and port it runs at."""
    where: dict[str, tuple[str, str]] = {}
    for w in workers:
        for e in w.endpoints:
            if e.get("topology"):
                where[str(e["url"])] = (str(e["topology"]), w.host)
    out: dict[str, list[ReportedError]] = {}
    for url, answer in got.items():
        if url not in where or not answer.errors:
            continue
        tid, host = where[url]
        port = urlsplit(url).port or 0
        out.setdefault(tid, []).extend(ReportedError(r, host, port, url)
                                       for r in answer.errors)
    for errs in out.values():
        errs.sort(key=lambda e: e.report.time_ms)
    return out
