"""Acker ledger on one core: ack records applied per second, bytes per pending tree.

Workload: word-count-shaped tuple trees (a spout tuple, split into 10 words,
each counted: 1 init + 1 ack + 10 acks = 12 records per tree), with the
records of a sliding window of trees shuffled together so acks arrive before
inits and trees interleave, applied in batches as the acker would.

Baseline in the same run: a dict of per-root objects (Storm's ``AckObject``
design in Python) on the same records.

Last line: one JSON object, ``{"ack_records_per_s": ..., "bytes_per_pending_tree": ...}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from squall.core.reliability.ledger import Ledger
from squall.core.reliability.records import AckerBatch, RecordKind

TIMEOUT_MS = 30_000
WORDS = 10


def make_records(n_trees: int, window: int, seed: int) -> AckerBatch:
    """Records of ``n_trees`` trees; each window of trees has its records shuffled."""
    rng = np.random.default_rng(seed)
    per_tree = 2 + WORDS
    roots = rng.integers(1, 2**63, n_trees, dtype=np.uint64)
    spout_edge = rng.integers(1, 2**63, n_trees, dtype=np.uint64)
    word_edges = rng.integers(1, 2**63, (n_trees, WORDS), dtype=np.uint64)
    split_ack = spout_edge ^ np.bitwise_xor.reduce(word_edges, axis=1)
    values = np.empty((n_trees, per_tree), np.uint64)
    values[:, 0] = spout_edge  # init
    values[:, 1] = split_ack  # the split bolt's ack of the sentence
    values[:, 2:] = word_edges  # the count bolt's acks of the words
    kinds = np.full((n_trees, per_tree), RecordKind.ACK, np.uint8)
    kinds[:, 0] = RecordKind.INIT
    tree_roots = np.repeat(roots, per_tree).reshape(n_trees, per_tree)
    flat = n_trees * per_tree
    order = np.arange(flat)
    step = window * per_tree
    for start in range(0, flat, step):
        rng.shuffle(order[start:start + step])
    return AckerBatch(
        roots=tree_roots.reshape(-1)[order],
        values=values.reshape(-1)[order],
        kinds=kinds.reshape(-1)[order],
        tasks=np.zeros(flat, np.uint16),
        ts_ms=np.zeros(flat, np.int64),
    )


def slices(batch: AckerBatch, size: int) -> list[AckerBatch]:
    return [
        AckerBatch(batch.roots[i:i + size], batch.values[i:i + size], batch.kinds[i:i + size],
                   batch.tasks[i:i + size], batch.ts_ms[i:i + size])
        for i in range(0, len(batch), size)
    ]


def run_ledger(batches: list[AckerBatch]) -> tuple[float, int]:
    ledger = Ledger(TIMEOUT_MS)
    done = 0
    t0 = time.perf_counter()
    for seq, b in enumerate(batches):
        done += len(ledger.apply(b, now_ms=0, seq=seq))
    return time.perf_counter() - t0, done


@dataclass(slots=True)
class _AckObject:
    val: int = 0
    task: int = -1
    failed: bool = False
    start: int = 0


def run_dict_baseline(batches: list[AckerBatch]) -> tuple[float, int]:
    """Storm's per-record acker loop over a dict of objects, in Python."""
    recs = [(b.roots.tolist(), b.values.tolist(), b.kinds.tolist(), b.tasks.tolist())
            for b in batches]
    pending: dict[int, _AckObject] = {}
    done = 0
    init, ack = int(RecordKind.INIT), int(RecordKind.ACK)
    t0 = time.perf_counter()
    for roots, values, kinds, tasks in recs:
        for root, val, kind, task in zip(roots, values, kinds, tasks, strict=True):
            cur = pending.get(root)
            if cur is None:
                cur = pending[root] = _AckObject()
            if kind == init:
                cur.val ^= val
                cur.task = task
            elif kind == ack:
                cur.val ^= val
            else:
                cur.failed = True
            if cur.task >= 0 and (cur.val == 0 or cur.failed):
                del pending[root]
                done += 1
    return time.perf_counter() - t0, done


def memory_per_tree(n: int) -> dict[str, float]:
    rng = np.random.default_rng(7)
    gc.collect()
    tracemalloc.start()
    ledger = Ledger(TIMEOUT_MS)
    for i in range(0, n, 50_000):
        m = min(50_000, n - i)
        ledger.apply(AckerBatch(
            rng.integers(1, 2**63, m, dtype=np.uint64), rng.integers(1, 2**63, m, dtype=np.uint64),
            np.full(m, RecordKind.INIT, np.uint8), np.zeros(m, np.uint16), np.zeros(m, np.int64),
        ), now_ms=0)
    gc.collect()
    traced, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(ledger) == n
    return {"table": ledger.nbytes / n, "traced": traced / n, "capacity": ledger.capacity}


def dict_memory_per_tree(n: int) -> float:
    rng = np.random.default_rng(7)
    roots = rng.integers(1, 2**63, n, dtype=np.uint64)
    vals = rng.integers(1, 2**63, n, dtype=np.uint64)
    gc.collect()
    tracemalloc.start()
    # The int objects are part of a Python ledger's cost, so they are created while tracing.
    pending = {r: _AckObject(v, 0) for r, v in zip(roots.tolist(), vals.tolist(), strict=True)}
    traced, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del pending
    return traced / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=int, default=300_000, help="trees in the throughput run")
    ap.add_argument("--window", type=int, default=20_000, help="trees whose records interleave")
    ap.add_argument("--batch", type=int, default=20_000, help="records per applied batch")
    ap.add_argument("--pending", type=int, default=1_000_000, help="trees in the memory run")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = ap.parse_args()

    records = make_records(args.trees, args.window, seed=1)
    n = len(records)
    print(f"{n:,} records of {args.trees:,} trees, batches of {args.batch:,}", file=sys.stderr)
    figures: dict[str, float] = {}
    for size in sorted({1_000, 5_000, args.batch}):
        batches = slices(records, size)
        best = min(run_ledger(batches)[0] for _ in range(args.repeat))
        _, done = run_ledger(batches)
        assert done == args.trees, f"{done} of {args.trees} trees completed"
        figures[f"ack_records_per_s_batch_{size}"] = round(n / best)
        print(f"ledger, batch {size:>6,}: {n / best:>12,.0f} records/s", file=sys.stderr)
    dict_time, dict_done = run_dict_baseline(slices(records, args.batch))
    assert dict_done == args.trees
    figures["baseline_dict_records_per_s"] = round(n / dict_time)
    print(f"dict baseline:        {n / dict_time:>12,.0f} records/s", file=sys.stderr)

    mem = memory_per_tree(args.pending)
    dict_mem = dict_memory_per_tree(min(args.pending, 1_000_000))
    print(f"memory at {args.pending:,} pending: table {mem['table']:.1f} B/tree, traced "
          f"{mem['traced']:.1f} B/tree (capacity {mem['capacity']:,}); dict baseline "
          f"{dict_mem:.0f} B/tree", file=sys.stderr)
    out = {
        "ack_records_per_s": figures[f"ack_records_per_s_batch_{args.batch}"],
        "bytes_per_pending_tree": round(mem["traced"], 1),
        "table_bytes_per_pending_tree": round(mem["table"], 1),
        "baseline_dict_bytes_per_pending_tree": round(dict_mem, 1),
        "records": n,
        **figures,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
