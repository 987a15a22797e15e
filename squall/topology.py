"""The topology API users write against (``from squall.topology import TopologyBuilder``)."""

from squall.core.topology.builder import BoltDeclarer, TopologyBuilder
from squall.core.topology.grouping import CustomStreamGrouping
from squall.core.topology.model import BoltSpec, InputSpec, SpoutSpec, TopologySpec
from squall.core.topology.windows import Count, Duration

__all__ = ["BoltDeclarer", "BoltSpec", "Count", "CustomStreamGrouping", "Duration", "InputSpec",
           "SpoutSpec", "TopologyBuilder", "TopologySpec"]
