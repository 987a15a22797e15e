from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.bolts.report import COUNTS, LAST_ERRORS, BatchReport

counts = st.integers(0, 1 << 40)
reports = st.builds(
    BatchReport, task=st.integers(-1, 1 << 16), component=st.text(max_size=20),
    executed=counts, emitted=counts, acked=counts, failed=counts, bad=counts,
    error_count=counts, fetch_retries=counts,
    seconds=st.floats(0, 1e6, allow_nan=False),
    errors=st.lists(st.text(max_size=30), max_size=LAST_ERRORS),
    phases=st.dictionaries(st.sampled_from(["input", "read", "execute", "produce", "flush"]),
                           st.floats(0, 1e6, allow_nan=False)))


@given(st.lists(reports, max_size=5))
def test_merged_sums_counts_and_keeps_the_last_errors(reps: list[BatchReport]) -> None:
    m = BatchReport.merged("c", reps)
    assert m.component == "c"
    for k in COUNTS:
        assert getattr(m, k) == sum(getattr(r, k) for r in reps)
    assert m.errors == [e for r in reps for e in r.errors][-LAST_ERRORS:]
    for p, v in m.phases.items():
        assert v == pytest.approx(sum(r.phases.get(p, 0.0) for r in reps))
