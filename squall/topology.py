"""The topology API users write against (``from squall.topology import TopologyBuilder``)."""

from squall.core.topology import BoltSpec, InputSpec, SpoutSpec, TopologySpec
from squall.core.topology_builder import BoltDeclarer, TopologyBuilder

__all__ = ["BoltDeclarer", "BoltSpec", "InputSpec", "SpoutSpec", "TopologyBuilder",
           "TopologySpec"]
