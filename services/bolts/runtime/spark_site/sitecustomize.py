"""Spark's Python processes import the installed PySpark, not its zip.

Spark starts its Python processes (the planners of a Python data source, the daemon that
forks the tasks' workers) with ``PYTHONPATH`` led by ``$SPARK_HOME/python/lib/pyspark.zip``
and the py4j zip beside it. Python caches no bytecode for modules imported from a zip, so
each of them compiled PySpark anew, several times before a bolts job's first micro-batch
and once more for its Python workers. A bolts driver puts this directory on the ``PYTHONPATH``
of those processes (services/bolts/job.py), so Python runs this file as it starts. When the
zips are the ones shipped inside the PySpark installed here (pip installs both: the same
files), they go to the end of ``sys.path``; a Spark elsewhere keeps its zips first. Then any
other ``sitecustomize`` on the path runs, as it would have without this one.

Standard library only: it runs in every Python process Spark starts.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import PathFinder

HERE = os.path.dirname(os.path.realpath(__file__))


def installed_first(path: Sequence[str]) -> list[str]:
    """``path`` with the zips shipped inside the PySpark it finds outside a zip moved to
    its end; unchanged if there is no such PySpark or no such zip."""
    spec = PathFinder.find_spec("pyspark", [p for p in path if not p.endswith(".zip")])
    if spec is None or spec.origin is None:
        return list(path)
    lib = os.path.realpath(os.path.join(os.path.dirname(spec.origin), "python", "lib"))
    shipped = [p for p in path
               if p.endswith(".zip") and os.path.realpath(os.path.dirname(p)) == lib]
    return [p for p in path if p not in shipped] + shipped


def _run_the_next_one() -> None:
    """Python imports the first ``sitecustomize`` on the path: this one shadows any other."""
    rest = [p for p in sys.path if os.path.realpath(p or ".") != HERE]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if __name__ == "sitecustomize":  # as Python runs it at start; not when a test imports it
    if any(p.endswith("pyspark.zip") for p in sys.path):
        sys.path[:] = installed_first(sys.path)
    _run_the_next_one()
