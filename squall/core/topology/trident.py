"""Trident in a topology: ``persistent_aggregate``, ``partition_persist`` and
``state_query`` as a spec says them, checked.

In YAML / JSON a bolt says one of them instead of ``class:``::

    - name: count
      parallelism: 2
      persistent_aggregate:
        group_by: [word]          # the key; [] for one global value (SnapshottableMap)
        aggregator: count         # count | sum | module:Class (a combiner or reducer)
        fields: []                # the aggregator's input fields (sum: the one to add)
        output: count             # the new values stream: group_by fields + this
        state: {kind: opaque, url: null, name: null, cache_size: 0, backend: null}
      inputs: [{component: split, grouping: fields, fields: [word]}]

    - name: persist               # Trident's partitionPersist with a StateUpdater
      partition_persist:
        group_by: [user]          # the keys the updater writes (each key in one task)
        updater: mymodule:Updater # update_state(state, tuples, collector)
        fields: [user, amount]    # the tuples' fields it is given
        outputs: [user, total]    # what it emits (its new values stream)
        state: {kind: transactional}
      inputs: [{component: payments, grouping: fields, fields: [user]}]

    - name: lookup                # Trident's stateQuery: read a state from a stream
      state_query:
        state: count              # the component that keeps the state
        key: [word]               # the input fields that make its key
        fields: [word]            # input fields passed on (default: key)
        function: map_get         # map_get | module:Class (batch_retrieve(state, keys))
        output: count             # emitted: fields + this
      inputs: [{component: queries, grouping: shuffle}]

Each is stored as a bolt of class :data:`CLASS`, :data:`PERSIST_CLASS` or
:data:`QUERY_CLASS` with this as its config, so a spec round-trips through JSON like any
other bolt.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from squall.core.errors import TopologyError
from squall.core.topology.checks import check_keys
from squall.core.trident.aggregators import CombinerAggregator, Count, ReducerAggregator, Sum
from squall.core.trident.codec import MapKind
from squall.core.trident.state import Key

CLASS = "squall.trident:PersistentAggregate"
PERSIST_CLASS = "squall.trident:PartitionPersist"
QUERY_CLASS = "squall.trident:StateQuery"
#: The bolts that own a state: their txid is their own query's micro-batch id.
STATEFUL = (CLASS, PERSIST_CLASS)
#: The YAML / JSON key of each, and its class.
SPEC_KEYS = {"persistent_aggregate": CLASS, "partition_persist": PERSIST_CLASS,
             "state_query": QUERY_CLASS}
_KEYS = {"group_by", "aggregator", "fields", "output", "state"}
_PERSIST_KEYS = {"group_by", "updater", "fields", "outputs", "state"}
_QUERY_KEYS = {"state", "key", "fields", "function", "output"}
_STATE_KEYS = {"kind", "url", "name", "cache_size", "backend"}
_CLASS_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_BUILTIN: dict[str, type] = {"count": Count, "sum": Sum}


@dataclass(frozen=True)
class StateOptions:
    """Where and how a stateful component keeps its state (``state:`` in a spec)."""

    kind: MapKind = MapKind.OPAQUE
    #: the database (``postgresql://...``, ``sqlite:///path``); None: the job's default
    url: str | None = None
    #: the state's name in the database; None: ``<topology>.<component>``
    name: str | None = None
    #: an LRU of this many values in front of the database (0: none)
    cache_size: int = 0
    #: a user-defined store, ``module:Class`` called as ``Class(url, StoreName)``
    #: (docs/trident.md); None: Squall's SQL store
    backend: str | None = None

    @classmethod
    def from_config(cls, raw: Any, where: str) -> StateOptions:
        state = raw or {}
        check_keys(state, _STATE_KEYS, where, "state")
        try:
            kind = MapKind(state.get("kind", MapKind.OPAQUE))
        except ValueError:
            raise TopologyError(f"{where}: state kind {state.get('kind')!r} is not one of "
                                f"{', '.join(k.value for k in MapKind)}") from None
        cache = state.get("cache_size", 0)
        if not isinstance(cache, int) or isinstance(cache, bool) or cache < 0:
            raise TopologyError(f"{where}: cache_size must be an integer >= 0, got {cache!r}")
        backend = state.get("backend")
        if backend is not None and not _CLASS_PATH.match(str(backend)):
            raise TopologyError(f"{where}: state backend {backend!r} must be 'module:Class'")
        url, name = (None if state.get(k) is None else str(state[k]) for k in ("url", "name"))
        return cls(kind, url, name, cache, None if backend is None else str(backend))

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "url": self.url, "name": self.name,
                "cache_size": self.cache_size, "backend": self.backend}


@dataclass(frozen=True)
class AggregateSpec:
    group_by: tuple[str, ...]
    aggregator: str = "count"
    fields: tuple[str, ...] = ()
    output: str = "count"
    state: StateOptions = StateOptions()

    @classmethod
    def from_config(cls, raw: Any, where: str) -> AggregateSpec:
        check_keys(raw, _KEYS, where, "persistent_aggregate")
        agg = str(raw.get("aggregator", "count"))
        spec = cls(_names(raw.get("group_by", ()), f"{where}: group_by"), agg,
                   _names(raw.get("fields", ()), f"{where}: fields"),
                   str(raw.get("output", agg if agg in _BUILTIN else "value")),
                   StateOptions.from_config(raw.get("state"), where))
        spec.load_aggregator(where)
        return spec

    def to_config(self) -> dict[str, Any]:
        return {"group_by": list(self.group_by), "aggregator": self.aggregator,
                "fields": list(self.fields), "output": self.output,
                "state": self.state.to_config()}

    def outputs(self) -> dict[str, tuple[str, ...]]:
        """The new values stream: each changed key with its value."""
        return {"default": (*self.group_by, self.output)}

    def load_aggregator(self, where: str = "") -> CombinerAggregator[Any] | ReducerAggregator[Any]:
        if self.aggregator in _BUILTIN:
            agg: Any = _BUILTIN[self.aggregator]()
        else:
            agg = _load(self.aggregator, "aggregator", where)
        if not isinstance(agg, CombinerAggregator | ReducerAggregator):
            raise TopologyError(f"{where}: aggregator {self.aggregator!r} is neither a "
                                "CombinerAggregator (init, combine, zero) nor a "
                                "ReducerAggregator (init, reduce)")
        if self.aggregator == "sum" and len(self.fields) != 1:
            raise TopologyError(f"{where}: the sum aggregator needs one input field, "
                                f"got fields {list(self.fields)}")
        return agg


@dataclass(frozen=True)
class PersistSpec:
    """``partition_persist``: a :class:`~squall.core.trident.persist.StateUpdater` given
    each batch's fresh tuples (their ``fields``), emitting ``outputs``."""

    group_by: tuple[str, ...]
    updater: str
    fields: tuple[str, ...]
    outputs_: tuple[str, ...] = ()
    state: StateOptions = StateOptions()

    @classmethod
    def from_config(cls, raw: Any, where: str) -> PersistSpec:
        check_keys(raw, _PERSIST_KEYS, where, "partition_persist")
        if not isinstance(raw.get("updater"), str):
            raise TopologyError(f"{where}: partition_persist needs an updater "
                                "('module:Class' with update_state(state, tuples, collector))")
        spec = cls(_names(raw.get("group_by", ()), f"{where}: group_by"), raw["updater"],
                   _names(raw.get("fields", ()), f"{where}: fields"),
                   _names(raw.get("outputs", ()), f"{where}: outputs"),
                   StateOptions.from_config(raw.get("state"), where))
        spec.load_updater(where)
        return spec

    def to_config(self) -> dict[str, Any]:
        return {"group_by": list(self.group_by), "updater": self.updater,
                "fields": list(self.fields), "outputs": list(self.outputs_),
                "state": self.state.to_config()}

    def outputs(self) -> dict[str, tuple[str, ...]]:
        return {"default": self.outputs_}

    def load_updater(self, where: str = "") -> Any:
        up = _load(self.updater, "updater", where)
        if not callable(getattr(up, "update_state", None)):
            raise TopologyError(f"{where}: updater {self.updater!r} has no "
                                "update_state(state, tuples, collector)")
        return up


