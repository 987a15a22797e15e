"""The tasks' lease (squall/core/control/lease.py) and its file (squall/lease.py): a
deadline that ends before the session can, never moves back, and holds nothing once
passed, unreadable or never written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from squall import lease as lease_file
from squall.core.control.lease import NONE, Lease, deadline, needs_read
from squall.core.errors import ConfigError
from squall.lease import LeaseCheck, NoLease, from_environment

MS = 1_000_000


@given(st.integers(0, 2**62))
def test_a_lease_reads_back_as_written(at: int) -> None:
    assert Lease.decode(Lease(at).encode()) == Lease(at)


@given(st.binary(max_size=30).filter(lambda b: re.fullmatch(rb"[0-9]+\n?", b) is None))
@example(b"\x1c0")  # str.strip() takes the separator for white space
@example(b" 5\n")
@example(b"")
def test_a_malformed_lease_is_refused_naming_it(raw: bytes) -> None:
    with pytest.raises(ConfigError, match="lease"):
        Lease.decode(raw)


@given(st.integers(0, 2**50), st.integers(1, 600_000))
def test_a_renewal_ends_before_the_session_could(sent: int, timeout_ms: int) -> None:
    d = deadline(sent, timeout_ms)
    assert d == sent + (timeout_ms - timeout_ms // 3) * MS
    assert sent < d <= sent + timeout_ms * MS


def test_a_margin_that_leaves_nothing_is_refused() -> None:
    with pytest.raises(ConfigError, match="margin 6000 ms"):
        deadline(0, 6000, 6000)
    with pytest.raises(ConfigError, match="timeout 0 ms"):
        deadline(0, 0)


@given(st.lists(st.integers(0, 2**40), max_size=20), st.integers(0, 2**40))
def test_renewals_never_shorten_and_the_lease_holds_only_before_its_deadline(
        deadlines: list[int], now: int) -> None:
    lease = NONE
    for d in deadlines:
        before = lease
        lease = lease.renewed(d)
        assert lease.deadline_ns >= before.deadline_ns
    assert lease.deadline_ns == max([0, *deadlines])
    assert lease.holds(now) is (now < lease.deadline_ns)
    assert needs_read(lease, now) is not lease.holds(now)


class Clock:
    def __init__(self) -> None:
        self.now = 10 * MS

    def __call__(self) -> int:
        return self.now


def test_a_check_holds_while_the_file_says_so_and_reads_it_only_once_it_passed(
        tmp_path: Path) -> None:
    path, clock = tmp_path / "lease", Clock()
    check = LeaseCheck(path, clock)
    assert not check.holds()  # never written
    lease_file.write(path, Lease(clock.now + 100 * MS))
    assert check.holds()
    path.write_text("garbage")  # not read while the deadline it knows lies ahead
    clock.now += 50 * MS
    assert check.holds()
    clock.now += 50 * MS  # the deadline passed: read, malformed, hold
    assert not check.holds()
    lease_file.write(path, Lease(clock.now + 10 * MS))
    assert check.holds()
    path.unlink()
    clock.now += 10 * MS
    assert not check.holds()


def test_a_lease_run_out_is_waited_on_until_stopped(tmp_path: Path) -> None:
    import threading

    stop = threading.Event()
    stop.set()
    assert not LeaseCheck(tmp_path / "none").wait(stop, 0.001)
    assert NoLease().holds()


def test_a_process_without_a_workers_lease_checks_nothing(tmp_path: Path) -> None:
    assert isinstance(from_environment({}), NoLease)
    got = from_environment({lease_file.LEASE_FILE_ENV: str(tmp_path / "lease")})
    assert isinstance(got, LeaseCheck) and got.path == tmp_path / "lease"
