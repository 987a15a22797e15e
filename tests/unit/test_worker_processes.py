"""What a worker runs for its assignment: which processes share a task (the new one then
starts only once the old one exited)."""

from __future__ import annotations

from services.worker.processes import ProcSpec, shares_tasks
from squall.core.control.assignment import Kind


def proc(component: str, tasks: tuple[int, ...], kind: Kind = Kind.SPOUT,
         topology: str = "wc") -> ProcSpec:
    return ProcSpec(f"{topology}.{kind}.{component}.{tasks}", topology, kind, component, (),
                    tasks)


def test_a_spout_whose_task_set_changes_shares_the_tasks_in_common() -> None:
    assert shares_tasks(proc("src", (0, 1)), proc("src", (0,)))
    assert not shares_tasks(proc("src", (1,)), proc("src", (0,)))


def test_a_bolts_job_shares_a_task_with_one_that_runs_any_of_its_bolts() -> None:
    assert shares_tasks(proc("count,split", (0,), Kind.BOLTS), proc("count", (0,), Kind.BOLTS))
    assert not shares_tasks(proc("split", (0,), Kind.BOLTS), proc("count", (0,), Kind.BOLTS))


def test_other_topologies_and_kinds_share_nothing() -> None:
    assert not shares_tasks(proc("src", (0,)), proc("src", (0,), topology="other"))
    assert not shares_tasks(proc("__acker", (0,), Kind.ACKER), proc("__acker", (0,)))
