"""A spec holds no secret: it is stored in ZooKeeper and shown to every reader (the REST
views, the topology page, ``squall status``), so a password in it would be everyone's. A
submission naming one (a key such as ``password``, ``secret``, ``token`` or ``api.key``
with a value, or a URL with a password in it: a state database's) is refused at submit,
saying where, never what. The secret goes in the environment of the processes that need it
instead: PostgreSQL's ``PGPASSWORD`` or ``~/.pgpass`` for a state URL without a password,
``SQUALL_KAFKA_*`` for Kafka (docs/security.md). Pure."""

from __future__ import annotations

import re
from typing import Any

from squall.core.errors import TopologyError

_KEY = re.compile(r"(^|[._-])(password|passwd|secret|token|api[._-]?key|credentials?)($|[._-])",
                  re.IGNORECASE)
_URL_WITH_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@")


def check_no_secrets(doc: Any, where: str = "spec") -> None:
    """A TopologyError naming the first place in ``doc`` (a spec as JSON data) that holds
    a secret; the value is never shown."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            here = f"{where}.{k}"
            if isinstance(k, str) and _KEY.search(k) and v not in (None, "", {}, []):
                raise TopologyError(f"{here}: a spec holds no secret (every reader sees it); "
                                    "give it to the processes through their environment")
            check_no_secrets(v, here)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            check_no_secrets(v, f"{where}[{i}]")
    elif isinstance(doc, str) and _URL_WITH_PASSWORD.search(doc):
        raise TopologyError(f"{where}: a URL with a password (every reader sees a spec); "
                            "leave the password out and give it through the environment "
                            "(PGPASSWORD or ~/.pgpass for PostgreSQL)")
