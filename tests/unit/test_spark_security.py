"""Spark's authentication and encryption as a bolts job asks for them
(squall/core/control/spark_security.py): on a cluster always, unless said insecure; never
for a local master; the secret never in an error or a repr."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.spark_security import (
    INSECURE_ENV,
    MIN_SECRET,
    SECRET_ENV,
    SparkSecurity,
    daemon_options,
    security_from,
)
from squall.core.errors import ConfigError

SECRET = "s" * MIN_SECRET


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,4]", " local[1] "])
def test_a_local_master_needs_nothing(master: str) -> None:
    assert SparkSecurity().session(master) == {}


def test_a_cluster_gets_authentication_and_encryption_with_the_secret() -> None:
    conf = SparkSecurity(SECRET).session("spark://m1:7077,m2:7077")
    assert conf == {"spark.authenticate": "true", "spark.network.crypto.enabled": "true",
                    "spark.authenticate.secret": SECRET}


def test_a_cluster_without_the_secret_is_refused_naming_both_ways_out() -> None:
    with pytest.raises(ConfigError, match=f"{SECRET_ENV}.*{INSECURE_ENV}=true"):
        SparkSecurity().session("spark://m:7077")
    assert SparkSecurity(insecure=True).session("spark://m:7077") == {}


def test_the_daemons_are_told_the_same_settings_and_no_rest_submission() -> None:
    assert daemon_options() == ("-Dspark.authenticate=true -Dspark.network.crypto.enabled=true "
                                "-Dspark.master.rest.enabled=false")


@given(st.text(min_size=1, max_size=MIN_SECRET - 1).filter(lambda t: t.strip() == t))
def test_a_short_secret_is_refused_without_its_value(secret: str) -> None:
    with pytest.raises(ConfigError) as e:
        security_from({SECRET_ENV: secret})
    assert str(e.value) == f"{SECRET_ENV} must be {MIN_SECRET} characters at least"


def test_the_environment_read() -> None:
    assert security_from({}) == SparkSecurity()
    assert security_from({SECRET_ENV: SECRET}).secret == SECRET
    assert security_from({INSECURE_ENV: "TRUE"}).insecure
    with pytest.raises(ConfigError, match=f"{INSECURE_ENV} must be true or false"):
        security_from({INSECURE_ENV: "maybe"})
    assert SECRET not in repr(SparkSecurity(SECRET))
