"""What a bolts job asks of a cluster: the cores its queries run on at once, and a lock of
its own beside the jobs other workers run for the topology's other bolts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from services.bolts.job import cluster_conf, job_lock
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.chains import chains
from squall.core.topology.model import TopologySpec


def _spec() -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("s", "src", 2)
    b.set_bolt("split", "examples.wordcount:SplitSentence", 4,
               outputs={"default": ["word"]}).shuffle_grouping("s")
    b.set_bolt("count", "examples.wordcount:WordCount", 3).fields_grouping("split", ["word"])
    spec = b.build("cores", ackers=1)
    # split's four tasks on two executors
    return dataclasses.replace(spec, bolts=tuple(
        dataclasses.replace(x, executors=2) if x.name == "split" else x for x in spec.bolts))


def test_a_cluster_job_takes_one_core_per_executor_of_each_query_head() -> None:
    spec = _spec()
    fused = chains(spec, ["split", "count"], True)
    apart = chains(spec, ["split", "count"], False)
    assert cluster_conf("spark://m:7077", spec, fused) == {"spark.cores.max": "2"}
    assert cluster_conf("spark://m:7077", spec, apart) == {"spark.cores.max": "5"}


def test_a_local_master_is_left_alone() -> None:
    assert cluster_conf("local[2]", _spec(), [("split",)]) == {}


def test_each_set_of_bolts_has_a_lock_of_its_own() -> None:
    spec, here = _spec(), Path("/ckpt")
    assert job_lock(here, spec, ["split"]) != job_lock(here, spec, ["count"])
    assert job_lock(here, spec, ["split", "count"]) == job_lock(here, spec, ["count", "split"])
    assert job_lock(here, spec, ["split"]).parent == here / spec.name
