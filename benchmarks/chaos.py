"""Chaos: the word count through the control plane, with processes killed under load.

As users deploy it (``squall demo``'s cluster: Apache Kafka and
ZooKeeper, the REST API, one worker of each kind, the word count submitted over
REST), sentences are fed at a steady rate, and while the pipeline is busy the
suite ``kill -9``s in turn the spout, an acker, the bolts' Spark driver (its
JVM; by default while one of its tasks is producing, when its acks are half
sent: ``driver_killed_while_producing`` says whether that moment was caught,
``resent_batches`` how many micro-batches were then run again and their roots failed) and
the API (restarted by the demo cluster's supervisor), then restarts ZooKeeper.
After each fault it measures how long until the killed process is back and
source offsets are being committed again. Then it waits for the pipeline to
drain and checks, from Kafka itself (not from counters that restart with the
processes):

- ``lost``: source messages neither committed nor dead-lettered (must be 0);
- ``dead_lettered``: messages in the dead-letter topic (0 unless ``--poison``,
  ``--poison-crash`` or ``--poison-hang``; with them, each poison message exactly once,
  with its reason and attempt count, and no healthy one);
- ``max_stall_s``: the longest time the committed offsets stood still while behind what
  was fed (a record that kills or hangs a bolt must not stall the topology: at most 60 s);
- ``replays``: tree emissions beyond one per source message (the init records
  in the acker topic), against what was outstanding (fed, not committed) as each
  fault struck (``outstanding_by_fault``) and ``max_spout_pending`` per fault;
- ``duplicates``: words counted beyond the words fed (the published counts);
- with ``--exact`` the counts are Trident state (a persistent aggregate, exactly once):
  ``counts_delta``, the sum over words of |counted - fed|, must be 0;
- with ``--sink`` the Kafka bolt also writes every word to a topic, exactly once:
  ``sink_delta``, the sum over words of |written - fed|, and ``sink_repeated_ids``, records
  whose ``squall.id`` another record has too, must be 0.

``--broker-faults`` runs on three Kafka brokers (topics at replication factor 3,
``min.insync.replicas`` 2) and strikes them instead (benchmarks/chaos_brokers.py): the
broker leading most partitions killed, a rolling restart of all three, the leading broker
frozen for 30 s. Each gives a row of the ``faults`` list; ``offset_regressions`` counts
committed offsets seen to move backwards (must be 0); every fault's ``longest_stall_s``
must be at most 15.

``--no-kills --minutes N`` runs the word count for N minutes with no fault and
reports the longest stretch with no commit (``max_ack_gap_s``, at most 10 s).

Last line: one JSON object, ``{"sentences", "lost", "dead_lettered", "replays",
"duplicates", "max_recovery_s", "processes_back", ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.chaos_brokers import BROKER_FAULTS, BrokerFaults
from benchmarks.chaos_load import Commits, CpuSampler, Feeder, wait
from benchmarks.chaos_targets import KILLS, active_driver, catch_producing, pids, resent_batches
from squall.core.errors import ApiError
from squall.core.topology.kafka_sink import ID_HEADER
from squall.demo import (
    COUNTS,
    NAME,
    SOURCE,
    SOURCE_PARTITIONS,
    Progress,
    demo_topology,
    state_counts,
)
from squall.demo_cluster import Cluster, cluster
from squall.kafka import ensure_topics
from squall.kafka_clients import quiet_logger

#: The topic ``--sink`` writes every word to, exactly once, and its partitions.
WORDS, WORDS_PARTS = "squall-chaos-words", 3
#: The share of messages that kill (``--poison-crash``) or hang (``--poison-hang``) the bolt.
POISON_SHARE = 0.0005
#: The longest the commits may stand still while behind, with such poison.
MAX_STALL_S = 60.0
#: The longest the commits may stand still during a broker fault.
BROKER_STALL_S = 15.0


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fault(cl: Cluster, name: str, pattern: str | None, commits: Commits,
          timeout_s: float, moment: Callable[[], object] | None = None
          ) -> tuple[float | None, int]:
    """One fault: seconds until the process is back and everything fed before the fault is
    committed, what was in flight got through (None: not within ``timeout_s``); and how many
    sentences were outstanding (fed, not committed) as it struck, what a replay can concern.
    ``moment``, called once the victim is known, returns when it is to be killed."""
    t0 = time.monotonic()
    in_flight_end = commits.fed()
    outstanding = max(0, in_flight_end - commits.value)
    if pattern is None:  # ZooKeeper: a restart (it keeps its data)
        cl.stack.restart("zookeeper")
        back: Callable[[], bool] = lambda: (  # noqa: E731
            cl.client.request("GET", "/readyz").get("ready") is True
            and len(cl.client.workers()) == 3)
    else:
        victims = active_driver(cl.workdir) if name == "bolts-driver" else pids(pattern)
        if not victims:
            say(f"  no process matches {pattern!r}: fault {name} skipped")
            return None, 0
        if moment is not None:
            moment()
            t0, in_flight_end = time.monotonic(), commits.fed()
            outstanding = max(0, in_flight_end - commits.value)
        os.kill(victims[0], signal.SIGKILL)
        if name == "api":  # the demo cluster's supervisor starts it again
            back = lambda: (  # noqa: E731
                cl.supervisor.children["api"].proc.pid != victims[0]
                and cl.client.request("GET", "/healthz")["status"] == "ok")
        else:
            back = lambda: any(p not in victims for p in pids(pattern))  # noqa: E731
    if not wait(back, timeout_s) or not wait(lambda: commits.value >= in_flight_end, timeout_s):
        return None, outstanding
    return round(time.monotonic() - t0, 1), outstanding


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every message of a topic, start to end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-read-{os.getpid()}",
                  "enable.partition.eof": True, "enable.auto.commit": False,
                  "logger": quiet_logger("chaos-read")})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Any] = []
    eof: set[int] = set()
    idle = time.monotonic()
    try:
        while len(eof) < partitions and time.monotonic() - idle < 30:
            for m in c.consume(10_000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition() or 0)
                    continue
                out.append(m)
                idle = time.monotonic()
    finally:
        c.close()
    return out


def count_inits(bootstrap: str, topology_id: str, ackers: int) -> int:
    from squall.core.reliability.records import RecordKind
    from squall.core.wire.internal import decode_acker_batch, decode_progress

    n = 0
    for m in read_topic(bootstrap, f"squall.{topology_id}.acker", ackers):
        raw = m.value() or b""
        if decode_progress(raw) is not None:
            continue
        with contextlib.suppress(Exception):
            n += int((decode_acker_batch(raw).kinds == RecordKind.INIT).sum())
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=100_000,
                    help="how many to feed (with faults at least this many: the feed goes on "
                    "until the last fault is recovered from, so that each strikes under load)")
    ap.add_argument("--rate", type=float, default=1_000, help="sentences per second")
    ap.add_argument("--poison", action="store_true",
                    help="1%% undecodable messages and 0.5%% that the split bolt raises on")
    ap.add_argument("--poison-crash", action="store_true",
                    help="0.05%% of messages on which the split bolt exits its process")
    ap.add_argument("--poison-hang", action="store_true",
                    help="0.05%% of messages on which the split bolt never returns")
    ap.add_argument("--bolt-deadline-s", type=float, default=3,
                    help="the topology's bolt deadline: how long a bolt call may run before "
                    "its process is killed and its record isolated (default 3: a hanging "
                    "record's six attempts each cost one or two of them)")
    ap.add_argument("--broker-faults", nargs="?", const=",".join(BROKER_FAULTS), default="",
                    metavar="FAULTS",
                    help="three brokers, struck instead of the services: all of "
                    f"{','.join(BROKER_FAULTS)} (the default), or those named")
    ap.add_argument("--no-kills", action="store_true", help="no faults: a soak")
    ap.add_argument("--minutes", type=float, default=None,
                    help="with --no-kills: feed for this long (instead of --sentences)")
    ap.add_argument("--message-timeout-s", type=float, default=60,
                    help="the topology's message timeout (shorter than a recovery: shows that "
                    "waiting for a restarted job replays nothing)")
    ap.add_argument("--recovery-timeout-s", type=float, default=180)
    ap.add_argument("--drain-timeout-s", type=float, default=600)
    ap.add_argument("--workdir", type=Path, default=Path(".squall/chaos"))
    ap.add_argument("--driver-kill", choices=("producing", "any"), default="producing",
                    help="when the bolts driver is killed: while one of its tasks produces "
                    "(the default; its acks half sent, the hardest moment) or at any moment")
    ap.add_argument("--exact", action="store_true",
                    help="count into Trident state (exactly once) and report counts_delta; "
                    "default: the at-least-once counting bolt, whose duplicates are reported")
    ap.add_argument("--sink", action="store_true",
                    help="also write every word to a topic with the exactly-once Kafka bolt "
                    "and report sink_delta")
    a = ap.parse_args(argv)
    unknown = set(a.broker_faults.split(",")) - {"", *BROKER_FAULTS}
    if unknown:
        ap.error(f"--broker-faults: no faults {sorted(unknown)}; choose from "
                 f"{', '.join(BROKER_FAULTS)}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    stop = threading.Event()
    total = None if (a.no_kills and a.minutes) else a.sentences
    with cluster(a.workdir.resolve(), stop, brokers=3 if a.broker_faults else 1) as cl:
        bootstrap = cl.info.bootstrap_servers
        ensure_topics(cl.info.clients(), {SOURCE: SOURCE_PARTITIONS, COUNTS: 1, WORDS: WORDS_PARTS},
                      30)
        split = "examples.faults:SplitOrDie" if a.poison_crash or a.poison_hang else \
            "examples.faults:SplitOrRaise" if a.poison else "examples.wordcount:SplitSentenceArrow"
        spec = demo_topology(bootstrap, split, a.message_timeout_s, exact=a.exact,
                             bolt_deadline_s=a.bolt_deadline_s,
                             words_to=WORDS if a.sink else None)
        tid = str(cl.client.submit(spec.to_json())["id"])
        say(f"submitted as {tid}; waiting for the bolt queries")
        if not wait(lambda: all(b["running"] for b in cl.client.storm_topology(NAME)["bolts"]),
                    240):
            raise SystemExit("the bolt queries did not start in 240 s")
        prog = Progress(cl.info.clients(), cl.client, tid)
        feeder = Feeder(bootstrap, total, a.rate, a.poison,
                        a.minutes * 60 if (a.no_kills and a.minutes) else None,
                        crash=POISON_SHARE if a.poison_crash else 0.0,
                        hang=POISON_SHARE if a.poison_hang else 0.0)
        commits = Commits(prog, lambda: feeder.fed)
        faults: list[tuple[str, str | None]] = (
            [] if a.no_kills else [(f, None) for f in a.broker_faults.split(",")]
            if a.broker_faults
            else [*KILLS, ("zookeeper", None)])
        brokers = BrokerFaults(cl.stack, cl.info, commits, [SOURCE, f"squall.{tid}."],
                               a.recovery_timeout_s)
        rows: list[dict[str, Any]] = []
        if faults:
            feeder.hold.set()
        t0 = time.monotonic()
        feeder.start()
        commits.start()
        recovery: dict[str, float | None] = {}
        outstanding: dict[str, int] = {}
        killed_producing = False
        expected = total or int(a.rate * (a.minutes or 0) * 60)
        for i, (name, pattern) in enumerate(faults):
            # Faults spread over the feed: the pipeline is busy at each one.
            at = expected * (i + 1) / (len(faults) + 2)
            while feeder.fed < at and not feeder.done.is_set():
                time.sleep(0.2)
            say(f"{time.monotonic() - t0:6.1f}s  fed {feeder.fed:,}  committed "
                f"{commits.value:,}: {name} down")
            if a.broker_faults:
                rows.append(brokers.run(name))
                recovery[name] = rows[-1]["recovery_s"]
                continue
            at_produce = name == "bolts-driver" and a.driver_kill == "producing"
            caught: list[bool] = []
            recovery[name], outstanding[name] = fault(
                cl, name, pattern, commits, a.recovery_timeout_s,
                functools.partial(catch_producing, cl.workdir, caught) if at_produce else None)
            if at_produce:
                killed_producing = bool(caught and caught[0])
                say("  killed while a task produced" if killed_producing else
                    "  no task produced in 10 s: killed then")
            say(f"{time.monotonic() - t0:6.1f}s  {name}: back, commits moving after "
                f"{recovery[name]} s")
        feeder.hold.clear()
        cpu = CpuSampler()
        cpu.sample()
        cpu_log: list[dict[str, int]] = []
        while not feeder.done.wait(30 if a.no_kills else 5):
            shares = cpu.sample()
            cpu_log.append(shares)
            say(f"{time.monotonic() - t0:6.1f}s  fed {feeder.fed:,}  committed "
                f"{commits.value:,}  longest stall {commits.max_gap_s:.1f} s  cpu % "
                + " ".join(f"{k} {v}" for k, v in shares.items()))
        fed = feeder.fed
        say(f"fed {fed:,}; waiting for the pipeline to drain")
        deadline = time.monotonic() + a.drain_timeout_s
        while commits.value < fed and time.monotonic() < deadline:
            time.sleep(1)
        if commits.value < fed:  # what ran as it stalled: the log says where to look
            with contextlib.suppress(ApiError, OSError):
                say(f"not drained in {a.drain_timeout_s:.0f} s: committed {commits.value:,}; "
                    "workers: " + "; ".join(
                        f"{w['id']}: {len(w['placements'])} placements, {len(w['running'])} "
                        "endpoints up" for w in cl.client.workers()))
        commits.stop.set()
        committed = prog.committed()
        drained_s = round(time.monotonic() - t0, 1)
        back = {
            "api": wait(lambda: cl.client.request("GET", "/healthz")["status"] == "ok", 30),
            "workers": wait(lambda: len(cl.client.workers()) == 3, 30),
            "spout": bool(pids("-m services.spout")), "acker": bool(pids("-m services.acker")),
            "bolts": wait(lambda: all(b["running"] for b in
                                      cl.client.storm_topology(NAME)["bolts"]), 60),
        }
        from squall.core.reliability.dead_letters import DeadLetterHeaders

        letters = [(m.value(), DeadLetterHeaders.from_headers(m.headers() or []))
                   for m in read_topic(bootstrap, f"squall.{tid}.dlq", 1)]
        spout_letters = [(v, d) for v, d in letters if d.component == SOURCE]
        by_value = Counter(v for v, _ in spout_letters)
        poison = feeder.undecodable | feeder.raising | feeder.killing
        inits = count_inits(bootstrap, tid, spec.ackers)
        counted: Counter[str] = Counter()
        if a.exact:
            counted = state_counts(cl.state_url, tid)
        else:
            for m in read_topic(bootstrap, COUNTS, 1):
                with contextlib.suppress(ValueError):
                    counted.update(json.loads(m.value() or b""))
        words_fed = sum(feeder.words.values())
        sink: dict[str, int] = {}
        if a.sink:
            written = read_topic(bootstrap, WORDS, WORDS_PARTS)
            by_word = Counter((m.value() or b"").decode() for m in written)
            ids = Counter(v for m in written for k, v in m.headers() or [] if k == ID_HEADER)
            sink = {"sink_written": len(written),
                    "sink_delta": sum(abs(by_word[w] - feeder.words[w])
                                      for w in feeder.words.keys() | by_word.keys()),
                    "sink_repeated_ids": sum(n - 1 for n in ids.values())}
        storm = {}
        with contextlib.suppress(ApiError):
            storm = cl.client.storm_topology(NAME)
        summary = {
            "sentences": fed, "committed": committed,
            "lost": max(0, fed - committed),
            "dead_lettered": len(spout_letters),
            "healthy_dead_lettered": sum(n for v, n in by_value.items() if v not in poison),
            "poison": len(poison), "poison_dead_lettered_once": sum(
                1 for v in poison if by_value.get(v) == 1),
            "poison_reasons": sorted({d.reason.split(":")[0] for v, d in spout_letters
                                      if v in poison})[:5],
            "replays": max(0, inits - (fed - len(feeder.undecodable))),
            # Replays after a fault are bounded by what was outstanding at it, not multiplied
            # by timeouts: the sum over the faults is the bound.
            "outstanding_at_faults": sum(outstanding.values()),
            "outstanding_by_fault": outstanding,
            "replay_bound": spec.max_spout_pending * max(1, len(faults)) if spec.max_spout_pending
            else None,
            "duplicates": sum(counted.values()) - words_fed,
            "missing_words": sum((feeder.words - counted).values()),
            # Every word's count against the truth: 0 when counted exactly once.
            "counts_delta": sum(abs(counted[w] - feeder.words[w])
                                for w in feeder.words.keys() | counted.keys()),
            "exact": a.exact,
            "max_recovery_s": max((r for r in recovery.values() if r is not None), default=0.0)
            if all(r is not None for r in recovery.values()) else None,
            "recovery_s": recovery,
            "processes_back": all(back.values()), "back": back,
            "faults": rows, "offset_regressions": commits.regressions,
            "max_ack_gap_s": round(commits.max_gap_s, 1),
            "max_stall_s": round(commits.max_stall_s, 1), "stalls": commits.stalls[:20],
            "killing_poison": len(feeder.killing), "bolt_deadline_s": spec.deadline_s,
            "restarts": {c.get("spoutId", c.get("boltId", "__acker")): c.get("restarts", 0)
                         for c in [*storm.get("spouts", []), *storm.get("bolts", []),
                                   storm.get("acker", {})]},
            "rate": a.rate, "message_timeout_s": a.message_timeout_s, "seconds": drained_s,
            "driver_killed_while_producing": killed_producing,
            # Whether the kill landed before the flush ended (else the re-run is skipped).
            "resent_batches": resent_batches(cl.workdir),
            "cpu_first": cpu_log[0] if cpu_log else {}, "cpu_last": cpu_log[-1] if cpu_log else {},
            **sink,
        }
        prog.close()
    print(json.dumps(summary), flush=True)
    poisoned = a.poison or a.poison_crash or a.poison_hang
    ok = (summary["lost"] == 0 and summary["healthy_dead_lettered"] == 0
          and summary["processes_back"]
          and (not poisoned or summary["poison_dead_lettered_once"] == len(poison))
          and (poisoned or summary["dead_lettered"] == 0)
          and (not (a.poison_crash or a.poison_hang) or summary["max_stall_s"] <= MAX_STALL_S)
          and (not a.exact or summary["counts_delta"] == 0)
          and (not a.sink or summary["sink_delta"] == summary["sink_repeated_ids"] == 0)
          and summary["offset_regressions"] == 0
          and all(r["recovery_s"] is not None and r["longest_stall_s"] <= BROKER_STALL_S
                  for r in rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
