"""What a killed topology's teardown removes and keeps, and when it may start."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.assignment import Kind, Placement, Worker
from squall.core.control.cluster import WorkerAssignment, WorkerInfo
from squall.core.control.teardown import Teardown, owned, still_running

TID = "wc-3-1795798502"


def test_only_what_the_id_owns_is_removed_and_its_dead_letters_are_kept() -> None:
    topics = [f"squall.{TID}.acker", f"squall.{TID}.results", f"squall.{TID}.dlq",
              f"squall.{TID}.edge.sentences.default.split", f"squall.{TID}.metrics",
              "squall.wc-3-1795798502x.acker",  # another id that starts the same
              "squall.wc-4-1795798999.acker", "sentences", f"{TID}.acker"]
    groups = [f"squall.{TID}.sentences", f"squall.{TID}.acker",
              f"squall.{TID}.bolt-reports.412", "squall.wc-4-1795798999.sentences",
              "other-app"]
    remove, drop, kept = owned(TID, topics, groups)
    assert remove == sorted([f"squall.{TID}.acker", f"squall.{TID}.results",
                             f"squall.{TID}.edge.sentences.default.split",
                             f"squall.{TID}.metrics"])
    assert drop == sorted(groups[:3]) and kept == [f"squall.{TID}.dlq"]
    # Purged: the dead letters go too.
    assert owned(TID, topics, groups, purge_state=True) == (
        sorted([*remove, f"squall.{TID}.dlq"]), drop, [])


@given(st.lists(st.text("abcwq.-0123456789", max_size=30), max_size=20))
def test_nothing_outside_the_ids_prefix_is_ever_removed(names: list[str]) -> None:
    remove, drop, kept = owned(TID, names, names)
    assert all(n.startswith(f"squall.{TID}.") for n in [*remove, *drop, *kept])
    assert set(remove) | set(kept) == {n for n in names if n.startswith(f"squall.{TID}.")}


def test_it_waits_while_a_worker_runs_or_is_assigned_a_process_of_it() -> None:
    info = WorkerInfo(Worker("w1", Kind.BOLTS, 4), "h", 1, 0,
                      ({"topology": TID, "component": "split", "kind": "bolts",
                        "url": "http://h:1/metrics"},))
    placed = WorkerAssignment((Placement(TID, Kind.SPOUT, "sentences", (0,)),))
    stopping = WorkerInfo(Worker("w2", Kind.SPOUT, 4), "h", 2, 0, (), (TID,))
    assert still_running(TID, [info], [])
    assert still_running(TID, [], [placed])
    assert still_running(TID, [stopping], [])  # its processes have not exited yet
    assert WorkerInfo.from_json(stopping.to_json()) == stopping
    assert not still_running("wc-5-1", [info], [placed])
    assert not still_running(TID, [], [])


def test_a_teardown_reads_back_and_says_what_it_did() -> None:
    t = Teardown(TID, "wc", 1_000)
    assert Teardown.from_json(t.to_json()) == t
    assert t.summary() == f"{TID}: waiting for its processes to stop"
    done = Teardown(TID, "wc", 1_000, 2_000, (f"squall.{TID}.acker",),
                    (f"squall.{TID}.sentences",), (f"squall.{TID}.dlq",))
    assert Teardown.from_json(done.to_json()) == done
    assert done.summary() == (f"{TID}: removed 1 topics (squall.{TID}.acker) and 1 consumer "
                              f"groups (squall.{TID}.sentences); kept squall.{TID}.dlq; its "
                              "state stays")
