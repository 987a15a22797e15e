"""Trident state throughput: batched key updates per second on SQLite and on PostgreSQL.

One process, one task's store, as a persistent aggregate uses it: per micro-batch
(``--keys-per-batch`` distinct keys) one transaction of ``multi_get`` + ``multi_put``
through an opaque map, plus the task's applied record (Storm-level replays), committed.
The garbage collector is tuned as in the bolts' workers (``services.bolts.runtime.heap``).
Keys are drawn from ``--key-space`` words, so later batches update existing rows as a
word count does. Steady state: the first ``--warmup`` batches are not timed.

PostgreSQL is started by the embedded stack from the machine's binaries (as in the tests).
With ``--wordcount``, also the word count (``benchmarks/wordcount.py``) with exact state and
with at-least-once counting, one after the other, measured the same way.

``sqlite_floor_updates_per_s``: the same reads and writes as raw SQL with no Python state
logic: what SQLite itself allows with this schema on this machine.

Last line: one JSON object, ``{"sqlite_updates_per_s": ..., "postgres_updates_per_s": ...,
"wordcount_exact_per_s": ..., "wordcount_at_least_once_per_s": ..., "exact_ratio": ...}``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from services.bolts.runtime import heap
from squall.backends import open_store
from squall.backends.sql import StoreName
from squall.core.trident.aggregators import Count
from squall.core.trident.codec import MapKind
from squall.core.trident.maps import OpaqueMap
from squall.core.trident.persist import BatchInput, PersistentAggregate


def measure(url: str, batches: int, keys_per_batch: int, key_space: int, warmup: int,
            tuples_per_key: int = 3) -> dict[str, float]:
    store = open_store(url, StoreName(f"bench{random.getrandbits(32)}", 0, MapKind.OPAQUE))
    agg = PersistentAggregate(OpaqueMap(store), store, Count())
    rng = np.random.default_rng(7)
    words = [f"word{i}" for i in range(key_space)]
    offset = 0
    inputs = []  # made before the clock starts: the store is measured, not the input
    for _ in range(warmup + batches):
        chosen = rng.choice(key_space, keys_per_batch, replace=False)
        keys = [(words[i],) for i in chosen for _ in range(tuples_per_key)]
        n = len(keys)
        offs = np.arange(offset, offset + n, dtype=np.int64) // tuples_per_key
        offset += n
        inputs.append((BatchInput(keys, [()] * n, ["src:0"] * n, offs, np.zeros(n, np.int64)),
                       {"src:0": max(0, int(offs[0]) - 10 * keys_per_batch)}))
    t0 = time.perf_counter()
    for txid, (batch, committed) in enumerate(inputs, 1):
        if txid == warmup + 1:
            t0 = time.perf_counter()
        agg.run(txid, batch, committed=committed)
    secs = time.perf_counter() - t0
    store.close()
    return {"updates_per_s": round(batches * keys_per_batch / secs),
            "batches_per_s": round(batches / secs, 1),
            "tuples_per_s": round(batches * keys_per_batch * tuples_per_key / secs)}


def sqlite_floor(path: str, batches: int, keys_per_batch: int, key_space: int, warmup: int
                 ) -> float:
    """The database alone: the same reads, upserts and commits with Squall's schema and
    precomputed texts, no Python state logic (the ceiling for the store on this machine)."""
    from squall.backends.sqlite import SqliteDialect, connect

    conn, d = connect(path), SqliteDialect(path)
    rng = np.random.default_rng(7)
    words = [json.dumps([f"word{i}"]) for i in range(key_space)]
    value = '{"txid":5,"curr":10,"prev":9}'
    t0 = time.perf_counter()
    for b in range(warmup + batches):
        if b == warmup:
            t0 = time.perf_counter()
        keys = sorted(words[i] for i in rng.choice(key_space, keys_per_batch, replace=False))
        d.begin(conn)
        d.select_keys(conn, "floor", keys)
        conn.executemany("INSERT INTO squall_state (state, key, value) VALUES (?, ?, ?) ON "
                         "CONFLICT (state, key) DO UPDATE SET value = excluded.value",
                         [("floor", k, value) for k in keys])
        d.commit(conn)
    conn.close()
    return round(batches * keys_per_batch / (time.perf_counter() - t0))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heap.tune()  # the collector as the bolts' workers run it
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--keys-per-batch", type=int, default=5_000)
    p.add_argument("--key-space", type=int, default=100_000)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--skip-postgres", action="store_true")
    p.add_argument("--wordcount", action="store_true",
                   help="also the word count, exact vs at least once (~7 minutes)")
    a = p.parse_args()
    out: dict[str, float | None] = {"keys_per_batch": a.keys_per_batch, "batches": a.batches}
    with tempfile.TemporaryDirectory(prefix="squall-state-bench-") as tmp:
        print("SQLite ...", file=sys.stderr, flush=True)
        r = measure(f"sqlite://{tmp}/state.db", a.batches, a.keys_per_batch, a.key_space,
                    a.warmup)
        print(f"  {r}", file=sys.stderr)
        out["sqlite_updates_per_s"] = r["updates_per_s"]
        out["sqlite_batches_per_s"] = r["batches_per_s"]
        out["sqlite_floor_updates_per_s"] = sqlite_floor(
            f"{tmp}/floor.db", a.batches, a.keys_per_batch, a.key_space, a.warmup)
        print(f"  the database alone: {out['sqlite_floor_updates_per_s']:,} updates/s",
              file=sys.stderr)
        out["postgres_updates_per_s"] = None
        if not a.skip_postgres:
            from squall.dev.stack import EmbeddedStack, StackSettings

            print("PostgreSQL (starting the embedded stack) ...", file=sys.stderr, flush=True)
            with EmbeddedStack(StackSettings(home=Path(tmp) / "stack", postgres=True)) as info:
                assert info.postgres is not None
                r = measure(info.postgres, a.batches, a.keys_per_batch, a.key_space, a.warmup)
            print(f"  {r}", file=sys.stderr)
            out["postgres_updates_per_s"] = r["updates_per_s"]
            out["postgres_batches_per_s"] = r["batches_per_s"]
    if a.wordcount:
        rates = {}
        for mode, flags in (("at_least_once", []), ("exact", ["--exact"])):
            print(f"word count, {mode} ...", file=sys.stderr, flush=True)
            done = subprocess.run([sys.executable, "-m", "benchmarks.wordcount",
                                   "--skip-baseline", *flags], capture_output=True, text=True,
                                  check=True)
            rates[mode] = json.loads(done.stdout.strip().splitlines()[-1])["sentences_per_s"]
            print(f"  {rates[mode]:,} sentences/s", file=sys.stderr)
        out["wordcount_at_least_once_per_s"] = rates["at_least_once"]
        out["wordcount_exact_per_s"] = rates["exact"]
        out["exact_ratio"] = round(rates["exact"] / rates["at_least_once"], 3)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
