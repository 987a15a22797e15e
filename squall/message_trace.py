"""Where is my message? One source message's state in a running topology, from the places
that know it: its spout's committed offset (Kafka), the dead-letter topic, the spout task
that reads its partition (its offsets table: pending since when, which attempt, why the
last attempt failed, when the next is due) and the acker that holds its tree, if one does.

States, in the order they are decided:

- ``dead_lettered``: in the dead letters (reason, attempts, when), committed past since;
- ``committed``: its tree completed and the spout committed past it;
- ``done``: its tree completed (or it was dead-lettered); the commit is to come;
- ``pending``: emitted and not complete; ``tree`` says whether an acker holds it open;
- ``failed``: its last tree failed (why), its retry is due at ``retry_ms``;
- ``dead_lettering``: out of retries, its dead letter being written;
- ``unread``: in the topic, not read yet (the spout is behind or paused);
- ``not_in_topic``: past the end of its partition;
- ``unknown``: no spout task of the topology answered for its partition.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from squall.core.errors import KafkaUnavailable, NotFoundError, ProcessUnavailable, UsageError
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import spout_group
from squall.dead_letters import letters
from squall.endpoint_fetch import Endpoints
from squall.kafka import end_offset, group_offsets
from squall.kafka_clients import KafkaClients

#: A process's base URL and the host its worker registered as.
Base = tuple[str, str]


def trace(kafka: KafkaClients, spec: TopologySpec, tid: str, topic: str, partition: int,
          offset: int, spouts: Sequence[Base], ackers: Sequence[Base], fetch: Endpoints,
          timeout_s: float = 5.0) -> dict[str, Any]:
    """The message at ``topic``/``partition``/``offset`` in topology ``tid`` (``spec``);
    ``spouts`` and ``ackers``: its spout and acker processes, asked through ``fetch``."""
    readers = [s for s in spec.spouts if topic in s.topics]
    if not readers:
        raise NotFoundError(f"topology {tid!r} reads no topic {topic!r} (its spouts read "
                            f"{sorted({t for s in spec.spouts for t in s.topics})})")
    if partition < 0 or offset < 0:
        raise UsageError(f"partition and offset must be >= 0, got {partition}, {offset}")
    spout = readers[0]
    out: dict[str, Any] = {"topology": tid, "topic": topic, "partition": partition,
                           "offset": offset, "spout": spout.name}
    try:
        committed = group_offsets(kafka, spout_group(tid, spout.name), [topic],
                                  timeout_s).get(topic, {}).get(partition, -1)
    except KafkaUnavailable:
        committed = -1
    out["committed_offset"] = committed
    letter = dead_letter_of(kafka, tid, topic, partition, offset, timeout_s)
    out["dead_letter"] = letter
    at = f"messages/{quote(topic, safe='')}/{partition}/{offset}"
    where = _first(fetch, [(f"{u}/{at}", h) for u, h in spouts], timeout_s)
    out["where"] = where
    tree = None
    if where is not None and where.get("root"):
        root = quote(str(where["root"]), safe="")
        tree = _first(fetch, [(f"{u}/trees/{root}", h) for u, h in ackers],
                      timeout_s) or {"open": False}
    out["tree"] = tree
    if letter is not None:
        state = "dead_lettered"
    elif offset < committed:
        state = "committed"
    elif where is not None:
        state = str(where["state"])
    else:
        state = "unknown"
    if state == "unread" and offset >= end_offset(kafka, topic, partition, timeout_s):
        state = "not_in_topic"
    out["state"] = state
    out["summary"] = summary(out)
    return out


def summary(t: dict[str, Any]) -> str:
    """One sentence of a trace."""
    state, w = t["state"], t.get("where") or {}
    at = f"{t['topic']}[{t['partition']}]@{t['offset']}"
    if state == "dead_lettered":
        d = t["dead_letter"]
        return (f"{at} was dead-lettered after {d['attempts']} attempts: {d['reason']} "
                f"(dead letter {d['dlq_offset']})")
    if state == "committed":
        return f"{at} is done: its tree completed and the spout committed up to " \
               f"{t['committed_offset']}"
    if state == "done":
        return f"{at}: its tree completed; the next commit takes the spout past it"
    if state == "pending":
        tree = t.get("tree") or {}
        held = f"its tree is open in acker task {tree['acker_task']}" if tree.get("open") \
            else "no acker holds its tree yet (its init is on the way, or it will time out)"
        return (f"{at} is pending in attempt {w['failures'] + 1} since {_when(w['since_ms'])}"
                f" in spout task {w['task']}; {held}"
                + (f"; the last attempt failed: {w['last_failure']}" if w["last_failure"]
                   else ""))
    if state == "failed":
        return (f"{at} failed ({w['last_failure'] or 'no reason given'}); attempt "
                f"{w['failures'] + 1} is due at {_when(w['retry_ms'])}")
    if state == "dead_lettering":
        return f"{at} is out of retries ({w['last_failure']}); its dead letter is being written"
    if state == "unread":
        return f"{at} is in the topic; spout task {w['task']} has not read it yet"
    if state == "not_in_topic":
        return f"{at} is past the end of its partition: no such message yet"
    return f"{at}: no spout task of {t['topology']} answered for its partition (not running?)"


def dead_letter_of(kafka: KafkaClients, tid: str, topic: str, partition: int, offset: int,
                   timeout_s: float) -> dict[str, Any] | None:
    """The dead letter of that message among the topology's newest dead letters
    (``SCAN_LETTERS``), if any (the newest, if it was dead-lettered more than once)."""
    found = None
    for lt in letters(kafka, tid, timeout_s)[0]:
        w = lt.why
        if w is not None and (w.topic, w.partition, w.offset) == (topic, partition, offset):
            found = {"reason": w.reason, "attempts": w.attempts, "component": w.component,
                     "dlq_offset": lt.dlq_offset, "time_ms": lt.time_ms}
    return found


def _first(fetch: Endpoints, urls: Sequence[Base], timeout_s: float
           ) -> dict[str, Any] | None:
    """The first 200 answer among ``urls`` (a 404 is "not here"; one that does not answer,
    or is refused, is passed over)."""
    for url, host in urls:
        try:
            got: dict[str, Any] = json.loads(fetch.ok(url, host, timeout_s))
            return got
        except (ProcessUnavailable, ValueError):
            continue
    return None


def _when(ms: int | None) -> str:
    if ms is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + \
        f".{ms % 1000:03d} UTC"
