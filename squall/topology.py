"""The topology API users write against (``from squall.topology import TopologyBuilder``)."""

from squall.core.topology.builder import BoltDeclarer, TopologyBuilder
from squall.core.topology.grouping import CustomStreamGrouping
from squall.core.topology.model import BoltSpec, InputSpec, SpoutSpec, TopologySpec

__all__ = ["BoltDeclarer", "BoltSpec", "CustomStreamGrouping", "InputSpec", "SpoutSpec",
           "TopologyBuilder", "TopologySpec"]
