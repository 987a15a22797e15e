"""Dead letters sent back into their topology, each once: the replays log (pure).

Replaying letter ``n`` (its offset in the dead-letter topic) writes, in order:

1. an *intended* record to the replays log: the source partition it goes back to and an
   offset of that partition at or before where it will land (``start``);
2. the message, to its source partition, with the header ``squall.replay-of`` naming the
   letter;
3. a *done* record with where it landed.

A replay interrupted after (1) is finished by looking in the source partition from
``start`` for the header: found, only (3) is written; not found, (2) and (3). So however
often a replay is run or interrupted, a letter goes back at most once, and a letter whose
replay is done is never sent again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from squall.core.errors import WireFormatError

#: The header a replayed message carries: ``<topology id>:<letter offset>``.
REPLAY_HEADER = "squall.replay-of"


@dataclass(frozen=True)
class Replay:
    letter: int
    topic: str
    partition: int
    #: an offset of the source partition at or before the replayed message
    start: int
    #: where the message landed (None: intended, not known to be written)
    offset: int | None = None
    time_ms: int = 0

    @property
    def done(self) -> bool:
        return self.offset is not None

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Replay:
        try:
            d = json.loads(raw)
            return cls(int(d["letter"]), str(d["topic"]), int(d["partition"]), int(d["start"]),
                       None if d.get("offset") is None else int(d["offset"]),
                       int(d.get("time_ms", 0)))
        except (ValueError, KeyError, TypeError) as e:
            raise WireFormatError(f"replays log: a bad record ({e})") from None


def replay_key(topology: str, letter: int) -> str:
    """The header value naming a letter's replay."""
    return f"{topology}:{letter}"


class Replays:
    """The replays log read back: each letter's latest word (done wins)."""

    def __init__(self, records: Iterable[Replay] = ()) -> None:
        self.by_letter: dict[int, Replay] = {}
        for r in records:
            self.add(r)

    def add(self, r: Replay) -> None:
        was = self.by_letter.get(r.letter)
        if was is None or not was.done:
            self.by_letter[r.letter] = r

    def done(self, letter: int) -> Replay | None:
        got = self.by_letter.get(letter)
        return got if got is not None and got.done else None

    def unsure(self, letter: int) -> Replay | None:
        """An intended replay not known to be written (an interrupted one)."""
        got = self.by_letter.get(letter)
        return got if got is not None and not got.done else None
