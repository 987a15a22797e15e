"""A windowed bolt task's micro-batch: its tuples into the windows, each window that closes
through the bolt's ``execute``, and each tuple acked once no later window holds it
(:mod:`squall.core.tasks.windows` decides which, :class:`~squall.core.tasks.executor.BoltExecutor`
keeps the books).

A late tuple goes, anchored to itself, to the late stream if the bolt has one, and is acked
(Storm's way); without one it is acked and counted in a warning. A tuple whose timestamp is
not a number fails, saying so. An exception in ``execute`` fails every tuple of the window,
which leaves it; emitted children are put into their trees right after each window, so a
tuple that waits for later windows holds no edges in memory. The trees of the tuples kept
have their timeouts reset while they wait.
"""

from __future__ import annotations

from collections.abc import Sequence

from squall.core.bolt_api.windowed import TupleWindow, WindowedBolt, WindowedOutputCollector
from squall.core.errors import SquallError
from squall.core.reliability.tuples import Tuple
from squall.core.tasks.books import Books
from squall.core.tasks.exec_result import ALL_INPUTS, CallWatch
from squall.core.tasks.windows import WindowManager


def run_windows(ex: Books, bolt: WindowedBolt, windows: WindowManager,
                collector: WindowedOutputCollector, tuples: Sequence[Tuple],
                watch: CallWatch | None, timeout_ms: int) -> None:
    """``timeout_ms``: the topology's message timeout (the tuples kept have their trees'
    timeouts reset within it)."""
    res = ex.result
    now = ex.clock.now_ms()
    late: list[Tuple] = []
    windows.begin()
    for t in tuples:
        if t.is_tick:  # a tick only lets the clock be read
            continue
        res.executed += 1
        try:
            if not windows.add(t, now):
                late.append(t)
        except SquallError as e:
            ex.failed_by(f"bolt {ex.context.component!r}: {e}", t.roots)
            ex.fail(t)
    stream = windows.spec.late_stream
    for t in late:
        if stream is not None:
            ex.emit(stream, [t[f] for f in ex.outputs[stream]], [t], None)
        ex.ack(t)
    if late and stream is None:
        res.warnings.append(
            f"bolt {ex.context.component!r} task {ex.context.task}: {len(late)} late tuples "
            f"(timestamps below the watermark {windows.progress.watermark}) acked and left "
            "out of every window: name a late stream (topology.bolts.late.tuple.stream) to "
            "keep them")
    timed = not windows.spec.by_count
    for fired in windows.fire(now):
        collector.window = fired.tuples
        window = TupleWindow(fired.tuples, fired.new, fired.expired,
                             fired.start if timed else None, fired.end if timed else None)
        if watch is not None:
            watch.enter(ALL_INPUTS)
        try:
            bolt.execute(window)
        except Exception as e:  # user code: the window's tuples fail and leave it
            ex.failed_by(e, {r for t in fired.tuples for r in t.roots})
            for t in fired.tuples:
                ex.fail(t)
            windows.drop(fired.tuples)
        else:
            for t in fired.tuples:
                ex.children_so_far(t)
            for t in fired.done:
                ex.ack(t)
        finally:
            collector.window = ()
            if watch is not None:
                watch.leave()
        windows.finish(fired)
    for t in windows.refresh(now, timeout_ms // 3):
        ex.reset_timeout(t)
