"""Squall: Apache Storm's guaranteed message processing, on Kafka and Spark.

Layers, arrows down only (checked by import-linter, see pyproject.toml):
``services`` -> the shell (``squall.cli``, ``launch``, ``demo``, ``client``, ``coord``,
``kafka``, ``metrics``, ``wallclock``, ``processes``, ``dev``) -> the pure core
(``squall.core``). The API users write bolts and topologies against is re-exported here
and in ``squall.bolt``, ``squall.topology`` and ``squall.tuples``.

The re-exports are loaded when first used (PEP 562): every ``squall.*`` import runs this
file, and the bolt API brings NumPy and Arrow, which a worker, the API or the CLI does
not need (0.3-0.5 s of each one's start, on a machine where they all start at once).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from squall.core.bolt_api.bolt import (
        PARENT,
        BasicBolt,
        BatchBolt,
        Bolt,
        OutputCollector,
        TaskContext,
    )
    from squall.core.bolt_api.state import KeyValueState
    from squall.core.reliability.tuples import Tuple
    from squall.core.topology.builder import TopologyBuilder
    from squall.core.topology.model import TopologySpec

__version__ = "0.1.0"

_HOMES = {
    "PARENT": "squall.core.bolt_api.bolt", "BasicBolt": "squall.core.bolt_api.bolt",
    "BatchBolt": "squall.core.bolt_api.bolt", "Bolt": "squall.core.bolt_api.bolt",
    "OutputCollector": "squall.core.bolt_api.bolt", "TaskContext": "squall.core.bolt_api.bolt",
    "KeyValueState": "squall.core.bolt_api.state",
    "TopologyBuilder": "squall.core.topology.builder",
    "TopologySpec": "squall.core.topology.model", "Tuple": "squall.core.reliability.tuples",
}

__all__ = ["PARENT", "BasicBolt", "BatchBolt", "Bolt", "KeyValueState", "OutputCollector",
           "TaskContext", "TopologyBuilder", "TopologySpec", "Tuple", "__version__"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'squall' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found once; later uses do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
