"""``python -m services.spout`` / ``squall spout``: load settings, run, drain on SIGTERM."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from services.common import run_service
from services.spout.metrics import SpoutMetrics
from services.spout.service import SpoutService
from services.spout.settings import parse_args


def main(argv: Sequence[str] | None = None) -> int:
    return run_service(
        "spout", lambda: parse_args(argv),
        lambda s, registry, errors: SpoutService(
            s, SpoutMetrics(registry, s.topology, s.component, errors)))


if __name__ == "__main__":
    sys.exit(main())
