"""``python -m services.bolts`` / ``squall bolts``: run a topology's bolts on Spark."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from services.bolts.job import BoltJob
from services.bolts.metrics import BoltMetrics
from services.bolts.settings import parse_args
from services.common import run_service


def main(argv: Sequence[str] | None = None) -> int:
    return run_service("bolts", lambda: parse_args(argv),
                       lambda s, registry, errors: BoltJob(
                           s, BoltMetrics(registry, s.spec().name, errors)))


if __name__ == "__main__":
    sys.exit(main())
