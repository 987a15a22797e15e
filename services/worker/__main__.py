"""``python -m services.worker`` / ``squall worker``: run assigned tasks until SIGTERM."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from services.common import run_service
from services.worker.settings import parse_args
from services.worker.supervisor import WorkerService


def main(argv: Sequence[str] | None = None) -> int:
    return run_service("worker", lambda: parse_args(argv),
                       lambda s, registry, _errors: WorkerService(s, registry))


if __name__ == "__main__":
    sys.exit(main())
