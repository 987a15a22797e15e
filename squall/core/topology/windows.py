"""A windowed bolt's window (Storm's ``BaseWindowedBolt``), from its configuration keys.

Storm keeps a window's shape in the bolt's configuration under these keys, and so does
Squall (the builder's ``with_window`` writes them; a YAML spec names them in ``config:``):

- length: ``topology.bolts.window.length.count`` (tuples) or
  ``topology.bolts.window.length.duration.ms``;
- slide: ``topology.bolts.sliding.interval.count`` or
  ``topology.bolts.sliding.interval.duration.ms`` (absent: the length, a tumbling window);
- event time: ``topology.bolts.tuple.timestamp.field.name`` (the field holding each
  tuple's timestamp, milliseconds since the epoch), ``topology.bolts.tuple.window.max.lag.ms``
  (how far out of order tuples may come: the watermark trails the newest timestamp by it)
  and ``topology.bolts.late.tuple.stream`` (where tuples that come later still go).

A window is a range of positions ``[end - length, end)``, its ends one slide apart: a
tuple's position is its arrival number for a count window, its timestamp (event time) or
its arrival time (processing time) for a duration window. Count windows go by arrival
only: with a timestamp field the window must be a duration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from squall.core.errors import TopologyError

LENGTH_COUNT = "topology.bolts.window.length.count"
LENGTH_MS = "topology.bolts.window.length.duration.ms"
SLIDE_COUNT = "topology.bolts.sliding.interval.count"
SLIDE_MS = "topology.bolts.sliding.interval.duration.ms"
TIMESTAMP_FIELD = "topology.bolts.tuple.timestamp.field.name"
LAG_MS = "topology.bolts.tuple.window.max.lag.ms"
LATE_STREAM = "topology.bolts.late.tuple.stream"
KEYS = (LENGTH_COUNT, LENGTH_MS, SLIDE_COUNT, SLIDE_MS, TIMESTAMP_FIELD, LAG_MS, LATE_STREAM)

#: Most tuples a count window may hold: every one is kept in the task's state.
MAX_COUNT = 1_000_000
MAX_MS = 7 * 86_400_000
#: How often a window task runs when no tuple comes (ticks): to close processing-time
#: windows and reset the timeouts of the trees it holds.
TICK_S = 1.0


@dataclass(frozen=True)
class Count:
    """A length or slide in tuples (Storm's ``BaseWindowedBolt.Count``)."""

    n: int


@dataclass(frozen=True)
class Duration:
    """A length or slide in milliseconds (Storm's ``BaseWindowedBolt.Duration``)."""

    ms: int

    @classmethod
    def seconds(cls, s: float) -> Duration:
        return cls(round(s * 1000))

    @classmethod
    def minutes(cls, m: float) -> Duration:
        return cls(round(m * 60_000))


@dataclass(frozen=True)
class WindowSpec:
    """A window's shape: ``length`` and ``slide`` in tuples (``by_count``) or milliseconds."""

    length: int
    slide: int
    by_count: bool
    timestamp_field: str | None = None
    lag_ms: int = 0
    late_stream: str | None = None

    @property
    def event_time(self) -> bool:
        return self.timestamp_field is not None

    @property
    def tumbling(self) -> bool:
        return self.slide == self.length


    def config(self) -> dict[str, Any]:
        """The configuration keys that give this window."""
        kind = (LENGTH_COUNT, SLIDE_COUNT) if self.by_count else (LENGTH_MS, SLIDE_MS)
        out: dict[str, Any] = {kind[0]: self.length, kind[1]: self.slide}
        if self.timestamp_field is not None:
            out[TIMESTAMP_FIELD] = self.timestamp_field
            out[LAG_MS] = self.lag_ms
        if self.late_stream is not None:
            out[LATE_STREAM] = self.late_stream
        return out


def window_of(config: Mapping[str, Any], where: str) -> WindowSpec | None:
    """The window a bolt's configuration gives (None: not a windowed bolt's), or a
    TopologyError naming the key and the value."""
    if not any(k in config for k in KEYS):
        return None
    if (LENGTH_COUNT in config) == (LENGTH_MS in config):
        raise TopologyError(f"{where}: a window needs exactly one length, {LENGTH_COUNT} "
                            f"(tuples) or {LENGTH_MS}")
    by_count = LENGTH_COUNT in config
    length_key, slide_key, other = (LENGTH_COUNT, SLIDE_COUNT, SLIDE_MS) if by_count \
        else (LENGTH_MS, SLIDE_MS, SLIDE_COUNT)
    if other in config:
        raise TopologyError(f"{where}: {other} does not go with {length_key}: a window's "
                            "length and slide are both counts or both durations")
    top = MAX_COUNT if by_count else MAX_MS
    length = _whole(config, length_key, where, 1, top)
    slide = _whole(config, slide_key, where, 1, length) if slide_key in config else length
    ts = config.get(TIMESTAMP_FIELD)
    if ts is not None and (not isinstance(ts, str) or not ts):
        raise TopologyError(f"{where}: {TIMESTAMP_FIELD} must name a field, got {ts!r}")
    if ts is not None and by_count:
        raise TopologyError(f"{where}: {TIMESTAMP_FIELD} needs a duration window "
                            f"({LENGTH_MS}): count windows go by arrival")
    if ts is None and (LAG_MS in config or LATE_STREAM in config):
        key = LAG_MS if LAG_MS in config else LATE_STREAM
        raise TopologyError(f"{where}: {key} is for event time: set {TIMESTAMP_FIELD}")
    lag = _whole(config, LAG_MS, where, 0, MAX_MS) if LAG_MS in config else 0
    late = config.get(LATE_STREAM)
    if late is not None and (not isinstance(late, str) or not late):
        raise TopologyError(f"{where}: {LATE_STREAM} must name a stream, got {late!r}")
    return WindowSpec(length, slide, by_count, ts, lag, late)


def check_window(w: WindowSpec, outputs: Mapping[str, tuple[str, ...]],
                 input_fields: Mapping[str, tuple[str, ...]], where: str) -> None:
    """What a window needs of its topology: its timestamp field in every input and its late
    stream declared with fields every input has. (Storm also refuses a window longer than
    the message timeout; here the window resets the timeouts of the trees it holds.)"""
    for name, fields in input_fields.items():
        if w.timestamp_field is not None and w.timestamp_field not in fields:
            raise TopologyError(f"{where}: input {name} has no field {w.timestamp_field!r} "
                                f"({TIMESTAMP_FIELD}); it has {list(fields)}")
        if w.late_stream is not None:
            missing = [f for f in outputs.get(w.late_stream, ()) if f not in fields]
            if missing:
                raise TopologyError(f"{where}: the late stream {w.late_stream!r} carries "
                                    f"fields {missing} that input {name} lacks")
    if w.late_stream is not None and w.late_stream not in outputs:
        raise TopologyError(f"{where}: the late stream {w.late_stream!r} ({LATE_STREAM}) is "
                            f"not among its outputs {sorted(outputs)}: declare it with the "
                            "input fields it carries")


def _whole(config: Mapping[str, Any], key: str, where: str, low: int, high: int) -> int:
    v = config[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or \
            v != int(v) or not low <= v <= high:
        raise TopologyError(f"{where}: {key} must be a whole number in [{low}, {high}], "
                            f"got {v!r}")
    return int(v)
