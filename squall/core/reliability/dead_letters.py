"""What a dead letter carries besides the message itself: why it was given up on and where it
came from, as Kafka headers (``squall.reason``, ``squall.topic``, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from squall.core.errors import WireFormatError


@dataclass(frozen=True, slots=True)
class DeadLetterHeaders:
    """Why a record was given up on, and where it came from."""

    reason: str
    topic: str
    partition: int
    offset: int
    attempts: int = 0
    component: str = ""

    def headers(self) -> list[tuple[str, bytes]]:
        return [
            ("squall.reason", self.reason.encode()),
            ("squall.topic", self.topic.encode()),
            ("squall.partition", str(self.partition).encode()),
            ("squall.offset", str(self.offset).encode()),
            ("squall.attempts", str(self.attempts).encode()),
            ("squall.component", self.component.encode()),
        ]

    @classmethod
    def from_headers(cls, headers: Sequence[tuple[str, bytes | None]]) -> DeadLetterHeaders:
        h = {k: (v or b"").decode(errors="replace") for k, v in headers}
        try:
            return cls(h["squall.reason"], h["squall.topic"], int(h["squall.partition"]),
                       int(h["squall.offset"]), int(h.get("squall.attempts", "0")),
                       h.get("squall.component", ""))
        except (KeyError, ValueError) as e:
            raise WireFormatError(f"dead letter: bad or missing header ({e})") from None
