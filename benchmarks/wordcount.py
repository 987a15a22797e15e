"""Word count end to end, fully tracked: sentences/s and complete latency, vs Quix Streams.

Squall: the vectorized word count (split and count as batch bolts on Spark
``local[2]``), a real spout and acker; 10-word sentences over a 1,000-word
vocabulary. Throughput: N sentences produced as fast as possible, timed until
every offset is committed (every tree complete). Latency: sentences paced at
half that rate; p50 / p99 of the spout's complete-latency histogram (emit to
ack), interpolated within buckets, and of the acker's (emit to the tree's completion
there: the difference is the results' way back to the spout).

Baseline in the same run, on the same broker: the same word count in Quix
Streams with at-least-once processing. Both are measured in steady state, start-up
apart: Squall's rate after a warm-up batch is committed, Quix's from when a tenth of
its input is committed to the end; each one's start-up (from the command to its first
commits) is printed beside it (``startup_s``, ``baseline_startup_s``).

Last line: ``{"sentences_per_s", "complete_latency_p50_s", "complete_latency_p99_s",
"acker_latency_p50_s", "acker_latency_p99_s", "batch_p50_s", "batch_p99_s" (the head query's
micro-batches at half rate),
"baseline_sentences_per_s", "x_baseline", "startup_s", "baseline_startup_s", ...,
"windowed_sentences_per_s", "sink_sentences_per_s", "sink_exactly_once_sentences_per_s"}``:
the last three are other topologies over the same sentences, measured the same way (a
windowed count in 1 s windows; every word written to Kafka by the Kafka bolt, at least and
exactly once). With ``--api both`` (the default) the word count runs twice, its bolts
vectorized and then as Storm's per-tuple ``BasicBolt`` / ``Bolt`` (with ``--exact``: a
per-tuple split into the persistent aggregate), measured the same way:
``vectorized_sentences_per_s``, ``tuple_sentences_per_s``, ``*_bolts_cpu_us_per_word`` (the
bolts job's CPU over the burst, per word tuple), ``*_complete_latency_p99_s`` and
``tuple_to_vectorized``; the headline figures are the vectorized run's. ``--api join`` (or
``all``, the three) measures the per-tuple split into a multi-anchoring join the same way
(``join_*``).
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
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer

from benchmarks.measure import (
    bolt_totals,
    cpu_by_kind,
    histogram,
    quantile,
    tree_cpu,
    tree_pids,
    where_time_goes,
)
from benchmarks.pipeline import (
    PARTS,
    WORDS,
    committed,
    launch,
    make_sentences,
    produce,
    say,
    wait_committed,
)
from examples.join import LogTotal, PairWords
from examples.windows import WordsPerWindow
from examples.wordcount import SplitSentence, topology
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec
from squall.core.topology.ticks import TICK_FREQ
from squall.core.topology.windows import Duration
from squall.dev.stack import EmbeddedStack, StackSettings
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients
from squall.processes import die_with_parent


def start_profile(out: Path | None, pids: dict[str, int]) -> list[subprocess.Popen[bytes]]:
    """py-spy over each process tree (``--subprocesses``: the bolts job's Python workers),
    collapsed stacks to ``out/<name>.txt`` (flamegraph.pl or speedscope read them)."""
    if out is None:
        return []
    out.mkdir(parents=True, exist_ok=True)
    spy = str(Path(sys.executable).parent / "py-spy")
    return [subprocess.Popen([spy, "record", "--pid", str(pid), "--subprocesses",
                              "--rate", "200", "--format", "raw", "--output",
                              str(out / f"{name}.txt")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name, pid in pids.items()]


def stop_profile(spies: list[subprocess.Popen[bytes]]) -> None:
    for p in spies:
        p.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
    for p in spies:
        p.wait(60)


def jvm_profile(out: Path | None, bolts_pid: int, start: bool) -> None:
    """Java Flight Recorder over the bolts job's JVM (``out/jvm.jfr``; ``jfr print --events
    jdk.ExecutionSample`` reads it)."""
    if out is None:
        return
    jvms = [p for p in tree_pids(bolts_pid)
            if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].endswith(b"java")]
    for pid in jvms:
        args = (["JFR.start", "name=squall", "settings=profile"] if start
                else ["JFR.stop", "name=squall", f"filename={out / 'jvm.jfr'}"])
        subprocess.run(["jcmd", str(pid), *args], check=False, capture_output=True)


def run_squall(b: str, tmp: Path, n: int, warm: int, max_rows: int,
               trigger_ms: int = 50,
               latency_rate: float | None = None, exact: bool = False,
               profile: Path | None = None, pending: int = 50_000,
               profile_phase: str = "throughput", api: str = "vectorized") -> dict[str, float]:
    """``api``: the word count's bolts, ``vectorized`` (Arrow batch bolts) or ``tuple``
    (Storm's per-tuple ``BasicBolt`` split and ``Bolt`` count, or with ``exact`` the split
    into a persistent aggregate); or ``join``: the per-tuple split into a multi-anchoring
    join (:func:`pair_join`)."""
    launched = time.perf_counter()
    pipe = launch(b, tmp, max_rows, trigger_ms, exact, pending, build=pair_join
                  if api == "join" else lambda name, src:
                  topology(name=name, source=src, vectorized=api == "vectorized", exact=exact))
    name, src, port, bolts_port = pipe.name, pipe.source, pipe.spout_port, pipe.bolts_port
    procs = [pipe.procs[k] for k in ("acker", "bolts", "spout")]
    watch = Consumer({"bootstrap.servers": b, "group.id": f"squall.{name}.sentences",
                      "enable.auto.commit": False})
    try:
        say("squall: warming up (Spark start, first micro-batches) ...")
        produce(b, src, make_sentences(warm, 1))
        # to the first commit, as Quix's
        startup = wait_committed(watch, src, 1, procs=pipe.procs) - launched
        wait_committed(watch, src, warm, procs=pipe.procs)
        lines = make_sentences(n, 2)
        say(f"squall: {n:,} sentences as fast as possible ...")
        names = ("acker", "bolts", "spout")
        cpu0 = {k: tree_cpu(p.pid) for k, p in zip(names, procs, strict=True)}
        cpu0["broker+bench"] = tree_cpu(os.getpid())
        kinds0 = cpu_by_kind(procs[1].pid)
        pids = {k: p.pid for k, p in zip(names, procs, strict=True)}
        burst_profile = profile if profile_phase == "throughput" else None
        spy = start_profile(burst_profile, pids)
        jvm_profile(burst_profile, procs[1].pid, start=True)
        t0 = time.perf_counter()
        produce(b, src, lines)
        t1 = wait_committed(watch, src, warm + n, procs=pipe.procs)
        stop_profile(spy)
        jvm_profile(burst_profile, procs[1].pid, start=False)
        kinds = cpu_by_kind(procs[1].pid)
        say("squall: bolts job CPU seconds by process: " + ", ".join(
            f"{k} {v - kinds0.get(k, 0.0):.1f}" for k, v in kinds.items()))
        rate = n / (t1 - t0)
        cpu = {k: tree_cpu(p.pid) - cpu0[k] for k, p in zip(names, procs, strict=True)}
        cpu["broker+bench"] = tree_cpu(os.getpid()) - cpu0["broker+bench"] - sum(cpu.values())
        say(f"squall: {rate:,.0f} sentences/s; CPU seconds over {t1 - t0:.1f} s of wall time: "
            + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()))
        pace = latency_rate or rate / 2
        paced = max(int(pace * 15), 1000)
        say(f"squall: {paced:,} sentences at {pace:,.0f}/s for the latency ...")
        before = histogram(port, "squall_spout_complete_latency_seconds")
        acker_before = histogram(pipe.acker_port, "squall_acker_complete_latency_seconds")
        bolts_before = bolt_totals(bolts_port)
        # The head query's micro-batches (the fused count runs inside them).
        batch_name, head = "squall_bolt_batch_duration_seconds", {"component": "split"}
        batches_before = histogram(bolts_port, batch_name, **head)
        paced_profile = profile if profile_phase == "latency" else None
        spy = start_profile(paced_profile, pids)
        jvm_profile(paced_profile, procs[1].pid, start=True)
        produce(b, src, make_sentences(paced, 3), rate=pace)
        wait_committed(watch, src, warm + n + paced, procs=pipe.procs)
        stop_profile(spy)
        jvm_profile(paced_profile, procs[1].pid, start=False)
        after = histogram(port, "squall_spout_complete_latency_seconds")
        acker_after = histogram(pipe.acker_port, "squall_acker_complete_latency_seconds")
        batches_after = histogram(bolts_port, batch_name, **head)
        prof = where_time_goes(bolts_before, bolt_totals(bolts_port))
        say(f"squall: micro-batches at half rate: {json.dumps(prof)}")
        return {"sentences_per_s": rate, "latency_rate": pace, "startup_s": startup,
                "p50": quantile(before, after, 0.5), "p99": quantile(before, after, 0.99),
                # Emit to the acker's decision: the rest of the spout's figure is the
                # results' way back to the spout.
                "acker_p50": quantile(acker_before, acker_after, 0.5),
                "acker_p99": quantile(acker_before, acker_after, 0.99),
                # A tree waits for the micro-batch running when it came, then runs in the
                # next: its latency's tail follows the batches' tail.
                "batch_p50": quantile(batches_before, batches_after, 0.5),
                "batch_p99": quantile(batches_before, batches_after, 0.99),
                "wall_s": t1 - t0,
                "bolts_cpu_us_per_word": cpu["bolts"] / (n * WORDS) * 1e6,
                **{f"cpu_s_{k}": v for k, v in cpu.items()}}
    except RuntimeError:
        pipe.log_tails(tmp)
        raise
    finally:
        watch.close()
        pipe.stop()


def windowed_count(name: str, source: str) -> TopologySpec:
    """The word count with a windowed bolt: each word's count per 1 s window (processing
    time), then totals."""
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    b.set_bolt("split", "examples.wordcount:SplitSentenceArrow", 2,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    b.set_bolt("window", WordsPerWindow, 2).with_tumbling_window(Duration.seconds(1)) \
        .fields_grouping("split", ["word"])
    b.set_bolt("total", "examples.wordcount:WordCountArrow", 2,
               outputs={"default": ["word", "count"]}).fields_grouping("window", ["word"])
    return b.build(name, ackers=2, message_timeout_s=60)


def kafka_sink(exactly_once: bool) -> Callable[[str, str], TopologySpec]:
    """Every word written to a topic of its own by the Kafka bolt."""
    def build(name: str, source: str) -> TopologySpec:
        b = TopologyBuilder()
        b.set_spout("sentences", source)
        b.set_bolt("split", "examples.wordcount:SplitSentenceArrow", 2,
                   outputs={"default": ["word"]}).shuffle_grouping("sentences")
        b.kafka_bolt("publish", f"{name}-out", 2, message_field="word",
                     exactly_once=exactly_once).fields_grouping("split", ["word"])
        return b.build(name, ackers=2, message_timeout_s=60)
    return build


def pair_join(name: str, source: str) -> TopologySpec:
    """Per-tuple bolts with a multi-anchoring join: the split's words paired on each task,
    each pair anchored to its two words (``examples.join.PairWords``), then acked by a sink;
    a tick a second releases a word left waiting."""
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    b.set_bolt("split", SplitSentence, 2).shuffle_grouping("sentences")
    b.set_bolt("join", PairWords, 2).fields_grouping("split", ["word"]) \
        .add_configuration(TICK_FREQ, 1)
    b.set_bolt("sink", LogTotal, 2).shuffle_grouping("join")
    return b.build(name, ackers=2, message_timeout_s=30)


VARIANTS = {"windowed": windowed_count, "sink": kafka_sink(False),
            "sink_exactly_once": kafka_sink(True)}


def run_variant(b: str, tmp: Path, variant: str, n: int, warm: int, max_rows: int,
                trigger_ms: int) -> float:
    """Sentences/s of another topology over the same sentences, measured as the word
    count's throughput (a warm-up committed first)."""
    build = VARIANTS[variant]

    def sink_first(name: str, source: str) -> TopologySpec:
        ensure_topics(KafkaClients(b), {f"{name}-out": PARTS})
        return build(name, source)

    pipe = launch(b, tmp, max_rows, trigger_ms, build=sink_first)
    watch = Consumer({"bootstrap.servers": b, "group.id": f"squall.{pipe.name}.sentences",
                      "enable.auto.commit": False})
    try:
        say(f"{variant}: warming up ...")
        produce(b, pipe.source, make_sentences(warm, 1))
        wait_committed(watch, pipe.source, warm, procs=pipe.procs)
        say(f"{variant}: {n:,} sentences as fast as possible ...")
        t0 = time.perf_counter()
        produce(b, pipe.source, make_sentences(n, 2))
        t1 = wait_committed(watch, pipe.source, warm + n, procs=pipe.procs)
        say(f"{variant}: {n / (t1 - t0):,.0f} sentences/s")
        return n / (t1 - t0)
    except RuntimeError:
        pipe.log_tails(tmp)
        raise
    finally:
        watch.close()
        pipe.stop()


