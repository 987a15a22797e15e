"""Windowed bolts: page views counted per page in event-time windows (Storm's
``BaseWindowedBolt`` with a timestamp field, a lag and a late stream).

``views`` gets each page's clicks (fields grouping on ``page``) and counts them in tumbling
windows of ``window_ms`` by each click's own timestamp ``ts``; clicks may come up to
``lag_ms`` out of order. Each count is anchored to the clicks it counts, so a click's tree
completes once its window's count has been logged; a click that comes after its window
closed goes to the ``late`` stream instead. ``log`` prints both.

Run it: ``squall run examples/windows.yaml`` (feed the topic "clicks" with JSON such as
``{"page": "/home", "ts": 1764316800000}``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from squall.bolt import BasicBolt, OutputCollector, TaskContext, TupleWindow, WindowedBolt
from squall.topology import Duration, TopologyBuilder, TopologySpec
from squall.tuples import Tuple

log = logging.getLogger("examples.windows")


class PageViews(WindowedBolt):
    """Each window's views per page, as (page, views, start, end); its own metrics count the
    windows, keep the last one's size and the spread of views per page."""

    outputs: ClassVar = {"default": ("page", "views", "start", "end"), "late": ("page", "ts")}

    def prepare(self, conf: Any, context: TaskContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        # on the bolts job's /metrics as squall_user_windows_total, squall_user_last_window,
        # squall_user_views_per_page, with the task's labels; the API sums them
        self.windows = context.register_counter("windows")
        self.last_window = context.register_gauge("last_window")
        self.views = context.register_histogram("views_per_page", (1, 5, 10, 50, 100))

    def execute(self, window: TupleWindow) -> None:
        self.windows.inc()
        self.last_window.set(len(window))
        by_page: dict[str, list[Tuple]] = defaultdict(list)
        for t in window.get():
            by_page[t["page"]].append(t)
        for page, clicks in sorted(by_page.items()):
            self.views.observe(len(clicks))
            # anchored to the clicks counted (not to the whole window: fewer edges)
            self.collector.emit((page, len(clicks), window.start_timestamp,
                                 window.end_timestamp), clicks)


class WordsPerWindow(WindowedBolt):
    """Each word's count per window, anchored to that word's tuples (the benchmarks' windowed
    word count)."""

    outputs: ClassVar = {"default": ("word", "count")}

    def execute(self, window: TupleWindow) -> None:
        by_word: dict[str, list[Tuple]] = defaultdict(list)
        for t in window.get():
            by_word[t["word"]].append(t)
        for word, ts in by_word.items():
            self.collector.emit((word, len(ts)), ts)


class LogViews(BasicBolt):
    outputs: ClassVar = {"default": ()}

    def process(self, t: Tuple) -> Iterable[Sequence[Any]]:
        if t.stream == "late":
            log.info("late click on %s at %d", t["page"], t["ts"])
        else:
            log.info("%s: %d views in [%d, %d)", t["page"], t["views"], t["start"], t["end"])
        return ()


def topology(name: str = "windows", source: str = "clicks", window_ms: int = 10_000,
             lag_ms: int = 2_000, parallelism: int = 2) -> TopologySpec:
    """The same topology as ``windows.yaml``, built in Python."""
    b = TopologyBuilder()
    b.set_spout("clicks", source, scheme="json", fields=["page", "ts"])
    b.set_bolt("views", PageViews, parallelism) \
        .with_tumbling_window(Duration(window_ms)).with_timestamp_field("ts") \
        .with_lag(Duration(lag_ms)).with_late_tuple_stream("late") \
        .fields_grouping("clicks", ["page"])
    b.set_bolt("log", LogViews).global_grouping("views").global_grouping("views", "late")
    return b.build(name, ackers=2)
