"""The topology page: the DAG of spouts and bolts with live numbers, drawn in the browser.

One self-contained HTML page (no build step, no CDN: these machines and many
production networks reach neither). It polls ``/api/v1/topology/:id`` every two
seconds and draws an SVG: spouts on the left, each bolt one column right of its
deepest input, the ``__acker`` below; edges carry their grouping; nodes turn
red while tuples fail and amber when capacity passes 0.8.
"""

from __future__ import annotations

import html
import json

_STYLE = """
body{font:14px system-ui,sans-serif;margin:0;background:#0f1720;color:#e6edf3}
header{padding:12px 20px;background:#16202b;display:flex;gap:24px;align-items:baseline}
h1{font-size:18px;margin:0} .status{font-weight:600} .ACTIVE{color:#3fb950}
.INACTIVE,.REBALANCING{color:#d29922} .KILLED{color:#f85149}
#totals span{margin-right:18px;color:#9da7b3} #totals b{color:#e6edf3}
svg{display:block;margin:10px auto} .node rect{fill:#1c2733;stroke:#3b4b5c;stroke-width:1.5}
.node.spout rect{stroke:#58a6ff} .node.acker rect{stroke:#a371f7}
.node.hot rect{stroke:#d29922;stroke-width:3} .node.failing rect{stroke:#f85149;stroke-width:3}
.node text{fill:#e6edf3;font-size:12px} .node .name{font-size:14px;font-weight:600}
.edge{stroke:#6e7681;stroke-width:1.5;fill:none;marker-end:url(#arrow)}
.elabel{fill:#9da7b3;font-size:11px} #err,#loops{color:#f85149;padding:0 20px}
#loops div{margin:4px 0;white-space:pre-wrap}
"""

