"""A bolt's own metrics: the registry a task's context holds, the deltas its micro-batches
hand over (however they are split between workers), their export and the API's sums."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from services.api.stats import aggregate, is_counter
from services.bolts.user_metrics import UserMetricsCollector
from squall.bolt import BasicBolt, TaskContext
from squall.core.bolt_api.metrics import HistogramDelta, MetricsDelta, UserMetrics
from squall.core.errors import UsageError
from squall.core.reliability.clock import ManualClock
from squall.core.reliability.tuples import Tuple
from squall.core.tasks.executor import BoltExecutor
from squall.core.wire.tuple_batch import TupleBatch


@pytest.mark.parametrize("name", ["", "1st", "a-b", "x" * 101, "hits_total", "t_count",
                                  "latency_bucket", "s_sum"])
def test_a_bad_name_is_refused_saying_why(name: str) -> None:
    with pytest.raises(UsageError, match="must match"):
        UserMetrics().counter(name)


def test_a_name_is_one_kind_and_registering_again_gives_the_same() -> None:
    m = UserMetrics()
    c = m.counter("hits")
    assert m.counter("hits") is c
    with pytest.raises(UsageError, match="registered as a counter, not a gauge"):
        m.gauge("hits")
    m.histogram("size", (1, 2))
    with pytest.raises(UsageError, match=r"buckets \[1.0, 2.0\], not \[1.0, 3.0\]"):
        m.histogram("size", (1, 3))
    with pytest.raises(UsageError, match="finite and increasing"):
        m.histogram("other", (2, 1))
    with pytest.raises(UsageError, match="finite amount"):
        c.inc(-1)


@given(st.lists(st.tuples(st.sampled_from(["inc", "set", "observe", "take"]),
                          st.floats(0, 20, allow_nan=False)), max_size=60))
def test_deltas_add_up_to_what_was_done_however_they_are_taken(
        ops: list[tuple[str, float]]) -> None:
    """A task's micro-batches hand over deltas whenever they end: summed, they are the
    totals; the gauge is the last value set."""
    m = UserMetrics()
    c, g, h = m.counter("c"), m.gauge("g"), m.histogram("h", (1, 5, 10))
    total = MetricsDelta()
    count = 0.0
    last: float | None = None
    seen: list[float] = []
    for op, v in ops:
        if op == "inc":
            c.inc(v)
            count += v
        elif op == "set":
            g.set(v)
            last = v
        elif op == "observe":
            h.observe(v)
            seen.append(v)
        else:
            total.add(m.take())
    total.add(m.take())
    assert total.counters.get("c", 0.0) == pytest.approx(count)
    assert total.gauges.get("g") == last
    if seen:
        hist = total.histograms["h"]
        assert sum(hist.counts) == len(seen)
        assert hist.counts[0] == sum(1 for v in seen if v <= 1)
        assert hist.counts[-1] == sum(1 for v in seen if v > 10)
        assert hist.sum == pytest.approx(sum(seen))
    else:
        assert "h" not in total.histograms


class Counting(BasicBolt):
    outputs: ClassVar[dict[str, tuple[str, ...]]] = {"default": ()}

    def prepare(self, conf: Any, context: TaskContext, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.seen = context.register_counter("seen")

    def process(self, t: Tuple) -> None:
        self.seen.inc()


def test_a_micro_batch_hands_over_what_its_bolt_counted() -> None:
    ex = BoltExecutor(Counting(), TaskContext("t", "c", 3, 4), [], clock=ManualClock())
    batch = TupleBatch.from_tuples([Tuple([i], ("n",)) for i in range(5)], ("n",))
    assert ex.run([batch]).user.counters == {"seen": 5.0}
    assert not ex.run([]).user  # nothing since


def test_exported_by_task_and_summed_per_component_as_the_api_does() -> None:
    reg = CollectorRegistry()
    col = UserMetricsCollector("topo")
    reg.register(col)
    hist = HistogramDelta((1.0, 5.0), (1, 2, 0), 7.0)
    col.add("views", 0, MetricsDelta({"windows": 2.0}, {"size": 3.0}, {"per_page": hist}))
    col.add("views", 1, MetricsDelta({"windows": 1.0}, {"size": 4.0}, {"per_page": hist}))
    col.add("views", 0, MetricsDelta({"windows": 1.0}, {}, {"per_page": hist}))
    col.add("other", 0, MetricsDelta(gauges={"windows": 1.0}))  # a clash: left out
    text = generate_latest(reg).decode()
    samples = [(s.name, dict(s.labels), float(s.value))
               for fam in text_string_to_metric_families(text) for s in fam.samples]
    assert ("squall_user_windows_total", {"topology": "topo", "component": "views",
                                          "task": "0"}, 3.0) in samples
    assert ("squall_user_per_page_bucket", {"topology": "topo", "component": "views",
                                            "task": "0", "le": "5.0"}, 6.0) in samples
    stats = aggregate(samples, "topo")
    assert {k: v for k, v in stats["views"].counters.items() if k.startswith("user_")} == {
        "user_windows_total": 4.0, "user_size": 7.0, "user_per_page_count": 9.0,
        "user_per_page_sum": 21.0}
    assert "other" not in stats
    assert is_counter("user_windows_total") and is_counter("user_per_page_sum")
    assert not is_counter("user_size")
