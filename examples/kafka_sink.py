"""Writing to Kafka (storm-kafka-client's ``KafkaBolt``): each word's running count goes to
the topic "word-counts", keyed by the word, exactly once.

``count`` emits (word, count) anchored to each word; ``publish`` writes it as a record
with key ``word`` and value ``count`` and acks the word once Kafka confirmed the write,
so a sentence's offset is committed only when its counts are in "word-counts". With
``exactly.once`` the topic holds each count once, even when a sentence is replayed (its
tree failed somewhere else) or the bolts job dies mid-write: the records carry their
input's place in its sentence's tree (header ``squall.id``), and the sink looks for a
replayed one before it writes it again. Its inputs are fields-grouped, so a replay comes
back to the task that wrote it.

Run it: ``squall run examples/kafka_sink.yaml`` (feed the topic "sentences"; create
"word-counts" first, or let your broker create topics).
"""

from __future__ import annotations

from squall.topology import TopologyBuilder, TopologySpec


def topology(name: str = "kafka-sink", source: str = "sentences", sink: str = "word-counts",
             exactly_once: bool = True) -> TopologySpec:
    """The same topology as ``kafka_sink.yaml``, built in Python."""
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    b.set_bolt("split", "examples.wordcount:SplitSentenceArrow", 2,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    b.set_bolt("count", "examples.wordcount:WordCount", 2,
               outputs={"default": ["word", "count"]}).fields_grouping("split", ["word"])
    b.kafka_bolt("publish", sink, 2, key_field="word", message_field="count",
                 exactly_once=exactly_once).fields_grouping("count", ["word"])
    return b.build(name, ackers=2)
