"""The CLI's commands about single messages: ``squall trace`` (where is my message?) and
``squall dead-letters list|show|replay``, through the REST API."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from squall.cli_common import api_client, show


def message_commands(sub: Any, client_opts: Callable[[argparse.ArgumentParser], None]
                     ) -> None:
    """Add ``trace`` and ``dead-letters`` to the CLI's subcommands."""
    tr = sub.add_parser("trace", help="where is my message: a source message's state "
                        "(pending, failed and why, committed, dead-lettered, ...)")
    tr.add_argument("topic", help="the source topic")
    tr.add_argument("partition", type=int)
    tr.add_argument("offset", type=int)
    tr.add_argument("--topology", help="topology id or name (default: the one topology "
                    "that reads the topic)")
    client_opts(tr)
    tr.set_defaults(func=cmd_trace)
    dl = sub.add_parser("dead-letters", help="a topology's dead letters: list them, show "
                        "one, send chosen ones back (each at most once)")
    dl.add_argument("action", choices=("list", "show", "replay"))
    dl.add_argument("offsets", type=int, nargs="*",
                    help="show / replay: letters by their offset in the dead-letter topic")
    dl.add_argument("--topology", required=True, help="topology id or name")
    dl.add_argument("--reason", default=None,
                    help="list / replay: those whose reason contains this text")
    dl.add_argument("--limit", type=int, default=100, help="list: at most so many, newest first")
    dl.add_argument("--all", action="store_true",
                    help="replay: every letter (of the newest 10,000), not by offset or reason")
    dl.add_argument("--dry-run", action="store_true",
                    help="replay: send nothing, say what would be sent")
    client_opts(dl)
    dl.set_defaults(func=cmd_letters)


def cmd_trace(args: argparse.Namespace) -> int:
    """Where is my message: its state, in a sentence (or the whole answer with --json)."""
    c = api_client(args)
    tid = args.topology
    if tid is None:
        readers = [t["id"] for t in c.topologies()
                   if args.topic in {tp for s in c.topology(t["id"])["spec"]["spouts"]
                                     for tp in s["topics"]}]
        if len(readers) != 1:
            print(f"squall trace: {len(readers)} topologies read {args.topic!r}"
                  + (f" ({', '.join(readers)})" if readers else "")
                  + ": name one with --topology", file=sys.stderr)
            return 2
        tid = readers[0]
    got = c.message(tid, args.topic, args.partition, args.offset)
    show(args, got, lambda g: str(g["summary"]))
    return 0


def cmd_letters(args: argparse.Namespace) -> int:
    """``squall dead-letters list|show|replay``."""
    c = api_client(args)
    if args.action == "list":
        show(args, c.dead_letters(args.topology, args.reason or "", 0, args.limit),
             _letter_table)
        return 0
    if args.action == "show":  # a letter is its payload and headers: JSON either way
        for n in args.offsets:
            print(json.dumps(c.dead_letter(args.topology, n), indent=2))
        return 0
    if args.reason == "":
        print("squall dead-letters replay: --reason needs text (--all replays every letter)",
              file=sys.stderr)
        return 2
    if not args.offsets and args.reason is None and not args.all:
        print("squall dead-letters replay: name letters (their offsets), --reason or --all",
              file=sys.stderr)
        return 2
    got = c.replay(args.topology, args.offsets, args.reason, args.all, args.dry_run)
    if args.output == "json":
        print(json.dumps(got, indent=2))
    elif args.dry_run:
        print(f"would replay {len(got['would_replay'])}, replayed before "
              f"{len(got['already'])}, refused {len(got['refused'])} (a dry run: nothing "
              "sent)")
        for r in got["would_replay"]:
            print(f"  {r['dlq_offset']} -> {r['topic']}[{r['partition']}]")
        for r in got["refused"]:
            print(f"  {r['dlq_offset']}: would not be replayed: {r['why']}")
    else:
        print(f"replayed {len(got['replayed'])}, replayed before {len(got['already'])}, "
              f"refused {len(got['refused'])}")
        for r in got["replayed"]:
            print(f"  {r['dlq_offset']} -> {r['replayed_to']}")
        for r in got["refused"]:
            print(f"  {r['dlq_offset']}: not replayed: {r['why']}")
    return 0 if not got["refused"] else 1


def _letter_table(got: dict[str, Any]) -> str:
    from squall.client import format_table

    rows = [("offset", "when (UTC)", "from", "attempts", "replayed to", "reason")] + [
        (str(r["dlq_offset"]), time.strftime("%Y-%m-%d %H:%M:%S",
                                             time.gmtime(r["time_ms"] / 1000)),
         f"{r['topic']}[{r['partition']}]@{r['offset']}", str(r["attempts"]),
         r["replayed_to"] or "", r["reason"][:80]) for r in got["letters"]]
    return f"{got['total']} dead letters" + "".join(
        f"; {n} {k}" for k, n in sorted(got["by_reason"].items())) + "\n" + format_table(rows)
