"""A bolt task's state log on disk: what makes a task's state follow it between workers.

One append-only file per task, ``task-<n>.log`` in the bolt's state directory
(``squall-state`` in the bolt query's checkpoint directory, so the state and
the query's progress are kept, or removed, together).
Around each micro-batch the Python worker running the task takes the task's
lock, applies what was appended since it last read (nothing, usually: a
``stat``), runs the task, appends the state's changes, and lets go. When the
log outgrows its last snapshot it is rewritten as one snapshot (a new file put
in place atomically; other workers see the new inode and read it from the
start). Writes are not fsynced: a process that dies loses nothing the page
cache holds; a machine that dies may lose the last micro-batches' changes.

On a cluster of several machines the state directory must be shared (the
checkpoint directory must be anyway).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from squall.core.state import SNAPSHOT, KeyValueState, decode, encode

#: Rewrite the log as a snapshot once it is this large and 4x its last snapshot.
COMPACT_MIN_BYTES = 8 << 20


class TaskStateLog:
    """One worker's view of one task's log: how far it has read, in which file."""

    def __init__(self, path: Path, state: KeyValueState,
                 compact_min_bytes: int = COMPACT_MIN_BYTES) -> None:
        self.path = path
        self.state = state
        self.compact_min_bytes = compact_min_bytes
        self._pos = 0
        self._inode: int | None = None
        self._snapshot_bytes = 0
        path.parent.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def turn(self) -> Iterator[KeyValueState]:
        """The task's turn: lock, catch up, run the body, append its changes, unlock.

        Changes are appended only if the body succeeds: a failed micro-batch is run
        again, and its changes are made again then.
        """
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self.catch_up()
                try:
                    yield self.state
                except BaseException:
                    self.state.changes()  # dropped; the next catch-up re-reads the log
                    self._inode = None
                    raise
                self.append()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def catch_up(self) -> int:
        """Apply what was appended since the last read; the number of records applied."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._inode is not None:  # the log was removed: start over, empty
                self.state.apply({}, replace=True)
            self._inode, self._pos = None, 0
            return 0
        if st.st_ino != self._inode or st.st_size < self._pos:
            self.state.apply({}, replace=True)  # a new file (compacted): read it all
            self._inode, self._pos = st.st_ino, 0
        if st.st_size == self._pos:
            return 0
        with open(self.path, "rb") as f:
            f.seek(self._pos)
            buf = f.read(st.st_size - self._pos)
        records, used = decode(buf, str(self.path), self._pos)
        for r in records:
            self.state.apply(r.changes, replace=r.kind == SNAPSHOT)
            if r.kind == SNAPSHOT:
                self._snapshot_bytes = used
        self._pos += used
        return len(records)

    def append(self) -> None:
        """Append the state's changes (nothing if there are none); compact if due."""
        changes = self.state.changes()
        if not changes:
            return
        record = encode(changes)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            # Over any torn tail a crashed writer left past what was read.
            os.ftruncate(fd, self._pos)
            os.lseek(fd, self._pos, os.SEEK_SET)
            view = memoryview(record)
            while view:
                view = view[os.write(fd, view):]
            self._inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        self._pos += len(record)
        if self._pos > max(self.compact_min_bytes, 4 * self._snapshot_bytes):
            self.compact()

    def compact(self) -> None:
        """Rewrite the log as one snapshot of the whole state."""
        record = encode(self.state.snapshot(), SNAPSHOT)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(record)
        os.replace(tmp, self.path)
        self._inode, self._pos = os.stat(self.path).st_ino, len(record)
        self._snapshot_bytes = len(record)


def log_path(state_dir: Path, task: int) -> Path:
    return state_dir / f"task-{task}.log"
