"""The API's roles: a token is one role's or none, each role reaches what the ones below do,
and the settings refuse short, shared or orphaned tokens naming the rule, never a token."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.api.context import authorize
from services.api.errors import NoToken, RoleTooLow, WrongToken
from services.api.roles import MIN_TOKEN, Role, role_of
from services.api.settings import parse_args
from squall.core.errors import ConfigError

ADMIN, OPERATOR, READER = ("a" * MIN_TOKEN, "o" * MIN_TOKEN, "r" * MIN_TOKEN)


def settings(monkeypatch: pytest.MonkeyPatch, **tokens: str) -> object:
    for name, value in tokens.items():
        monkeypatch.setenv(f"SQUALL_API_{name.upper()}", value)
    return parse_args([])


def test_each_token_is_its_roles_and_no_other() -> None:
    tokens = {Role.ADMIN: ADMIN, Role.OPERATOR: OPERATOR, Role.READER: READER}
    assert [role_of(tokens, t) for t in (ADMIN, OPERATOR, READER)] == [
        Role.ADMIN, Role.OPERATOR, Role.READER]
    assert role_of(tokens, ADMIN[:-1]) is None and role_of(tokens, "") is None


@given(st.text(max_size=40))
def test_a_guess_is_no_role(guess: str) -> None:
    tokens = {Role.ADMIN: ADMIN, Role.OPERATOR: OPERATOR, Role.READER: READER}
    assert role_of(tokens, guess) == {v: k for k, v in tokens.items()}.get(guess)


def test_a_role_reaches_its_routes_and_those_below_only(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    s = settings(monkeypatch, token=ADMIN, operator_token=OPERATOR, reader_token=READER)
    for token, role in ((ADMIN, Role.ADMIN), (OPERATOR, Role.OPERATOR), (READER, Role.READER)):
        for need in Role:
            if role >= need:
                assert authorize(s, token, need) is role  # type: ignore[arg-type]
            else:
                with pytest.raises(RoleTooLow, match=f"the {role} role .* the {need} role"):
                    authorize(s, token, need)  # type: ignore[arg-type]
    with pytest.raises(NoToken):
        authorize(s, None, Role.READER)  # type: ignore[arg-type]
    with pytest.raises(WrongToken):
        authorize(s, "x" * MIN_TOKEN, Role.READER)  # type: ignore[arg-type]


@pytest.mark.parametrize(("tokens", "says"), [
    ({"token": "short-token"}, "the admin token must be at least 32"),
    ({"token": ADMIN, "operator_token": "short-token"}, "the operator token must be at least"),
    ({"token": ADMIN, "reader_token": ADMIN}, "a token of its own"),
    ({"operator_token": OPERATOR, "allow_anonymous": "true"}, "need the admin's"),
])
def test_short_shared_or_orphaned_tokens_are_refused_without_showing_them(
        monkeypatch: pytest.MonkeyPatch, tokens: dict[str, str], says: str) -> None:
    monkeypatch.delenv("SQUALL_API_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=says) as got:
        settings(monkeypatch, **tokens)
    assert all(t not in str(got.value) for t in tokens.values())
