"""A worker's task processes' logs over its telemetry port, for ``squall logs`` (through
the API): ``/logs/<process>/<offset>``, a chunk of ``<process>.log`` from byte ``offset``
(negative: that many bytes before the end), as JSON with where the next chunk starts."""

from __future__ import annotations

import json
import re
from pathlib import Path

from services.loop_queries import Handler

#: The most one answer carries.
CHUNK = 64 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,250}")


def log_route(logdir: Path) -> Handler:
    def handle(rest: str) -> tuple[int, bytes]:
        name, _, at = rest.strip("/").partition("/")
        if not _NAME.fullmatch(name) or ".." in name:
            return 400, _body({"error": f"not a process name: {name[:60]!r}"})
        try:
            offset = int(at or "0")
        except ValueError:
            return 400, _body({"error": f"not a byte offset: {at[:30]!r}"})
        path = logdir / f"{name}.log"
        try:
            with open(path, "rb") as f:
                size = f.seek(0, 2)
                start = max(0, size + offset) if offset < 0 else min(offset, size)
                f.seek(start)
                data = f.read(CHUNK)
        except FileNotFoundError:
            return 404, _body({"error": f"no log of {name!r} on this worker"})
        except OSError as e:
            return 500, _body({"error": f"cannot read the log of {name!r}: {e}"})
        if offset < 0 and start > 0:  # from a line's start, not mid-line
            cut = data.find(b"\n")
            if 0 <= cut < len(data) - 1:
                data, start = data[cut + 1:], start + cut + 1
        return 200, _body({"process": name, "size": size, "offset": start,
                           "next": start + len(data),
                           "text": data.decode(errors="replace")})

    return handle


def _body(obj: object) -> bytes:
    return json.dumps(obj).encode()
