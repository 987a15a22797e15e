"""The bolts job's settings: Spark's own --conf KEY=VALUE, validated."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.bolts.settings import parse_args
from squall.core.errors import ConfigError


def test_conf_flags_become_spark_settings(tmp_path: Path) -> None:
    s = parse_args(["--topology-file", str(tmp_path / "t.json"),
                    "--conf", "spark.eventLog.enabled=true",
                    "--conf", "spark.driver.extraJavaOptions=-Da=b -Dc=d=e"])
    assert s.conf() == {"spark.eventLog.enabled": "true",
                        "spark.driver.extraJavaOptions": "-Da=b -Dc=d=e"}


def test_no_conf_flags_no_settings(tmp_path: Path) -> None:
    assert parse_args(["--topology-file", str(tmp_path / "t.json")]).conf() == {}


@pytest.mark.parametrize("bad", ["spark.x", "foo=1", "=1"])
def test_a_bad_conf_is_named(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match=f"spark_conf.*'{bad}'"):
        parse_args(["--topology-file", str(tmp_path / "t.json"), "--conf", bad])


def test_conf_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQUALL_BOLTS_SPARK_CONF", '["spark.a.b=1"]')
    assert parse_args(["--topology-file", str(tmp_path / "t.json")]).conf() == {"spark.a.b": "1"}


def test_latency_buckets_are_fine_over_the_micro_batch_range() -> None:
    """Quantiles of complete latency are interpolated inside a bucket: between 0.1 s and
    3 s no bucket may be wider than half its lower bound (0.5 -> 1.0 s was one bucket)."""
    from itertools import pairwise

    from squall.metrics import LATENCY_BUCKETS

    inside = [b for b in LATENCY_BUCKETS if 0.1 <= b <= 3.0]
    assert all(hi - lo <= lo / 2 for lo, hi in pairwise(inside))
