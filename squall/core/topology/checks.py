"""What a topology spec must be to run, beyond its shape: read from untrusted text within
bounds, no unknown keys, names and topics Kafka accepts, and a graph with no cycle and no
component that no spout reaches. Each refusal is a TopologyError naming what and where.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from squall.core.errors import TopologyError

#: The longest spec text read (the API refuses larger bodies before reading them).
MAX_SPEC_BYTES = 256 * 1024
#: How deep a spec document may nest (a topology needs 6 levels; configs a few more).
MAX_DEPTH = 32
#: YAML aliases in one document: a few are handy, many are a "billion laughs" bomb.
MAX_ALIASES = 64
#: Values in one document, counted as if aliases were copies: what a bomb of few aliases
#: (each naming the one before, nested) would expand to is refused, not walked.
MAX_NODES = 200_000
#: Name lengths: ``squall.<topology id>.edge.<component>.<stream>.<component>`` stays
#: within Kafka's 249 characters. A topology's id is its name and ``-counter-seconds``
#: (squall/core/control/cluster.py, topology_id): 22 characters more at most.
MAX_NAME = {"topology": 64, "topology id": 86, "component": 48, "stream": 48}
SCHEMES = ("text", "raw", "json")
#: A scheme of the user's: ``module:Class``.
SCHEME_CLASS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
SPOUT_KEYS = frozenset({"name", "topics", "parallelism", "scheme", "fields", "start"})
BOLT_KEYS = frozenset({"name", "class", "cls", "parallelism", "executors", "inputs", "outputs",
                       "config",
                       "persistent_aggregate", "partition_persist", "state_query"})
INPUT_KEYS = frozenset({"component", "stream", "grouping", "fields", "class"})
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def load_text(text: str) -> Any:
    """A JSON or YAML document, bounded: size, aliases and depth."""
    import yaml

    if len(text.encode()) > MAX_SPEC_BYTES:
        raise TopologyError(f"the spec is {len(text.encode()):,} bytes; at most "
                            f"{MAX_SPEC_BYTES:,} are read")

    class Bounded(yaml.SafeLoader):
        aliases = 0
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise TopologyError(f"the spec uses more than {MAX_ALIASES} YAML aliases")
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise TopologyError(f"the spec nests deeper than {MAX_DEPTH} levels")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    try:
        return yaml.load(text, Loader=Bounded)
    except yaml.YAMLError as e:
        raise TopologyError(f"not valid JSON or YAML: {e}") from None


def check_depth(doc: Any, where: str = "the spec") -> None:
    """A parsed document nests at most :data:`MAX_DEPTH` levels and holds at most
    :data:`MAX_NODES` values (a YAML alias counts as a copy)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    nodes = 0
    while stack:
        x, d = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise TopologyError(f"{where} holds more than {MAX_NODES:,} values (YAML aliases "
                                "count as copies)")
        if d > MAX_DEPTH:
            raise TopologyError(f"{where} nests deeper than {MAX_DEPTH} levels")
        if isinstance(x, Mapping):
            stack += [(v, d + 1) for v in x.values()]
        elif isinstance(x, list | tuple):
            stack += [(v, d + 1) for v in x]


def check_keys(raw: Any, known: Iterable[str], where: str, what: str = "") -> None:
    """``raw`` is an object with no key outside ``known`` (``what``: its name in the
    message, e.g. "state")."""
    name = f"{what} " if what else ""
    if not isinstance(raw, Mapping):
        raise TopologyError(f"{where}: {name or 'this '}must be an object, got "
                            f"{type(raw).__name__}")
    known = sorted(known)
    unknown = sorted(str(k) for k in set(raw) - set(known))
    if unknown:
        raise TopologyError(f"{where}: unknown {name}keys {unknown} (known: {known})")


def check_length(kind: str, name: str, limit: int | None = None) -> None:
    limit = limit or MAX_NAME.get(kind)
    if limit is not None and len(name) > limit:
        raise TopologyError(f"{kind} name {name[:20]!r}... is {len(name)} characters; at most "
                            f"{limit} (names are parts of Kafka topic names)")


def check_topic(topic: str, where: str) -> None:
    """Kafka's rules for a topic name."""
    if not isinstance(topic, str) or not _TOPIC.match(topic) or topic in (".", ".."):
        raise TopologyError(f"{where}: topic {topic!r} is not a Kafka topic name (1-249 of "
                            "letters, digits, '.', '_', '-'; not '.' or '..')")


#: Where a spout starts a partition its own group has committed nothing in: the log's
#: start, its end, or where another consumer group got to (``group:<id>``).
START = re.compile(r"^(earliest|latest|group:[A-Za-z0-9._-]{1,249})$")


def check_start(start: str, where: str) -> None:
    if not isinstance(start, str) or not START.match(start):
        raise TopologyError(f"{where}: start {start!r} is not earliest, latest or "
                            "group:<consumer group id>")


def check_graph(spouts: Sequence[str], edges: Mapping[str, Sequence[str]]) -> None:
    """``edges``: each bolt's input components. No cycle; every bolt reached from a spout."""
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for up in edges.get(n, ()):
            if state.get(up) == 1:
                cycle = [*path[path.index(up):], up] if up in path else [n, up]
                raise TopologyError(f"the bolts form a cycle: {' <- '.join(cycle)}")
            if up in edges and state.get(up) is None:
                visit(up, [*path, up])
        state[n] = 2

    for b in edges:
        if state.get(b) is None:
            visit(b, [b])
    reached = set(spouts)
    grew = True
    while grew:
        new = {b for b, ins in edges.items() if b not in reached and reached & set(ins)}
        reached |= new
        grew = bool(new)
    lost = sorted(set(edges) - reached)
    if lost:
        raise TopologyError(f"bolts {lost} are reached from no spout (follow their inputs: "
                            f"{', '.join(f'{b} <- {list(edges[b])}' for b in lost)})")