@dataclass(frozen=True)
class QuerySpec:
    """``state_query``: each input tuple's key looked up in another component's state."""

    state: str
    key: tuple[str, ...]
    fields: tuple[str, ...]
    function: str = "map_get"
    output: str = "value"

    @classmethod
    def from_config(cls, raw: Any, where: str) -> QuerySpec:
        check_keys(raw, _QUERY_KEYS, where, "state_query")
        if not isinstance(raw.get("state"), str):
            raise TopologyError(f"{where}: state_query needs state: the component that "
                                "keeps the state")
        key = _names(raw.get("key", ()), f"{where}: key")
        spec = cls(raw["state"], key, _names(raw.get("fields", key), f"{where}: fields"),
                   str(raw.get("function", "map_get")), str(raw.get("output", "value")))
        spec.load_function(where)
        return spec

    def to_config(self) -> dict[str, Any]:
        return {"state": self.state, "key": list(self.key), "fields": list(self.fields),
                "function": self.function, "output": self.output}

    def outputs(self) -> dict[str, tuple[str, ...]]:
        return {"default": (*self.fields, self.output)}

    def load_function(self, where: str = "") -> Any:
        if self.function == "map_get":
            return MapGet()
        fn = _load(self.function, "function", where)
        if not callable(getattr(fn, "batch_retrieve", None)):
            raise TopologyError(f"{where}: function {self.function!r} has no "
                                "batch_retrieve(state, keys)")
        return fn


