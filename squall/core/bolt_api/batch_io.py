"""A batch bolt's micro-batch in, and its output as the executor reads it: pandas for
``BatchBolt.process``, Arrow for ``BatchBolt.process_arrow``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from squall.core.bolt_api.bolt import PARENT, BatchBolt
from squall.core.errors import TopologyError
from squall.core.wire.tuple_batch import RESERVED, TupleBatch

#: The output column that names each row's stream (the default stream without it); in
#: the input, each row's stream, beside its source component's name.
STREAM_COL, SOURCE_COL = "__stream", "__source"


def arrow_native(bolt: BatchBolt) -> bool:
    """Whether the bolt implements ``process_arrow`` (then it is called, not ``process``)."""
    return type(bolt).process_arrow is not BatchBolt.process_arrow


def _fields(batches: Sequence[TupleBatch]) -> list[pa.RecordBatch]:
    return [b.data.drop_columns([c for c in b.data.schema.names if c in RESERVED])
            for b in batches]


def input_frame(batches: Sequence[TupleBatch]) -> pd.DataFrame:
    """The inputs' fields as one pandas frame, plus ``__stream`` and ``__source``.

    One Arrow concatenation and one conversion for the micro-batch: converting each
    input message on its own was most of a small micro-batch's time.
    """
    fields = _fields(batches)
    try:
        df = pa.Table.from_batches(fields).to_pandas() if len({f.schema for f in fields}) == 1 \
            else pa.concat_tables([pa.Table.from_batches([f]) for f in fields],
                                  promote_options="default").to_pandas()
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # same field, other types: pandas unifies
        df = pd.concat([f.to_pandas() for f in fields], ignore_index=True)
    sizes = [len(b) for b in batches]
    df[STREAM_COL] = np.repeat(np.array([b.stream for b in batches], dtype=object), sizes)
    df[SOURCE_COL] = np.repeat(np.array([b.source for b in batches], dtype=object), sizes)
    return df


def input_table(batches: Sequence[TupleBatch]) -> pa.Table:
    """The inputs' fields as one Arrow table, plus ``__stream`` and ``__source``
    (dictionary-encoded: one string per input message, not per row). A field whose types
    differ between messages is widened where Arrow can (``permissive``), else the batch
    fails with Arrow's message."""
    fields = _fields(batches)
    table = pa.Table.from_batches(fields) if len({f.schema for f in fields}) == 1 \
        else pa.concat_tables([pa.Table.from_batches([f]) for f in fields],
                              promote_options="permissive")
    which = pa.array(np.repeat(np.arange(len(batches), dtype=np.int32),
                               [len(b) for b in batches]))
    for name, values in ((STREAM_COL, [b.stream for b in batches]),
                         (SOURCE_COL, [b.source for b in batches])):
        table = table.append_column(name, pa.DictionaryArray.from_arrays(
            which, pa.array(values, pa.string())))
    return table


@dataclass(frozen=True)
class BatchOutput:
    """What a batch bolt returned, checked: every row names an input row (``parents``) and
    a declared stream."""

    data: pd.DataFrame | pa.Table
    parents: npt.NDArray[np.int64]
    #: each row's stream, or None: all on the default stream
    streams: npt.NDArray[Any] | None

    @classmethod
    def run(cls, bolt: BatchBolt, batches: Sequence[TupleBatch], n: int) -> BatchOutput:
        """Call the bolt on the micro-batch's ``n`` rows; :class:`TopologyError` if what it
        returned is not a well-formed output (the caller fails the inputs)."""
        if arrow_native(bolt):
            out: pd.DataFrame | pa.Table = bolt.process_arrow(input_table(batches))
            if not isinstance(out, pa.Table):
                raise TopologyError(f"process_arrow returned a {type(out).__name__}, "
                                    "not a pyarrow.Table")
            names = out.column_names
            if PARENT in names and out.column(PARENT).null_count:
                raise TopologyError(f"{PARENT} has {out.column(PARENT).null_count} nulls")
        else:
            out = bolt.process(input_frame(batches))
            names = list(out.columns)
        if PARENT not in names:
            raise TopologyError(f"a batch bolt's output needs a {PARENT!r} column")
        parents = np.asarray(_numpy(out, PARENT), dtype=np.int64)
        if parents.size and (parents.min() < 0 or parents.max() >= n):
            raise TopologyError(f"{PARENT} names a row outside 0..{n - 1}")
        streams = np.asarray(_numpy(out, STREAM_COL), dtype=object) \
            if STREAM_COL in names else None
        return cls(out, parents, streams)

    def __len__(self) -> int:
        return int(self.parents.size)

    def has(self, name: str) -> bool:
        out = self.data
        return name in (out.column_names if isinstance(out, pa.Table) else out.columns)

    def arrow(self, name: str, rows: npt.NDArray[np.intp]) -> pa.Array:
        """Column ``name`` at ``rows`` (sorted, unique) as one Arrow array."""
        whole = rows.size == len(self)
        if isinstance(self.data, pa.Table):
            col = _decoded(self.data.column(name)).combine_chunks()
            return col if whole else col.take(pa.array(rows))
        values = self.data[name].to_numpy()
        return pa.array(values if whole else values[rows])

    def values(self, name: str) -> list[Any]:
        """Column ``name`` as Python values, one per row."""
        if isinstance(self.data, pa.Table):
            return list(self.data.column(name).to_pylist())
        return list(self.data[name].tolist())


def _decoded(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col


def _numpy(out: pd.DataFrame | pa.Table, name: str) -> npt.NDArray[Any]:
    if isinstance(out, pa.Table):
        return np.asarray(_decoded(out.column(name)).to_numpy())
    return np.asarray(out[name].to_numpy())
