"""Hand the C heap's free pages back to the system every few seconds, as jemalloc's decay does.

glibc's malloc keeps what a process frees: it gives memory back only from the top of a heap,
and after a large block is freed it serves blocks of that size from its heaps, not from
mappings (its dynamic mapping threshold). A long-running service's resident memory then
stays at the highest working set it ever had, so RSS stops saying whether anything leaks
(``mallinfo2`` in the soak, ``benchmarks/soak.py``, showed an acker's growth to be memory
freed but kept).

``malloc_trim(0)`` returns every whole free page of every arena (``madvise``), keeping the
heaps' layout: about a millisecond for a heap of tens of MiB, and a later allocation there
takes a page fault per 4 KiB page touched again. The bolts' Python workers do
the opposite on purpose (``services/bolts/runtime/heap.py``): each task re-touches the same large
arrays at once, and the faults were most of a small task's time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("squall.heap_decay")

#: How often free pages go back: jemalloc's default decay time for dirty pages.
INTERVAL_S = 10.0


def trimmer() -> Callable[[], None] | None:
    """``malloc_trim(0)`` of this process's C library; None where there is none (not glibc)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def run() -> None:
        trim(0)

    return run


def start(stop: threading.Event, interval_s: float = INTERVAL_S) -> threading.Thread | None:
    """Trim every ``interval_s`` until ``stop`` is set, from a daemon thread (malloc locks
    one arena at a time as it trims it: a service thread's malloc waits at most for that
    arena's pass). None where the C library cannot trim."""
    trim = trimmer()
    if trim is None:
        log.info("the C library has no malloc_trim: free heap pages stay with the process")
        return None

    def loop() -> None:
        while not stop.wait(interval_s):
            trim()

    thread = threading.Thread(target=loop, daemon=True, name="heap-decay")
    thread.start()
    return thread