_SCRIPT = r"""
const ID = JSON.parse(document.getElementById('topology-id').textContent);
const W = 250, H = 96, GX = 90, GY = 36;
const fmt = n => Number(n).toLocaleString('en-US', {maximumFractionDigits: 0});
function el(tag, attrs, text) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function layout(t) {
  const depth = {}; t.spouts.forEach(s => depth[s.spoutId] = 0);
  for (let i = 0; i < t.bolts.length + 1; i++)
    t.edges.forEach(e => { if (e.from in depth)
      depth[e.to] = Math.max(depth[e.to] ?? 0, depth[e.from] + 1); });
  t.bolts.forEach(b => { if (!(b.boltId in depth)) depth[b.boltId] = 1; });
  const cols = {}; Object.entries(depth).forEach(([n, d]) => (cols[d] = cols[d] || []).push(n));
  const pos = {};
  Object.entries(cols).forEach(([d, names]) => names.forEach((n, i) =>
    pos[n] = {x: 20 + d * (W + GX), y: 20 + i * (H + GY)}));
  const rows = Math.max(...Object.values(cols).map(c => c.length));
  pos['__acker'] = {x: 20, y: 20 + rows * (H + GY) + 10};
  return {pos, width: 40 + (Object.keys(cols).length) * (W + GX) - GX,
          height: pos['__acker'].y + H + 20};
}
function node(svg, p, kind, name, lines, cls) {
  const g = el('g', {class: `node ${kind.split(' ')[0]} ${cls}`, 'data-component': name,
                     transform: `translate(${p.x},${p.y})`});
  g.appendChild(el('rect', {width: W, height: H, rx: 8}));
  g.appendChild(el('text', {x: 12, y: 22, class: 'name'}, `${name}  ·  ${kind}`));
  lines.forEach((l, i) => g.appendChild(el('text', {x: 12, y: 44 + i * 17}, l)));
  svg.appendChild(g);
}
function draw(t) {
  document.getElementById('status').textContent = t.status;
  document.getElementById('status').className = 'status ' + t.status;
  const s = t.topologyStats.find(w => w.window === t.window) || t.topologyStats[0];
  document.getElementById('totals').innerHTML =
    `<span>emitted <b>${fmt(s.emitted)}</b></span><span>acked <b>${fmt(s.acked)}</b></span>` +
    `<span>failed <b>${fmt(s.failed)}</b></span><span>complete latency <b>${s.completeLatency} ms</b></span>` +
    `<span>up <b>${fmt(t.uptimeSeconds)} s</b></span><span>window <b>${t.window}</b></span>`;
  const {pos, width, height} = layout(t);
  const svg = document.getElementById('dag');
  svg.setAttribute('width', width); svg.setAttribute('height', height);
  svg.replaceChildren();
  const defs = el('defs'); const m = el('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 10,
    refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'});
  m.appendChild(el('path', {d: 'M 0 0 L 10 5 L 0 10 z', fill: '#6e7681'}));
  defs.appendChild(m); svg.appendChild(defs);
  t.edges.forEach(e => {
    const a = pos[e.from], b = pos[e.to]; if (!a || !b) return;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    svg.appendChild(el('path', {class: 'edge', d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`}));
    const label = e.grouping + (e.fields.length ? `(${e.fields.join(',')})` : '') +
                  (e.stream !== 'default' ? ` [${e.stream}]` : '');
    svg.appendChild(el('text', {class: 'elabel', x: mx - 30, y: (y1 + y2) / 2 - 6}, label));
  });
  // A process that keeps exiting is restarted with backoff; never silently.
  const loop = (x, kind) => x.crashLooping ? `${kind} (crash loop)` : kind;
  const restarts = x => x.restarts ? `   restarts ${fmt(x.restarts)}` : '';
  t.spouts.forEach(sp => node(svg, pos[sp.spoutId], loop(sp, 'spout'), sp.spoutId, [
    `emitted ${fmt(sp.emitted)}   acked ${fmt(sp.acked)}`,
    `failed ${fmt(sp.failed)}   pending ${fmt(sp.pending)}   lag ${fmt(sp.lag)}`,
    `latency ${sp.completeLatency} ms   tasks ${sp.tasks}${restarts(sp)}`],
    sp.failed > 0 || sp.crashLooping ? 'failing' : ''));
  t.bolts.forEach(b => node(svg, pos[b.boltId], loop(b, b.running ? 'bolt' : 'bolt (starting)'),
    b.boltId, [
    `executed ${fmt(b.executed)}   emitted ${fmt(b.emitted)}`,
    `acked ${fmt(b.acked)}   failed ${fmt(b.failed)}   errors ${fmt(b.errors)}`,
    `execute ${b.executeLatency} ms   capacity ${b.capacity}${restarts(b)}`],
    b.failed > 0 || b.crashLooping ? 'failing' : (Number(b.capacity) > 0.8 ? 'hot' : '')));
  const a = t.acker;
  node(svg, pos['__acker'], loop(a, 'acker'), '__acker', [
    `records ${fmt(a.records)}   pending trees ${fmt(a.pendingTrees)}`,
    `trees acked ${fmt(a.treesAcked)}   failed ${fmt(a.treesFailed)}`,
    `timed out ${fmt(a.treesTimedOut)}   tasks ${a.tasks}${restarts(a)}`],
    a.treesFailed > 0 || a.crashLooping ? 'failing' : '');
  // Under the diagram, each crash loop with the error its process last exited with.
  const loops = [...t.spouts.map(x => [x.spoutId, x]), ...t.bolts.map(x => [x.boltId, x]),
                 ['__acker', a]].filter(([, x]) => x.crashLooping);
  document.getElementById('loops').replaceChildren(...loops.map(([name, x]) => {
    const d = document.createElement('div');
    d.className = 'loop'; d.dataset.component = name;
    d.textContent = `${name}: crash loop: ${x.lastExit || 'no error given (see its log)'}`;
    return d;
  }));
  document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
}
async function refresh() {
  try {
    const r = await fetch(`/api/v1/topology/${encodeURIComponent(ID)}`);
    const body = await r.json();
    if (!r.ok) throw new Error(body.detail || r.statusText);
    document.getElementById('err').textContent = '';
    draw(body);
  } catch (e) { document.getElementById('err').textContent = String(e.message || e); }
}
refresh(); setInterval(refresh, 2000);
"""


def topology_page(topology_id: str) -> str:
    safe = html.escape(topology_id)
    # JSON inside <script type=application/json>, with "<" escaped: no injection via the id.
    data = json.dumps(topology_id).replace("<", "\\u003c")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{safe} · Squall</title><style>{_STYLE}</style></head>
<body><header><h1>{safe}</h1><span id="status" class="status">…</span>
<div id="totals"></div></header><div id="err"></div>
<svg id="dag" role="img" aria-label="topology {safe}"></svg><div id="loops"></div>
<script id="topology-id" type="application/json">{data}</script>
<script>{_SCRIPT}</script></body></html>"""


def index_page(ids: list[str]) -> str:
    items = "".join(f'<li><a href="/ui/topologies/{html.escape(i)}">{html.escape(i)}</a></li>'
                    for i in ids) or "<li>no topologies</li>"
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Squall</title><style>{_STYLE} main{{padding:20px}} a{{color:#58a6ff}}</style></head>
<body><header><h1>Squall topologies</h1></header><main><ul>{items}</ul>
<p><a href="/docs">REST API (OpenAPI)</a></p></main></body></html>"""
