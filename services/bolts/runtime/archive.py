"""Where the bolts' Spark driver finds its class data sharing archive: keyed by the JDK,
PySpark and the driver's class path (made by ``python -m services.bolts.cds``, which
says why it halves a driver's start)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from services.bolts.runtime.driver_classes import driver_classes
from squall.machine_cache import cache_home

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
