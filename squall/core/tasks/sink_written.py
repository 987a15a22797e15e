"""Which outputs an exactly-once Kafka sink task may have written (pure; in its state).

Before it writes, the task records each output's id with where it goes and an offset of
that partition at or before where it will land; after a crash, or when a replayed tuple
comes, an id recorded may or may not have been written, and reading its partition from that
offset says which. An id is kept until the spouts commit its source message's offset: no
replay can bring it back after that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from squall.core.bolt_api.state import KeyValueState

_KEY = "__sink__"


@dataclass(frozen=True, slots=True)
class Intent:
    topic: str
    partition: int
    #: an offset of the partition at or before the record
    start: int
    #: its source message (``topic:partition``, offset)
    source: str
    offset: int


class Written:
    def __init__(self, state: KeyValueState) -> None:
        self.state = state

    def recorded(self, ids: Iterable[str]) -> dict[str, Intent]:
        """The ids among ``ids`` recorded before (maybe written)."""
        out = {}
        for i in ids:
            got = self.state.get((_KEY, i))
            if isinstance(got, Intent):
                out[i] = got
        return out

    def record(self, output: str, intent: Intent) -> None:
        self.state[(_KEY, output)] = intent

    def forget_below(self, committed: Mapping[str, int]) -> int:
        """Let go of the ids whose source messages the spouts committed; how many."""
        gone = [k for k, v in self.state.items()
                if isinstance(v, Intent) and v.offset < committed.get(v.source, -1)]
        for k in gone:
            del self.state[k]
        return len(gone)
