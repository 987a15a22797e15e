"""Names of a topology's internal topics (docs/architecture.md, "Contracts between services")."""

from __future__ import annotations

import re

from squall.core.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
ACKER_COMPONENT = "__acker"
#: The topic the development stack's readiness probe and the workers' Kafka watch
#: (services/worker/kafka_watch.py) write to, shared by every topology; a partition for each
#: of up to three brokers, so that one broker's loss leaves the others' writable.
HEALTH_TOPIC = "__squall_health"
HEALTH_PARTITIONS = 3


def check_name(kind: str, name: str) -> str:
    """Topology, component and stream names become parts of Kafka topic names."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"{kind} name {name!r} must be letters, digits, '_' or '-' (it is part of topic names)"
        )
    return name


def acker_topic(topology: str) -> str:
    return f"squall.{check_name('topology', topology)}.acker"


def results_topic(topology: str) -> str:
    return f"squall.{check_name('topology', topology)}.results"


def dlq_topic(topology: str) -> str:
    return f"squall.{check_name('topology', topology)}.dlq"


def dlq_replays_topic(topology: str) -> str:
    """Which dead letters were sent back (squall/core/reliability/letter_replays.py)."""
    return f"{dlq_topic(topology)}.replays"


def edge_topic(topology: str, source: str, stream: str, target: str) -> str:
    parts = (check_name("topology", topology), check_name("component", source),
             check_name("stream", stream), check_name("component", target))
    return "squall.{}.edge.{}.{}.{}".format(*parts)


def spout_group(topology: str, spout: str) -> str:
    """A spout's consumer group: its source offsets are committed there."""
    return f"squall.{check_name('topology', topology)}.{check_name('component', spout)}"
