"""What a worker removes once the processes of a killed topology stopped: its checkpoints
and topology file (their teardown is queued: squall/core/control/teardown.py) and, if the
kill asked, its state. Its default state (SQLite beside the checkpoints) otherwise stays,
and a topology moved to another worker keeps its checkpoints, for them to be shared."""

from __future__ import annotations

import contextlib
import logging
import shutil
from pathlib import Path
from typing import Any

from services.worker.settings import WorkerSettings
from squall.backends import default_state_path, purge
from squall.coord import teardown_of
from squall.core.control.assignment import Kind
from squall.core.errors import SquallError

log = logging.getLogger("squall.worker")


def clean_killed(s: WorkerSettings, zk: Any, tid: str) -> None:
    """Remove what this worker kept of ``tid`` if it was killed (nothing if it was not, or
    ZooKeeper cannot say)."""
    try:
        teardown = teardown_of(zk, tid) if zk is not None else None
    except SquallError as e:
        log.warning("cannot tell whether %s was killed (%s): its checkpoints stay", tid, e)
        return
    if teardown is None:
        return
    state = default_state_path(s.checkpoints, tid)
    spec = s.workdir / "topologies" / f"{tid}.json"
    gone = [p for p in (state.parent.iterdir() if state.parent.is_dir() else ())
            if not p.name.startswith(state.name)] + [spec] * spec.exists()
    remove(gone)
    if s.kind is Kind.BOLTS and teardown.purge_state:
        # the state it kept from an earlier submission, if it kept one
        purge_state(s, teardown.state_id, default_state_path(s.checkpoints, teardown.state_id))
    for d in {state.parent, default_state_path(s.checkpoints, teardown.state_id).parent}:
        with contextlib.suppress(OSError):  # a directory with only its state stays
            d.rmdir()
    if gone:
        log.info("killed topology %s: removed %s", tid, ", ".join(str(p) for p in gone))


def purge_state(s: WorkerSettings, tid: str, state: Path) -> None:
    """A kill asked for the topology's state to go: its default SQLite files, and its rows
    in the bolts' database if they have one."""
    files = sorted(state.parent.glob(f"{state.name}*"))  # with its -wal and .locks
    remove(files)
    rows = 0
    if s.state_url:
        try:
            rows = purge(s.state_url, tid)
        except SquallError as e:
            log.error("killed topology %s: %s", tid, e)
            return
    log.info("killed topology %s: purged its state (%s%d rows)", tid,
             "".join(f"{p}, " for p in files), rows)


def remove(paths: list[Path]) -> None:
    """Delete files and directories; one already gone is fine."""
    for p in paths:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
