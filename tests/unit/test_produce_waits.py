"""Producing behind a full local queue waits, and says so when it waits long (pure: a stub
producer stands for confluent-kafka's, the clock is passed in)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from squall.kafka import BLOCKED_WARN_S, produce


class FullFor:
    """Raises BufferError (confluent-kafka's full local queue) for the first ``n`` tries."""

    def __init__(self, n: int) -> None:
        self.n, self.sent, self.polls = n, 0, 0

    def produce(self, topic: str, value: bytes | None, **_: Any) -> None:
        if self.n > 0:
            self.n -= 1
            raise BufferError("queue full")
        self.sent += 1

    def poll(self, _timeout: float) -> None:
        self.polls += 1

    def __len__(self) -> int:
        return 7


def test_a_short_wait_is_quiet(caplog: pytest.LogCaptureFixture) -> None:
    p, t = FullFor(3), iter([0.0, 0.1, 0.2, 0.3])
    produce(p, "t", b"v", clock=lambda: next(t))
    assert (p.sent, p.polls) == (1, 3) and not caplog.records


def test_a_long_wait_is_logged_with_the_queue_and_its_end(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "squall.kafka")
    step = BLOCKED_WARN_S / 2
    p, now = FullFor(6), iter([i * step for i in range(20)])
    produce(p, "acks", b"v", clock=lambda: next(now))
    msgs = [r.getMessage() for r in caplog.records]
    assert p.sent == 1
    assert msgs[0] == f"produce to acks blocked for {BLOCKED_WARN_S:.1f} s: the local queue " \
                      "is full (7 messages waiting for the broker)"
    assert len([m for m in msgs if "blocked" in m]) == 2  # every BLOCKED_WARN_S, not each try
    assert msgs[-1].startswith("produce to acks went through after")
