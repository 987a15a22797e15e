"""Trident's stream operations on Storm's ``TopologyBuilder`` (mixed into it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from squall.core.trident.spec import CLASS as AGGREGATE_CLASS
from squall.core.trident.spec import PERSIST_CLASS, QUERY_CLASS

if TYPE_CHECKING:
    from squall.core.topology_builder import BoltDeclarer


class TridentBuilder:
    def _trident(self, name: str, cls: str, parallelism: int, config: dict[str, Any]
                 ) -> BoltDeclarer:
        raise NotImplementedError

    def persistent_aggregate(self, name: str, group_by: Sequence[str],
                             aggregator: str = "count", parallelism: int = 1, *,
                             fields: Sequence[str] = (), output: str | None = None,
                             kind: str = "opaque", url: str | None = None,
                             state_name: str | None = None, cache_size: int = 0,
                             backend: str | None = None) -> BoltDeclarer:
        """Trident's ``groupBy(fields).persistentAggregate(state, aggregator, output)``:
        group its input with ``fields_grouping(component, group_by)`` (or
        ``global_grouping`` when ``group_by`` is empty)."""
        return self._trident(name, AGGREGATE_CLASS, parallelism, {
            "group_by": list(group_by), "aggregator": aggregator, "fields": list(fields),
            **({"output": output} if output else {}),
            "state": {"kind": kind, "url": url, "name": state_name, "cache_size": cache_size,
                      "backend": backend}})

    def partition_persist(self, name: str, updater: str, group_by: Sequence[str],
                          fields: Sequence[str], outputs: Sequence[str] = (),
                          parallelism: int = 1, *, kind: str = "opaque",
                          url: str | None = None, state_name: str | None = None,
                          backend: str | None = None) -> BoltDeclarer:
        """Trident's ``partitionBy(group_by).partitionPersist(state, fields, updater,
        outputs)``: ``updater`` ('module:Class') is given each batch's fresh tuples."""
        return self._trident(name, PERSIST_CLASS, parallelism, {
            "group_by": list(group_by), "updater": updater, "fields": list(fields),
            "outputs": list(outputs),
            "state": {"kind": kind, "url": url, "name": state_name, "backend": backend}})

    def state_query(self, name: str, state: str, key: Sequence[str],
                    function: str = "map_get", output: str = "value", parallelism: int = 1,
                    *, fields: Sequence[str] | None = None) -> BoltDeclarer:
        """Trident's ``stateQuery(state, key, function, output)``: each input tuple's
        ``key`` looked up in component ``state``'s state; emits ``fields`` (default: the
        key) and the result, anchored to the input."""
        return self._trident(name, QUERY_CLASS, parallelism, {
            "state": state, "key": list(key), "function": function, "output": output,
            **({"fields": list(fields)} if fields is not None else {})})

