"""A bolt's report of one micro-batch: the one schema of what the tasks did.

The tasks run in Spark's Python workers, which serve no /metrics; their numbers reach the
bolts job's driver in two ways: as what the micro-batch's job collects (the foreachBatch
path: the reports themselves, or rows of ``mapInArrow`` where the batch is read through
the edge source) and as JSON on the topology's reports topic (the writer sink's commit).
Both are written and read here; the driver's metrics take a :class:`BatchReport`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from squall.core.errors import WireFormatError

#: Where a task's time goes: waiting for the micro-batch's ranges, reading them from Kafka,
#: the bolt, producing, Kafka's confirmation.
PHASES = ("input", "read", "execute", "produce", "flush")
#: Counters summed across tasks.
COUNTS = ("records", "executed", "emitted", "acked", "failed", "bad", "error_count",
          "fetch_retries", "culprits", "sandboxes")
#: How many of the last errors a report keeps (the count keeps them all).
LAST_ERRORS = 5


@dataclass
class BatchReport(WriterCommitMessage):
    task: int = -1
    component: str = ""
    #: edge messages read (each a batch of tuples), by the chain's head
    records: int = 0
    executed: int = 0
    emitted: int = 0
    acked: int = 0
    failed: int = 0
    #: undecodable edge messages (dead-lettered)
    bad: int = 0
    #: every exception of bolt code (each failed its input) ...
    error_count: int = 0
    #: edge range reads that brought nothing for a while and were re-positioned
    fetch_retries: int = 0
    #: source messages failed because a call on them killed or hung the process, and the
    #: sandboxes run to find them (docs/poison.md)
    culprits: int = 0
    sandboxes: int = 0
    seconds: float = 0.0
    #: ... and the last few of them, for the log
    errors: list[str] = field(default_factory=list)
    #: where ``seconds`` went, by :data:`PHASES`
    phases: dict[str, float] = field(default_factory=dict)

    @classmethod
    def merged(cls, component: str, reports: Iterable[BatchReport]) -> BatchReport:
        """One report for a component's tasks: counts, seconds and phases summed."""
        out = cls(component=component)
        for r in reports:
            for k in COUNTS:
                setattr(out, k, getattr(out, k) + getattr(r, k))
            out.seconds += r.seconds
            out.errors = (out.errors + r.errors)[-LAST_ERRORS:]
            for p, v in r.phases.items():
                out.phases[p] = out.phases.get(p, 0.0) + v
        return out

    # ----- as Spark rows (mapInArrow) ------------------------------------

    def to_row(self) -> dict[str, Any]:
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        row["phases"] = list(self.phases.items())  # pyarrow builds a map from pairs
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> BatchReport:
        kw = {f.name: row[f.name] for f in fields(cls) if row.get(f.name) is not None}
        kw["errors"] = list(kw.get("errors", []))
        kw["phases"] = dict(kw.get("phases", {}))
        return cls(**kw)

    # ----- as JSON (the reports topic) -----------------------------------

    def to_json(self, run: str) -> bytes:
        return json.dumps({"run": run, **self.to_row(), "phases": self.phases}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> tuple[str, BatchReport]:
        """(run id, report); :class:`WireFormatError` naming what is wrong."""
        try:
            doc = json.loads(raw)
        except ValueError as e:
            raise WireFormatError(f"a bolt report is not JSON: {e}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("run"), str):
            raise WireFormatError(f"a bolt report is not an object with a run id: {doc!r:.80}")
        try:
            for f in fields(cls):
                if f.name in doc:
                    _check(f.name, str(f.type), doc[f.name])
            rep = cls.from_row(doc)
        except (TypeError, ValueError) as e:
            raise WireFormatError(f"bolt report of run {doc['run']!r}: {e}") from None
        return doc["run"], rep


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _check(name: str, kind: str, v: Any) -> None:
    if kind == "int":
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif kind == "float":
        ok = _number(v)
    elif kind == "str":
        ok = isinstance(v, str)
    elif kind == "list[str]":
        ok = isinstance(v, list) and all(isinstance(e, str) for e in v)
    else:
        ok = isinstance(v, dict) and all(isinstance(k, str) and _number(x)
                                         for k, x in v.items())
    if not ok:
        raise ValueError(f"field {name!r} is not {kind}: {v!r:.80}")


_TYPES = {int: ("long", pa.int64()), str: ("string", pa.string()),
          float: ("double", pa.float64()),
          list: ("array<string>", pa.list_(pa.string())),
          dict: ("map<string, double>", pa.map_(pa.string(), pa.float64()))}
_KINDS = {"int": int, "str": str, "float": float, "list[str]": list,
          "dict[str, float]": dict}
_COLUMNS = [(f.name, _TYPES[_KINDS[str(f.type)]]) for f in fields(BatchReport)]
#: The report rows' schema, for Spark (``mapInArrow``) and for pyarrow.
SPARK_SCHEMA = ", ".join(f"{name} {ddl}" for name, (ddl, _) in _COLUMNS)
ARROW_SCHEMA = pa.schema([(name, arrow) for name, (_, arrow) in _COLUMNS])


def to_arrow(reports: Iterable[BatchReport]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([r.to_row() for r in reports], schema=ARROW_SCHEMA)
