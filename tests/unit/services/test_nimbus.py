"""The API replicas as Storm's nimbuses: the election identity and the uptime string."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.api.control import Contender
from services.api.views import nimbus_summary, pretty_uptime


@given(st.integers(1, 65535), st.integers(0, 2**45), st.from_regex(r"[0-9a-z.+]{1,12}",
                                                                    fullmatch=True))
def test_an_identity_round_trips(port: int, started: int, version: str) -> None:
    c = Contender(f"http://10.0.0.1:{port}", started, version)
    assert Contender.parse(c.identity()) == c


def test_an_older_replicas_bare_url_reads_with_the_rest_unknown() -> None:
    assert Contender.parse("http://h:8080") == Contender("http://h:8080", None, None)


@given(st.text(max_size=40))
def test_any_election_node_reads_without_raising(identity: str) -> None:
    # What another process wrote there is not trusted to be an identity.
    c = Contender.parse(identity)
    assert c.url == (identity.split() or [""])[0]


def test_uptime_strings_leave_out_leading_zero_units() -> None:
    assert [pretty_uptime(s) for s in (0, 59, 61, 3600, 90061)] == [
        "0s", "59s", "1m 1s", "1h 0m 0s", "1d 1h 1m 1s"]


def test_the_leader_comes_first_and_this_replica_knows_its_own_uptime() -> None:
    body = nimbus_summary([Contender("http://a:1", 1_000, "1.0"), Contender("http://b:2")],
                          "http://b:2", 5_000, 65_000)
    assert [(n["host"], n["port"], n["status"], n["nimbusUpTimeSeconds"], n["version"])
            for n in body["nimbuses"]] == [("a", 1, "Leader", "64", "1.0"),
                                           ("b", 2, "Not a Leader", "60", "unknown")]
