"""The topology model: spouts, bolts, streams and groupings (built with Storm's
``TopologyBuilder``: :mod:`squall.core.topology.builder`).

The same topology is built in Python or read from JSON / YAML; either way it
is validated here, and every error names the component and field at fault.
Code is named as importable ``module:Class`` and is never imported here: the
API validates specs without running user code.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from squall.core.errors import SquallError, TopologyError
from squall.core.reliability.retry import RetrySchedule
from squall.core.reliability.tuples import DEFAULT_STREAM
from squall.core.topology.checks import (
    BOLT_KEYS,
    INPUT_KEYS,
    MAX_NAME,
    SCHEME_CLASS,
    SCHEMES,
    SPOUT_KEYS,
    check_depth,
    check_graph,
    check_keys,
    check_length,
    check_start,
    check_topic,
    load_text,
)
from squall.core.topology.grouping import Edge, Grouping, check_subscription
from squall.core.topology.kafka_sink import KAFKA_BOLT, check_sink, sink_of
from squall.core.topology.ticks import tick_freq
from squall.core.topology.topics import check_name, edge_topic
from squall.core.topology.trident import (
    SPEC_KEYS,
    check_bolt,
    trident_spec,
)
from squall.core.topology.windows import TICK_S as WINDOW_TICK_S
from squall.core.topology.windows import WindowSpec, check_window, window_of

TRIDENT_CLASSES = frozenset(SPEC_KEYS.values())
_ID = re.compile(r"-\d+-\d+$")

MAX_PARALLELISM = 1024


class Guarantee(StrEnum):
    """What a spout promises for each source message (Storm's ack modes)."""

    AT_LEAST_ONCE = "at_least_once"
    AT_MOST_ONCE = "at_most_once"
    NO_GUARANTEE = "no_guarantee"

_CLASS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class InputSpec:
    """A subscription of a bolt to ``stream`` of ``component``."""

    component: str
    stream: str = DEFAULT_STREAM
    grouping: Grouping = Grouping.SHUFFLE
    fields: tuple[str, ...] = ()
    #: a custom grouping's ``module:Class`` (``class`` in a spec)
    grouping_class: str = ""


@dataclass(frozen=True)
class SpoutSpec:
    name: str
    topics: tuple[str, ...]
    parallelism: int = 1
    scheme: str = "text"
    fields: tuple[str, ...] = ()
    #: where a partition starts when the spout's own group committed nothing in it
    #: (squall/core/topology/checks.py: ``earliest``, ``latest``, ``group:<id>``)
    start: str = "earliest"

    def outputs(self) -> dict[str, tuple[str, ...]]:
        if self.scheme == "raw":
            return {DEFAULT_STREAM: ("bytes",)}
        if self.scheme == "text":
            return {DEFAULT_STREAM: ("str",)}
        return {DEFAULT_STREAM: self.fields}


@dataclass(frozen=True)
class BoltSpec:
    name: str
    cls: str
    parallelism: int = 1
    inputs: tuple[InputSpec, ...] = ()
    outputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    #: Storm's executors: how many Spark tasks run the bolt's tasks (1..parallelism; None:
    #: one each). Its tasks are its edge topics' partitions and stay; executors can change.
    executors: int | None = None

    @property
    def num_executors(self) -> int:
        return self.executors or self.parallelism

    @property
    def tick_s(self) -> float | None:
        """Seconds between its tick tuples (None: it asked for none); a windowed bolt gets
        them to run when no tuple comes (squall/core/topology/windows.py)."""
        asked = tick_freq(self.config, f"bolt {self.name!r}")
        return asked if asked is not None or self.window is None else WINDOW_TICK_S

    @property
    def window(self) -> WindowSpec | None:
        """Its window, if it is a windowed bolt (squall/core/topology/windows.py)."""
        return window_of(self.config, f"bolt {self.name!r}")


@dataclass(frozen=True)
class TopologySpec:
    name: str
    spouts: tuple[SpoutSpec, ...]
    bolts: tuple[BoltSpec, ...] = ()
    ackers: int = 1
    message_timeout_s: float = 30.0
    max_spout_pending: int | None = 10_000
    guarantee: Guarantee = Guarantee.AT_LEAST_ONCE
    retry: RetrySchedule = field(default_factory=RetrySchedule)
    #: How long one bolt call (a tuple's execute, a batch call) may run before its process is
    #: killed and its record isolated (docs/poison.md); None: half the message timeout.
    bolt_deadline_s: float | None = None
    #: The submission whose state and source offsets this one keeps (``squall submit
    #: --keep-state``, docs/trident.md); None: its own. Set by the API, never by a user.
    state_of: str | None = None

    # ----- queries -------------------------------------------------------

    def components(self) -> tuple[SpoutSpec | BoltSpec, ...]:
        return (*self.spouts, *self.bolts)

    @functools.cached_property
    def num_tasks(self) -> int:
        """Every task: spout and bolt parallelism plus the ackers (a spec is immutable)."""
        return sum(c.parallelism for c in self.components()) + self.ackers

    @functools.cached_property
    def num_executors(self) -> int:
        """Storm's executors: a spout's tasks, a bolt's executors, the ackers."""
        return sum(s.parallelism for s in self.spouts) + sum(
            b.num_executors for b in self.bolts) + self.ackers

    @property
    def deadline_s(self) -> float:
        """The bolt deadline in effect: a call running half a tree's timeout holds its tree
        past any reasonable completion."""
        return self.bolt_deadline_s if self.bolt_deadline_s is not None \
            else self.message_timeout_s / 2

    @property
    def state_id(self) -> str:
        """The id that names this topology's state: its own, or the kept one's."""
        return self.state_of or self.name

    def component(self, name: str) -> SpoutSpec | BoltSpec:
        for c in self.components():
            if c.name == name:
                return c
        raise TopologyError(f"no component {name!r} in topology {self.name!r}")

    def output_fields(self, name: str, stream: str = DEFAULT_STREAM) -> tuple[str, ...]:
        c = self.component(name)
        outs = c.outputs() if isinstance(c, SpoutSpec) else c.outputs
        if stream not in outs:
            raise TopologyError(f"component {name!r} declares no stream {stream!r} "
                                f"(it declares {sorted(outs)})")
        return tuple(outs[stream])

    def edges_from(self, name: str) -> tuple[Edge, ...]:
        """Every subscription to ``name``'s streams, as edges (one topic each)."""
        out = []
        for b in self.bolts:
            for i in b.inputs:
                if i.component == name:
                    out.append(Edge(b.name, edge_topic(self.name, name, i.stream, b.name),
                                    b.parallelism, i.grouping, i.fields, i.stream,
                                    self.component(name).parallelism, i.grouping_class))
        return tuple(out)

    def input_topics(self, bolt: str) -> tuple[str, ...]:
        b = self.component(bolt)
        assert isinstance(b, BoltSpec)
        return tuple(edge_topic(self.name, i.component, i.stream, b.name) for i in b.inputs)

    # ----- validation ------------------------------------------------------

    def validate(self) -> TopologySpec:
        try:
            check_name("topology", self.name)
            # a submission runs under its id, name-counter-seconds (squall/core/control/cluster.py)
            check_length("topology", self.name, MAX_NAME[
                "topology id" if _ID.search(self.name) else "topology"])
            if self.state_of is not None:
                check_name("kept topology", self.state_of)
                check_length("topology id", self.state_of)
            names = [c.name for c in self.components()]
            for n in names:
                check_name("component", n)
                check_length("component", n)
        except SquallError as e:
            raise TopologyError(str(e)) from None
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise TopologyError(f"component names {dup} are used more than once")
        if not self.spouts:
            raise TopologyError(f"topology {self.name!r} has no spout")
        if not 0 <= self.ackers <= MAX_PARALLELISM:
            raise TopologyError(f"ackers must be 0..{MAX_PARALLELISM}, got {self.ackers}")
        if not 0 < self.message_timeout_s <= 86_400:
            raise TopologyError(f"message_timeout_s must be in (0, 86400], got "
                                f"{self.message_timeout_s}")
        if self.max_spout_pending is not None and self.max_spout_pending < 1:
            raise TopologyError(f"max_spout_pending must be >= 1, got {self.max_spout_pending}")
        if self.bolt_deadline_s is not None and not 0.1 <= self.bolt_deadline_s <= 86_400:
            raise TopologyError(f"bolt_deadline_s must be in [0.1, 86400], got "
                                f"{self.bolt_deadline_s}")
        if not isinstance(self.guarantee, Guarantee):
            raise TopologyError(f"guarantee {self.guarantee!r} is not one of "
                                f"{', '.join(g.value for g in Guarantee)}")
        for s in self.spouts:
            where = f"spout {s.name!r}"
            if not 1 <= s.parallelism <= MAX_PARALLELISM:
                raise TopologyError(f"{where}: parallelism must be 1..{MAX_PARALLELISM}, "
                                    f"got {s.parallelism}")
            if not s.topics:
                raise TopologyError(f"{where}: topics must name at least one source topic")
            for t in s.topics:
                check_topic(t, where)
            if s.scheme not in SCHEMES and not SCHEME_CLASS.match(s.scheme):
                raise TopologyError(f"{where}: scheme {s.scheme!r} is not one of "
                                    f"{', '.join(SCHEMES)} or a 'module:Class'")
            if s.scheme == "json" and not s.fields:
                raise TopologyError(f"{where}: the json scheme needs fields")
            check_start(s.start, where)
        for b in self.bolts:
            where = f"bolt {b.name!r}"
            if b.cls in TRIDENT_CLASSES:
                names_ = set(names)
                ins = [(i.component, i.grouping.value, i.fields,
                        self.output_fields(i.component, i.stream) if i.component in names_
                        else ()) for i in b.inputs]
                check_bolt(b.cls, b.config, b.outputs, ins,
                           {c.name: getattr(c, "cls", "") for c in self.components()}, where)
            ticks, window = b.tick_s, b.window  # each checks its keys
            if b.cls in TRIDENT_CLASSES and (ticks is not None or window is not None):
                raise TopologyError(f"{where}: a persistent aggregate, partition_persist or "
                                    "state_query takes no tick tuples and no window")
            if b.cls == KAFKA_BOLT:
                check_sink(sink_of(b.config, where), b.config, [
                    (f"{i.component}/{i.stream}", i.grouping,
                     self.output_fields(i.component, i.stream) if i.component in names else ())
                    for i in b.inputs], b.parallelism, where)
                if any(b.outputs.values()):
                    raise TopologyError(f"{where}: a Kafka bolt emits nothing; it declares "
                                        f"outputs {dict(b.outputs)}")
            if not _CLASS.match(b.cls):
                raise TopologyError(f"{where}: class {b.cls!r} must be 'module:Class'")
            if not 1 <= b.parallelism <= MAX_PARALLELISM:
                raise TopologyError(f"{where}: parallelism must be 1..{MAX_PARALLELISM}, "
                                    f"got {b.parallelism}")
            if b.executors is not None and not 1 <= b.executors <= b.parallelism:
                raise TopologyError(f"{where}: executors must be 1..{b.parallelism} (its "
                                    f"tasks, the partitions of its edge topics), got "
                                    f"{b.executors}")
            if not b.inputs:
                raise TopologyError(f"{where}: inputs must name at least one component")
            for stream in b.outputs:
                check_name("stream", stream)
                check_length("stream", stream)
            for i in b.inputs:
                if i.component not in names:
                    raise TopologyError(f"{where}: input from unknown component {i.component!r}")
                try:
                    fields = self.output_fields(i.component, i.stream)
                except TopologyError as e:
                    raise TopologyError(f"{where}: {e}") from None
                up = self.component(i.component)
                check_subscription(where, i.component, i.grouping, i.fields, i.grouping_class,
                                   fields, isinstance(up, BoltSpec) and
                                   up.cls not in TRIDENT_CLASSES)
            if window is not None:
                check_window(window, b.outputs, {
                    f"{i.component}/{i.stream}": self.output_fields(i.component, i.stream)
                    for i in b.inputs}, where)
        check_graph([s.name for s in self.spouts],
                    {b.name: [i.component for i in b.inputs] for b in self.bolts})
        return self

    # ----- (de)serialisation -----------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["state_of"] is None:
            del d["state_of"]  # set by the API only; a user's spec never has it
        for b in d["bolts"]:
            if b["executors"] is None:
                del b["executors"]
            for i in b["inputs"]:
                i["grouping"] = Grouping(i["grouping"]).value
                custom = i.pop("grouping_class")
                if custom:
                    i["class"] = custom
        plain: dict[str, Any] = json.loads(json.dumps(d))  # tuples -> lists: a JSON document
        return plain

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TopologySpec:
        """Build and validate; a malformed document is a TopologyError naming the place."""
        if not isinstance(raw, Mapping):
            raise TopologyError("a topology must be an object")
        check_depth(raw)
        unknown = set(raw) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise TopologyError(f"unknown topology fields {sorted(unknown)}")
        try:
            spouts = tuple(_spout(s) for s in _list(raw, "spouts"))
            bolts = tuple(_bolt(b) for b in _list(raw, "bolts"))
            check_keys(raw.get("retry", {}), RetrySchedule.__dataclass_fields__, "retry")
            retry = RetrySchedule(**raw.get("retry", {}))
            return cls(
                name=str(_req(raw, "name", "topology")), spouts=spouts, bolts=bolts,
                ackers=int(raw.get("ackers", 1)),
                message_timeout_s=float(raw.get("message_timeout_s", 30.0)),
                max_spout_pending=raw.get("max_spout_pending", 10_000),
                guarantee=_guarantee(raw.get("guarantee", Guarantee.AT_LEAST_ONCE)),
                retry=retry,
                bolt_deadline_s=_optional_float(raw.get("bolt_deadline_s")),
                state_of=None if raw.get("state_of") is None else str(raw["state_of"]),
            ).validate()
        except TopologyError:
            raise
        except (SquallError, TypeError, ValueError, AttributeError, KeyError, OverflowError) as e:
            raise TopologyError(f"invalid topology: {e}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_text(cls, text: str) -> TopologySpec:
        """JSON or YAML."""
        return cls.from_dict(load_text(text))  # YAML is a superset of JSON


def _optional_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _list(raw: Mapping[str, Any], key: str) -> list[Any]:
    v = raw.get(key, [])
    if not isinstance(v, list):
        raise TopologyError(f"{key} must be a list")
    return v


def _req(raw: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in raw:
        raise TopologyError(f"{what}: {key!r} is required")
    return raw[key]


def _named(kind: str, raw: Any) -> str:
    return f"{kind} {raw['name']!r}" if isinstance(raw, Mapping) and "name" in raw else \
        f"a {kind}"


def _spout(raw: Mapping[str, Any]) -> SpoutSpec:
    check_keys(raw, SPOUT_KEYS, _named("spout", raw))
    name = _req(raw, "name", "spout")
    topics = _req(raw, "topics", f"spout {name!r}")
    return SpoutSpec(name, tuple([topics] if isinstance(topics, str) else topics),
                     int(raw.get("parallelism", 1)), str(raw.get("scheme", "text")),
                     tuple(raw.get("fields", ())), raw.get("start", "earliest"))


def _bolt(raw: Mapping[str, Any]) -> BoltSpec:
    check_keys(raw, BOLT_KEYS, _named("bolt", raw))
    name = _req(raw, "name", "bolt")
    where = f"bolt {name!r}"
    inputs = []
    for i in _list(raw, "inputs"):
        check_keys(i, INPUT_KEYS, f"{where} input")
        try:
            grouping = Grouping(i.get("grouping", "shuffle"))
        except ValueError:
            raise TopologyError(f"{where}: unknown grouping {i.get('grouping')!r}") from None
        inputs.append(InputSpec(_req(i, "component", f"{where} input"),
                                i.get("stream", DEFAULT_STREAM), grouping,
                                tuple(i.get("fields", ())), str(i.get("class", ""))))
    for key, cls in SPEC_KEYS.items():
        if key in raw:
            clash = sorted({"class", "cls", "outputs", "config", *SPEC_KEYS} - {key} & set(raw))
            if clash:
                raise TopologyError(f"{where}: {key} takes no {clash}")
            t = trident_spec(cls, raw[key], where)
            return BoltSpec(name, cls, int(raw.get("parallelism", 1)), tuple(inputs),
                            t.outputs(), t.to_config(), _executors(raw))
    outputs = {k: tuple(v) for k, v in dict(raw.get("outputs", {})).items()}
    return BoltSpec(name, str(_req(raw, "class", where) if "class" in raw else
                              _req(raw, "cls", where)),
                    int(raw.get("parallelism", 1)), tuple(inputs), outputs,
                    dict(raw.get("config", {})), _executors(raw))


def _executors(raw: Mapping[str, Any]) -> int | None:
    v = raw.get("executors")
    return None if v is None else int(v)


def _guarantee(raw: Any) -> Guarantee:
    try:
        return Guarantee(raw)
    except ValueError:
        raise TopologyError(f"guarantee {raw!r} is not one of "
                            f"{', '.join(g.value for g in Guarantee)}") from None
