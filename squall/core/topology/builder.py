"""Storm's ``TopologyBuilder``: a topology declared in Python, validated as it is built.

``set_spout``, ``set_bolt(...).fields_grouping(...)``, ``build``; and Trident's stream
operations on it: ``persistent_aggregate``, ``partition_persist``, ``state_query``
(:mod:`squall.core.topology.trident` says what each is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from squall.core.errors import TopologyError
from squall.core.reliability.tuples import DEFAULT_STREAM
from squall.core.topology import windows
from squall.core.topology.grouping import Grouping
from squall.core.topology.kafka_sink import KAFKA_BOLT, KEY_FIELD, SinkSpec
from squall.core.topology.model import BoltSpec, InputSpec, SpoutSpec, TopologySpec
from squall.core.topology.trident import CLASS as AGGREGATE_CLASS
from squall.core.topology.trident import PERSIST_CLASS, QUERY_CLASS, trident_spec
from squall.core.topology.windows import Count, Duration


class BoltDeclarer:
    """Returned by :meth:`TopologyBuilder.set_bolt`: declare its inputs, Storm style."""

    def __init__(self, inputs: list[InputSpec], config: dict[str, Any] | None = None) -> None:
        self._inputs = inputs
        self._config = config

    def add_configuration(self, key: str, value: Any) -> BoltDeclarer:
        """One key of the bolt's configuration (Storm's ``addConfiguration``), e.g.
        ``topology.tick.tuple.freq.secs``."""
        if self._config is None:
            raise TopologyError(f"a Trident bolt's configuration is its spec, not {key!r}")
        self._config[key] = value
        return self

    def with_window(self, length: Count | Duration,
                    slide: Count | Duration | None = None) -> BoltDeclarer:
        """A sliding window (Storm's ``withWindow``) of ``length`` tuples or milliseconds,
        one every ``slide`` (default: ``length``, a tumbling window); for a
        :class:`squall.bolt.WindowedBolt`."""
        return self._window(length, length if slide is None else slide)

    def with_tumbling_window(self, length: Count | Duration) -> BoltDeclarer:
        return self._window(length, length)

    def with_timestamp_field(self, field: str) -> BoltDeclarer:
        """Event time: windows by the timestamps (ms) in ``field`` of each input tuple."""
        return self.add_configuration(windows.TIMESTAMP_FIELD, field)

    def with_lag(self, lag: Duration) -> BoltDeclarer:
        """How far out of order timestamps may come: the watermark trails the newest."""
        return self.add_configuration(windows.LAG_MS, lag.ms)

    def with_late_tuple_stream(self, stream: str) -> BoltDeclarer:
        """Where tuples that come after their windows closed go (declare it among the
        bolt's outputs, with the input fields it carries)."""
        return self.add_configuration(windows.LATE_STREAM, stream)

    def _window(self, length: Count | Duration, slide: Count | Duration) -> BoltDeclarer:
        if type(length) is not type(slide):
            raise TopologyError(f"a window's length {length} and slide {slide} must both be "
                                "Count or both Duration")
        for k in (windows.LENGTH_COUNT, windows.LENGTH_MS, windows.SLIDE_COUNT,
                  windows.SLIDE_MS):
            (self._config or {}).pop(k, None)
        if isinstance(length, Count) and isinstance(slide, Count):
            self.add_configuration(windows.LENGTH_COUNT, length.n)
            return self.add_configuration(windows.SLIDE_COUNT, slide.n)
        assert isinstance(length, Duration) and isinstance(slide, Duration)
        self.add_configuration(windows.LENGTH_MS, length.ms)
        return self.add_configuration(windows.SLIDE_MS, slide.ms)

    def _add(self, component: str, stream: str, grouping: Grouping,
             fields: Sequence[str] = (), grouping_class: str = "") -> BoltDeclarer:
        self._inputs.append(InputSpec(component, stream, grouping, tuple(fields),
                                      grouping_class))
        return self

    def shuffle_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, Grouping.SHUFFLE)

    def fields_grouping(self, component: str, fields: Sequence[str],
                        stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, Grouping.FIELDS, fields)

    def all_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, Grouping.ALL)

    def global_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, Grouping.GLOBAL)

    def direct_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, Grouping.DIRECT)

    def none_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, Grouping.NONE)

    def local_or_shuffle_grouping(self, component: str,
                                  stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, Grouping.LOCAL_OR_SHUFFLE)

    def partial_key_grouping(self, component: str, fields: Sequence[str],
                             stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Each key to the less loaded of two tasks: a hot key is spread over two, so the
        bolt's per-key results are partial and a fields-grouped bolt downstream merges
        them."""
        return self._add(component, stream, Grouping.PARTIAL_KEY, fields)

    def custom_grouping(self, component: str, grouping: str | type,
                        stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """``grouping``: a :class:`squall.topology.CustomStreamGrouping` subclass, or its
        ``module:Class``; importable wherever the component's tasks run."""
        if not isinstance(grouping, str) and grouping.__module__ == "__main__":
            raise TopologyError(f"custom grouping {grouping.__qualname__!r} is defined in "
                                "__main__, which the topology's tasks cannot import: move it "
                                "to a module")
        name = grouping if isinstance(grouping, str) \
            else f"{grouping.__module__}:{grouping.__qualname__}"
        return self._add(component, stream, Grouping.CUSTOM, grouping_class=name)


class TopologyBuilder:
    """Storm's TopologyBuilder: ``set_spout``, ``set_bolt(...).fields_grouping(...)``, ``build``;
    Trident's ``persistent_aggregate``, ``partition_persist``, ``state_query``."""

    def __init__(self) -> None:
        self._spouts: list[SpoutSpec] = []
        self._bolts: list[tuple[str, str, int, list[InputSpec], dict[str, tuple[str, ...]],
                                dict[str, Any]]] = []

    def set_spout(self, name: str, topics: str | Sequence[str], parallelism: int = 1,
                  scheme: str = "text", fields: Sequence[str] = (),
                  start: str = "earliest") -> None:
        t = (topics,) if isinstance(topics, str) else tuple(topics)
        self._spouts.append(SpoutSpec(name, t, parallelism, scheme, tuple(fields), start))

    def set_bolt(self, name: str, bolt: str | type, parallelism: int = 1,
                 outputs: Mapping[str, Sequence[str]] | None = None,
                 config: Mapping[str, Any] | None = None) -> BoltDeclarer:
        """``bolt`` is ``module:Class`` or the class itself (its ``outputs`` are read)."""
        if isinstance(bolt, type):
            cls = f"{bolt.__module__}:{bolt.__qualname__}"
            declared = getattr(bolt, "outputs", {})
        else:
            cls, declared = bolt, {}
        outs = {k: tuple(v) for k, v in (outputs if outputs is not None else declared).items()}
        inputs: list[InputSpec] = []
        conf = dict(config or {})
        self._bolts.append((name, cls, parallelism, inputs, outs, conf))
        return BoltDeclarer(inputs, conf)

    def kafka_bolt(self, name: str, topic: str | None = None, parallelism: int = 1, *,
                   topic_field: str | None = None, key_field: str = "key",
                   message_field: str = "message", exactly_once: bool = False,
                   producer: Mapping[str, Any] | None = None) -> BoltDeclarer:
        """storm-kafka-client's ``KafkaBolt``: each input tuple written to ``topic`` (or the
        topic its ``topic_field`` names), keyed by ``key_field`` (when the input has it) with
        ``message_field`` as the value; acked once Kafka confirmed it. ``exactly_once``:
        each output written once to the topic, whatever is replayed (fields- or
        global-group its inputs). ``producer``: librdkafka properties for its producer."""
        spec = SinkSpec(topic, topic_field, key_field, message_field, exactly_once,
                        dict(producer or {}))
        config = spec.config()
        if key_field == "key":
            config.pop(KEY_FIELD)  # the default: a key only if the input has the field
        inputs: list[InputSpec] = []
        self._bolts.append((name, KAFKA_BOLT, parallelism, inputs, {}, config))
        return BoltDeclarer(inputs, config)

    def _trident(self, name: str, cls: str, parallelism: int, config: dict[str, Any]
                 ) -> BoltDeclarer:
        t = trident_spec(cls, config, f"bolt {name!r}")
        inputs: list[InputSpec] = []
        self._bolts.append((name, cls, parallelism, inputs, t.outputs(), t.to_config()))
        return BoltDeclarer(inputs)

    def persistent_aggregate(self, name: str, group_by: Sequence[str],
                             aggregator: str = "count", parallelism: int = 1, *,
                             fields: Sequence[str] = (), output: str | None = None,
                             kind: str = "opaque", url: str | None = None,
                             state_name: str | None = None, cache_size: int = 0,
                             backend: str | None = None) -> BoltDeclarer:
        """Trident's ``groupBy(fields).persistentAggregate(state, aggregator, output)``:
        group its input with ``fields_grouping(component, group_by)`` (or
        ``global_grouping`` when ``group_by`` is empty)."""
        return self._trident(name, AGGREGATE_CLASS, parallelism, {
            "group_by": list(group_by), "aggregator": aggregator, "fields": list(fields),
            **({"output": output} if output else {}),
            "state": {"kind": kind, "url": url, "name": state_name, "cache_size": cache_size,
                      "backend": backend}})

    def partition_persist(self, name: str, updater: str, group_by: Sequence[str],
                          fields: Sequence[str], outputs: Sequence[str] = (),
                          parallelism: int = 1, *, kind: str = "opaque",
                          url: str | None = None, state_name: str | None = None,
                          backend: str | None = None) -> BoltDeclarer:
        """Trident's ``partitionBy(group_by).partitionPersist(state, fields, updater,
        outputs)``: ``updater`` ('module:Class') is given each batch's fresh tuples."""
        return self._trident(name, PERSIST_CLASS, parallelism, {
            "group_by": list(group_by), "updater": updater, "fields": list(fields),
            "outputs": list(outputs),
            "state": {"kind": kind, "url": url, "name": state_name, "backend": backend}})

    def state_query(self, name: str, state: str, key: Sequence[str],
                    function: str = "map_get", output: str = "value", parallelism: int = 1,
                    *, fields: Sequence[str] | None = None) -> BoltDeclarer:
        """Trident's ``stateQuery(state, key, function, output)``: each input tuple's
        ``key`` looked up in component ``state``'s state; emits ``fields`` (default: the
        key) and the result, anchored to the input."""
        return self._trident(name, QUERY_CLASS, parallelism, {
            "state": state, "key": list(key), "function": function, "output": output,
            **({"fields": list(fields)} if fields is not None else {})})

    def build(self, name: str, **conf: Any) -> TopologySpec:
        bolts = tuple(BoltSpec(n, c, p, tuple(i), o, cf) for n, c, p, i, o, cf in self._bolts)
        return TopologySpec(name, tuple(self._spouts), bolts, **conf).validate()
