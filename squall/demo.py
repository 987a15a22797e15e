"""``squall demo``: the word count, end to end, the way users run Squall.

Starts the embedded stack (Apache Kafka + ZooKeeper), the API, one worker of each
kind; submits the word count over REST (its counts in Trident state, exactly once);
feeds sentences with a progress line; prints the top counts, whether they equal what was
fed, and the acker throughput. With ``--sentences N`` it first warms the pipeline
(:data:`WARMUP_SENTENCES`, awaited and reported apart, as the benchmark warms up), ends
by itself once all N are processed (or its timeout passes) and prints a JSON
summary on its last line; without, it feeds until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from squall.client import ApiClient
from squall.core.errors import ApiError
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec
from squall.demo_cluster import await_until, cluster, say
from squall.kafka import ensure_topics, produce
from squall.kafka_clients import KafkaClients, quiet_logger

# Storm's RandomSentenceSpout sentences.
SENTENCES = ("the cow jumped over the moon", "an apple a day keeps the doctor away",
             "four score and seven years ago", "snow white and the seven dwarfs",
             "i am at two with nature")
SOURCE = "sentences"
SOURCE_PARTITIONS = 2
COUNTS = "wordcount.counts"
NAME = "wordcount"


@dataclass(frozen=True)
class DemoSettings:
    workdir: Path
    sentences: int | None  # None: feed until Ctrl-C
    rate: float  # sentences per second (0: as fast as the spout takes them)
    timeout_s: float


def demo_topology(bootstrap: str, split: str = "examples.wordcount:SplitSentenceArrow",
                  message_timeout_s: float = 60, exact: bool = True,
                  bolt_deadline_s: float | None = None, words_to: str | None = None,
                  ackers: int = 2) -> TopologySpec:
    """Sentences -> split -> count. ``exact``: the counts are a persistent aggregate
    (Trident state, read with :func:`state_counts`); else a counting bolt whose counts a
    sink publishes to Kafka (at least once; :func:`top_counts`). ``words_to``: a topic the
    Kafka bolt also writes every word to, exactly once. ``ackers``: the acker tasks."""
    b = TopologyBuilder()
    b.set_spout(SOURCE, [SOURCE], SOURCE_PARTITIONS, scheme="text")
    b.set_bolt("split", split, 2,
               outputs={"default": ["word"]}).shuffle_grouping(SOURCE)
    if words_to is not None:
        b.kafka_bolt("words", words_to, 2, message_field="word", exactly_once=True
                     ).fields_grouping("split", ["word"])
    if exact:
        b.persistent_aggregate("count", ["word"], "count", 2, kind="opaque"
                               ).fields_grouping("split", ["word"])
        return b.build(NAME, ackers=ackers, message_timeout_s=message_timeout_s,
                       max_spout_pending=20_000, bolt_deadline_s=bolt_deadline_s)
    b.set_bolt("count", "examples.wordcount:WordCountArrow", 2,
               outputs={"default": ["word", "count"]}).fields_grouping("split", ["word"])
    b.set_bolt("publish", "examples.wordcount:PublishCounts", 1, outputs={},
               config={"topic": COUNTS, "bootstrap_servers": bootstrap}
               ).global_grouping("count")
    return b.build(NAME, ackers=ackers, message_timeout_s=message_timeout_s,
                   max_spout_pending=20_000, bolt_deadline_s=bolt_deadline_s)


def shown_stats(storm: dict[str, Any]) -> dict[str, Any]:
    """Of Storm's ``topologyStats`` (one per window), the window the body was asked for."""
    stats: list[dict[str, Any]] = storm.get("topologyStats", [])
    return next((w for w in stats if w.get("window") == storm.get("window")), {})

class Progress:
    """The numbers the demo shows, from Kafka (committed offsets) and the API (stats)."""

    def __init__(self, kafka: KafkaClients, client: ApiClient, topology_id: str) -> None:
        self.client, self.id = client, topology_id
        self.c = kafka.consumer({"logger": quiet_logger("demo-progress"),
                                 "group.id": f"squall.{topology_id}.{SOURCE}",
                                 "enable.auto.commit": False})
        self.start = time.monotonic()
        self.last: tuple[float, float] | None = None
        self.acker_rate = 0.0
        self.storm: dict[str, Any] = {}

    def committed(self) -> int:
        return sum(self.committed_by_partition())

    def committed_by_partition(self) -> list[int]:
        """Each source partition's committed offset (0 where nothing is committed yet)."""
        from confluent_kafka import TopicPartition

        got = self.c.committed([TopicPartition(SOURCE, p) for p in range(SOURCE_PARTITIONS)],
                               timeout=10)
        return [max(0, t.offset) for t in got]

    def refresh(self) -> None:
        with contextlib.suppress(ApiError):
            self.storm = self.client.storm_topology(self.id)
        records = float(self.storm.get("acker", {}).get("records", 0.0))
        now = time.monotonic()
        if self.last is not None and now > self.last[0]:
            self.acker_rate = max(0.0, (records - self.last[1]) / (now - self.last[0]))
        self.last = (now, records)

    def spout(self, key: str) -> float:
        return float(sum(s.get(key, 0) for s in self.storm.get("spouts", ())))

    def line(self, fed: int, total: int | None, done: int) -> str:
        try:
            lat = f"{float(shown_stats(self.storm)['completeLatency']):,.0f}"
        except (KeyError, TypeError, ValueError):
            lat = "-"
        of = f"/{total:,}" if total else ""
        return (f"\r{time.monotonic() - self.start:6.1f}s  fed {fed:,}{of}  processed {done:,}"
                f"  acked {self.spout('acked'):,.0f}  failed {self.spout('failed'):,.0f}"
                f"  __acker {self.acker_rate:,.0f} records/s  latency {lat} ms   ")

    def close(self) -> None:
        self.c.close()


