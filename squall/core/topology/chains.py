"""Which bolts run fused into one Spark query (operator chaining, as Flink calls it).

Every Kafka hop between two bolts costs a tree about one and a half
micro-batches: it waits for the running micro-batch of the next query to end,
then for its own. A bolt whose only input is another bolt of the same job runs
instead in the upstream bolt's query, in the same Spark task, right after it:
its tuples are handed over in memory, partitioned by the edge's grouping onto
its tasks. Fields grouping still means one task per key: a stateful task's
state follows it through its log and lock, whichever Spark task runs it.

A chain is linear: a bolt fuses at most one downstream bolt (the first, in the
topology's order), and the rest of its subscribers read it through Kafka. A bolt that
asks for tick tuples fuses too: its ticks come through the head's input topic
(squall/core/topology/ticks.py).

A persistent aggregate (or partition_persist) fuses like any bolt: its txids are its tasks'
own (kept with the state), not a query's micro-batch ids, and a task runs one batch at a
time under its lock (services/bolts/aggregate.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from squall.core.topology.grouping import Edge
from squall.core.topology.model import BoltSpec, TopologySpec


def chains(spec: TopologySpec, components: Sequence[str], fuse: bool = True
           ) -> list[tuple[str, ...]]:
    """The job's bolts as chains, head first, in the topology's order."""
    names = [b.name for b in spec.bolts if b.name in set(components)]
    if not fuse:
        return [(n,) for n in names]
    nxt: dict[str, str] = {}
    fused: set[str] = set()
    for n in names:
        b = spec.component(n)
        assert isinstance(b, BoltSpec)
        if len(b.inputs) != 1:
            continue
        up = b.inputs[0].component
        if up in names and up not in nxt and up != n and not _reaches(nxt, n, up):
            nxt[up] = n
            fused.add(n)
    out = []
    for n in names:
        if n in fused:
            continue
        chain = [n]
        while chain[-1] in nxt:
            chain.append(nxt[chain[-1]])
        out.append(tuple(chain))
    return out


def _reaches(nxt: dict[str, str], start: str, goal: str) -> bool:
    """Whether following the fused links from ``start`` reaches ``goal`` (a cycle)."""
    seen = start
    while seen in nxt:
        seen = nxt[seen]
        if seen == goal:
            return True
    return False


def fused_edge(spec: TopologySpec, upstream: str, downstream: str) -> Edge:
    """The edge a fused bolt's tuples take (its topic names it; nothing is produced to it)."""
    (edge,) = [e for e in spec.edges_from(upstream) if e.target == downstream]
    return edge
