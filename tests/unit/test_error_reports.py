"""A process's last errors (Storm UI's lastError): kept, served, read back (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.error_reports import MAX_CHARS, ErrorReport, ErrorReports, parse_reports
from squall.core.errors import WireFormatError

reports = st.lists(st.builds(ErrorReport, st.text(max_size=20), st.text(max_size=50),
                             st.integers(0, 2**53), st.integers(-1, 1024)), max_size=30)


@given(reports)
def test_what_a_process_serves_reads_back_the_same(rs: list[ErrorReport]) -> None:
    kept = ErrorReports(keep=100)
    for r in rs:
        kept.report(r.component, r.error, r.time_ms, r.task)
    got = parse_reports(kept.to_json())
    assert [r.time_ms for r in got] == sorted(r.time_ms for r in rs)  # oldest first
    assert sorted(got, key=repr) == sorted(rs, key=repr)


def test_only_the_last_few_per_component_are_kept_and_long_texts_are_cut() -> None:
    kept = ErrorReports(keep=3)
    for i in range(5):
        kept.report("split", f"boom {i}", i)
    kept.report("count", "x" * (MAX_CHARS + 50), 9)
    got = kept.all()
    assert [r.error for r in got if r.component == "split"] == ["boom 2", "boom 3", "boom 4"]
    assert len(next(r for r in got if r.component == "count").error) == MAX_CHARS


@pytest.mark.parametrize(("raw", "needle"), [
    (b"<html>", "not JSON"),
    (b"[]", "no 'errors' list"),
    (b'{"errors": [1]}', "error report 0 is not an object"),
    (b'{"errors": [{"component": "a", "error": "b", "time_ms": "soon"}]}', "integers"),
    (b'{"errors": [{"component": "a", "error": "b", "time_ms": true}]}', "integers"),
    (b'{"errors": [{"error": "b", "time_ms": 1}]}', "component and error"),
])
def test_a_malformed_document_is_an_error_naming_what_is_wrong(raw: bytes, needle: str) -> None:
    with pytest.raises(WireFormatError, match=needle):
        parse_reports(raw)
