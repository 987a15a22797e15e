// The topology page: the DAG with live numbers, charts over Storm's windows, the last
// errors, a component's drill-down. Reads the API with the token the user gives, if
// reads need one (kept for this tab only).
const ID = JSON.parse(document.getElementById('topology-id').textContent);
const ENC = encodeURIComponent(ID);
const W = 250, H = 96, GX = 90, GY = 36;
const COLORS = ['#3fb950', '#f85149', '#58a6ff', '#d29922', '#a371f7'];
let WINDOW = '600', LIVE = true, PICKED = null, BUSY = false;
const $ = id => document.getElementById(id);
const fmt = n => n === null || n === undefined ? '-' :
  Number(n).toLocaleString('en-US', {maximumFractionDigits: Number(n) < 10 ? 2 : 0});
const esc = s => String(s).replace(/[&<>"']/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;',
  '"': '&quot;', "'": '&#39;'}[c]));
// A link the page writes: http(s) only, never javascript: or data: (the API checks it too).
const webUrl = u => {
  if (!u) return null;
  try {
    const p = new URL(String(u), location.href);
    return p.protocol === 'http:' || p.protocol === 'https:' ? p.href : null;
  } catch (e) { return null; }
};

// A link may say what to show (#window=10800&component=split) and carry the token in its
// fragment, which is never sent to a server (and is dropped from the address bar here).
const HASH = new URLSearchParams(location.hash.slice(1));
if (HASH.get('token')) {
  sessionStorage.setItem('squall-token', HASH.get('token'));
  HASH.delete('token');
  history.replaceState(null, '', location.pathname + location.search +
                       (String(HASH) ? '#' + HASH : ''));
}
if (['600', '10800', '86400'].includes(HASH.get('window'))) WINDOW = HASH.get('window');
if (HASH.get('component')) PICKED = HASH.get('component');
if (HASH.get('live') === '0') { LIVE = false; $('live').checked = false; }
async function api(path) {
  const token = sessionStorage.getItem('squall-token');
  const r = await fetch(path, {headers: token ? {Authorization: `Bearer ${token}`} : {}});
  if (r.status === 401 || r.status === 403) {
    $('token-form').hidden = false;
    throw new Error(r.status === 401 ? 'reads need the API token' : 'a wrong token');
  }
  const body = await r.json();
  if (!r.ok) throw new Error(body.detail || r.statusText);
  return body;
}
$('token-form').addEventListener('submit', ev => {
  ev.preventDefault();
  sessionStorage.setItem('squall-token', $('token-input').value);
  $('token-form').hidden = true;
  refresh();
});

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
  const g = el('g', {class: `node ${kind.split(' ')[0]} ${cls} ${name === PICKED ? 'picked' : ''}`,
                     'data-component': name, transform: `translate(${p.x},${p.y})`});
  g.appendChild(el('rect', {width: W, height: H, rx: 8}));
  g.appendChild(el('text', {x: 12, y: 22, class: 'name'}, `${name}  ·  ${kind}`));
  lines.forEach((l, i) => g.appendChild(el('text', {x: 12, y: 44 + i * 17}, l)));
  g.addEventListener('click', () => { PICKED = name; drill(); });
  svg.appendChild(g);
}
function draw(t) {
  $('status').textContent = t.status;
  $('status').className = 'status ' + t.status;
  const s = t.topologyStats.find(w => w.window === t.window) || t.topologyStats[0];
  $('totals').innerHTML =
    `<span>emitted <b>${fmt(s.emitted)}</b></span><span>acked <b>${fmt(s.acked)}</b></span>` +
    `<span>failed <b>${fmt(s.failed)}</b></span>` +
    `<span>complete latency (mean) <b>${fmt(s.completeLatency)} ms</b></span>` +
    `<span>up <b>${esc(t.uptime)}</b></span><span>over <b>${esc(s.windowPretty)}</b></span>`;
  const {pos, width, height} = layout(t);
  const svg = $('dag');
  svg.setAttribute('width', width); svg.setAttribute('height', height);
  svg.replaceChildren();
  const defs = el('defs'); const mk = el('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 10,
    refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'});
  mk.appendChild(el('path', {d: 'M 0 0 L 10 5 L 0 10 z', fill: '#6e7681'}));
  defs.appendChild(mk); svg.appendChild(defs);
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
    `latency ${fmt(sp.completeLatency)} ms   tasks ${sp.tasks}${restarts(sp)}`],
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
  $('loops').replaceChildren(...loops.map(([name, x]) => {
    const d = document.createElement('div');
    d.className = 'loop'; d.dataset.component = name;
    d.textContent = `${name}: crash loop: ${x.lastExit || 'no error given (see its log)'}`;
    return d;
  }));
  document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
}

