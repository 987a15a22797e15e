"""A bolt task's keyed state (Storm's ``KeyValueState``).

Spark runs a task's micro-batches in whichever of its reused Python workers is
idle, so state kept in a bolt's attributes would be split between workers. A
stateful bolt keeps it in a :class:`KeyValueState` instead: the state records
which keys changed; after each micro-batch the changes are written to the state
database, and before each micro-batch the worker running the task reads the
state back if another worker ran it since (``services.bolts.task_state``). The
database also restores the state when the job restarts, on any machine (Storm's
in-memory state is lost then).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any


class _Deleted:
    """Marks a key deleted in a delta (a singleton, also after unpickling)."""

    _instance: _Deleted | None = None

    def __new__(cls) -> _Deleted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self) -> tuple[type[_Deleted], tuple[()]]:
        return (_Deleted, ())

    def __repr__(self) -> str:
        return "DELETED"


DELETED: Any = _Deleted()


class KeyValueState(MutableMapping[Any, Any]):
    """Storm's ``KeyValueState``: ``put`` / ``get`` / ``delete``, and a mapping too.

    Keys must be hashable and picklable, values picklable. Read it where it is
    used (in ``execute`` / ``process``): it is brought up to date before every
    micro-batch, so do not copy it out in ``init_state``.
    """

    def __init__(self, data: Mapping[Any, Any] | None = None) -> None:
        self._data: dict[Any, Any] = dict(data or {})
        self._dirty: set[Any] = set()

    # Storm's names
    def put(self, key: Any, value: Any) -> None:
        self._data[key] = value  # not through __setitem__: one call less a put
        self._dirty.add(key)

    def get(self, key: Any, default: Any = None) -> Any:
        return self._data.get(key, default)

    def delete(self, key: Any) -> Any:
        """Remove ``key``; its value (or None)."""
        value = self._data.pop(key, None)
        self._dirty.add(key)
        return value

    # the mapping protocol
    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[key] = value
        self._dirty.add(key)

    def __delitem__(self, key: Any) -> None:
        del self._data[key]
        self._dirty.add(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __repr__(self) -> str:
        return f"KeyValueState({len(self._data)} keys, {len(self._dirty)} changed)"

    # the store's side
    def changes(self) -> dict[Any, Any]:
        """The keys changed since the last call, with their values (or ``DELETED``)."""
        out = {k: self._data.get(k, DELETED) for k in self._dirty}
        self._dirty.clear()
        return out

    def apply(self, changes: Mapping[Any, Any], replace: bool = False) -> None:
        """Another worker's changes (or, with ``replace``, a whole snapshot); not marked
        as changed here."""
        if replace:
            self._data.clear()
        for k, v in changes.items():
            if v is DELETED:
                self._data.pop(k, None)
            else:
                self._data[k] = v

    def snapshot(self) -> dict[Any, Any]:
        return dict(self._data)
