"""``python -m services.api`` / ``squall api``: the REST API on uvicorn."""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Sequence

from services.api.settings import parse_args
from squall.core.errors import SquallError


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn

    from services.api.app import create_app
    from services.api.control import Control

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = parse_args(argv)
        control = Control(settings)
    except SquallError as e:
        print(f"squall api: error: {e}", file=sys.stderr)
        return 2
    control.start()
    # A full collection walks every object the API holds (its mirrors of ZooKeeper, FastAPI's
    # models) and stalled the reads' p99 by tens of ms: collections made rarer, and what
    # start-up made moved out of the collector's sight (freed by reference counting still).
    gc.set_threshold(50_000, 20, 20)
    app = create_app(control, settings)
    gc.freeze()
    try:
        # uvicorn handles SIGTERM / SIGINT: it stops accepting, finishes requests, returns.
        uvicorn.run(app, host=settings.host, port=settings.port,
                    log_level="info", timeout_graceful_shutdown=10,
                    ssl_certfile=settings.tls_cert, ssl_keyfile=settings.tls_key)
    finally:
        control.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
