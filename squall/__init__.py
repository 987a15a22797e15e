"""Squall: Apache Storm's guaranteed message processing, on Kafka and Spark.

Layers, arrows down only (checked by import-linter, see pyproject.toml):
``services`` -> the shell (``squall.cli``, ``launch``, ``demo``, ``client``, ``coord``,
``kafka``, ``metrics``, ``wallclock``, ``processes``, ``dev``) -> the pure core
(``squall.core``). The API users write bolts and topologies against is re-exported here
and in ``squall.bolt``, ``squall.topology`` and ``squall.tuples``.
"""

from squall.core.bolt import PARENT, BasicBolt, BatchBolt, Bolt, OutputCollector, TaskContext
from squall.core.state import KeyValueState
from squall.core.topology import TopologyBuilder, TopologySpec
from squall.core.tuples import Tuple

__version__ = "0.1.0"

__all__ = ["PARENT", "BasicBolt", "BatchBolt", "Bolt", "KeyValueState", "OutputCollector",
           "TaskContext", "TopologyBuilder", "TopologySpec", "Tuple", "__version__"]
