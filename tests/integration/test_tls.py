"""Squall on Kafka's TLS listener (docs/kafka.md): every client of the word count (spout,
acker, the bolts' driver and executors, the publishing bolt) on ``security.protocol=SSL``
with a CA the test made and a client certificate, which is the principal the ACLs name; a
client without the CA is refused with an error that names the setting to fix.

The broker is a secured Apache Kafka node of its own (tests/integration/secure_kafka.py):
the SSL listener requires a client certificate, so a client that got through spoke TLS.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from squall.core.control.kafka_acls import Acl, Operation, Pattern, Resource, topology_acls
from squall.demo import COUNTS, SOURCE, SOURCE_PARTITIONS, demo_topology
from squall.kafka import ensure_topics
from squall.launch import spout_args
from tests.integration.helpers import (
    ServiceProcess,
    committed_offsets,
    consume,
    produce_source,
    topology_services,
    wait_for,
    wait_for_queries,
)
from tests.integration.secure_kafka import secure_kafka
from tests.integration.test_kafka_acls import bindings

pytestmark = pytest.mark.integration


def test_the_word_count_runs_over_tls_and_a_client_without_the_ca_is_refused(
        tmp_path: Path) -> None:
    with secure_kafka(tmp_path / "tls") as broker:
        env = broker.tls_env("squall-tls")
        kafka, bootstrap = broker.clients(broker.admin_env()), broker.bootstrap("SSL")
        spec = demo_topology(bootstrap, split="examples.wordcount:SplitSentence", exact=False)
        ensure_topics(kafka, {SOURCE: SOURCE_PARTITIONS, COUNTS: 1})
        # The topology's ACLs, and its publishing bolt's topic (a bolt's own client).
        broker.grant(bindings([*topology_acls(spec), *(
            Acl(Resource.TOPIC, Pattern.LITERAL, COUNTS, op, "publish writes it")
            for op in (Operation.DESCRIBE, Operation.WRITE))], "User:squall-tls"))
        lines = [f"the quick brown fox {i % 7} jumps over the lazy dog".encode()
                 for i in range(300)]
        acker, spout, bolts = topology_services(spec, bootstrap, tmp_path, env=env)
        with acker.start(), bolts.start():
            wait_for_queries(bolts)
            produce_source(kafka, SOURCE, lines, SOURCE_PARTITIONS)
            group = f"squall.{spec.name}.{SOURCE}"
            with spout.start():
                wait_for(lambda: sum(committed_offsets(kafka, group, SOURCE,
                                                       SOURCE_PARTITIONS)) >= len(lines)
                         or not bolts.alive(), 240, "every sentence committed")
            assert bolts.alive(), bolts.log_tail()
        counted: Counter[str] = Counter()
        for m in consume(kafka, COUNTS, 1000, timeout_s=10):
            counted.update(json.loads(m.value()))
        want = Counter(w for s in lines for w in s.decode().split())
        assert set(counted) == set(want) and all(counted[w] >= n for w, n in want.items()), \
            (counted, bolts.log_tail())

        # The same spout, its clients on TLS but without the CA: refused, and told why.
        blind = ServiceProcess("services.spout", spout_args(
            tmp_path / "topology.json", SOURCE, [0], 1, bootstrap), tmp_path / "blind.log",
            env={"SQUALL_KAFKA_SECURITY_PROTOCOL": "SSL"})
        blind.start()
        assert blind.wait(120) == 2, blind.log_tail()
        said = [line for line in blind.log_tail(200).splitlines()
                if line.startswith("squall spout: error:")]
        assert len(said) == 1 and f"cannot reach Kafka at {bootstrap}" in said[0] \
            and "certificate verify failed" in said[0] \
            and "set ssl.ca.location (SQUALL_KAFKA_SSL_CA_LOCATION)" in said[0], said
