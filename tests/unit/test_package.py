"""The ``squall`` package: its bolt API re-exported, loaded only when used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import squall
from squall.core.bolt_api.bolt import Bolt
from squall.core.topology.builder import TopologyBuilder


def test_the_bolt_api_is_re_exported() -> None:
    assert squall.Bolt is Bolt and squall.TopologyBuilder is TopologyBuilder
    # Every lazily loaded name is exported and every export but the version is loaded
    # lazily: a name added to one list and not the other fails here.
    assert set(squall.__all__) == {*squall._HOMES, "__version__"}
    assert set(squall.__all__) <= set(dir(squall))
    for name in squall.__all__:
        assert getattr(squall, name) is not None


def test_an_unknown_name_says_which() -> None:
    with pytest.raises(AttributeError, match="'Blot'"):
        _ = squall.Blot


def test_a_process_that_reads_topologies_loads_no_arrow() -> None:
    # A worker and the API read topologies and assignments: their start on a busy
    # machine is the cluster's start. Arrow is for
    # the processes that move tuples (NumPy still comes with the Trident aggregators).
    code = ("import sys, services.worker.__main__, services.api.__main__, "
            "squall.core.topology.grouping;"
            "print('pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
