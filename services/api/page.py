"""The topology page and the index, drawn in the browser from the API's reads.

Self-contained pages (no build step, no CDN: these machines and many production
networks reach neither): the HTML here, the script and style in ``static/``. The pages
themselves hold no data, so they are served even when reads need the token: their
script asks for it and sends it with every read (services/api/static/page.js).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path

STATIC = Path(__file__).parent / "static"


def _asset(name: str) -> str:
    return (STATIC / name).read_text()


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def policy(scripts: list[str], styles: list[str]) -> str:
    """The pages' Content-Security-Policy: their own inline script and style by hash and
    nothing else (no other script, no plugin, no frame around them, no form or base
    elsewhere); the API for their reads; style attributes for the charts' colours."""
    return "; ".join([
        "default-src 'none'", f"script-src {' '.join(map(_sha256, scripts))}",
        f"style-src-elem {' '.join(map(_sha256, styles))}", "style-src-attr 'unsafe-inline'",
        "img-src 'self' data:", "connect-src 'self'", "base-uri 'none'",
        "form-action 'none'", "frame-ancestors 'none'"])


def topology_page(topology_id: str) -> tuple[str, str]:
    """The page, and its policy."""
    safe = html.escape(topology_id)
    # JSON inside <script type=application/json>, with "<" escaped: no injection via the id.
    data = json.dumps(topology_id).replace("<", "\\u003c")
    windows = "".join(f'<button data-window="{w}"{" class=on" if w == "600" else ""}>{label}'
                      "</button>" for w, label in (("600", "10 min"), ("10800", "3 h"),
                                                   ("86400", "1 day")))
    css, js = _asset("page.css"), _asset("page.js")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{safe} · Squall</title><style>{css}</style></head>
<body><header><h1><a href="/ui">Squall</a> / {safe}</h1>
<span id="status" class="status">…</span><div id="totals"></div>
<div id="controls">{windows}<label><input type="checkbox" id="live" checked> live</label>
</div><div id="links"></div></header>
<form id="token-form" hidden>Reads need the API token:
<input type="password" id="token-input" autocomplete="off"> <button>use it</button></form>
<div id="err"></div>
<svg id="dag" role="img" aria-label="topology {safe}"></svg><div id="loops"></div>
<div id="drill" hidden></div>
<div id="charts"></div>
<h2>Last errors</h2><div id="errors"></div>
<script id="topology-id" type="application/json">{data}</script>
<script>{js}</script></body></html>""", policy([js], [css])


def index_page() -> tuple[str, str]:
    """The index, and its policy."""
    css = _asset("page.css") + " main{padding:20px}"
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Squall</title><style>{css}</style></head>
<body><header><h1>Squall topologies</h1></header>
<form id="token-form" hidden>Reads need the API token:
<input type="password" id="token-input" autocomplete="off"> <button>use it</button></form>
<div id="err"></div><main><ul id="list"><li>…</li></ul>
<p><a href="/docs">REST API (OpenAPI)</a></p></main>
<script>{_INDEX_SCRIPT}</script></body></html>""", policy([_INDEX_SCRIPT], [css])


_INDEX_SCRIPT = r"""
const $ = id => document.getElementById(id);
const esc = s => String(s).replace(/[&<>"']/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;',
  '"': '&quot;', "'": '&#39;'}[c]));
const HASH = new URLSearchParams(location.hash.slice(1));
if (HASH.get('token')) {  // as the topology page takes it (static/page.js)
  sessionStorage.setItem('squall-token', HASH.get('token'));
  history.replaceState(null, '', location.pathname);
}
async function load() {
  const token = sessionStorage.getItem('squall-token');
  const r = await fetch('/topologies', {headers: token ? {Authorization: `Bearer ${token}`} : {}});
  if (r.status === 401 || r.status === 403) { $('token-form').hidden = false; return; }
  const ts = await r.json();
  $('list').innerHTML = ts.length ? ts.map(t => `<li><a href="/ui/topologies/` +
    `${encodeURIComponent(t.id)}">${esc(t.name)}</a> ${esc(t.id)} · ${esc(t.status)}</li>`
  ).join('') : '<li>no topologies</li>';
}
$('token-form').addEventListener('submit', ev => {
  ev.preventDefault(); sessionStorage.setItem('squall-token', $('token-input').value);
  $('token-form').hidden = true; load();
});
load();
"""
