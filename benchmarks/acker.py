"""Acker service throughput through the real broker (the development stack's Apache Kafka).

Word-count-shaped trees (12 records each: init, the split's ack, 10 word acks)
are produced beforehand as packed acker batches; then real acker processes
(``python -m services.acker``) are started and timed from their first applied
record to their last, read from their own Prometheus counters, while a
consumer counts the results that reach the spouts' partitions.

In the same run, for comparison: the in-memory ledger on the same records,
and a breakdown of where the time goes (broker fetch alone, decode, apply).

Last line: one JSON object with at least ``{"ack_records_per_s": ...}`` (one process).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import numpy as np
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.ledger import make_records
from squall.core.reliability.ledger import Ledger
from squall.core.reliability.records import AckerBatch
from squall.core.topology.topics import acker_topic, dlq_topic, results_topic
from squall.core.wire.internal import decode_acker_batch, decode_results, encode_acker_batch
from squall.dev.stack import EmbeddedStack, StackSettings
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients
from squall.processes import die_with_parent, free_port

PER_TREE = 12


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def encode(records: AckerBatch, parts: int, batch: int) -> list[tuple[int, bytes]]:
    """(partition ``root mod parts``, packed batch of ``batch`` records) in stream order."""
    owner = (records.roots % np.uint64(parts)).astype(np.int64)
    out: list[tuple[int, bytes]] = []
    ts = int(time.time() * 1000)
    for part in range(parts):
        idx = np.flatnonzero(owner == part)
        for lo in range(0, idx.size, batch):
            sl = idx[lo:lo + batch]
            out.append((part, encode_acker_batch(AckerBatch(
                records.roots[sl], records.values[sl], records.kinds[sl], records.tasks[sl],
                records.ts_ms[sl]), ts)))
    return out


def produce(bootstrap: str, topic: str, payloads: list[tuple[int, bytes]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 20})
    for part, raw in payloads:
        while True:
            try:
                p.produce(topic, raw, partition=part)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def scrape(port: int) -> dict[str, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            key = s.name + "".join(f"|{v}" for _, v in sorted(s.labels.items()))
            out[key] = s.value
    return out


def _safe(port: int) -> dict[str, float]:
    try:
        return scrape(port)
    except OSError:
        return {}


def applied(port: int) -> float:
    try:
        m = scrape(port)
    except OSError:
        return 0.0
    return sum(v for k, v in m.items() if k.startswith("squall_acker_records_total|"))


def run_ackers(bootstrap: str, topo: str, n_proc: int, payloads: list[tuple[int, bytes]],
               total: int, n_trees: int, logdir: Path) -> dict[str, float]:
    """Start ``n_proc`` idle acker processes (one task each), then produce and time them.

    The clock starts when producing starts and stops when the ackers' own
    counters reach ``total``: production overlaps and is included.
    """
    res = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                    "enable.auto.commit": False})
    res.assign([TopicPartition(results_topic(topo), 0, 0)])
    procs, ports = [], []
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for i in range(n_proc):
        port = free_port()
        ports.append(port)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "services.acker", "--topology", topo, "--tasks", str(i),
             "--num-ackers", str(n_proc), "--bootstrap-servers", bootstrap,
             "--metrics-port", str(port), "--message-timeout-s", "300"],
            stdout=open(logdir / f"acker-{topo}-{i}.log", "wb"),  # noqa: SIM115 - the child owns it
            stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
            env=env))
    trees = 0
    try:
        # Ready = assigned and idle: the first watermark commit publishes this gauge.
        deadline = time.monotonic() + 60
        while not all(any(k.startswith("squall_acker_watermark_offset") for k in _safe(p))
                      for p in ports):
            if time.monotonic() > deadline:
                raise RuntimeError("ackers did not become ready")
            time.sleep(0.05)
        t_first = time.perf_counter()
        produce(bootstrap, acker_topic(topo), payloads)
        t_last = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            now_applied = sum(applied(p) for p in ports)
            t = time.perf_counter()
            for m in res.consume(1000, 0.02):
                raw = m.value()
                if raw is not None and not m.error():
                    trees += len(decode_results(raw))
            if now_applied >= total and t_last is None:
                t_last = t
            if t_last is not None and trees >= n_trees:
                t_done = time.perf_counter()
                break
            time.sleep(0.01)
        else:
            raise RuntimeError(f"ackers did not finish: {now_applied} of {total} records")
    finally:
        for pr in procs:
            pr.send_signal(signal.SIGTERM)
        for pr in procs:
            pr.wait(30)
        res.close()
    assert t_last is not None
    secs = t_last - t_first
    return {"records_per_s": total / secs, "trees_per_s": n_trees / (t_done - t_first),
            "seconds": secs}


def breakdown(bootstrap: str, topic: str, payloads: list[bytes], total: int,
              per_poll: int) -> dict[str, float]:
    """Where one process's time goes: fetching alone, decoding, applying (as the service does:
    the messages of one poll concatenated into one ledger batch)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
                  "max.partition.fetch.bytes": 16 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    while got < len(payloads):
        got += sum(1 for m in c.consume(500, 1.0) if not m.error())
    fetch = time.perf_counter() - t0
    c.close()
    t0 = time.perf_counter()
    batches = [decode_acker_batch(p) for p in payloads]
    decode = time.perf_counter() - t0
    ledger = Ledger(300_000)
    t0 = time.perf_counter()
    for lo in range(0, len(batches), per_poll):
        ledger.apply(AckerBatch.concat(batches[lo:lo + per_poll]), 0, lo)
    apply = time.perf_counter() - t0
    assert len(ledger) == 0
    return {"fetch_records_per_s": total / fetch, "decode_records_per_s": total / decode,
            "ledger_records_per_s": total / apply}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=int, default=500_000, help="tuple trees (12 records each)")
    ap.add_argument("--batch", type=int, default=2_000, help="records per Kafka message")
    args = ap.parse_args()
    n_trees = args.trees
    records = make_records(n_trees, window=5_000, seed=3)
    total = len(records)
    out: dict[str, float] = {"records": total, "trees": n_trees, "batch": args.batch}
    with tempfile.TemporaryDirectory() as tmp, \
            EmbeddedStack(StackSettings(home=Path(tmp) / "stack")) as info:
        b = info.bootstrap_servers
        for n_proc in (1, 2):
            topo = f"bench{n_proc}{uuid.uuid4().hex[:6]}"
            ensure_topics(KafkaClients(b), {acker_topic(topo): n_proc, results_topic(topo): 1,
                              dlq_topic(topo): 1})
            payloads = encode(records, n_proc, args.batch)
            say(f"{n_proc} acker process(es): {total:,} records ({n_trees:,} trees) in "
                f"{len(payloads):,} messages ...")
            r = run_ackers(b, topo, n_proc, payloads, total, n_trees, Path(tmp))
            say(f"{n_proc} process(es): {r['records_per_s']:,.0f} records/s, "
                f"{r['trees_per_s']:,.0f} trees/s (results received)")
            key = "" if n_proc == 1 else "_2proc"
            out[f"ack_records_per_s{key}"] = round(r["records_per_s"])
            out[f"trees_per_s{key}"] = round(r["trees_per_s"])
            if n_proc == 1:
                bd = breakdown(b, acker_topic(topo), [raw for _, raw in payloads], total, 500)
                say("breakdown (one process, same data): " + ", ".join(
                    f"{k} {v:,.0f}" for k, v in bd.items()))
                out.update({k: round(v) for k, v in bd.items()})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
