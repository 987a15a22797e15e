"""Trident State, as users import it: ``from squall.trident import Count, OpaqueMap``.

The implementation is the core's (``squall.core.trident``); databases are in
``squall.backends``. In a topology, use ``TopologyBuilder.persistent_aggregate``,
``partition_persist`` and ``state_query``, or a bolt's ``persistent_aggregate:``,
``partition_persist:`` or ``state_query:`` in YAML / JSON (docs/trident.md).
"""

from squall.core.topology.trident import MapGet
from squall.core.trident.aggregators import CombinerAggregator, Count, ReducerAggregator, Sum
from squall.core.trident.cached import CachedMap
from squall.core.trident.codec import MapKind
from squall.core.trident.maps import (
    NonTransactionalMap,
    OpaqueMap,
    SnapshottableMap,
    TransactionalMap,
)
from squall.core.trident.persist import (
    Collector,
    PartitionPersist,
    PersistentAggregate,
    StateUpdater,
)
from squall.core.trident.state import BackingMap, MapState, State, ValueUpdater
from squall.core.trident.values import OpaqueValue, TransactionalValue
from squall.state_query import StateQuery

__all__ = ["BackingMap", "CachedMap", "Collector", "CombinerAggregator", "Count", "MapGet",
           "MapKind", "MapState", "NonTransactionalMap", "OpaqueMap", "OpaqueValue",
           "PartitionPersist", "PersistentAggregate", "ReducerAggregator", "SnapshottableMap",
           "State", "StateQuery", "StateUpdater", "Sum", "TransactionalMap",
           "TransactionalValue", "ValueUpdater"]
