"""Trident State, as users import it: ``from squall.trident import Count, OpaqueMap``.

The implementation is the core's (``squall.core.trident``); databases are in
``squall.backends``. In a topology, use ``TopologyBuilder.persistent_aggregate`` or a
bolt's ``persistent_aggregate:`` in YAML / JSON (whose class is ``squall.trident:
PersistentAggregate``).
"""

from squall.core.trident.aggregators import CombinerAggregator, Count, ReducerAggregator, Sum
from squall.core.trident.cached import CachedMap
from squall.core.trident.codec import MapKind
from squall.core.trident.maps import (
    NonTransactionalMap,
    OpaqueMap,
    SnapshottableMap,
    TransactionalMap,
)
from squall.core.trident.persist import PersistentAggregate
from squall.core.trident.state import BackingMap, MapState, State, ValueUpdater
from squall.core.trident.values import OpaqueValue, TransactionalValue

__all__ = ["BackingMap", "CachedMap", "CombinerAggregator", "Count", "MapKind", "MapState",
           "NonTransactionalMap", "OpaqueMap", "OpaqueValue", "PersistentAggregate",
           "ReducerAggregator", "SnapshottableMap", "State", "Sum", "TransactionalMap",
           "TransactionalValue", "ValueUpdater"]
