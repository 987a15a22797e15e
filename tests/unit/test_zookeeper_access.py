"""Squall's ZooKeeper access from the environment: parsed in one place, every error naming
the variable and never the password; the ACL it gives; who else may change a node."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kazoo.security import make_digest_acl_credential

from squall.core.control.zookeeper_access import (
    ALL,
    AUTH,
    CHANGES,
    PREVIOUS_AUTH,
    READ,
    Identity,
    ZooKeeperAccess,
    access_from,
    others_who_may_write,
)
from squall.core.errors import ConfigError

SECRET = "s3cret-s3cret-s3cret"


def test_nothing_set_is_the_open_laptop_default() -> None:
    a = access_from({})
    assert a == ZooKeeperAccess() and a.acl() == []


def test_an_identity_closes_every_node_to_others_and_world_read_opens_reading() -> None:
    a = access_from({AUTH: f"squall:{SECRET}"})
    ident = make_digest_acl_credential("squall", SECRET)
    assert a.acl() == [(ALL, "digest", ident)]
    b = access_from({AUTH: f"squall:{SECRET}", "SQUALL_ZOOKEEPER_WORLD_READ": "true"})
    assert b.acl() == [(ALL, "digest", ident), (READ, "world", "anyone")]


@pytest.mark.parametrize(("env", "says"), [
    ({AUTH: "no-colon"}, "must be user:password"),
    ({AUTH: f"bad user:{SECRET}"}, "must be user:password"),
    ({AUTH: "squall:short-pass"}, "at least 16 characters"),
    ({"SQUALL_ZOOKEEPER_WORLD_READ": "yes"}, "must be true or false"),
    ({"SQUALL_ZOOKEEPER_TLS_CERT": "c.pem"}, "go together"),
    ({"SQUALL_ZOOKEEPER_TLS_CERT": "c.pem", "SQUALL_ZOOKEEPER_TLS_KEY": "k.pem"}, "needs"),
    ({"SQUALL_ZOOKEEPER_PASSWORD": SECRET}, "unknown SQUALL_ZOOKEEPER_PASSWORD"),
])
def test_a_malformed_setting_names_its_variable_and_never_the_password(
        env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says) as got:
        access_from(env)
    assert SECRET not in str(got.value) and "short-pass" not in str(got.value)


def test_the_password_is_in_no_repr() -> None:
    a = access_from({AUTH: f"squall:{SECRET}", "SQUALL_ZOOKEEPER_TLS_CA": "ca.pem"})
    assert SECRET not in repr(a) and a.tls is not None and a.tls.ca == "ca.pem"


@given(st.text(st.characters(codec="ascii", exclude_characters=":"), min_size=1, max_size=20)
       .filter(lambda u: u.replace(".", "a").replace("_", "a").replace("-", "a").isalnum()),
       st.text(min_size=16, max_size=40))
def test_the_digest_id_is_zookeepers(user: str, password: str) -> None:
    assert Identity(user, password).digest_id() == make_digest_acl_credential(user, password)


ACCESS = ZooKeeperAccess(Identity("squall", SECRET))
MINE = ("digest", Identity("squall", SECRET).digest_id())


def test_only_squalls_identity_may_change_a_trusted_node() -> None:
    assert others_who_may_write([(ALL, *MINE), (READ, "world", "anyone")], ACCESS) == []
    assert others_who_may_write([(ALL, "world", "anyone")], ACCESS) == ["world:anyone"]
    thief = ("digest", Identity("thief", SECRET).digest_id())
    assert others_who_may_write([(ALL, *MINE), (READ | 2, *thief)], ACCESS) == [
        f"digest:{thief[1]}"]


@given(st.lists(st.tuples(st.integers(0, 31), st.sampled_from(["digest", "world", "ip"]),
                          st.sampled_from([MINE[1], "anyone", "10.0.0.1", "x:y"])), max_size=6))
def test_a_node_is_trusted_iff_no_one_else_holds_a_changing_permission(
        acl: list[tuple[int, str, str]]) -> None:
    others = others_who_may_write(acl, ACCESS)
    assert (others == []) == all(not p & CHANGES or (s, i) == MINE for p, s, i in acl)


def test_a_rotation_authenticates_as_both_and_gives_nodes_the_new_acl_alone() -> None:
    a = access_from({AUTH: f"squall:{SECRET}", PREVIOUS_AUTH: "squall:old-0123456789abcdef"})
    assert a.credentials() == [f"squall:{SECRET}", "squall:old-0123456789abcdef"]
    assert a.acl() == [(ALL, *MINE)]
    assert others_who_may_write([(ALL, "digest", a.previous.digest_id())], a)  # type: ignore
    with pytest.raises(ConfigError, match="needs SQUALL_ZOOKEEPER_AUTH"):
        access_from({PREVIOUS_AUTH: f"squall:{SECRET}"})
    with pytest.raises(ConfigError, match="the same as"):
        access_from({AUTH: f"squall:{SECRET}", PREVIOUS_AUTH: f"squall:{SECRET}"})
