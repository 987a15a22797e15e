from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.bolts.report import (
    ARROW_SCHEMA,
    COUNTS,
    LAST_ERRORS,
    BatchReport,
    to_arrow,
)
from squall.core.errors import WireFormatError

counts = st.integers(0, 1 << 40)
reports = st.builds(
    BatchReport, task=st.integers(-1, 1 << 16), component=st.text(max_size=20),
    executed=counts, emitted=counts, acked=counts, failed=counts, bad=counts,
    error_count=counts, fetch_retries=counts,
    seconds=st.floats(0, 1e6, allow_nan=False),
    errors=st.lists(st.text(max_size=30), max_size=LAST_ERRORS),
    phases=st.dictionaries(st.sampled_from(["input", "read", "execute", "produce", "flush"]),
                           st.floats(0, 1e6, allow_nan=False)))


@given(reports, st.text(max_size=10))
def test_json_round_trip(rep: BatchReport, run: str) -> None:
    assert BatchReport.from_json(rep.to_json(run)) == (run, rep)


@given(st.lists(reports, max_size=5))
def test_arrow_round_trip(reps: list[BatchReport]) -> None:
    batch = to_arrow(reps)
    assert batch.schema == ARROW_SCHEMA
    assert [BatchReport.from_row(r) for r in batch.to_pylist()] == reps


@given(st.lists(reports, max_size=5))
def test_merged_sums_counts_and_keeps_the_last_errors(reps: list[BatchReport]) -> None:
    m = BatchReport.merged("c", reps)
    assert m.component == "c"
    for k in COUNTS:
        assert getattr(m, k) == sum(getattr(r, k) for r in reps)
    assert m.errors == [e for r in reps for e in r.errors][-LAST_ERRORS:]
    for p, v in m.phases.items():
        assert v == pytest.approx(sum(r.phases.get(p, 0.0) for r in reps))


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_wire_format_error(raw: bytes) -> None:
    try:
        run, rep = BatchReport.from_json(raw)
    except WireFormatError:
        return
    assert isinstance(run, str) and isinstance(rep, BatchReport)


@pytest.mark.parametrize(("doc", "needle"), [
    ({"run": "r", "acked": "7"}, "'acked' is not int"),
    ({"run": "r", "acked": True}, "'acked' is not int"),
    ({"run": "r", "phases": {"input": "x"}}, "'phases'"),
    ({"run": "r", "errors": "boom"}, "'errors'"),
    ({"acked": 1}, "run id"),
    ([1, 2], "run id"),
])
def test_a_wrongly_typed_report_names_the_field(doc: object, needle: str) -> None:
    with pytest.raises(WireFormatError, match=needle):
        BatchReport.from_json(json.dumps(doc).encode())
