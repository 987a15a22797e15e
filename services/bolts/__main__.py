"""``python -m services.bolts`` / ``squall bolts``: run a topology's bolts on Spark."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from services.bolts.job import BoltJob, BoltSettings
from services.bolts.metrics import BoltMetrics
from services.common import load_settings, run_service


def parse_args(argv: Sequence[str] | None = None) -> BoltSettings:
    p = argparse.ArgumentParser(
        prog="squall bolts",
        description="Run a topology's bolts as Spark Structured Streaming queries. Every flag "
        "can also be set as SQUALL_BOLTS_<NAME>.")
    p.add_argument("--topology-file", help="the topology, JSON or YAML")
    p.add_argument("--components", help="bolts to run, comma separated (default: all)")
    p.add_argument("--bootstrap-servers")
    p.add_argument("--master", help="Spark master (default local[*]; or spark://host:7077)")
    p.add_argument("--checkpoint-dir")
    p.add_argument("--max-rows-per-batch", type=int, help="Kafka messages per micro-batch")
    p.add_argument("--trigger-ms", type=int, help="micro-batch interval")
    p.add_argument("--metrics-port", type=int)
    p.add_argument("--sink", choices=["foreach_batch", "writer"],
                   help="foreachBatch + mapInArrow (default) or the data source writer")
    p.add_argument("--checkpoint-fs", choices=["no-fork", "hadoop"],
                   help="local checkpoints without Hadoop's forked chmod/readlink (no-fork, "
                   "the default; compiled once with javac) or Hadoop's own")
    p.add_argument("--java-options",
                   help="JVM flags of the Spark driver and executors, as one string "
                   "(--java-options='-Xmx2g'); default: the JVM's own")
    p.add_argument("--fuse", action=argparse.BooleanOptionalAction, default=None,
                   help="run a bolt whose only input is another bolt of this job in that "
                   "bolt's query, one micro-batch per tree instead of two (default: on; "
                   "foreach_batch sink only)")
    p.add_argument("--conf", action="append", dest="spark_conf", metavar="KEY=VALUE",
                   help="any other Spark setting, as spark-submit's (repeatable; applied last)")
    return load_settings(BoltSettings, p, argv, "bolts")


def main(argv: Sequence[str] | None = None) -> int:
    return run_service("bolts", lambda: parse_args(argv),
                       lambda s, registry: BoltJob(s, BoltMetrics(registry, s.spec().name)))


if __name__ == "__main__":
    sys.exit(main())
