"""A bolt task's keyed state (Storm's ``KeyValueState``) and the log that carries it.

Spark runs a task's micro-batches in whichever of its reused Python workers is
idle, so state kept in a bolt's attributes would be split between workers. A
stateful bolt keeps it in a :class:`KeyValueState` instead: the state records
which keys changed; after each micro-batch the changes are appended to the
task's log, and before each micro-batch the worker running the task applies
what other workers appended since it last ran it. The log also restores the
state when the job restarts (Storm's in-memory state is lost then).

This module is pure: records to and from bytes. The file side is
``services.bolts.state_log``.

A record: ``MAGIC`` (4 bytes), kind (1 byte: delta or snapshot), payload
length (4 bytes), CRC-32 of the payload (4 bytes), payload (a pickle of
``{key: value}``, deleted keys mapping to :data:`DELETED`).
"""

from __future__ import annotations

import pickle
import struct
import zlib
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from squall.core.errors import StateError

MAGIC = b"SQS1"
DELTA = b"D"
SNAPSHOT = b"S"
_HEADER = struct.Struct(">4scII")


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
        self[key] = value

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

    # the log's side
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


@dataclass(frozen=True)
class Record:
    kind: bytes  # DELTA or SNAPSHOT
    changes: dict[Any, Any]


def encode(changes: Mapping[Any, Any], kind: bytes = DELTA) -> bytes:
    try:
        payload = pickle.dumps(dict(changes), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        bad = next((k for k, v in changes.items() if not _picklable(k, v)), None)
        raise StateError(f"state key {bad!r} or its value cannot be saved: {e}") from None
    return _HEADER.pack(MAGIC, kind, len(payload), zlib.crc32(payload)) + payload


def _picklable(key: Any, value: Any) -> bool:
    try:
        pickle.dumps((key, value))
    except Exception:
        return False
    return True


def decode(buf: bytes, where: str = "state log", base: int = 0) -> tuple[list[Record], int]:
    """The whole records in ``buf`` and how many bytes they take.

    An incomplete record at the end (a write cut short by a crash) is left out,
    not an error: the next append overwrites it. A complete record that is
    damaged is an error naming its offset (``base`` + its position).
    """
    out: list[Record] = []
    pos = 0
    while len(buf) - pos >= _HEADER.size:
        magic, kind, size, crc = _HEADER.unpack_from(buf, pos)
        if magic != MAGIC or kind not in (DELTA, SNAPSHOT):
            raise StateError(f"{where}: no state record at byte {base + pos}")
        end = pos + _HEADER.size + size
        if end > len(buf):
            break
        payload = buf[pos + _HEADER.size:end]
        if zlib.crc32(payload) != crc:
            raise StateError(f"{where}: damaged state record at byte {base + pos} "
                             f"(CRC mismatch)")
        try:
            changes = pickle.loads(payload)  # the task's own log, written by its workers
        except Exception as e:
            raise StateError(f"{where}: unreadable state record at byte {base + pos}: "
                             f"{e}") from None
        out.append(Record(kind, changes))
        pos = end
    return out, pos
