"""The cluster benchmark's faults as named on its command line (benchmarks/cluster.py)."""

from __future__ import annotations

import pytest

from benchmarks.cluster import ALL, CUT_PORTS, KINDS, bound_s, parse_faults


def test_a_fault_is_a_kind_and_a_host() -> None:
    assert parse_faults("kill:h1,cut-zk:h3") == [("kill", "h1"), ("cut-zk", "h3")]


def test_all_fails_every_host_and_each_partial_partition() -> None:
    got = parse_faults("all")
    assert {h for k, h in got if k == "kill"} == {"h1", "h2", "h3"}
    assert {h for k, h in got if k == "cut"} == {"h1", "h2", "h3"}
    assert {k for k, _ in got} == set(KINDS)
    assert len(got) == len(ALL) == len(set(got))


def test_the_state_database_going_down_is_a_fault_of_no_host() -> None:
    assert parse_faults("pg-down,freeze:h2") == [("pg-down", ""), ("freeze", "h2")]
    with pytest.raises(ValueError, match=r"\(pg-down, ro-checkpoints alone\)"):
        parse_faults("pg-down:h1")


@pytest.mark.parametrize("bad", ["kill", "kill:h4", "explode:h1", "kill:h1,,cut", ":h2",
                                 "freeze"])
def test_a_fault_that_is_not_one_is_named(bad: str) -> None:
    with pytest.raises(ValueError, match="KIND:HOST"):
        parse_faults(bad)


def test_a_partial_partition_cuts_zookeeper_or_kafka_never_both() -> None:
    zk, kafka = set(CUT_PORTS["cut-zk"]), set(CUT_PORTS["cut-kafka"])
    assert 2181 in zk and 9092 in kafka and not zk & kafka


def test_acks_must_flow_within_30_s_or_60_where_the_leading_spark_master_goes() -> None:
    assert bound_s("kill:h1") == bound_s("cut:h1") == 60
    assert {bound_s(f) for f in ALL if f not in ("kill:h1", "cut:h1")} == {30}
