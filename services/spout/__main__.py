"""``python -m services.spout`` / ``squall spout``: load settings, run, drain on SIGTERM."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, start_http_server

from services.spout.metrics import SpoutMetrics
from services.spout.service import SpoutService
from services.spout.settings import parse_args
from squall.errors import SquallError


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = parse_args(argv)
        registry = CollectorRegistry()
        metrics = SpoutMetrics(registry, settings.topology, settings.component)
        if settings.metrics_port:
            start_http_server(settings.metrics_port, settings.metrics_host, registry=registry)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        SpoutService(settings, metrics).run(stop)
    except SquallError as e:
        print(f"squall spout: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
