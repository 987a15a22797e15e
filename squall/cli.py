"""The ``squall`` command."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from squall import __version__
from squall.cli_common import api_client as _client
from squall.cli_common import client_opts, read_file, show
from squall.cli_messages import message_commands
from squall.cli_ops import ops_commands
from squall.core.errors import SquallError

if TYPE_CHECKING:
    from squall.client import ApiClient


def _stack_settings(args: argparse.Namespace, detached: bool) -> object:
    from squall.dev.stack import StackSettings

    return StackSettings(home=Path(args.home), brokers=args.brokers,
                         kafka_port=args.kafka_port, zk_port=args.zk_port,
                         java=args.java, start_timeout_s=args.timeout, detached=detached,
                         postgres=args.postgres, postgres_port=args.postgres_port)


def cmd_dev_up(args: argparse.Namespace) -> int:
    from squall.dev.stack import EmbeddedStack, StackSettings

    settings = _stack_settings(args, detached=not args.foreground)
    assert isinstance(settings, StackSettings)
    stack = EmbeddedStack(settings)
    what = "Apache Kafka" + (f" ({settings.brokers} brokers)" if settings.brokers > 1 else "")
    print(f"starting {what}, ZooKeeper" + (" and PostgreSQL" if settings.postgres else "")
          + " ...", file=sys.stderr)
    info = stack.start()
    env = stack.home / "env"
    env.write_text(f"export SQUALL_BOOTSTRAP_SERVERS={info.bootstrap_servers}\n"
                   f"export SQUALL_ZOOKEEPER={info.zookeeper}\n"
                   + (f"export SQUALL_STATE_URL={info.postgres}\n" if info.postgres else ""))
    for p in info.processes:
        print(f"{p.name:<10} {'127.0.0.1:' + str(p.port):<18} pid {p.pid:<8} log {p.log}")
    print(f"environment for other shells: source {env}")
    if not args.foreground:
        print("stop with: squall dev down")
        return 0
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("running; Ctrl-C stops it", file=sys.stderr)
    stop.wait()
    stack.stop()
    print("stopped", file=sys.stderr)
    return 0


def cmd_dev_down(args: argparse.Namespace) -> int:
    from squall.dev.stack import EmbeddedStack, StackSettings, load_state

    home = Path(args.home)
    if load_state(home.resolve()) is None:
        print(f"no stack is running from {home}")
        return 0
    EmbeddedStack(StackSettings(home=home)).stop()
    print("stopped")
    return 0


def cmd_dev_status(args: argparse.Namespace) -> int:
    from squall.dev.stack import status

    rows = status(Path(args.home))
    if not rows:
        print(f"no stack is running from {args.home}")
        return 1
    for p, alive in rows:
        print(f"{p.name:<10} 127.0.0.1:{p.port:<8} pid {p.pid:<8} "
              f"{'running' if alive else 'DEAD (see ' + p.log + ')'}")
    return 0 if all(a for _, a in rows) else 1


def cmd_dev_smoke(args: argparse.Namespace) -> int:
    from squall.dev.smoke import run_smoke
    from squall.dev.stack import StackSettings, load_state, running_stack

    info = load_state(Path(args.home).resolve())
    if info is not None:
        report = run_smoke(info.clients(), trees=args.trees)
    else:
        print("no running stack: starting a temporary one ...", file=sys.stderr)
        with running_stack(StackSettings(home=Path(args.home) / "smoke")) as tmp:
            report = run_smoke(tmp.clients(), trees=args.trees)
    print(f"{report.completed:,} of {report.trees:,} trees completed "
          f"({report.records:,} acker records through Kafka) in {report.seconds:.2f}s",
          file=sys.stderr)
    print(json.dumps(report.as_dict()))
    return 0 if report.completed == report.trees else 1


def cmd_run(args: argparse.Namespace) -> int:
    from squall.local_cluster import run

    return run(Path(args.topology), args.bootstrap_servers, Path(args.workdir), args.master)


def cmd_demo(args: argparse.Namespace) -> int:
    from squall.demo import DemoSettings, run_demo

    if args.sentences is not None and args.sentences < 1:
        raise SquallError(f"--sentences must be >= 1, got {args.sentences}")
    rate = args.rate if args.rate is not None else (0.0 if args.sentences else 2000.0)
    return run_demo(DemoSettings(Path(args.workdir), args.sentences, rate, args.timeout))


def cmd_submit(args: argparse.Namespace) -> int:
    path = Path(args.topology)
    text = read_file(path)
    c = _client(args)
    out = c.submit(text, yaml=path.suffix in (".yaml", ".yml"), activate=not args.inactive,
                   keep_state=args.keep_state)
    if args.output == "json":
        print(json.dumps(out, indent=2))
        return 0
    kept = out.get("state_of")
    print(f"submitted {out.get('name', out['id'])} as {out['id']} ({out['status']})"
          + (f", keeping the state of {kept}" if kept else ""))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from squall.client import format_table

    show(args, _client(args).topologies(), lambda ts: format_table(
        [("name", "id", "status", "uptime s", "version")] + [
            (t.get("name", t["id"]), t["id"], t["status"], f"{t['uptime_s']:.0f}",
             str(t["version"])) for t in ts]))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from squall.client import crash_loops, format_table, status_rows

    c = _client(args)
    while True:
        st = c.storm_topology(args.id)
        if args.output == "json":
            print(json.dumps(st, indent=2), flush=True)
            if not args.watch:
                return 0
            threading.Event().wait(args.watch)
            continue
        table = "\n".join([f"{st['id']}  {st['status']}  up {st['uptimeSeconds']}s  "
                           f"workers {st['workersTotal']}", format_table(status_rows(st)),
                           *crash_loops(st)])
        if not args.watch:
            print(table)
            return 0
        print("\x1b[2J\x1b[H" + table, flush=True)  # clear the screen: a live table
        threading.Event().wait(args.watch)


def cmd_operate(args: argparse.Namespace) -> int:
    c = _client(args)
    par: dict[str, int] = {}
    for item in getattr(args, "parallelism", None) or []:
        name, _, n = item.partition("=")
        if not (n.isascii() and n.isdigit()):
            raise SquallError(f"-p expects component=N, got {item!r}")
        par[name] = int(n)
    out = c.operate(args.id, args.command, getattr(args, "wait", None), par,
                    getattr(args, "purge_state", False))
    print(json.dumps(out, indent=2) if args.output == "json" else
          f"{out['id']}: {out['status']}")
    if getattr(args, "follow", False):
        return _follow_teardown(c, str(out["id"]), float(out.get("deadline_ms") or 0) / 1000)
    return 0


def _follow_teardown(c: ApiClient, tid: str, deadline_s: float) -> int:
    """Wait out the kill: the drain, then the teardown; say what it removed."""
    give_up = max(deadline_s, time.time()) + 300
    said = ""
    while time.time() < give_up:
        t = c.teardown(tid)
        now = ("draining" if t is None else "removing what it owned" if not t["done"]
               else "")
        if t is not None and t["done"]:
            print(f"teardown: {t['summary']}")
            return 0
        if now != said:
            print(f"{tid}: {now}" + (f" ({t['error']})" if t and t.get("error") else ""),
                  file=sys.stderr)
            said = now
        time.sleep(1)
    print(f"{tid}: the teardown did not finish in time (GET /teardowns/{tid})", file=sys.stderr)
    return 1


def cmd_completion(args: argparse.Namespace) -> int:
    import shtab

    print(shtab.complete(build_parser(), shell=args.shell))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="squall",
        description="Storm's guaranteed message processing on Kafka and Spark.",
    )
    p.add_argument("--version", action="version", version=f"squall {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = sub.add_parser("dev", help="the development stack (Apache Kafka + ZooKeeper)")
    dsub = dev.add_subparsers(dest="dev_command", required=True, metavar="ACTION")

    def stack_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--home", default=".squall/dev", help="state, data and log directory")

    up = dsub.add_parser("up", help="start Apache Kafka and ZooKeeper on loopback ports")
    stack_opts(up)
    up.add_argument("--brokers", type=int, default=1, metavar="N",
                    help="Kafka brokers: 1, or 3 for topics replicated three times with "
                    "min.insync.replicas 2")
    up.add_argument("--kafka-port", type=int, default=0,
                    help="the first broker's port (0: a free one)")
    up.add_argument("--zk-port", type=int, default=0, help="ZooKeeper port (0: a free one)")
    up.add_argument("--java", default=None, help="java binary (default: JAVA_HOME, then PATH)")
    up.add_argument("--timeout", type=float, default=60.0, help="start-up timeout, seconds")
    up.add_argument("--foreground", action="store_true", help="run until Ctrl-C")
    up.add_argument("--postgres", action="store_true",
                    help="also PostgreSQL, for Trident state (Debian's postgresql package)")
    up.add_argument("--postgres-port", type=int, default=0,
                    help="PostgreSQL port (0: a free one)")
    up.set_defaults(func=cmd_dev_up)

    down = dsub.add_parser("down", help="stop the stack started by 'squall dev up'")
    stack_opts(down)
    down.set_defaults(func=cmd_dev_down)

    st = dsub.add_parser("status", help="show what runs where (exit 1 if not all running)")
    stack_opts(st)
    st.set_defaults(func=cmd_dev_status)

    sm = dsub.add_parser("smoke", help="send tuple trees through a real acker topic")
    stack_opts(sm)
    sm.add_argument("--trees", type=int, default=10_000, help="tuple trees to send")
    sm.set_defaults(func=cmd_dev_smoke)
    rn = sub.add_parser("run", help="run a topology (JSON / YAML) as local processes")
    rn.add_argument("topology", help="topology file, JSON or YAML")
    rn.add_argument("--bootstrap-servers", default=None,
                    help="Kafka to use (default: start the embedded stack)")
    rn.add_argument("--workdir", default=".squall/run", help="logs and Spark checkpoints")
    rn.add_argument("--master", default="local[*]", help="Spark master for the bolts")
    rn.set_defaults(func=cmd_run)

    dm = sub.add_parser("demo", help="the word count on the embedded stack, over the REST API")
    dm.add_argument("--sentences", type=int, default=None,
                    help="feed N sentences, end once all are processed, print a JSON summary "
                    "(default: feed until Ctrl-C)")
    dm.add_argument("--rate", type=float, default=None,
                    help="sentences per second (default: 2,000 without --sentences, else as "
                    "fast as possible)")
    dm.add_argument("--timeout", type=float, default=600.0,
                    help="give up after this many seconds (with --sentences)")
    dm.add_argument("--workdir", default=".squall/demo", help="logs, state (wiped at start)")
    dm.set_defaults(func=cmd_demo)

    sb = sub.add_parser("submit", help="submit a topology (JSON / YAML) to the API")
    sb.add_argument("topology", help="topology file")
    sb.add_argument("--inactive", action="store_true", help="submit deactivated")
    sb.add_argument("--keep-state", nargs="?", const="", metavar="KILLED",
                    help="keep the Trident state of a killed submission and start where its "
                         "spouts got to (KILLED: its id or name; default this topology's "
                         "name); refused if the topology changed what the state depends on")
    client_opts(sb)
    sb.set_defaults(func=cmd_submit)
    ls = sub.add_parser("list", help="list topologies")
    client_opts(ls)
    ls.set_defaults(func=cmd_list)
    stt = sub.add_parser("status", help="a topology's emitted / acked / failed / latency")
    stt.add_argument("id", help="topology id")
    stt.add_argument("--watch", type=float, default=0, metavar="S",
                     help="refresh every S seconds (a live table)")
    client_opts(stt)
    stt.set_defaults(func=cmd_status)
    message_commands(sub, client_opts)
    ops_commands(sub, client_opts)
    co = sub.add_parser("completion", help="print the shell's completion script: "
                        'eval "$(squall completion bash)"')
    co.add_argument("shell", choices=("bash", "zsh", "tcsh"))
    co.set_defaults(func=cmd_completion)
    for op, what in (("activate", "spouts emit"), ("deactivate", "spouts stop; trees drain"),
                     ("rebalance", "drain, then apply new executors (a spout's parallelism, a "
                      "bolt's executors)"),
                     ("kill", "spouts stop, trees drain, then the topology is removed")):
        o = sub.add_parser(op, help=f"{op} a topology: {what}")
        o.add_argument("id", help="topology id, or the name of a live topology")
        if op in ("rebalance", "kill"):
            o.add_argument("--wait", type=float, default=None,
                           help="drain seconds (default: the message timeout)")
        if op == "kill":
            o.add_argument("--follow", action="store_true",
                           help="wait for the drain and the teardown, and say what it removed")
            o.add_argument("--purge-state", action="store_true",
                           help="delete its Trident state and dead letters too (kept by "
                           "default)")
        if op == "rebalance":
            o.add_argument("-p", "--parallelism", action="append", metavar="COMPONENT=N",
                           help="a spout's new parallelism, or a bolt's executors (1..its "
                           "tasks), as Storm's rebalance -e (repeatable)")
        client_opts(o)
        o.set_defaults(func=cmd_operate)

    sub.add_parser("api", help="serve the REST API (see: squall api --help)", add_help=False)
    sub.add_parser("worker", help="run a worker (see: squall worker --help)", add_help=False)
    sub.add_parser("acker", help="run acker tasks (see: squall acker --help)", add_help=False)
    sub.add_parser("spout", help="run spout tasks (see: squall spout --help)", add_help=False)
    sub.add_parser("bolts", help="run bolts on Spark (see: squall bolts --help)", add_help=False)
    return p


# Service commands parse their own flags (and env); `squall acker --help` shows them.
_SERVICES = {"acker": "services.acker", "spout": "services.spout", "bolts": "services.bolts",
             "api": "services.api", "worker": "services.worker"}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _SERVICES:
        # A service is a program of its own: it runs in this process's place (same pid,
        # same signals), and the shell never imports the services above it.
        os.execv(sys.executable, [sys.executable, "-m", _SERVICES[argv[0]], *argv[1:]])
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SquallError as e:
        print(f"squall: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
