"""The ``PYTHONPATH`` of the Python processes Spark starts: :data:`SITE` on it.

:data:`SITE` holds one file, ``sitecustomize.py``, which Python runs as each of those
processes starts: they import the installed PySpark instead of compiling the zip Spark puts
first on their path (its docstring). The driver's own
processes get it through the JVM's environment, a cluster's executors through
``spark.executorEnv.PYTHONPATH``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

SITE = Path(__file__).resolve().with_name("spark_site")


def with_site(path: str | None) -> str:
    """A ``PYTHONPATH`` with :data:`SITE` first and then ``path``'s entries."""
    rest = [p for p in (path or "").split(os.pathsep) if p and p != str(SITE)]
    return os.pathsep.join([str(SITE), *rest])


@contextlib.contextmanager
def launching_env() -> Iterator[None]:
    """While the driver's JVM is launched (it keeps the environment it starts with and
    hands its ``PYTHONPATH`` to every Python process it starts): :data:`SITE` on this
    process's ``PYTHONPATH``; as it was afterwards."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = with_site(before)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