class MapGet:
    """Trident's ``MapGet``: each key's value (None if it has none)."""

    def batch_retrieve(self, state: Any, keys: Sequence[Key]) -> list[Any]:
        return list(state.multi_get(keys))


def trident_spec(cls: str, config: Any, where: str) -> AggregateSpec | PersistSpec | QuerySpec:
    """The spec of a Trident bolt of class ``cls``."""
    kinds: dict[str, Any] = {CLASS: AggregateSpec, PERSIST_CLASS: PersistSpec,
                             QUERY_CLASS: QuerySpec}
    parsed: AggregateSpec | PersistSpec | QuerySpec = kinds[cls].from_config(config, where)
    return parsed


def stored_state(topology: str, component: str, spec: AggregateSpec | PersistSpec
                 ) -> StateOptions:
    """Where a stateful component keeps its state, its name filled in."""
    return replace(spec.state, name=spec.state.name or f"{topology}.{component}")


def check_bolt(cls: str, config: Any, outputs: Mapping[str, Sequence[str]],
               inputs: Sequence[tuple[str, str, Sequence[str], Sequence[str]]],
               classes: Mapping[str, str], where: str) -> None:
    """A Trident bolt in its topology: a sound spec, outputs as it declares them, every key
    of a stateful one owned by one task, and a query's state kept by a stateful component.
    ``inputs``: (component, grouping, grouping fields, the component's output fields);
    ``classes``: every component's class."""
    spec = trident_spec(cls, config, where)
    if {k: tuple(v) for k, v in outputs.items()} != spec.outputs():
        raise TopologyError(f"{where}: its outputs are {spec.outputs()}, not {dict(outputs)}")
    if isinstance(spec, QuerySpec):
        if classes.get(spec.state) not in STATEFUL:
            raise TopologyError(f"{where}: state {spec.state!r} is not a persistent_aggregate "
                                "or partition_persist of this topology")
        needed: tuple[str, ...] = (*spec.key, *spec.fields)
    else:
        needed = (*spec.group_by, *spec.fields)
    for component, grouping, by, have in inputs:
        if not isinstance(spec, QuerySpec):
            want = "fields" if spec.group_by else "global"
            if grouping != want or (spec.group_by and tuple(by) != spec.group_by):
                raise TopologyError(
                    f"{where}: input from {component!r} must be grouped "
                    + (f"by fields {list(spec.group_by)}" if spec.group_by else "globally")
                    + f" (each key's value lives in one task), not {grouping}"
                    + (f" by {list(by)}" if by else ""))
        missing = [f for f in dict.fromkeys(needed) if f not in have]
        if have and missing:
            raise TopologyError(f"{where}: fields {missing} are not among "
                                f"{component!r}'s output fields {list(have)}")


def _load(path: str, what: str, where: str) -> Any:
    mod, _, name = path.partition(":")
    try:
        return getattr(importlib.import_module(mod), name)()
    except Exception as e:  # the user's module: any failure is a bad spec
        raise TopologyError(f"{where}: {what} {path!r} cannot be loaded: "
                            f"{type(e).__name__}: {e}") from None


def _names(v: Any, where: str) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
        raise TopologyError(f"{where} must be a list of field names, got {v!r}")
    return tuple(v)
