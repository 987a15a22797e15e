"""The acker ledger's property: over any tuple DAG (joins across trees, fails) and any
interleaving and batching of its records, a tree is decided exactly once, exactly when
every edge is acked (or a fail and the init arrived)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.reliability.ledger import Ledger
from squall.core.reliability.records import AckerBatch, AckerRecord, Outcome, RecordKind
from squall.core.reliability.tuples import Anchoring, Tuple

T = 30_000
F = ("x",)


@st.composite
def tuple_dags(draw: st.DrawFn) -> tuple[list[AckerRecord], dict[int, set[int]], set[int]]:
    """Random topologies run through Anchoring: returns records, per-root record indexes, failed.

    Several spout tuples; bolts emit children anchored to one or several live
    tuples (joins across trees); every tuple is then acked or (sometimes) failed.
    """
    seed = draw(st.integers(0, 2**32))
    rng = random.Random(seed)
    anch = Anchoring(lambda: rng.getrandbits(64) or 1)
    n_roots = draw(st.integers(1, 4))
    may_fail = draw(st.booleans())
    records: list[AckerRecord] = []
    live: list[Tuple] = []
    for _ in range(n_roots):
        e = anch.spout_emit(1, draw(st.integers(0, 3)))
        records.append(e.init)
        live += [Tuple([0], F, a) for a in e.anchors]
    steps = draw(st.integers(0, 25))
    for _ in range(steps):
        if not live:
            break
        k = min(len(live), draw(st.integers(1, 3)))
        parents = rng.sample(live, k)
        live += [Tuple([0], F, a) for a in anch.emit(parents, draw(st.integers(1, 2)))]
        t = parents[0]
        live.remove(t)
        if may_fail and rng.random() < 0.15:
            records += anch.fail(t)
        else:
            records += anch.ack(t)
    for t in live:
        records += anch.ack(t)
    by_root: dict[int, set[int]] = {}
    for i, r in enumerate(records):
        by_root.setdefault(r.root, set()).add(i)
    failed = {r.root for r in records if r.kind is RecordKind.FAIL}
    return records, by_root, failed


@settings(max_examples=400, deadline=None)
@given(tuple_dags(), st.randoms(use_true_random=False), st.integers(1, 8))
def test_any_interleaving_completes_exactly_when_every_edge_is_acked(
    dag: tuple[list[AckerRecord], dict[int, set[int]], set[int]],
    shuffler: random.Random,
    n_batches: int,
) -> None:
    records, by_root, failed = dag
    order = list(range(len(records)))
    shuffler.shuffle(order)
    cuts = sorted(shuffler.sample(range(1, len(order)), min(n_batches - 1, len(order) - 1)))
    led = Ledger(T)
    applied: set[int] = set()
    decided: dict[int, Outcome] = {}
    for lo, hi in zip([0, *cuts], [*cuts, len(order)], strict=True):
        part = order[lo:hi]
        applied.update(part)
        for res in led.apply(AckerBatch.from_records([records[i] for i in part], 0), 0).results():
            assert res.root not in decided, "a root was decided twice"
            decided[res.root] = res.outcome
        for root, idx in by_root.items():
            init_seen = any(records[i].kind is RecordKind.INIT for i in idx & applied)
            if root in failed:
                fail_seen = any(records[i].kind is RecordKind.FAIL for i in idx & applied)
                expect = Outcome.FAILED if init_seen and fail_seen else None
            else:
                expect = Outcome.ACKED if idx <= applied else None
            assert decided.get(root) == expect, f"root {root}: {decided.get(root)} != {expect}"
