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

import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from services.bolts.driver_classes import cache_home, driver_classes
from services.bolts.settings import JAVA_OPTIONS

#: Flags that choose an archive themselves: a driver started with one is left alone.
_OWN = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare")


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found else None


def archive_path(cache: Path | None = None) -> Path | None:
    """Where the archive for this JDK, PySpark and class path is (made or not); None
    without a JDK."""
    import pyspark

    java = _java()
    if java is None:
        return None
    st = java.stat()
    classes = driver_classes()  # the class path every driver is started with
    key = hashlib.sha256(f"{java}|{st.st_size}|{st.st_mtime_ns}|{pyspark.__version__}|"
                         f"{pyspark.__file__}|{classes}".encode()).hexdigest()[:16]
    return (cache or cache_home()) / f"spark-driver-{key}.jsa"


def with_archive(java_options: str, cache: Path | None = None) -> str:
    """``java_options`` and, if it exists, the archive (unless they choose one)."""
    if any(flag in java_options for flag in _OWN):
        return java_options
    path = archive_path(cache)
    if path is None or not path.exists():
        return java_options
    return f"{java_options} -XX:SharedArchiveFile={path}".strip()


def make_archive(cache: Path | None = None, say: bool = True) -> Path | None:
    """Run a training driver that writes the archive at its exit; its path (None without
    a JDK). Already there: nothing to make (orphaned archives are removed either way)."""
    import pyspark

    from services.bolts.job import spark_session
    from services.bolts.standby import warm_planning, warm_up

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


#: Beside an archive: the PySpark (``pyspark.__file__``) it was made for.
OWNER = ".owner"


def prune_archives(cache: Path, keep: Path) -> list[Path]:
    """Remove the archives in ``cache`` (but ``keep``) whose PySpark no longer exists; the
    removed. An archive that names none (made before owners were written) is kept."""
    gone = []
    for jsa in sorted(cache.glob("spark-driver-*.jsa")):
        owner = jsa.with_suffix(OWNER)
        try:
            made_for = owner.read_text().strip()
        except OSError:
            continue
        if jsa == keep or not made_for or Path(made_for).exists():
            continue
        jsa.unlink(missing_ok=True)
        owner.unlink(missing_ok=True)
        gone.append(jsa)
    return gone


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