function chart(title, series, unit, start, end) {
  const CW = 400, CH = 130, L = 48, B = 16;
  const box = document.createElement('div');
  box.className = 'chart'; box.dataset.chart = title;
  const vals = series.flatMap(s => s.points.map(p => p[1]).filter(v => v !== null));
  const top = (Math.max(0, ...vals) || 1) * 1.1;  // all zero: a scale of one
  const x = t => L + (CW - L - 6) * (t - start) / Math.max(1, end - start);
  const y = v => 6 + (CH - B - 6) * (1 - v / top);
  const svg = el('svg', {width: '100%', viewBox: `0 0 ${CW} ${CH}`, role: 'img',
                         'aria-label': title});
  svg.appendChild(el('line', {class: 'axis', x1: L, y1: CH - B, x2: CW, y2: CH - B}));
  svg.appendChild(el('line', {class: 'axis', x1: L, y1: 6, x2: L, y2: CH - B}));
  svg.appendChild(el('text', {x: 2, y: 12}, fmt(top)));
  svg.appendChild(el('text', {x: 2, y: CH - B}, '0'));
  const hhmm = t => new Date(t).toTimeString().slice(0, 5);
  svg.appendChild(el('text', {x: L, y: CH - 3}, hhmm(start)));
  svg.appendChild(el('text', {x: CW - 34, y: CH - 3}, hhmm(end)));
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const runs = [[]];  // a gap (no value) lifts the pen
    s.points.forEach(([t, v]) => v === null ? runs.push([]) : runs.at(-1).push([x(t), y(v)]));
    const d = runs.filter(r => r.length).map(r => r.map(([px, py], j) =>
      `${j ? 'L' : 'M'}${px.toFixed(1)},${py.toFixed(1)}`).join('')).join(' ');
    svg.appendChild(el('path', {class: 'line', d, stroke: color}));
    runs.filter(r => r.length === 1).forEach(([[px, py]]) =>  // a lone reading: a dot
      svg.appendChild(el('circle', {cx: px, cy: py, r: 2.5, fill: color})));
  });
  const last = s => { const v = s.points.filter(p => p[1] !== null).pop(); return v ? v[1] : null; };
  box.innerHTML = `<h3>${esc(title)}</h3>`;
  box.appendChild(svg);
  const legend = document.createElement('div'); legend.className = 'legend';
  legend.innerHTML = series.map((s, i) => `<span style="color:${COLORS[i % COLORS.length]}">` +
    `${esc(s.name)} ${fmt(last(s))}${unit}</span>`).join('');
  box.appendChild(legend);
  return box;
}
function charts(h) {
  const end = Date.now(), start = end - Number(h.window) * 1000;
  const p = h.points, pick = k => p.map(q => [q.t_ms, q[k]]);
  $('charts').replaceChildren(
    chart('Tuple trees per second', [{name: 'acked', points: pick('acked_per_s')},
      {name: 'failed', points: pick('failed_per_s')},
      {name: 'emitted', points: pick('emitted_per_s')}], '/s', start, end),
    chart('Complete latency', [{name: 'p50', points: pick('latency_p50_ms')},
      {name: 'p99', points: pick('latency_p99_ms')}], ' ms', start, end),
    chart('Replays and dead letters per second', [
      {name: 'replayed', points: pick('replayed_per_s')},
      {name: 'dead-lettered', points: pick('dead_lettered_per_s')}], '/s', start, end),
    chart('Lag (messages not yet committed)', [
      {name: 'messages', points: h.lag.map(q => [q.t_ms, q.messages])}], '', start, end),
    chart('Oldest waiting message', [
      {name: 'age', points: h.lag.map(q => [q.t_ms, q.seconds])}], ' s', start, end));
  document.body.dataset.charted = String(Number(document.body.dataset.charted || 0) + 1);
}
function errors(got) {
  const rows = got.errors.map(e => `<tr><td>${new Date(e.time_ms).toLocaleTimeString()}</td>` +
    `<td class="text">${esc(e.component)}</td><td>${e.task >= 0 ? e.task : ''}</td>` +
    `<td class="text">${esc(e.host)}:${e.port}</td>` +
    `<td class="text">${esc(e.error.trim().split('\n').pop().slice(0, 300))}</td></tr>`);
  $('errors').innerHTML = rows.length ? '<table><tr><th>when</th><th>component</th>' +
    `<th>task</th><th>where</th><th>error</th></tr>${rows.join('')}</table>` :
    '<p class="muted">no errors reported</p>';
}
function links(v) {
  const a = [];
  const spark = webUrl(v.links.spark_ui), grafana = webUrl(v.links.grafana);
  if (spark) a.push(`<a href="${esc(spark)}" id="spark-ui">Spark UI</a>`);
  else a.push('<span class="muted" title="spark.ui.enabled=false, or its bolts job is not ' +
              'running">no Spark UI</span>');
  if (grafana) a.push(`<a href="${esc(grafana)}" id="grafana">Grafana</a>`);
  a.push(`<a href="/api/v1/topology/${ENC}/lag">lag</a>`, '<a href="/docs">REST API</a>');
  $('links').innerHTML = a.join(' ');
}
async function drill() {
  if (PICKED === null) return;
  const c = await api(`/api/v1/topology/${ENC}/component/${encodeURIComponent(PICKED)}` +
                      `?window=${WINDOW}`);
  const spout = c.componentType === 'spout';
  const stats = (spout ? c.spoutSummary : c.boltStats).map(w => `<tr><td>${esc(w.windowPretty)}` +
    `</td><td>${fmt(w.emitted)}</td><td>${fmt(w.acked)}</td><td>${fmt(w.failed)}</td>` +
    `<td>${spout ? fmt(w.completeLatency) : w.executeLatency} ms</td>` +
    `<td>${spout ? '' : w.capacity}</td></tr>`).join('');
  const execs = c.executorStats.map(x => `<tr><td class="text">${esc(x.host)}:${x.port}</td>` +
    `<td>${esc(x.uptime)}</td><td>${fmt(x.emitted)}</td><td>${fmt(x.acked)}</td>` +
    `<td>${fmt(x.failed)}</td></tr>`).join('');
  const errs = c.componentErrors.slice(0, 5).map(e => `<tr><td>` +
    `${new Date(e.errorTime).toLocaleTimeString()}</td><td class="text">` +
    `${esc(e.error.trim().split('\n').pop().slice(0, 300))}</td></tr>`).join('');
  $('drill').innerHTML = `<h2>${esc(PICKED)} · ${c.componentType} · ${c.tasks} tasks ` +
    `<a href="/topologies/${ENC}/logs/${encodeURIComponent(PICKED)}">its logs</a> ` +
    `<a href="#" id="drill-close">close</a></h2>` +
    `<table><tr><th>window</th><th>emitted</th><th>acked</th><th>failed</th>` +
    `<th>${spout ? 'complete' : 'execute'} latency</th><th>${spout ? '' : 'capacity'}</th></tr>` +
    `${stats}</table><table><tr><th>process</th><th>up</th><th>emitted</th><th>acked</th>` +
    `<th>failed</th></tr>${execs}</table>` +
    (errs ? `<table><tr><th>when</th><th>error</th></tr>${errs}</table>` : '') +
    (spout ? '<form id="trace" class="muted">where is my message? topic <input name=topic ' +
     'size=14> partition <input name=partition size=3> offset <input name=offset size=9> ' +
     '<button>trace</button> <span id="traced"></span></form>' : '');
  $('drill').hidden = false;
  $('drill').dataset.component = PICKED;
  $('drill-close').onclick = ev => { ev.preventDefault(); PICKED = null; $('drill').hidden = true; };
  const form = $('trace');
  if (form) form.onsubmit = async ev => {
    ev.preventDefault();
    const f = new FormData(form), q = k => encodeURIComponent(f.get(k));
    try {
      const got = await api(`/topologies/${ENC}/messages/${q('topic')}/${q('partition')}/${q('offset')}`);
      $('traced').textContent = got.summary;
    } catch (e) { $('traced').textContent = String(e.message || e); }
  };
}
async function refresh() {
  if (BUSY) return;
  BUSY = true;
  try {
    const [t, h, e, v] = await Promise.all([
      api(`/api/v1/topology/${ENC}?window=${WINDOW}`),
      api(`/topologies/${ENC}/history?window=${WINDOW}`),
      api(`/topologies/${ENC}/errors?limit=10`), api(`/topologies/${ENC}`)]);
    $('err').textContent = '';
    draw(t); charts(h); errors(e); links(v);
    await drill();
  } catch (err) { $('err').textContent = String(err.message || err); }
  finally { BUSY = false; }
}
document.querySelectorAll('#controls button[data-window]').forEach(
  x => x.classList.toggle('on', x.dataset.window === WINDOW));
document.querySelectorAll('#controls button[data-window]').forEach(b => b.onclick = () => {
  WINDOW = b.dataset.window;
  document.querySelectorAll('#controls button[data-window]').forEach(
    x => x.classList.toggle('on', x === b));
  refresh();
});
$('live').onchange = () => { LIVE = $('live').checked; if (LIVE) refresh(); };
refresh();
setInterval(() => { if (LIVE) refresh(); }, 2000);
