"""A spare bolts process: Spark started and warm before any topology.

A bolts job spends most of its start-up in Spark: the session (the JVM, the context, the
first SQL use), the first query planning (a Python data source registered, its schema
asked for) and the Python workers' first start. A bolts worker that runs no bolts job
keeps one spare process that has done all three (``services.worker``); the next bolts job
assigned to the worker is handed to it, as the job's flags written into the spare's
handoff file (:func:`squall.handoff.hand_off`), and the spare runs it as
``python -m services.bolts`` would, on the session it has. Its metrics are served on the
spare's port from then on.

A job whose Spark settings differ from the spare's (master, JVM flags, ``--conf``) does
not get the spare's session: the spare stops it and the job starts its own.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from services.bolts.job import BoltJob
from services.bolts.metrics import BoltMetrics
from services.bolts.runtime.session import fencing, spark_session
from services.bolts.settings import SpareSettings, parse_args, parse_spare_args
from services.bolts.warm import warm_planning, warm_up
from services.common import run_service
from squall.core.control.error_reports import ErrorReports
from squall.handoff import wait_for_handoff

log = logging.getLogger("squall.bolts.spare")


class SpareJob:
    def __init__(self, settings: SpareSettings, registry: CollectorRegistry,
                 errors: ErrorReports) -> None:
        self.s = settings
        self.registry = registry
        self.errors = errors

    def run(self, stop: threading.Event) -> None:
        t0 = time.monotonic()
        spark = spark_session(self.s.master, "squall-bolts", self.s.checkpoint_fs == "no-fork",
                              self.s.java_options, self.s.conf(), fencing(self.s),
                              self.s.spark_security)
        log.info("spare: Spark session started (%.1f s)", time.monotonic() - t0)
        t1 = time.monotonic()
        warm_planning(spark)
        log.info("spare: query planning warm (%.1f s); warming the Python workers",
                 time.monotonic() - t1)
        threading.Thread(target=self._warm_up, args=(spark,), daemon=True,
                         name="spare-warm-up").start()
        args = wait_for_handoff(self.s.handoff_file, stop)
        if args is None:
            spark.stop()
            return
        job = parse_args(args)  # its metrics: the registry this process serves already
        if job.session_shape() != self.s.session_shape():
            log.info("spare: the job's Spark settings differ from the spare's; it starts "
                     "its own session")
            spark.stop()
            spark = None
        log.info("spare: running the bolts of %s", job.topology_file)
        BoltJob(job, BoltMetrics(self.registry, job.spec().name, self.errors), spark).run(stop)

    def _warm_up(self, spark: object) -> None:
        t0 = time.monotonic()
        try:
            warm_up(spark, [], self.s.bootstrap_servers)
            log.info("spare: Python workers warm (%.1f s)", time.monotonic() - t0)
        except Exception as e:  # the job warms them again anyway
            log.warning("spare: warming the Python workers failed: %s", e)


def main(argv: Sequence[str] | None = None) -> int:
    return run_service("spare bolts", lambda: parse_spare_args(argv), SpareJob)


if __name__ == "__main__":
    sys.exit(main())
