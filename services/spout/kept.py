"""What the spout keeps of a source message while its tree is pending.

A pending message is kept for two things only: its replay (its value, re-emitted
without a re-read) and, after its last failure, its dead letter (value, key and
headers). A librdkafka ``Message`` object costs ~140 bytes on top of its value, and
the consumer gives each its own copy of the topic's name: a pending tree cost the spout
~400 bytes with it, ~170 without (benchmarks/pending_memory.py). At the spout's max
pending (tens of thousands of trees in flight when the pipeline is behind) that was most
of the spout's memory growth. So a message with neither key
nor headers, the common case, is kept as its value alone, the very ``bytes`` object
the message held; any other is kept whole.
"""

from __future__ import annotations

from typing import Any

#: What :func:`keep` returns: the value (``bytes`` or ``None``), or the message itself.
Kept = Any


def keep(msg: Any) -> Kept:
    """What to keep of ``msg`` (a ``confluent_kafka.Message``) while it is pending."""
    if msg.key() is None and msg.headers() is None:
        return msg.value()
    return msg


def value(kept: Kept) -> bytes | None:
    """The kept message's value."""
    if kept is None or isinstance(kept, bytes):
        return kept
    v: bytes | None = kept.value()
    return v


def parts(kept: Kept) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
    """The kept message's ``(value, key, headers)``, as a dead letter carries them on."""
    if kept is None or isinstance(kept, bytes):
        return kept, None, []
    return kept.value(), kept.key(), list(kept.headers() or [])
