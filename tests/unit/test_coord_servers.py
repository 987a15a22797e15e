"""The order a ZooKeeper client tries its servers in (squall/coord.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.coord import server_order
from squall.core.errors import CoordinationError

names = st.lists(st.from_regex(r"[a-z][a-z0-9]{0,5}:[1-9][0-9]{0,3}", fullmatch=True),
                 min_size=1, max_size=7, unique=True)


@given(names, st.integers(min_value=0, max_value=50), st.sampled_from(["", "/squall/x"]))
def test_a_rotation_keeps_every_server_in_its_cycle_and_the_chroot(
        servers: list[str], start: int, chroot: str) -> None:
    got = server_order(",".join(servers) + chroot, start)
    assert got.endswith(chroot)
    order = got[:len(got) - len(chroot)].split(",")
    assert sorted(order) == sorted(servers)
    k = start % len(servers)
    assert order == servers[k:] + servers[:k]


def test_spaces_are_dropped_and_an_empty_string_is_named() -> None:
    assert server_order(" a:1 , b:2,c:3 ", 1) == "b:2,c:3,a:1"
    with pytest.raises(CoordinationError, match="no ZooKeeper server in the connect string ''"):
        server_order("", 0)
    with pytest.raises(CoordinationError, match="'/chroot'"):
        server_order("/chroot", 0)
