"""The embedded broker's profile: its settings where none are set, and no client
properties meant for another cluster."""

from __future__ import annotations

from squall.dev import profile


def test_the_profile_fills_in_what_is_unset_and_leaves_out_client_properties() -> None:
    env = {"SQUALL_ACKER_FETCH_BACKOFF_MS": "25", "SQUALL_KAFKA_SECURITY_PROTOCOL": "SSL",
           "SQUALL_KAFKA_PROPERTIES": "/etc/squall/client.properties",
           "SQUALL_KAFKA_PORT": "9094", "PATH": "/bin"}
    assert profile.apply(env) == ["SQUALL_KAFKA_PROPERTIES", "SQUALL_KAFKA_SECURITY_PROTOCOL"]
    assert env == {"SQUALL_ACKER_FETCH_BACKOFF_MS": "25",  # the user's value wins
                   "SQUALL_SPOUT_SOURCE_GAP_HOLD_MS": "2000", "SQUALL_KAFKA_PORT": "9094",
                   "PATH": "/bin"}
    assert profile.exports() == ("export SQUALL_ACKER_FETCH_BACKOFF_MS=10\n"
                                 "export SQUALL_SPOUT_SOURCE_GAP_HOLD_MS=2000\n")
