"""Spark's checkpoint writes on the local file system, without forked processes.

Hadoop's local file system forks ``chmod`` and ``readlink`` for every
checkpoint file when its native library is missing (as in PySpark's jars):
about twenty processes per micro-batch of each query, 50 ms on an idle
machine and 300 ms of every micro-batch on a busy one (measured). The class
in ``java/NoForkLocalFs.java`` does the same with java.nio. It is compiled
once with the JDK's ``javac`` against PySpark's own Hadoop jars and cached by
source hash; without a JDK the job runs on Hadoop's default (and says so).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

log = logging.getLogger("squall.bolts")

SOURCE = Path(__file__).with_name("java") / "NoForkLocalFs.java"
CLASS = "squall.hadoop.NoForkLocalFs"


def cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "squall"


def no_fork_classes(cache: Path | None = None) -> Path | None:
    """A jar holding :data:`CLASS`, compiled if needed; None if it cannot be. A jar, not a
    class directory: the JVM's class archive (cds.py) refuses a class path with a
    non-empty directory."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    key = hashlib.sha256(SOURCE.read_bytes() + pyspark.__version__.encode()).hexdigest()[:16]
    out = (cache or cache_home()) / f"hadoop-{key}.jar"
    if out.exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        log.warning("no javac: Spark checkpoints use Hadoop's local file system, which forks "
                    "chmod/readlink per file (slower micro-batches)")
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        classes = Path(tmp) / "classes"
        res = subprocess.run([javac, "-nowarn", "-cp", f"{jars}/*", "-d", str(classes),
                              str(SOURCE)],
                             capture_output=True, text=True, timeout=120, check=False)
        if res.returncode != 0:
            log.warning("compiling %s failed (Hadoop's default is used): %s", SOURCE.name,
                        res.stderr.strip()[-500:])
            return None
        jar = Path(tmp) / "classes.jar"
        with zipfile.ZipFile(jar, "w") as z:
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        jar.replace(out)  # atomic: another job may be compiling the same
    return out


def spark_conf(classes: Path) -> dict[str, str]:
    """Settings that make the driver's checkpoint FileContext use :data:`CLASS`."""
    return {"spark.driver.extraClassPath": str(classes),
            "spark.hadoop.fs.AbstractFileSystem.file.impl": CLASS}