def state_counts(url: str, topology_id: str) -> Counter[str]:
    """Every word's count in the exact word count's Trident state (of the submission
    ``topology_id``)."""
    from squall.backends import open_store
    from squall.backends.sql import StoreName
    from squall.core.trident.codec import MapKind

    store = open_store(url, StoreName(f"{topology_id}.count", 0, MapKind.OPAQUE))
    try:
        return Counter({str(w): int(v.curr) for (w,), v in store.items()})
    finally:
        store.close()


def top_counts(kafka: KafkaClients, n: int = 10) -> list[tuple[str, int]]:
    """Sum the per-batch counts the ``publish`` bolt wrote."""
    from confluent_kafka import KafkaError, TopicPartition

    c = kafka.consumer({"group.id": "squall-demo-report", "logger": quiet_logger("demo-report"),
                        "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition(COUNTS, 0, 0)])
    total: Counter[str] = Counter()
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                continue
            with contextlib.suppress(ValueError):
                total.update(json.loads(m.value() or b""))
    finally:
        c.close()
    return total.most_common(n)


#: With ``--sentences``, fed and awaited before the timed sentences, in rounds: a query's
#: first micro-batch pays one-off costs (Spark plans the source's reads in a Python process
#: of its own, the batch's code paths run cold), and its second still pays some (its
#: offset-log write and its planning: 7-29 and 17-43 ms, 3-5 and 11-22 after); neither
#: is the pipeline's rate.
WARMUP_ROUNDS = (500, 250)
WARMUP_SENTENCES = sum(WARMUP_ROUNDS)
#: How often a counted run looks for its end once all is fed (a committed-offsets request;
#: the figure's resolution, against a burst of ~0.3 s).
END_POLL_S = 0.005


def _warm_up(producer: Any, prog: Progress, rounds: tuple[int, ...], rng: random.Random,
             words: Counter[str], stop: threading.Event, deadline: float) -> float:
    """Feed each round of sentences and wait (until ``deadline`` at most) until it is
    processed, then until the API's statistics show them all (the acker's records are
    counted from there); the seconds taken."""
    t0 = time.monotonic()
    n = sum(rounds)
    say(f"warming up: {n} sentences through the whole pipeline first")
    fed = 0
    for size in rounds:
        for _ in range(size):
            sentence = rng.choice(SENTENCES)
            produce(producer, SOURCE, sentence.encode())
            words.update(sentence.split())
        fed += size
        producer.flush(10)
        while prog.committed() < fed and time.monotonic() < deadline and not stop.wait(0.05):
            pass
    took = time.monotonic() - t0
    prog.refresh()
    while prog.spout("acked") < n and time.monotonic() < deadline and not stop.wait(0.2):
        prog.refresh()
    say(f"warm after {took:.1f} s")
    return took


def run_demo(s: DemoSettings) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    rng = random.Random(7)
    # No warm standby of the bolts job: nothing kills the demo's driver, and a second
    # Spark warming up beside the first takes half of a small machine.
    with cluster(s.workdir, stop, standby=False) as cl:
        info, client = cl.info, cl.client
        kafka = info.clients()
        ensure_topics(kafka, {SOURCE: SOURCE_PARTITIONS}, 30)
        spec = demo_topology(info.bootstrap_servers)
        tid = str(client.submit(spec.to_json())["id"])
        say(f"submitted {NAME!r} over REST as {tid}; waiting for Spark to start the bolt "
             "queries")
        t_wait = time.monotonic()

        def bolts_running() -> bool:
            bolts = client.storm_topology(tid)["bolts"]
            print(f"\r  {time.monotonic() - t_wait:5.1f}s  bolt queries running: "
                  f"{sum(b['running'] for b in bolts)}/{len(bolts)} ", end="", file=sys.stderr,
                  flush=True)
            return all(b["running"] for b in bolts)

        await_until(bolts_running, 180, stop, None, s.workdir, every_s=0.1)
        running_at = time.monotonic()
        say(f"\nbolt queries running {running_at - t_wait:.1f} s after the submission, "
             f"{running_at - cl.workers_started:.1f} s after the workers started")
        producer = kafka.producer({"linger.ms": 5, "logger": quiet_logger("demo")})
        prog = Progress(kafka, client, tid)
        words: Counter[str] = Counter()  # the ground truth
        deadline = time.monotonic() + s.timeout_s  # the warm-up's time included
        warm = WARMUP_SENTENCES if s.sentences is not None else 0
        warmup_s = (_warm_up(producer, prog, WARMUP_ROUNDS, rng, words, stop, deadline)
                    if warm else 0.0)
        acker_before = float(prog.storm.get("acker", {}).get("records", 0.0))
        # A counted run's sentences are drawn before the clock starts, as the benchmark's
        # (references to five encoded sentences: 8 bytes each).
        encoded = [line.encode() for line in SENTENCES]
        planned = [rng.choice(encoded) for _ in range(s.sentences or 0)]
        say(f"feeding {s.sentences or 'sentences until Ctrl-C'}"
             + (f" at {s.rate:,.0f}/s" if s.rate else ""))
        fed, done, t0 = 0, 0, time.monotonic()
        last_show = last_check = 0.0
        try:
            while not stop.is_set():
                now = time.monotonic()
                if s.sentences is None or fed < s.sentences:
                    want = s.sentences or 10**12
                    target = want if not s.rate else int((now - t0) * s.rate)
                    for _ in range(min(target, want) - fed):
                        if planned:
                            produce(producer, SOURCE, planned[fed])
                        else:
                            sentence = rng.choice(SENTENCES)
                            produce(producer, SOURCE, sentence.encode())
                            words.update(sentence.split())
                        fed += 1
                    producer.poll(0)
                # All fed: look for the end every END_POLL_S (the time taken is the figure:
                # its resolution), show progress every second.
                fed_all = s.sentences is not None and fed >= s.sentences
                if now - last_show >= 1.0 or (fed_all and now - last_check >= END_POLL_S):
                    producer.flush(10)
                    done, last_check = max(0, prog.committed() - warm), now
                    if now - last_show >= 1.0:
                        prog.refresh()
                        print(prog.line(fed, s.sentences, done), end="", file=sys.stderr,
                              flush=True)
                        last_show = now
                    if s.sentences is not None and done >= s.sentences:
                        break
                if s.sentences is not None and now > deadline:
                    say(f"\ntimeout: {done:,} of {s.sentences:,} processed in {s.timeout_s}s")
                    break
                stop.wait(END_POLL_S if fed_all else 0.01 if s.rate else 0.2)
            producer.flush(30)
            elapsed = time.monotonic() - t0
            done = max(0, prog.committed() - warm)
            for line, n in Counter(planned[:fed]).items():
                for w in line.decode().split():
                    words[w] += n
            prog.refresh()
            # The API's statistics are gathered every few seconds: let them catch up with
            # what Kafka says is committed before they go into the summary.
            settle = time.monotonic() + 10
            while (prog.spout("acked") < done + warm and time.monotonic() < settle
                   and not stop.is_set()):
                stop.wait(0.1)  # the API gathers every 0.25 s here: the summary waits no more
                prog.refresh()
            # The last progress line, on the final figures.
            print(prog.line(fed, s.sentences, done), file=sys.stderr, flush=True)
            acker_records = float(prog.storm.get("acker", {}).get("records", 0.0)) - acker_before
            counts = state_counts(cl.state_url, tid)
            top = counts.most_common(10)
            say("\ntop words:")
            for w, n in top:
                say(f"  {w:<10} {n:>10,}")
            dead = int(prog.spout("dead_lettered"))
            summary = {
                "sentences": fed, "processed": done, "acked": int(prog.spout("acked")),
                "failed": int(prog.spout("failed")), "replayed": int(prog.spout("replayed")),
                "dead_lettered": dead,
                # With --sentences the demo waits for every tree, so what is not completed by
                # then is lost. Stopped by Ctrl-C, what is in flight is merely unfinished.
                "lost": max(0, fed - (done - dead)) if s.sentences is not None else None,
                # Fed first and awaited, apart from the figures below (as the benchmark
                # warms up): the first micro-batch's one-off costs.
                "warmup_sentences": warm, "warmup_s": round(warmup_s, 2),
                "unfinished_at_stop": max(0, fed - done) if s.sentences is None else 0,
                "seconds": round(elapsed, 2),
                "bolt_queries_running_s": round(running_at - t_wait, 2),
                "bolt_queries_after_workers_s": round(running_at - cl.workers_started, 2),
                "sentences_per_s": round(done / elapsed, 1) if elapsed else 0.0,
                "acker_records_per_s": round(acker_records / elapsed, 1) if elapsed else 0.0,
                "complete_latency_ms": float(shown_stats(prog.storm).get("completeLatency", 0)
                                             or 0),
                "top_words": top,
                # Exactly once: every word fed counted once, no more (None when stopped by
                # Ctrl-C: what is in flight then is not counted yet).
                "counts_exact": counts == words if s.sentences is not None else None,
            }
            say(f"acker throughput: {summary['acker_records_per_s']:,.0f} records/s "
                 f"(mean over the run); " + (f"lost: {summary['lost']}" if s.sentences
                                             else f"unfinished at stop: "
                                                  f"{summary['unfinished_at_stop']:,}"))
            print(json.dumps(summary), flush=True)
        finally:
            prog.close()
    complete = s.sentences is None or summary["lost"] == 0
    return 0 if complete else 1
