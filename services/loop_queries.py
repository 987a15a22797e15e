"""Questions a service's HTTP port asks of its loop ("where is this message?", "is this
tree open?"): the loop's state is its own thread's, so a question waits for the loop to
answer it between two of its steps, as a Storm executor answers between tuples.

Routes are served beside ``/metrics`` (services/common.py): a path prefix and a handler of
the rest of the path, answering ``(status, JSON)``.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

#: How long a question waits for the loop before it is answered 503.
WAIT_S = 5.0

Handler = Callable[[str], tuple[int, bytes]]


class Routed(Protocol):
    def routes(self) -> Mapping[str, Handler]: ...


class LoopQueries:
    def __init__(self) -> None:
        self._q: queue.Queue[tuple[Callable[[], Any], list[Any], threading.Event]] = \
            queue.Queue()

    def ask(self, question: Callable[[], Any], wait_s: float = WAIT_S) -> tuple[bool, Any]:
        """(answered, the answer); from any thread but the loop's."""
        box: list[Any] = []
        done = threading.Event()
        self._q.put((question, box, done))
        if not done.wait(wait_s):
            return False, None
        return True, box[0] if box else None

    def answer(self) -> None:
        """Answer what was asked (the loop calls it between steps; cheap when idle)."""
        while not self._q.empty():
            try:
                question, box, done = self._q.get_nowait()
            except queue.Empty:
                return
            try:
                box.append(question())
            except Exception as e:  # a question never stops the loop
                box.append(e)
            done.set()


def json_route(queries: LoopQueries, answer: Callable[[list[str]], Any]) -> Handler:
    """A handler that splits the rest of the path at ``/`` and has the loop answer it: None
    is 404, a ValueError 400 (its message), a dict 200."""
    def handle(rest: str) -> tuple[int, bytes]:
        ok, got = queries.ask(lambda: answer(rest.strip("/").split("/")))
        if not ok:
            return 503, _body({"error": "the service's loop did not answer in time"})
        if isinstance(got, ValueError):
            return 400, _body({"error": str(got)})
        if isinstance(got, Exception):
            return 500, _body({"error": f"{type(got).__name__}: {got}"})
        if got is None:
            return 404, _body({"error": f"not here: {rest}"})
        return 200, _body(got)

    return handle


def _body(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj).encode()
