"""Trident's ``stateQuery`` as a bolt: each input tuple's key looked up in a state.

A batch bolt: per micro-batch, one ``batch_retrieve`` of the batch's keys (``MapGet``: one
``multi_get``, one database read), then one output tuple per input, its fields and the
result, anchored to it; the inputs are acked after the batch (failed if the read fails, so
their trees are replayed). It reads what the state's last committed batch wrote: opaque
and transactional maps give the current value, as Trident's ``MapGet`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from squall.backends import open_state
from squall.core.bolt_api.bolt import PARENT, BatchBolt, TaskContext
from squall.core.topology.trident import QuerySpec, StateOptions
from squall.core.trident.maps import map_state

if TYPE_CHECKING:
    import pandas as pd

#: Set by the bolts job: its default state database, and the queried state's settings.
JOB_STATE_URL = "squall.state_url"
QUERIED = "squall.queried"


class StateQuery(BatchBolt):
    def prepare(self, conf: Mapping[str, Any], context: TaskContext) -> None:
        super().prepare(conf, context)
        where = f"bolt {context.component!r}"
        self.spec = QuerySpec.from_config(
            {k: v for k, v in conf.items() if not k.startswith("squall.")}, where)
        self.function = self.spec.load_function(where)
        options: StateOptions = conf[QUERIED]
        self.store = open_state(options, conf[JOB_STATE_URL], context.task)
        self.map = map_state(options.kind, self.store)

    def process(self, df: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        keys = list(zip(*(df[f].tolist() for f in self.spec.key), strict=True)) \
            if self.spec.key else [()] * len(df)
        results = self.function.batch_retrieve(self.map, keys)
        out = {f: df[f].to_numpy() for f in self.spec.fields}
        out[self.spec.output] = pd.Series(results, dtype=object).to_numpy()
        out[PARENT] = range(len(df))
        return pd.DataFrame(out)

    def cleanup(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            close()
