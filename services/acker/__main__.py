"""``python -m services.acker`` / ``squall acker``: load settings, run, drain on SIGTERM."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from services.acker.metrics import AckerMetrics
from services.acker.service import AckerService
from services.acker.settings import parse_args
from services.common import run_service


def main(argv: Sequence[str] | None = None) -> int:
    return run_service(
        "acker", lambda: parse_args(argv),
        lambda s, registry, errors: AckerService(s, AckerMetrics(registry, s.topology, errors)))


if __name__ == "__main__":
    sys.exit(main())
