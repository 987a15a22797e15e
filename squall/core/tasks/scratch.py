"""Attributes a bolt changes while executing: per-process scratch, warned about once.

Spark runs a task's micro-batches in whichever of its Python workers is idle, so what a
bolt keeps in its attributes is split between workers and lost on restart; what must last
belongs in the state API (``stateful = True``, ``self.state``)."""

from __future__ import annotations

from typing import Any

_FRAMEWORK_ATTRS = frozenset({"state", "collector", "conf", "context"})


class ScratchWatch:
    """Compares a bolt's attributes with their shape after ``prepare``."""

    def __init__(self, bolt: Any, component: str) -> None:
        self.bolt = bolt
        self.component = component
        self._shape: dict[str, tuple[int, int | None]] | None = _attribute_shape(bolt)

    def check(self) -> list[str]:
        """A warning the first time the bolt rebound or grew an attribute; else none."""
        if self._shape is None:
            return []
        now = _attribute_shape(self.bolt)
        changed = sorted(k for k in now.keys() | self._shape.keys()
                         if now.get(k) != self._shape.get(k))
        if not changed:
            return []
        self._shape = None
        return [f"bolt {self.component!r} changed its attributes {changed} while executing: "
                "attributes are per-process scratch (Spark runs a task's micro-batches in "
                "any of its Python workers, and restarts lose them); keep what must last "
                "across micro-batches in the state API (stateful = True, self.state)"]


def _attribute_shape(bolt: Any) -> dict[str, tuple[int, int | None]]:
    """Each user attribute's identity and, for a container, its size."""
    return {k: (id(v), len(v) if isinstance(v, list | dict | set) else None)
            for k, v in vars(bolt).items()
            if k not in _FRAMEWORK_ATTRS and not k.startswith("__")} \
        if hasattr(bolt, "__dict__") else {}
