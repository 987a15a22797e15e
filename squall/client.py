"""A small HTTP client for the API, used by the ``squall`` CLI and the demo."""

from __future__ import annotations

from typing import Any

import httpx

from squall.core.errors import ApiError


class ApiClient:
    def __init__(self, url: str, token: str | None = None, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kw: Any) -> Any:
        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise ApiError(0, f"cannot reach the API at {self.url} ({e}); is it running? "
                              "Point to it with --api or SQUALL_API_URL") from None
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            if r.status_code in (401, 403):
                detail = f"{detail} (the CLI sends SQUALL_API_TOKEN, or --token)"
            raise ApiError(r.status_code, str(detail))
        return r.json()

    def submit(self, text: str, yaml: bool = False, activate: bool = True,
               keep_state: str | None = None) -> Any:
        """``keep_state``: a killed submission whose state this one keeps ("": the same
        name's newest)."""
        ctype = "application/yaml" if yaml else "application/json"
        params = {"activate": str(activate).lower()}
        if keep_state is not None:
            params["keep_state"] = keep_state
        return self.request("POST", "/topologies", content=text.encode(),
                            headers={"Content-Type": ctype}, params=params)

    def topologies(self) -> Any:
        return self.request("GET", "/topologies")

    def topology(self, tid: str) -> Any:
        return self.request("GET", f"/topologies/{tid}")

    def message(self, tid: str, topic: str, partition: int, offset: int) -> Any:
        """Where a source message is (GET /topologies/{id}/messages/...)."""
        from urllib.parse import quote

        return self.request("GET", f"/topologies/{quote(tid, safe='')}/messages/"
                                   f"{quote(topic, safe='')}/{partition}/{offset}")

    def dead_letters(self, tid: str, reason: str = "", since_ms: int = 0,
                     limit: int = 100) -> Any:
        return self.request("GET", f"/topologies/{tid}/dead-letters",
                            params={"reason": reason, "since_ms": since_ms, "limit": limit})

    def dead_letter(self, tid: str, dlq_offset: int) -> Any:
        return self.request("GET", f"/topologies/{tid}/dead-letters/{dlq_offset}")

    def replay(self, tid: str, offsets: list[int], reason: str | None = None,
               every: bool = False, dry_run: bool = False) -> Any:
        return self.request("POST", f"/topologies/{tid}/dead-letters/replay",
                            json={"offsets": offsets, "reason": reason, "all": every,
                                  "dry_run": dry_run})

    def storm_topology(self, tid: str) -> Any:
        return self.request("GET", f"/api/v1/topology/{tid}")

    def workers(self) -> Any:
        return self.request("GET", "/workers")

    def errors(self, tid: str, component: str | None = None, limit: int = 50) -> Any:
        params: dict[str, Any] = {"limit": limit}
        if component:
            params["component"] = component
        return self.request("GET", f"/topologies/{tid}/errors", params=params)

    def lag(self, tid: str) -> Any:
        return self.request("GET", f"/api/v1/topology/{tid}/lag")

    def logs(self, tid: str, component: str, task: int | None = None,
             process: str | None = None, offset: int | None = None,
             tail_bytes: int = 8192) -> Any:
        params: dict[str, Any] = {"tail_bytes": tail_bytes}
        for k, v in (("task", task), ("process", process), ("offset", offset)):
            if v is not None:
                params[k] = v
        return self.request("GET", f"/topologies/{tid}/logs/{component}", params=params)

    def teardown(self, tid: str) -> Any:
        """A killed topology's teardown; None until its kill wait is over."""
        try:
            return self.request("GET", f"/teardowns/{tid}")
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def operate(self, tid: str, op: str, wait_s: float | None = None,
                parallelism: dict[str, int] | None = None, purge_state: bool = False) -> Any:
        body: dict[str, Any] = {}
        if op in ("kill", "rebalance"):
            body["wait_s"] = wait_s
        if op == "kill" and purge_state:
            body["purge_state"] = True
        if op == "rebalance":
            body["parallelism"] = parallelism or {}
        return self.request("POST", f"/topologies/{tid}/{op}", json=body or None)


def crash_loops(storm: dict[str, Any]) -> list[str]:
    """Each component in a crash loop, with the error its process last exited with."""
    comps = [(s["spoutId"], s) for s in storm["spouts"]] + \
        [(b["boltId"], b) for b in storm["bolts"]] + [("__acker", storm["acker"])]
    return [f"{name}: CRASH LOOP: {c.get('lastExit') or 'no error given (see its log)'}"
            for name, c in comps if c.get("crashLooping")]


def status_rows(storm: dict[str, Any]) -> list[tuple[str, ...]]:
    """``squall status``'s table from ``/api/v1/topology/:id``."""
    rows: list[tuple[str, ...]] = [
        ("component", "kind", "tasks", "emitted", "acked", "failed", "latency ms", "restarts")]

    def restarts(c: dict[str, Any]) -> str:
        n = f"{c.get('restarts', 0):,}"
        return f"{n} CRASH LOOP" if c.get("crashLooping") else n

    for s in storm["spouts"]:
        rows.append((s["spoutId"], "spout", str(s["tasks"]), f"{s['emitted']:,.0f}",
                     f"{s['acked']:,.0f}", f"{s['failed']:,.0f}", s["completeLatency"],
                     restarts(s)))
    for b in storm["bolts"]:
        rows.append((b["boltId"], "bolt", str(b["tasks"]), f"{b['emitted']:,.0f}",
                     f"{b['acked']:,.0f}", f"{b['failed']:,.0f}", b["executeLatency"],
                     restarts(b)))
    a = storm["acker"]
    rows.append(("__acker", "acker", str(a["tasks"]), f"{a['records']:,.0f}",
                 f"{a['treesAcked']:,.0f}", f"{a['treesFailed'] + a['treesTimedOut']:,.0f}", "",
                 restarts(a)))
    return rows


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)
