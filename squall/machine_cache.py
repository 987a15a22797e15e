"""Where Squall keeps what it fetches or builds once per machine (Apache Kafka's jars, the
bolts driver's classes and class archive): ``$XDG_CACHE_HOME/squall``, else
``~/.cache/squall``. Deleting it costs only the time to make it again."""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "squall"
