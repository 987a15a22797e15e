"""The CLI's commands for a bad day, through the REST API: ``squall workers``, ``errors``,
``lag``, ``logs``; and one that needs no API: ``validate`` (a spec checked as a submit
checks it, and its classes imported)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from squall.cli_common import api_client, read_file, show


def ops_commands(sub: Any, client_opts: Callable[[argparse.ArgumentParser], None]) -> None:
    wk = sub.add_parser("workers", help="the live workers and every process they run")
    client_opts(wk)
    wk.set_defaults(func=cmd_workers)

    er = sub.add_parser("errors", help="a topology's last errors, newest first")
    er.add_argument("id", help="topology id or name")
    er.add_argument("--component", default=None, help="this component's only")
    er.add_argument("--limit", type=int, default=20, help="at most so many (default 20)")
    client_opts(er)
    er.set_defaults(func=cmd_errors)

    lg = sub.add_parser("lag", help="a topology's spouts' lag per partition, from Kafka "
                        "(messages, and the oldest waiting message's age)")
    lg.add_argument("id", help="topology id or name")
    client_opts(lg)
    lg.set_defaults(func=cmd_lag)

    lo = sub.add_parser("logs", help="the log of a component's processes, from their workers")
    lo.add_argument("id", help="topology id or name")
    lo.add_argument("component", help="a spout, a bolt, or __acker")
    lo.add_argument("--task", type=int, default=None, help="the process running this task")
    lo.add_argument("--tail", type=int, default=8192, metavar="BYTES",
                    help="how much of each log's end to show first (default 8192)")
    lo.add_argument("-f", "--follow", action="store_true", help="then print what is written")
    client_opts(lo)
    lo.set_defaults(func=cmd_logs)

    va = sub.add_parser("validate", help="check a topology file as a submit would, and "
                        "import its classes, without submitting it")
    va.add_argument("topology", help="topology file, JSON or YAML")
    va.add_argument("--no-import", action="store_true",
                    help="do not import the bolts' classes (they are not installed here)")
    va.set_defaults(func=cmd_validate)

    ac = sub.add_parser("acls", help="the Kafka ACLs a topology's processes need, as "
                        "kafka-acls.sh commands (docs/kafka.md, \"ACLs\")")
    ac.add_argument("topology", help="topology file, JSON or YAML")
    ac.add_argument("--principal", default="User:squall",
                    help="the principal Squall's processes run as (default User:squall)")
    ac.add_argument("--bootstrap-server", default="BROKER:9092",
                    help="put into each command (default BROKER:9092)")
    ac.add_argument("-o", "--output", choices=("commands", "json"), default="commands")
    ac.set_defaults(func=cmd_acls)


def cmd_workers(args: argparse.Namespace) -> int:
    show(args, api_client(args).workers(), _worker_table)
    return 0


def _worker_table(workers: list[dict[str, Any]]) -> str:
    from squall.client import format_table

    rows: list[tuple[str, ...]] = [("worker", "kind", "host", "topology", "component",
                                    "tasks", "restarts", "state", "last exit")]
    for w in sorted(workers, key=lambda w: (w["kind"], w["id"])):
        procs = [e for e in w["running"] if e.get("kind") != "worker"]
        if not procs:
            rows.append((w["id"], w["kind"], w["host"], "-", "-", "", "", "idle", ""))
        for e in sorted(procs, key=lambda e: (e["topology"], e["component"])):
            state = ("stopping" if e.get("stopping") else
                     "CRASH LOOP" if e.get("crashLooping") else "running")
            rows.append((w["id"], w["kind"], w["host"], e["topology"], e["component"],
                         ",".join(str(t) for t in e.get("tasks", ())),
                         str(e.get("restarts", 0)), state,
                         (e.get("lastExit") or "").splitlines()[-1][:60]
                         if e.get("lastExit") else ""))
    return format_table(rows)


def cmd_errors(args: argparse.Namespace) -> int:
    show(args, api_client(args).errors(args.id, args.component, args.limit), _error_table)
    return 0


def _error_table(got: dict[str, Any]) -> str:
    from squall.client import format_table

    if not got["errors"]:
        return "no errors reported"
    rows: list[tuple[str, ...]] = [("when (UTC)", "component", "task", "where", "error")]
    for e in got["errors"]:
        first = (e["error"].strip().splitlines() or [""])[-1]
        rows.append((time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e["time_ms"] / 1000)),
                     e["component"], str(e["task"]) if e["task"] >= 0 else "",
                     f"{e['host']}:{e['port']}", first[:100]))
    return format_table(rows)


def cmd_lag(args: argparse.Namespace) -> int:
    show(args, api_client(args).lag(args.id), _lag_table)
    return 0


def _lag_table(got: dict[str, Any]) -> str:
    from squall.client import format_table

    rows: list[tuple[str, ...]] = [("spout", "topic", "partition", "committed", "end", "lag",
                                    "oldest waiting")]
    for spout, body in sorted(got.items()):
        for topic, parts in sorted(body["spoutLagResult"].items()):
            for part, p in sorted(parts.items(), key=lambda kv: int(kv[0])):
                rows.append((spout, topic, part, f"{p['consumerCommittedOffset']:,}",
                             f"{p['logHeadOffset']:,}", f"{p['lag']:,}",
                             f"{p['lagSeconds']:.1f} s" if p["lag"] else ""))
    return format_table(rows) if len(rows) > 1 else "no committed offsets yet"


def cmd_logs(args: argparse.Namespace) -> int:
    c = api_client(args)
    got = c.logs(args.id, args.component, args.task, tail_bytes=args.tail)
    if args.output == "json" and not args.follow:
        show(args, got, str)
        return 0
    many = len(got["processes"]) > 1
    at: dict[str, int] = {}
    for p in got["processes"]:
        _print_chunk(p, many)
        at[p["process"]] = p["next"]
    while args.follow:
        time.sleep(1)
        for name, offset in list(at.items()):
            more = c.logs(args.id, args.component, process=name, offset=offset)
            for p in more["processes"]:
                if p["next"] < offset:  # a new log: the process was restarted
                    more = c.logs(args.id, args.component, process=name, offset=0)
                    p = more["processes"][0]
                _print_chunk(p, many)
                at[name] = p["next"]
    return 0


def _print_chunk(p: dict[str, Any], prefixed: bool) -> None:
    text = p["text"]
    if prefixed:
        text = "".join(f"{p['process']} | {line}" for line in text.splitlines(keepends=True))
    sys.stdout.write(text)
    sys.stdout.flush()


def cmd_validate(args: argparse.Namespace) -> int:
    import importlib

    from squall.core.topology.model import TopologySpec

    path = Path(args.topology)
    spec = TopologySpec.from_text(read_file(path)).validate()
    problems = []
    if not args.no_import:
        for b in spec.bolts:
            module, _, name = b.cls.partition(":")
            try:
                if not callable(getattr(importlib.import_module(module), name)):
                    problems.append(f"bolt {b.name!r}: {b.cls} is not a class")
            except Exception as e:  # any import failure is the user's to see
                problems.append(f"bolt {b.name!r}: cannot import {b.cls}: "
                                f"{type(e).__name__}: {e}")
    for p in problems:
        print(f"squall validate: {path}: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"{path}: topology {spec.name!r} is valid: {len(spec.spouts)} spout(s), "
          f"{len(spec.bolts)} bolt(s), {spec.ackers} acker task(s)")
    return 0


def cmd_acls(args: argparse.Namespace) -> int:
    from squall.core.control.kafka_acls import topology_acls, unknown_sinks
    from squall.core.topology.model import TopologySpec

    spec = TopologySpec.from_text(read_file(Path(args.topology))).validate()
    acls = topology_acls(spec)
    if args.output == "json":
        print(json.dumps([{"resource": a.resource.value, "pattern": a.pattern.value,
                           "name": a.name, "operation": a.operation.value, "why": a.why}
                          for a in acls], indent=2))
    else:
        why = None
        for a in acls:
            if a.why != why:
                print(f"# {a.why}")
                why = a.why
            print(a.command(args.principal, args.bootstrap_server))
    for name in unknown_sinks(spec):
        print(f"squall acls: Kafka bolt {name!r} picks its topics from a field: grant "
              "Describe and Write on them yourself", file=sys.stderr)
    return 0
