"""A class data sharing archive for the bolts' Spark driver: its start-up halved.

A Spark driver loads and verifies some 20,000 classes before its first micro-batch. The
JVM can map them from an archive instead (class data sharing, JDK 13+'s dynamic
archives): measured here, JVM + SparkContext + first job 6.1 s -> 2.9 s. The archive is
made once per machine by a training driver that does what a bolts job does at start
(``python -m services.bolts.cds``; ``scripts/setup.sh`` runs it): the JVM writes the
classes it loaded when it exits. It is keyed by the JDK, PySpark and the driver's class
path; a driver finds it by that key. Without one the driver starts as before, and a JVM
that finds an archive stale says so and runs without it. Each archive names the PySpark it
was made for (``.owner`` beside it); making one removes those whose PySpark is gone (a
deleted venv or clone), ~170 MB each.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from services.bolts.runtime.archive import OWNER, archive_path, prune_archives
from services.bolts.runtime.session import spark_session
from services.bolts.settings import JAVA_OPTIONS
from services.bolts.warm import warm_planning, warm_up


def make_archive(cache: Path | None = None, say: bool = True) -> Path | None:
    """Run a training driver that writes the archive at its exit; its path (None without
    a JDK). Already there: nothing to make (orphaned archives are removed either way)."""
    import pyspark


    path = archive_path(cache)
    if path is None:
        return None
    for gone in prune_archives(path.parent, keep=path):
        if say:
            print(f"removed {gone} (its PySpark is gone)", file=sys.stderr, flush=True)
    if path.exists():
        return path
    t0 = time.monotonic()
    if say:
        print(f"writing the Spark driver's class archive {path} (once) ...", file=sys.stderr,
              flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        out = Path(tmp) / "driver.jsa"
        spark = spark_session("local[*]", "squall-cds",
                              java_options=f"{JAVA_OPTIONS} -XX:ArchiveClassesAtExit={out}")
        warm_up(spark, [])
        warm_planning(spark, Path(tmp) / "checkpoint")
        gateway = spark.sparkContext._gateway
        spark.stop()
        # The JVM writes the archive as it exits: it exits when its stdin closes.
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(300)
        if not out.exists():
            raise RuntimeError("the training driver exited without writing its archive")
        path.with_suffix(OWNER).write_text(pyspark.__file__ or "")
        out.rename(path)  # atomic: a job never maps half an archive
    if say:
        print(f"done ({time.monotonic() - t0:.0f} s, "
              f"{path.stat().st_size / 2**20:.0f} MiB)", file=sys.stderr, flush=True)
    return path


def main() -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m services.bolts.cds",
        description="Write the class data sharing archive that halves a bolts job's Spark "
        "start-up (once per machine: JDK, PySpark and class path; kept in "
        "$XDG_CACHE_HOME/squall or ~/.cache/squall).")
    p.add_argument("--cache", type=Path, help="where to keep it (default: the cache above)")
    args = p.parse_args()
    path = make_archive(args.cache)
    if path is None:
        print("no JDK found: no archive", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
