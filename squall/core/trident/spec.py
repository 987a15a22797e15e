"""``persistent_aggregate`` in a topology: what the spec says, checked.

In YAML / JSON a bolt says ``persistent_aggregate:`` instead of ``class:``::

    - name: count
      parallelism: 2
      persistent_aggregate:
        group_by: [word]          # the key; [] for one global value (SnapshottableMap)
        aggregator: count         # count | sum | module:Class (a combiner or reducer)
        fields: []                # the aggregator's input fields (sum: the one to add)
        output: count             # the new values stream: group_by fields + this
        state: {kind: opaque, url: null, name: null, cache_size: 0}
      inputs: [{component: split, grouping: fields, fields: [word]}]

The bolt is stored as class :data:`CLASS` with this as its config, so a spec round-trips
through JSON like any other bolt.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from squall.core.errors import TopologyError
from squall.core.trident.aggregators import CombinerAggregator, Count, ReducerAggregator, Sum
from squall.core.trident.codec import MapKind

CLASS = "squall.trident:PersistentAggregate"
_KEYS = {"group_by", "aggregator", "fields", "output", "state"}
_STATE_KEYS = {"kind", "url", "name", "cache_size"}
_BUILTIN: dict[str, type] = {"count": Count, "sum": Sum}


@dataclass(frozen=True)
class AggregateSpec:
    group_by: tuple[str, ...]
    aggregator: str = "count"
    fields: tuple[str, ...] = ()
    output: str = "count"
    kind: MapKind = MapKind.OPAQUE
    #: the database (``postgresql://...``, ``sqlite:///path``); None: the job's default
    url: str | None = None
    #: the state's name in the database; None: ``<topology>.<component>``
    name: str | None = None
    #: an LRU of this many values in front of the database (0: none)
    cache_size: int = 0

    @classmethod
    def from_config(cls, raw: Any, where: str) -> AggregateSpec:
        if not isinstance(raw, Mapping):
            raise TopologyError(f"{where}: persistent_aggregate must be an object")
        unknown = sorted(set(raw) - _KEYS)
        if unknown:
            raise TopologyError(f"{where}: unknown persistent_aggregate keys {unknown} "
                                f"(known: {sorted(_KEYS)})")
        state = raw.get("state") or {}
        if not isinstance(state, Mapping):
            raise TopologyError(f"{where}: persistent_aggregate.state must be an object")
        bad = sorted(set(state) - _STATE_KEYS)
        if bad:
            raise TopologyError(f"{where}: unknown state keys {bad} (known: "
                                f"{sorted(_STATE_KEYS)})")
        try:
            kind = MapKind(state.get("kind", MapKind.OPAQUE))
        except ValueError:
            raise TopologyError(f"{where}: state kind {state.get('kind')!r} is not one of "
                                f"{', '.join(k.value for k in MapKind)}") from None
        agg = str(raw.get("aggregator", "count"))
        spec = cls(_names(raw.get("group_by", ()), f"{where}: group_by"), agg,
                   _names(raw.get("fields", ()), f"{where}: fields"),
                   str(raw.get("output", agg if agg in _BUILTIN else "value")), kind,
                   None if state.get("url") is None else str(state["url"]),
                   None if state.get("name") is None else str(state["name"]),
                   int(state.get("cache_size", 0)))
        spec.load_aggregator(where)
        if spec.cache_size < 0:
            raise TopologyError(f"{where}: cache_size must be >= 0, got {spec.cache_size}")
        return spec

    def to_config(self) -> dict[str, Any]:
        return {"group_by": list(self.group_by), "aggregator": self.aggregator,
                "fields": list(self.fields), "output": self.output,
                "state": {"kind": self.kind.value, "url": self.url, "name": self.name,
                          "cache_size": self.cache_size}}

    def outputs(self) -> dict[str, tuple[str, ...]]:
        """The new values stream: each changed key with its value."""
        return {"default": (*self.group_by, self.output)}

    def load_aggregator(self, where: str = "") -> CombinerAggregator[Any] | ReducerAggregator[Any]:
        if self.aggregator in _BUILTIN:
            agg: Any = _BUILTIN[self.aggregator]()
        else:
            mod, _, name = self.aggregator.partition(":")
            try:
                agg = getattr(importlib.import_module(mod), name)()
            except Exception as e:  # the user's module: any failure is a bad spec
                raise TopologyError(f"{where}: aggregator {self.aggregator!r} cannot be "
                                    f"loaded: {type(e).__name__}: {e}") from None
        if not isinstance(agg, CombinerAggregator | ReducerAggregator):
            raise TopologyError(f"{where}: aggregator {self.aggregator!r} is neither a "
                                "CombinerAggregator (init, combine, zero) nor a "
                                "ReducerAggregator (init, reduce)")
        if self.aggregator == "sum" and len(self.fields) != 1:
            raise TopologyError(f"{where}: the sum aggregator needs one input field, "
                                f"got fields {list(self.fields)}")
        return agg


def _names(v: Any, where: str) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
        raise TopologyError(f"{where} must be a list of field names, got {v!r}")
    return tuple(v)
