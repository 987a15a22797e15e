"""The Kafka sink (storm-kafka-client's ``KafkaBolt``) as a spec names it:
``class: squall.kafka_bolt:KafkaBolt`` with its ``config:`` (topic, key and message fields,
exactly once), or the builder's ``kafka_bolt``. The bolts job runs it itself
(squall/core/topology/kafka_sink.py says what it does; docs/bolts.md, "Writing to Kafka")."""

from typing import ClassVar

from squall.core.topology.kafka_sink import KAFKA_BOLT, SinkSpec


class KafkaBolt:
    """The sink's name in a topology; it declares no output stream."""

    outputs: ClassVar[dict[str, tuple[str, ...]]] = {}


__all__ = ["KAFKA_BOLT", "KafkaBolt", "SinkSpec"]
