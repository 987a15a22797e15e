"""The Kafka ACLs a topology needs, and nothing more (docs/kafka.md, "ACLs").

Every Squall process of a topology (its spouts, ackers, bolts and the API that controls it)
runs as one Kafka principal. What that principal must be allowed:

- its **source topics**: Describe and Read (the spouts), Write (the API sends a dead letter
  back to the partition it came from, ``squall dead-letters replay``);
- every **topic it owns**, all named ``squall.<id>.``: Create, Describe, Read and Write.
  The id is known only once the topology is submitted (``<name>-<n>-<time>``), so they are
  granted on the prefix ``squall.<name>``;
- its **consumer groups**, ``squall.<id>.<spout>`` and ``squall.<id>.acker`` (prefix
  ``squall.<name>``), and the readers' own short-lived groups, ``squall-*`` (prefix
  ``squall-``; they only fetch by assignment and commit nothing): Describe and Read;
- a **Kafka bolt's topics**: Describe and Write, and Read for an exactly-once one (it reads
  back what it wrote after a restart);
- a spout that starts from **another group's offsets** (``start: group:<id>``): Describe on
  that group.

A principal with these cannot touch another topology's topics (another name's prefix), nor
anything else of the cluster. Anyone else cannot write to the topology's internal topics
(a forged ack would complete a tree that never ran, and lose its message) nor read its
dead letters.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from squall.core.errors import NotAuthorized

if TYPE_CHECKING:  # the Kafka helpers use the refusals without loading the topology model
    from squall.core.topology.model import TopologySpec

#: The prefix of the readers' own groups (``squall-read-...``, ``squall-hw-...``).
READER_GROUPS = "squall-"


class Resource(Enum):
    TOPIC = "topic"
    GROUP = "group"


class Pattern(Enum):
    LITERAL = "literal"
    PREFIXED = "prefixed"


class Operation(Enum):
    """Kafka's operations, by their ``kafka-acls.sh`` names."""

    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DESCRIBE = "Describe"


@dataclass(frozen=True)
class Acl:
    """Allow ``operation`` on the ``resource`` named ``name`` (or every one whose name starts
    with it, ``PREFIXED``); ``why``: which part of Squall needs it."""

    resource: Resource
    pattern: Pattern
    name: str
    operation: Operation
    why: str

    def command(self, principal: str, bootstrap: str = "BROKER:9092") -> str:
        """The ``kafka-acls.sh`` line that grants it."""
        return (f"kafka-acls.sh --bootstrap-server {bootstrap} --add --allow-principal "
                f"{principal} --operation {self.operation.value} --{self.resource.value} "
                f"{self.name} --resource-pattern-type {self.pattern.value}")


def owned_prefix(topology_name: str) -> str:
    """The prefix of every topic and group a topology's submissions own."""
    return f"squall.{topology_name}"


def topology_acls(spec: TopologySpec) -> list[Acl]:
    """The ACLs ``spec``'s processes need, sorted and without repeats."""
    from squall.core.topology.kafka_sink import KAFKA_BOLT, sink_of

    out: set[Acl] = set()

    def allow(res: Resource, pat: Pattern, name: str, why: str, *ops: Operation) -> None:
        out.update(Acl(res, pat, name, op, why) for op in ops)

    T, G, L, P = Resource.TOPIC, Resource.GROUP, Pattern.LITERAL, Pattern.PREFIXED
    R, W, C, D = Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE
    own = owned_prefix(spec.name)
    allow(T, P, own, "the topology's own topics (edges, acker, results, dead letters)",
          C, D, R, W)
    allow(G, P, own, "the spouts' and ackers' consumer groups", D, R)
    allow(G, P, READER_GROUPS, "readers that fetch by assignment and commit nothing", D, R)
    for s in spec.spouts:
        for t in s.topics:
            allow(T, L, t, f"spout {s.name} reads it", D, R)
            allow(T, L, t, "a dead letter replayed goes back to it", W)
        if s.start.startswith("group:"):
            allow(G, L, s.start.removeprefix("group:"),
                  f"spout {s.name} starts from that group's offsets", D)
    for b in spec.bolts:
        if b.cls == KAFKA_BOLT:
            sink = sink_of(b.config, f"bolt {b.name}")
            if sink.topic is not None:
                allow(T, L, sink.topic, f"Kafka bolt {b.name} writes it", D, W)
                if sink.exactly_once:
                    allow(T, L, sink.topic, f"Kafka bolt {b.name} reads back what it wrote",
                          R)
    return sorted(out, key=lambda a: (a.resource.value, a.name, a.pattern.value, a.why,
                                      a.operation.value))


def unknown_sinks(spec: TopologySpec) -> list[str]:
    """Kafka bolts that choose each tuple's topic from a field: their topics cannot be
    known before the data, so their ACLs are the operator's to grant."""
    from squall.core.topology.kafka_sink import KAFKA_BOLT, sink_of

    return [b.name for b in spec.bolts if b.cls == KAFKA_BOLT
            and sink_of(b.config, f"bolt {b.name}").topic_field is not None]


#: librdkafka's error names for a refusal, and the kind of resource each names.
REFUSALS = {"TOPIC_AUTHORIZATION_FAILED": "topic", "GROUP_AUTHORIZATION_FAILED": "group",
            "CLUSTER_AUTHORIZATION_FAILED": "cluster"}


def refusal(error_name: str, operation: Operation, name: str, doing: str
            ) -> NotAuthorized | None:
    """The error for a broker's refusal (``error_name``, librdkafka's) of ``operation`` on
    ``name`` while ``doing`` something; None if ``error_name`` is not a refusal."""
    kind = REFUSALS.get(error_name)
    if kind is None:
        return None
    what = "the cluster" if kind == "cluster" else f"{kind} {name!r}"
    return NotAuthorized(
        f"Kafka refused to let this process {operation.value} {what} ({error_name}) while "
        f"{doing}: grant the principal it runs as (sasl.username, or its certificate's "
        "common name) that ACL; 'squall acls TOPOLOGY' lists every ACL a topology needs "
        "(docs/kafka.md, \"ACLs\")")
