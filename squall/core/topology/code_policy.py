"""Which code a topology may run on the workers.

A submission is code execution: every class a spec names is imported and instantiated on
the workers (a bolt, a custom grouping, a spout's scheme, a Trident function, aggregator or
updater). So each must be one of Squall's own (:data:`BUILT_IN`, the built-in schemes and
aggregators need no class) or live in a module the operator allowed: the modules listed in
``SQUALL_ALLOWED_MODULES`` (comma-separated; a name allows that module and every module
under it), ``examples`` by default. The API refuses a spec naming any other at submit, and a
worker refuses to run one (docs/security.md, "What a topology's code may do").

Pure: the caller passes the allowed modules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from squall.core.errors import ConfigError, TopologyError
from squall.core.topology.kafka_sink import KAFKA_BOLT
from squall.core.topology.trident import CLASS, PERSIST_CLASS, QUERY_CLASS, trident_spec

if TYPE_CHECKING:
    from squall.core.topology.model import TopologySpec

ENV = "SQUALL_ALLOWED_MODULES"
DEFAULT = ("examples",)
#: Squall's own classes a spec may name whatever the setting.
BUILT_IN = frozenset({KAFKA_BOLT, CLASS, PERSIST_CLASS, QUERY_CLASS})
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def allowed_modules(raw: str | None) -> tuple[str, ...]:
    """The modules ``SQUALL_ALLOWED_MODULES`` allows (unset: :data:`DEFAULT`)."""
    if raw is None:
        return DEFAULT
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    bad = [n for n in names if not _MODULE.fullmatch(n)]
    if bad:
        raise ConfigError(f"{ENV}: {bad} are not module names (comma-separated, as "
                          "'examples,mycompany.topologies')")
    return names


def code_refs(spec: TopologySpec) -> list[tuple[str, str]]:
    """Every class ``spec`` names, ``(where, "module:Class")``."""
    out: list[tuple[str, str]] = []
    for s in spec.spouts:
        if ":" in s.scheme:
            out.append((f"spout {s.name!r} scheme", s.scheme))
    for b in spec.bolts:
        where = f"bolt {b.name!r}"
        out.append((where, b.cls))
        out += [(f"{where} input from {i.component!r} grouping", i.grouping_class)
                for i in b.inputs if i.grouping_class]
        if b.cls in (CLASS, PERSIST_CLASS, QUERY_CLASS):
            t = trident_spec(b.cls, b.config, where)
            for what in ("aggregator", "updater", "function"):
                path = getattr(t, what, "")
                if isinstance(path, str) and ":" in path:
                    out.append((f"{where} {what}", path))
    return out


def may_run(path: str, allowed: Sequence[str]) -> bool:
    if path in BUILT_IN:
        return True
    module = path.partition(":")[0]
    return any(module == m or module.startswith(m + ".") for m in allowed)


def check_code(spec: TopologySpec, allowed: Sequence[str]) -> None:
    """A TopologyError naming the first class ``spec`` may not run, and what is allowed."""
    for where, path in code_refs(spec):
        if not may_run(path, allowed):
            raise TopologyError(
                f"{where}: {path!r} is not in a module this cluster runs code from "
                f"(allowed: {', '.join(allowed) or 'none'}, and Squall's own); the operator "
                f"allows more with {ENV}")
