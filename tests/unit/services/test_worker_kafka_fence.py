"""The worker's Kafka fence: off unless asked, and never shorter than a broker's loss."""

from __future__ import annotations

import pytest

from services.worker.settings import parse_args
from squall.core.errors import ConfigError
from squall.kafka_reach import answered as said

BASE = ["--kind", "spout"]


def test_the_kafka_fence_is_off_unless_asked() -> None:
    assert parse_args(BASE).kafka_fence_after_s is None
    assert parse_args([*BASE, "--kafka-fence-after-s", "15"]).kafka_fence_after_s == 15


@pytest.mark.parametrize("bad", ["5", "14", "0", "-1", "601", "soon"])
def test_a_grace_a_broker_loss_would_outlast_is_refused_and_named(bad: str) -> None:
    with pytest.raises((ConfigError, SystemExit)) as got:
        parse_args([*BASE, "--kafka-fence-after-s", bad])
    if got.type is ConfigError:
        assert "kafka_fence_after_s" in str(got.value)


@pytest.mark.parametrize(("error", "answered"), [
    ("TOPIC_AUTHORIZATION_FAILED", True), ("_MSG_TIMED_OUT", False),
    ("NOT_ENOUGH_REPLICAS", False), ("_TRANSPORT", False)])
def test_a_refusal_is_an_answer_and_silence_is_not(error: str, answered: bool) -> None:
    assert said(error) is answered


def test_the_alone_grace_is_bounded_and_never_longer_than_the_fence() -> None:
    s = parse_args([*BASE, "--kafka-fence-after-s", "20"])
    assert s.kafka_fence_alone_s == 8
    assert parse_args([*BASE, "--kafka-fence-after-s", "20",
                       "--kafka-fence-alone-s", "4"]).kafka_fence_alone_s == 4
    with pytest.raises(ConfigError, match=r"kafka_fence_alone_s 30.0 .* kafka_fence_after_s 20"):
        parse_args([*BASE, "--kafka-fence-after-s", "20", "--kafka-fence-alone-s", "30"])
    for bad in ("3", "0", "soon"):
        with pytest.raises((ConfigError, SystemExit)) as got:
            parse_args([*BASE, "--kafka-fence-alone-s", bad])
        if got.type is ConfigError:
            assert "kafka_fence_alone_s" in str(got.value)
