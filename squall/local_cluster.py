"""``squall run``: one topology on this machine, as Storm's LocalCluster runs one.

Its processes come from :mod:`squall.launch`; without ``--bootstrap-servers`` it starts the
embedded broker and ZooKeeper first (dev tooling, which is why this is not in ``launch``:
the worker imports ``launch`` and services never depend on dev tooling).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from squall.core.errors import SquallError
from squall.core.topology.model import TopologySpec
from squall.dev.stack import EmbeddedStack, StackSettings
from squall.launch import spout_acked, start_topology, stop_topology


@contextlib.contextmanager
def broker(bootstrap: str | None, workdir: Path) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    with EmbeddedStack(StackSettings(home=workdir / "stack")) as info:
        yield info.bootstrap_servers


def run(topology_file: Path, bootstrap: str | None, workdir: Path, master: str) -> int:
    try:
        spec = TopologySpec.from_text(topology_file.read_text())
    except OSError as e:
        raise SquallError(f"cannot read {topology_file}: {e}") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with broker(bootstrap, workdir) as servers:
        print(f"topology {spec.name!r} on {servers}; logs in {workdir}", file=sys.stderr)
        sup = start_topology(spec, topology_file.resolve(), servers, workdir, master)
        try:
            last = -1.0
            while not stop.wait(1.0):
                for exit_ in sup.check().exits:
                    print(f"\n{time.strftime('%H:%M:%S')}  {exit_}", file=sys.stderr,
                          flush=True)
                acked = spout_acked(sup)
                if acked != last:
                    print(f"\r{time.strftime('%H:%M:%S')}  source messages fully processed: "
                          f"{acked:,.0f}", end="", file=sys.stderr, flush=True)
                    last = acked
        finally:
            print("\nstopping: the spouts drain, then the bolts and ackers stop", file=sys.stderr)
            stop_topology(sup)
    return 0
