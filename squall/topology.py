"""The topology API users write against (``from squall.topology import TopologyBuilder``)."""

from squall.core.topology import (
    BoltDeclarer,
    BoltSpec,
    InputSpec,
    SpoutSpec,
    TopologyBuilder,
    TopologySpec,
)

__all__ = ["BoltDeclarer", "BoltSpec", "InputSpec", "SpoutSpec", "TopologyBuilder",
           "TopologySpec"]
