"""The bolt API users write against (``from squall.bolt import Bolt``); it lives in the core."""

from squall.core.bolt_api.bolt import (
    PARENT,
    BasicBolt,
    BatchBolt,
    Bolt,
    OutputCollector,
    TaskContext,
)
from squall.core.bolt_api.windowed import TupleWindow, WindowedBolt

__all__ = ["PARENT", "BasicBolt", "BatchBolt", "Bolt", "OutputCollector", "TaskContext",
           "TupleWindow", "WindowedBolt"]
