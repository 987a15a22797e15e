"""Source messages whose tuples killed or hung a bolt: their replays run in sandboxes from
the start (docs/poison.md).

A culprit's tree is failed and replayed by the spout under a new root, and its replay would
kill or hang the worker again, costing a second attempt (and, for a hang, a second deadline)
before the sandboxes name it again. So each query keeps the source messages of its recent
culprits in a small file beside its checkpoint (shared storage, like the checkpoint); a task
whose micro-batch holds one of them runs it in parts at once, each suspect in a part of its
own. Read when the file changed (one ``stat`` a micro-batch otherwise); written whole and
replaced atomically, the newest :data:`KEPT` kept. Two writers at once may lose one's
addition: its replay then costs the first attempt again, nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from squall.core.wire.tuple_batch import TupleBatch

FILE = "suspects.json"
#: Source messages kept (the oldest go first): a culprit's replays come within its retries.
KEPT = 10_000


class Suspects:
    """One query's recent culprits: ``source partition -> offsets``."""

    def __init__(self, directory: str) -> None:
        self.path = Path(directory) / FILE
        self._seen: tuple[int, int] | None = None
        self._items: list[tuple[str, int]] = []
        self._by_source: dict[str, npt.NDArray[np.int64]] = {}

    def _load(self) -> None:
        try:
            st = self.path.stat()
        except OSError:
            self._seen, self._items, self._by_source = None, [], {}
            return
        if self._seen == (st.st_mtime_ns, st.st_size):
            return
        items: list[tuple[str, int]] = []
        with contextlib.suppress(OSError, ValueError, TypeError):
            items = [(str(s), int(o)) for s, o in json.loads(self.path.read_text())]
        self._seen, self._items = (st.st_mtime_ns, st.st_size), items
        by: dict[str, list[int]] = {}
        for s, o in items:
            by.setdefault(s, []).append(o)
        self._by_source = {s: np.asarray(o, np.int64) for s, o in by.items()}

    def rows(self, batches: Sequence[TupleBatch]) -> npt.NDArray[np.bool_]:
        """Which of the batches' rows (in turn) descend from a suspect."""
        self._load()
        out = np.zeros(sum(len(b) for b in batches), np.bool_)
        if not self._by_source:
            return out
        at = 0
        for b in batches:
            o = b.origins()
            if o is not None:
                names, offsets = o
                for i, name in enumerate(names.dictionary.to_pylist()):
                    known = self._by_source.get(str(name))
                    if known is None:
                        continue
                    mine = np.asarray(names.indices.fill_null(-1).to_numpy()) == i
                    out[at:at + len(b)] |= mine & np.isin(offsets, known)
            at += len(b)
        return out

    def add(self, origins: Iterable[tuple[str, int]]) -> None:
        new = [(s, int(o)) for s, o in origins]
        if not new:
            return
        self._seen = None
        self._load()
        items = [*[i for i in self._items if i not in set(new)], *new][-KEPT:]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{FILE}.{os.getpid()}")
        tmp.write_text(json.dumps(items))
        os.replace(tmp, self.path)
        self._seen = None
