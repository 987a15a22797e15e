"""The bolts driver's own Java classes (``java/*.java``), compiled once into one jar on the
driver's class path.

- ``NoForkLocalFs``: Spark's checkpoint writes on the local file system without forked
  processes. Hadoop's local file system forks ``chmod`` and ``readlink`` for every
  checkpoint file when its native library is missing (as in PySpark's jars): about twenty
  processes per micro-batch of each query, a large share of a micro-batch on a busy
  machine. It does the same with java.nio.
- ``BatchJob``: a micro-batch's job collected without Spark's closure cleaner.
  ``RDD.collect`` cleans its closures for every job: it reads the class files of ``RDD``
  and ``SparkContext`` out of Spark's jar and parses them with ASM, a large share of the
  bolts JVM's CPU on each micro-batch's way to its tasks. ``BatchJob``'s function is a
  named class, which the cleaner leaves alone.
- ``BatchSink``: the queries' sink, which runs that job for every micro-batch without a
  Python callback (services/bolts/tasks_sink.py).

Compiled with the JDK's ``javac`` against PySpark's own jars and cached by the sources'
hash. The bolts job needs them (a JDK, not only a JRE): without them it refuses to start,
saying why.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from squall.machine_cache import cache_home

log = logging.getLogger("squall.bolts")

SOURCES = sorted((Path(__file__).with_name("java")).glob("*.java"))
#: The checkpoints' file system (``fs.AbstractFileSystem.file.impl``).
CLASS = "squall.hadoop.NoForkLocalFs"


def driver_classes(cache: Path | None = None) -> Path | None:
    """A jar of the driver's classes, compiled if needed; None if it cannot be. A jar, not a
    class directory: the JVM's class archive (cds.py) refuses a class path with a
    non-empty directory."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    key = hashlib.sha256(b"".join(s.read_bytes() for s in SOURCES)
                         + pyspark.__version__.encode()).hexdigest()[:16]
    out = (cache or cache_home()) / f"driver-{key}.jar"
    if out.exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        log.warning("no javac: the bolts driver's classes (%s) cannot be compiled; install "
                    "a JDK 17", ", ".join(s.name for s in SOURCES))
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        classes = Path(tmp) / "classes"
        res = subprocess.run([javac, "-nowarn", "-cp", f"{jars}/*", "-d", str(classes),
                              *map(str, SOURCES)],
                             capture_output=True, text=True, timeout=120, check=False)
        if res.returncode != 0:
            log.warning("compiling %s failed: %s",
                        ", ".join(s.name for s in SOURCES), res.stderr.strip()[-500:])
            return None
        jar = Path(tmp) / "classes.jar"
        with zipfile.ZipFile(jar, "w") as z:
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        jar.replace(out)  # atomic: another job may be compiling the same
    return out


def spark_conf(classes: Path, no_fork: bool) -> dict[str, str]:
    """The jar on the driver's class path; with ``no_fork``, the checkpoints' FileContext
    on :data:`CLASS`."""
    conf = {"spark.driver.extraClassPath": str(classes)}
    if no_fork:
        conf["spark.hadoop.fs.AbstractFileSystem.file.impl"] = CLASS
    return conf


def classes_loaded(sc: Any) -> bool:
    """Whether this driver runs with the jar (its sink and job), not started without it."""
    # py4j answers a name it finds no class for with a JavaPackage.
    return type(sc._jvm.squall.spark.BatchSink).__name__ == "JavaClass"