QUIX_APP = r'''
import sys
from quixstreams import Application

bootstrap, src, out, group = sys.argv[1:5]
# Committed as often as Squall's spout here (0.25 s): with Quix's 5 s the whole input was
# committed at once, and its rate could not be seen.
app = Application(broker_address=bootstrap, consumer_group=group,
                  processing_guarantee="at-least-once", auto_offset_reset="earliest",
                  commit_interval=0.25)
sdf = app.dataframe(app.topic(src, value_deserializer="bytes", key_deserializer="bytes"))
sdf = sdf.apply(lambda s: [w for w in s.decode().split()], expand=True)
sdf = sdf.group_by(lambda w: w, name="word")

def count(word, state):
    n = state.get("n", 0) + 1
    state.set("n", n)
    return {"word": word, "count": n}

sdf = sdf.apply(count, stateful=True)
sdf.to_topic(app.topic(out, value_serializer="json"))
app.run()
'''


def run_quix(b: str, tmp: Path, n: int) -> dict[str, float]:
    """Quix's steady-state rate (from when a tenth of the input is committed to the end) and
    its start-up (from the command to the first commit), apart."""
    nan = float("nan")
    try:
        import quixstreams  # noqa: F401
    except ImportError:
        say("quix: not installed (pip install -e '.[bench]'); no baseline")
        return {"rate": nan, "startup_s": nan}
    tag = uuid.uuid4().hex[:6]
    src, out, group = f"qsrc-{tag}", f"qout-{tag}", f"quix-{tag}"
    ensure_topics(KafkaClients(b), {src: PARTS, out: PARTS})
    lines = make_sentences(n, 2)
    produce(b, src, lines)
    script = tmp / "quix_app.py"
    script.write_text(QUIX_APP)
    watch = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False})
    say(f"quix: {n:,} sentences, at-least-once ...")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(script), b, src, out, group],
                            stdout=open(tmp / "quix.log", "wb"),  # noqa: SIM115
                            stderr=subprocess.STDOUT, preexec_fn=die_with_parent, cwd=tmp)
    try:
        deadline = time.monotonic() + 600
        first = tenth = None
        while (done := committed(watch, src)) < n:
            now = time.perf_counter()
            if first is None and done > 0:
                first = now
            if tenth is None and done >= n // 10:
                tenth, at_tenth = now, done
            if proc.poll() is not None:
                raise RuntimeError("quix exited:\n" + (tmp / "quix.log").read_text()[-2000:])
            if time.monotonic() > deadline:
                raise RuntimeError("quix did not finish in 600 s")
            time.sleep(0.05)
        end = time.perf_counter()
        first = first or end
        if tenth is None:
            tenth, at_tenth = first, 0
        # Too few commits to see a rate between them: not a figure.
        rate = (n - at_tenth) / (end - tenth) if end - tenth >= 1.0 else nan
        say(f"quix: {rate:,.0f} sentences/s steady; start-up {first - t0:.1f} s; "
            f"{n / (end - t0):,.0f}/s with it")
        return {"rate": rate, "startup_s": first - t0}
    finally:
        watch.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--warmup", type=int, default=5_000)
    ap.add_argument("--baseline-sentences", type=int, default=30_000)
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--max-rows-per-batch", type=int, default=2_000,
                    help="edge messages per bolt micro-batch (the bolts job's default)")
    ap.add_argument("--trigger-ms", type=int, default=50, help="micro-batch interval")
    ap.add_argument("--exact", action="store_true",
                    help="count into Trident state (a persistent aggregate on SQLite)")
    ap.add_argument("--latency-rate", type=float, default=None,
                    help="sentences/s for the latency phase (default: half the measured rate)")
    ap.add_argument("--max-spout-pending", type=int, default=200_000,
                    help="trees in flight (Storm's topology.max.spout.pending): the rate is "
                         "at most this over the round trip, so a low bound measures it")
    ap.add_argument("--profile", type=Path, default=None, metavar="DIR",
                    help="py-spy the processes, and Flight Recorder the bolts JVM, over one "
                         "phase (collapsed stacks per process and jvm.jfr into DIR; see "
                         "docs/performance.md)")
    ap.add_argument("--variants", default="windowed,sink,sink_exactly_once",
                    help="other topologies measured beside it, comma-separated, from "
                         f"{', '.join(VARIANTS)} (empty: none)")
    ap.add_argument("--variant-sentences", type=int, default=30_000)
    ap.add_argument("--api", choices=["tuple", "vectorized", "both", "join", "all"],
                    default="both",
                    help="the word count's bolts: vectorized (Arrow), Storm's per-tuple "
                    "BasicBolt / Bolt, or both (the headline is the vectorized); join: the "
                    "per-tuple split into a multi-anchoring join; all: the three")
    ap.add_argument("--profile-phase", choices=["throughput", "latency"],
                    default="throughput",
                    help="the phase --profile records: the burst, or the paced half rate "
                         "(where the latency's tail is)")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}: choose from {', '.join(VARIANTS)}")
    if args.profile and not (Path(sys.executable).parent / "py-spy").exists():
        ap.error("--profile needs py-spy beside this Python: pip install -e '.[profile]'")
    with tempfile.TemporaryDirectory() as tmpdir, \
            EmbeddedStack(StackSettings(home=Path(tmpdir) / "stack")) as info:
        tmp = Path(tmpdir)
        apis = {"both": ["vectorized", "tuple"], "all": ["vectorized", "tuple", "join"]
                }.get(args.api, [args.api])
        runs = {api: run_squall(info.bootstrap_servers, tmp, args.sentences, args.warmup,
                                args.max_rows_per_batch, args.trigger_ms,
                                args.latency_rate, args.exact, args.profile,
                                args.max_spout_pending, args.profile_phase, api)
                for api in apis}
        sq = runs[apis[0]]
        others = {v: run_variant(info.bootstrap_servers, tmp, v, args.variant_sentences,
                                 args.warmup, args.max_rows_per_batch, args.trigger_ms)
                  for v in variants}
        base = {"rate": float("nan"), "startup_s": float("nan")} if args.skip_baseline \
            else run_quix(info.bootstrap_servers, tmp, args.baseline_sentences)
    ratio = sq["sentences_per_s"] / base["rate"] if base["rate"] == base["rate"] else None
    print(json.dumps({
        "sentences_per_s": round(sq["sentences_per_s"]),
        "complete_latency_p50_s": round(sq["p50"], 3),
        "complete_latency_p99_s": round(sq["p99"], 3),
        "acker_latency_p50_s": round(sq["acker_p50"], 3),
        "acker_latency_p99_s": round(sq["acker_p99"], 3),
        "batch_p50_s": round(sq["batch_p50"], 3), "batch_p99_s": round(sq["batch_p99"], 3),
        "baseline_sentences_per_s": None if ratio is None else round(base["rate"]),
        "x_baseline": None if ratio is None else round(ratio, 1),
        "startup_s": round(sq["startup_s"], 1),
        "baseline_startup_s": None if ratio is None else round(base["startup_s"], 1),
        "latency_sentences_per_s": round(sq["latency_rate"]), "sentences": args.sentences,
        "trigger_ms": args.trigger_ms, "exact": args.exact,
        "max_spout_pending": args.max_spout_pending,
        **{k: round(v, 1) for k, v in sq.items() if k.startswith(("cpu_s_", "wall_s"))},
        **{f"{v}_sentences_per_s": round(r) for v, r in others.items()},
        "variant_sentences": args.variant_sentences if others else None,
        "api": apis[0],
        **{f"{api}_sentences_per_s": round(r["sentences_per_s"]) for api, r in runs.items()},
        **{f"{api}_bolts_cpu_us_per_word": round(r["bolts_cpu_us_per_word"], 2)
           for api, r in runs.items()},
        **{f"{api}_complete_latency_p99_s": round(r["p99"], 3) for api, r in runs.items()},
        "tuple_to_vectorized": round(runs["tuple"]["sentences_per_s"]
                                     / runs["vectorized"]["sentences_per_s"], 3)
        if {"tuple", "vectorized"} <= set(runs) else None,
    }))


if __name__ == "__main__":
    main()
