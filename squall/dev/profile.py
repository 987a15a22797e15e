"""The embedded broker's profile: the settings Squall's processes take on the development
stack, where they differ from the defaults, which are right for Apache Kafka.

The embedded broker (Tansu, in memory) answers the Kafka protocol with costs and habits of
its own (docs/kafka.md, "The embedded broker's profile"):

- it lists every record batch a partition ever held for each fetch that returns data, so
  a consumer that fetches again at once spends a tenth of a core by the end of a long
  benchmark: the acker waits ``fetch_backoff_ms`` after a fetch that brought records;
- it may show a record batch before an earlier one of the same partition: the spout holds
  a gap in a source partition's offsets for ``source_gap_hold_ms`` before it moves past
  (on Kafka a gap in a source is real, from transaction markers or compaction, and a
  spout moves past it at once).

The stack applies them as environment variables, so every process started from here
(the demo, ``squall run``, the benchmarks, the tests) and every shell that sources the
stack's ``env`` file gets them; a value set already in the environment wins. The
embedded broker speaks plain Kafka: a user's client properties (``SQUALL_KAFKA_*``, for
their own cluster) are taken out of the environment of what is started from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

from squall.kafka_clients import property_environment

#: The service settings the embedded broker needs, as their environment variables.
EMBEDDED: Mapping[str, str] = {
    "SQUALL_ACKER_FETCH_BACKOFF_MS": "10",
    "SQUALL_SPOUT_SOURCE_GAP_HOLD_MS": "2000",
}


def apply(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Set the profile's variables that ``environ`` (default: this process's) lacks, and
    take out the client properties' (returned: the variables taken out)."""
    env = os.environ if environ is None else environ
    for k, v in EMBEDDED.items():
        env.setdefault(k, v)
    dropped = sorted(property_environment(env))
    for k in dropped:
        del env[k]
    return dropped


def exports() -> str:
    """The profile as shell ``export`` lines (the stack's ``env`` file)."""
    return "".join(f"export {k}={v}\n" for k, v in EMBEDDED.items())
