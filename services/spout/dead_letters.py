"""Writing a spout's dead letters: the source message as it was read, with headers that say
why, where from and after how many attempts, then a marker in the task's results partition
so that a restart does not dead-letter it again. A letter the broker did not take is kept
and written again at the next step; one the authorizer refused says which ACL is missing."""

from __future__ import annotations

import logging
from typing import Any

from services.spout import kept
from services.spout.listener import SpoutListener
from squall.core.control.kafka_acls import Operation
from squall.core.reliability.clock import Clock
from squall.core.reliability.dead_letters import DeadLetterHeaders
from squall.core.tasks.spout_effects import Undeliverable
from squall.core.tasks.spout_task import SpoutTask
from squall.core.wire.internal import encode_letter_marker
from squall.kafka import check_refused, produce

log = logging.getLogger("squall.spout")
TP = tuple[str, int]


class DeadLetters:
    def __init__(self, dlq: str, results: str, component: str, listener: SpoutListener,
                 clock: Clock) -> None:
        self.dlq, self.results, self.component = dlq, results, component
        self.listener, self.clock = listener, clock
        self._to_retry: list[tuple[SpoutTask, TP, Undeliverable]] = []

    def write(self, producer: Any, task: SpoutTask, source: TP, letter: Undeliverable) -> None:
        """Write ``letter`` of ``task``'s source partition ``source``."""
        t, p = source
        value, key, read_headers = kept.parts(letter.payload)  # as it was read
        meta = DeadLetterHeaders(letter.reason, t, p, letter.offset, letter.attempts,
                                 self.component)
        headers = read_headers + meta.headers()
        log.warning("dead-lettering %s[%d]@%d: %s", t, p, letter.offset, letter.reason)
        self.listener.dead_lettering(task.cfg.task, f"{t}[{p}]@{letter.offset}", letter.reason,
                                     self.clock.now_ms())

        def marked(err: Any, marker: Any) -> None:
            # Noted in the results partition: a restart will not dead-letter it again.
            task.dead_lettered(letter, marker.offset() if err is None else None)

        def delivered(err: Any, _msg: Any) -> None:
            if err is None:
                self.listener.dead_lettered()
                produce(producer, self.results,
                        encode_letter_marker(t, p, letter.offset, self.clock.now_ms()),
                        partition=task.cfg.task, on_delivery=marked)
            else:
                check_refused(err, Operation.WRITE, self.dlq, "writing a dead letter")
                log.error("dead letter for %s[%d]@%d not delivered (%s); retrying", t, p,
                          letter.offset, err)
                self._to_retry.append((task, source, letter))

        produce(producer, self.dlq, value, key=key, headers=headers, on_delivery=delivered)

    def retry(self, producer: Any) -> None:
        """Write again the letters the broker did not take."""
        again, self._to_retry = self._to_retry, []
        for task, source, letter in again:
            self.write(producer, task, source, letter)
