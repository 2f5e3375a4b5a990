// The live page: heat map and spectrogram of one-second rows, drill-down tables, events of a cell.
'use strict';
const q = new URLSearchParams(location.search);
const form = document.getElementById('controls');
for (const k of ['filter', 'min', 'max', 'rows']) if (q.get(k)) form.elements[k].value = q.get(k);
for (const k of ['block', 'stream', 'waits', 'why']) form.elements[k].checked = q.get(k) === '1';
const base = {};
for (const k of ['filter', 'block', 'stream', 'min', 'max', 'waits', 'why']) if (q.get(k)) base[k] = q.get(k);
const ROWS = Math.min(3600, Math.max(10, +(q.get('rows') || 120))), COLS = 56;
const heat = document.getElementById('heatmap'), spec = document.getElementById('spectrogram');
let view = null, sel = null, tablesTimer = null, gotTables = false, threadsTimer = null;
// cell=busiest: select the busiest cell of the latest second with events once there is one
// (links and screenshots that open on a drill-down).
let pick = q.get('cell') === 'busiest';

const colorOf = (n, pal) => n <= 0 ? '#000' : pal[Math.min(pal.length - 1, Math.round(Math.log10(n) * 10))];
const since = i => ((i - view.first_row) - (view.rows.length - 1)) * view.interval_ns / 1e9;

function showFilterError(b) {
  const fe = b.filter_error, pre = document.getElementById('filtererror');
  pre.hidden = false;
  const expr = Array.from(fe.expr);
  pre.textContent = fe.message + '\n' + expr.join('') + '\n' + ' '.repeat(fe.start) + '^'.repeat(fe.len);
  pre.dataset.start = fe.start; pre.dataset.len = fe.len;
  document.getElementById('status').textContent = 'fix the filter';
  LS.ready();
}

async function poll() {
  let d;
  try { d = await LS.post('/api/live', Object.assign({ rows: ROWS, cols: COLS }, base)); }
  catch (e) {
    if (e.body && e.body.filter_error) return showFilterError(e.body);
    LS.fail(e); setTimeout(poll, 3000); return;
  }
  if (d.state !== 'running') {
    document.getElementById('status').textContent = d.state === 'failed' ? 'the live session failed: ' + d.error : 'starting the probes…';
    if (d.state === 'failed') { document.body.dataset.state = 'failed'; LS.fail(new Error(d.error)); }
    setTimeout(poll, d.state === 'failed' ? 5000 : 500);
    return;
  }
  document.getElementById('error').hidden = true;
  view = d;
  document.body.dataset.mode = d.mode;
  drawHeat(); drawSpec(); status();
  if (pick && d.mode === 'streaming') {
    const k = d.rows.map(r => r.counts.some(c => c > 0)).lastIndexOf(true);
    if (k >= 0) { pick = false; const cs = d.rows[k].counts; select({ r0: d.rows[k].i, r1: d.rows[k].i, c0: cs.indexOf(Math.max(...cs)), c1: cs.indexOf(Math.max(...cs)) }); }
  }
  if (d.mode === 'streaming' && !tablesTimer && !sel) tables();
  if (d.mode === 'streaming' && !threadsTimer) threadsView();
  if (d.mode !== 'streaming') {
    document.getElementById('drillnote').textContent = 'The histograms are built in the kernel, which keeps no events: click a cell (or check “keep events”) to keep the last events from then on and drill down by process, syscall, file, disk, client, container and pod.';
    document.getElementById('tables').replaceChildren();
    if (!document.body.dataset.ready) LS.ready();
  } else if (gotTables && !document.body.dataset.ready) LS.ready();
  setTimeout(poll, 1000);
}

function status() {
  const d = view, mode = d.mode === 'counting' ? 'counted in the kernel (no events copied)' : 'events kept: ' + (d.streaming_reason || 'drill-down');
  document.getElementById('status').textContent = `${d.source} — ${mode} — ${LS.count(d.events_per_s)} events/s — ${d.events_total} events since start${d.counted || ''}` +
    (d.lost ? ` — ${d.lost} LOST (ring buffer full)` : ' — none lost') + (d.filter ? ` — filter: ${d.filter}` : '');
  heat.dataset.shown = d.shown; heat.dataset.rows = d.rows.length; heat.dataset.below = d.below; heat.dataset.above = d.above;
  const leg = document.getElementById('legend');
  if (!leg.childElementCount) for (const n of [1, 10, 100, 1000, 10000, 100000]) leg.append(LS.el('span', null, Object.assign(LS.el('i'), { style: '' }), LS.trimZeros(LS.count(n))));
  leg.querySelectorAll('i').forEach((i, k) => { i.style.background = colorOf(10 ** k, d.palette); });
}

// Heat map: x = rows (time, newest right), y = latency columns (low at the bottom).
function drawHeat() {
  const d = view, ctx = heat.getContext('2d'), W = heat.width, H = heat.height, L = 58, B = 16;
  ctx.fillStyle = '#111'; ctx.fillRect(0, 0, W, H);
  const n = ROWS, cw = (W - L) / n, rh = (H - B) / d.axis.cols;
  const off = n - d.rows.length;
  d.rows.forEach((r, k) => r.counts.forEach((c, j) => {
    ctx.fillStyle = colorOf(c, d.palette);
    ctx.fillRect(L + (off + k) * cw, H - B - (j + 1) * rh, Math.ceil(cw), Math.ceil(rh));
  }));
  ctx.fillStyle = '#ccc'; ctx.font = '10px sans-serif'; ctx.textAlign = 'right';
  // Latency: every decade of the axis (every second or third when they would touch), at its
  // place on the log scale, whatever the axis' ends.
  const drawn = [];
  for (const t of decadeTicks(d.axis, H - B, 14)) {
    const y = Math.min(H - B, Math.max(10, H - B - t.at + 3)), text = LS.trimZeros(LS.ns(t.v));
    ctx.fillText(text, L - 4, y);
    drawn.push({ text, x: L - 4 - ctx.measureText(text).width, y: y - 9, w: ctx.measureText(text).width, h: 10 });
  }
  // Labels at the edges are aligned inward so that none is cut by the canvas.
  for (let s = 0; s <= n; s += n >= 300 ? 60 : n >= 60 ? 10 : 5) {
    const text = s === 0 ? 'now' : '-' + s + 's', w = ctx.measureText(text).width, x = L + (n - s) * cw;
    ctx.textAlign = s === 0 ? 'right' : s === n ? 'left' : 'center'; ctx.fillText(text, x, H - 3);
    drawn.push({ text, x: s === 0 ? x - w : s === n ? x : x - w / 2, y: H - 12, w, h: 10 });
  }
  heat.dataset.labels = JSON.stringify(drawn);
  if (sel) { ctx.strokeStyle = '#fff'; ctx.lineWidth = 2; const k0 = sel.r0 - d.first_row + off, k1 = sel.r1 - d.first_row + off; ctx.strokeRect(L + k0 * cw, H - B - (sel.c1 + 1) * rh, (k1 - k0 + 1) * cw, (sel.c1 - sel.c0 + 1) * rh); }
  heat.onclick = ev => {
    const rect = heat.getBoundingClientRect(), x = (ev.clientX - rect.left) * W / rect.width, y = (ev.clientY - rect.top) * H / rect.height;
    const k = Math.floor((x - L) / cw) - off, j = Math.floor((H - B - y) / rh);
    if (k < 0 || k >= d.rows.length || j < 0 || j >= d.axis.cols) return;
    select({ r0: d.rows[k].i, r1: d.rows[k].i, c0: j, c1: j });
  };
}

// Spectrogram: x = latency columns, y = the last 40 rows (newest at the bottom).
function drawSpec() {
  const d = view, ctx = spec.getContext('2d'), W = spec.width, H = spec.height, L = 58, T = 14, N = 40;
  ctx.fillStyle = '#111'; ctx.fillRect(0, 0, W, H);
  const cw = (W - L) / d.axis.cols, rh = (H - T) / N, rows = d.rows.slice(-N), off = N - rows.length;
  rows.forEach((r, k) => r.counts.forEach((c, j) => { ctx.fillStyle = colorOf(c, d.palette); ctx.fillRect(L + j * cw, T + (off + k) * rh, Math.ceil(cw), Math.ceil(rh)); }));
  ctx.fillStyle = '#ccc'; ctx.font = '10px sans-serif';
  // Latency: every decade (or every second, third...) that leaves room for its label; the last
  // is aligned inward so that the canvas does not cut it.
  const drawn = [];
  for (const t of decadeTicks(d.axis, W - L, 44)) {
    const text = LS.trimZeros(LS.ns(t.v)), w = ctx.measureText(text).width, x = L + t.at;
    const right = x + w / 2 > W - 1, left = x - w / 2 < L;
    ctx.textAlign = right ? 'right' : left ? 'left' : 'center';
    ctx.fillText(text, x, 10);
    drawn.push({ text, x: right ? x - w : left ? x : x - w / 2, y: 1, w, h: 10 });
  }
  spec.dataset.labels = JSON.stringify(drawn);
  ctx.textAlign = 'right';
  for (let s = 0; s < N; s += 10) ctx.fillText(s === 0 ? 'now' : '-' + s + 's', L - 4, T + (N - s) * rh - 2);
}

// The decades of a log latency axis (`axis`: min_ns, max_ns) laid over `len` pixels: each with
// its offset from the low end, every `step`-th decade so that two are at least `gap` pixels apart.
function decadeTicks(axis, len, gap) {
  const a = Math.log10(axis.min_ns), b = Math.log10(axis.max_ns), per = len / Math.max(b - a, 1e-9);
  const first = Math.ceil(a - 1e-9), last = Math.floor(b + 1e-9), step = Math.max(1, Math.ceil(gap / per));
  const out = [];
  for (let p = first; p <= last; p += step) out.push({ v: 10 ** p, at: (p - a) * per });
  return out;
}

async function select(s) {
  sel = s; drawHeat();
  // The first drill-down of a counting session switches it to keeping events, and says so.
  const switched = view.mode !== 'streaming' && !base.stream;
  if (switched) {
    base.stream = '1'; form.elements.stream.checked = true;
    const n = new URLSearchParams(base); if (q.get('rows')) n.set('rows', q.get('rows'));
    history.replaceState(null, '', '/live?' + n);
  }
  // The axis the cell was picked on (it follows the fastest event when not set).
  const p = Object.assign({ r0: s.r0, r1: s.r1, c0: s.c0, c1: s.c1, cols: COLS }, base, { min: view.axis.min_ns + 'ns', max: view.axis.max_ns + 'ns' });
  const box = document.getElementById('cell'); box.hidden = false;
  const pre = document.getElementById('events');
  try {
    const e = await LS.post('/api/live/events', p);
    document.getElementById('cellinfo').textContent = switched
      ? 'The histograms were built in the kernel, which keeps no events. From now on the last events are kept: click cells of the seconds from now on to list their events; the tables below fill as they come.'
      : `events ${e.query}: ${e.matched} matched` + (e.lines.length < e.matched ? `, the first ${e.lines.length} shown` : '') + (e.note ? ' — ' + e.note : '');
    if (switched) { sel = null; drawHeat(); }
    pre.textContent = e.lines.join('\n');
    pre.hidden = switched;
    box.dataset.matched = e.matched;
    drawWhy(switched ? null : e);
  } catch (err) { pre.textContent = err.message; }
  if (view.mode === 'streaming') tables();
}

// The breakdown of the selected cells (a session with why=1): time by cause as a stacked bar and
// a table, blocked time by waker with what the waker was in, the top blocking stacks.
const calls = n => n === 1 ? '1 call' : `${n} calls`;
function drawWhy(e) {
  const box = document.getElementById('why'), note = document.getElementById('whynote');
  const w = e && e.why;
  box.hidden = !w; note.hidden = !e || !!w;
  if (!w) {
    if (e) {
      note.replaceChildren('No breakdown: this live view records no attribution. ',
        LS.el('a', { href: '/live?' + new URLSearchParams(Object.assign({}, base, { why: '1' })), text: 'Record why it was slow' }),
        ' (a session of its own, from then on; costs more per syscall).');
    }
    return;
  }
  const left = w.idle_waits_left_out ? `; ${w.idle_waits_left_out} idle waits left out (tick “count idle waits” to count them)` : '';
  const without = w.calls_without_breakdown ? `; ${calls(w.calls_without_breakdown)} without one` : '';
  document.getElementById('whyinfo').textContent = `${calls(w.calls)} with a breakdown, ${LS.ns(w.total_ns)} in total` + without + left;
  box.dataset.calls = w.calls;
  // Nothing to break down (only idle waits, say): the line above says why, no empty picture.
  for (const id of ['whybar', 'whycause', 'whywaker', 'whyroots', 'whystacks']) document.getElementById(id).style.display = w.calls ? '' : 'none';
  if (!w.calls) return;
  const parts = Object.entries(w.parts_ns).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
  const total = Math.max(1, w.total_ns), bar = document.getElementById('whybar');
  bar.replaceChildren();
  // In pixels of the bar as laid out (no viewBox: labels are measured in the units drawn).
  const W = bar.getBoundingClientRect().width - 2 || 960, H = 32;
  let x = 0;
  for (const [k, v] of parts) {
    const wd = v / total * W, label = `${w.labels[k]} ${LS.ns(v)} (${LS.pct(v / total)})`;
    bar.append(LS.svg('rect', { x, y: 0, width: Math.max(wd, 0.5), height: H, fill: w.colors[k], 'data-part': k }, LS.svg('title', { text: label })));
    // A label only where it fits inside its segment.
    const t = LS.svg('text', { x: x + 6, y: H / 2 + 4, text: label });
    bar.append(t);
    if (t.getComputedTextLength() > wd - 12) t.remove();
    x += wd;
  }
  const cause = document.getElementById('whycause');
  cause.replaceChildren(LS.el('caption', { text: 'time by cause' }),
    LS.el('tr', null, ...['cause', 'time', 'share'].map((h, i) => LS.el('th', { class: i ? 'num' : '', text: h }))));
  for (const [k, v] of parts) {
    cause.append(LS.el('tr', { 'data-part': k, 'data-ns': v },
      LS.el('td', null, LS.el('i', { class: 'swatch', style: 'background:' + w.colors[k] }), w.labels[k]),
      LS.el('td', { class: 'num', text: LS.ns(v) }), LS.el('td', { class: 'num', text: LS.pct(v / total) })));
  }
  const waker = document.getElementById('whywaker');
  waker.replaceChildren(LS.el('caption', { text: 'blocked time by waker (the longest wait of each call)' }),
    LS.el('tr', null, ...['waker', 'ended', 'blocked', 'which was in'].map((h, i) => LS.el('th', { class: i === 2 ? 'num' : '', text: h }))));
  for (const k of w.wakers) {
    waker.append(LS.el('tr', { 'data-waker': k.waker, 'data-cause': k.cause, 'data-ns': k.blocked_ns, 'data-was-in': k.was_in ? k.was_in.cause : '' },
      LS.el('td', { class: 'name', title: k.waker, text: LS.shortMiddle(k.waker, 34) }), LS.el('td', { text: w.labels[k.cause] }),
      LS.el('td', { class: 'num', text: LS.ns(k.blocked_ns) }), LS.el('td', { text: k.was_in ? `${w.labels[k.was_in.cause]} ${LS.ns(k.was_in.ns)}` : '-' })));
  }
  if (!w.wakers.length) waker.append(LS.el('tr', null, LS.el('td', { colspan: 4, text: 'no call was woken by another thread, a timer or a softirq' })));
  // Where the chains of waits end: each call's longest wait followed through the threads it
  // waited on, down to a device, a timer, outside work or a thread that was running.
  const roots = document.getElementById('whyroots');
  roots.replaceChildren(LS.el('caption', { text: 'where the longest waits end (chains of waits)' }),
    LS.el('tr', null, ...['root', 'calls', 'time', 'share'].map((h, i) => LS.el('th', { class: i ? 'num' : '', text: h }))));
  for (const r of w.chain_roots || []) {
    roots.append(LS.el('tr', { 'data-root': r.kind, 'data-ns': r.ns },
      LS.el('td', { class: 'name', title: r.root, text: LS.shortMiddle(r.root, 40) }), LS.el('td', { class: 'num', text: calls(r.calls) }),
      LS.el('td', { class: 'num', text: LS.ns(r.ns) }), LS.el('td', { class: 'num', text: LS.pct(r.share) })));
  }
  if (!(w.chain_roots || []).length) roots.append(LS.el('tr', null, LS.el('td', { colspan: 4, text: 'no chain of waits: no call waited on another thread or a device' })));
  const st = document.getElementById('whystacks'), s = w.stacks;
  const kids = [LS.el('h3', null, 'Top blocking stacks ', LS.el('span', { class: 'sub', text: s.stacks.length ? `(${LS.ns(s.total_blocked_ns)} blocked in all)` : (s.note || 'no blocked call carries a stack') }))];
  s.stacks.forEach((k, i) => {
    kids.push(LS.el('div', { class: 'sub', 'data-op': k.op, text: `${i + 1}. ${LS.ns(k.blocked_ns)} blocked (${LS.pct(k.share)}) in ${calls(k.calls)}: ${k.op} by ${k.comm}` }));
    kids.push(LS.el('pre', { class: 'stack', text: 'kernel (where it blocked):\n  ' + k.kernel.join('\n  ') + '\nuser:\n  ' + k.user.join('\n  ') }));
  });
  st.replaceChildren(...kids);
}

async function tables() {
  clearTimeout(tablesTimer); tablesTimer = null;
  const p = Object.assign({ rows: Math.min(ROWS, 60), limit: 15 }, base);
  if (sel) Object.assign(p, { r0: sel.r0, r1: sel.r1, c0: sel.c0, c1: sel.c1, cols: COLS, min: view.axis.min_ns + 'ns', max: view.axis.max_ns + 'ns' });
  let t;
  try { t = await LS.post('/api/live/tables', p); } catch (e) { document.getElementById('drillnote').textContent = e.message; tablesTimer = setTimeout(tables, 3000); return; }
  document.getElementById('drillscope').textContent = sel ? '(the selected cells)' : `(the last ${Math.round(t.seconds)} s; click a row to narrow the filter to it)`;
  const waits = t.tables.length ? t.tables[0].note : null;
  document.getElementById('drillnote').textContent = `${t.events} events` + (t.note ? ' — ' + t.note : '') + (waits ? ' — ' + waits : '');
  const box = document.getElementById('tables'), out = [];
  for (const tb of t.tables) {
    const table = LS.el('table', { class: 'grid', 'data-by': tb.by, 'data-events': tb.events });
    table.append(LS.el('caption', { title: tb.scope_note, text: `by ${tb.by} (${tb.groups} group${tb.groups === 1 ? '' : 's'})` + (tb.scope ? ': ' + tb.scope : '') }),
      LS.el('tr', null, ...[tb.by, 'count', 'rate/s', 'p50', 'p99', 'max', 'total'].map((h, i) => LS.el('th', { class: i ? 'num' : '', text: h }))));
    for (const r of tb.rows) {
      const tr = LS.el('tr', { class: r.narrow ? 'narrow' : '', 'data-name': r.name, 'data-count': r.count, 'data-narrow': r.narrow, title: r.narrow ? 'narrow to: ' + r.narrow : 'no filter field names this group' },
        LS.el('td', { class: 'name', title: r.name, text: LS.shortMiddle(r.name, 34) }), LS.el('td', { class: 'num', text: String(r.count) }), LS.el('td', { class: 'num', text: LS.count(r.rate_per_s) }),
        LS.el('td', { class: 'num', text: LS.ns(r.p50_ns) }), LS.el('td', { class: 'num', text: LS.ns(r.p99_ns) }), LS.el('td', { class: 'num', text: LS.ns(r.max_ns) }), LS.el('td', { class: 'num', text: LS.ns(r.total_ns) }));
      if (r.narrow) tr.onclick = () => { const n = new URLSearchParams(base); n.set('filter', r.narrow); n.set('stream', '1'); if (q.get('rows')) n.set('rows', q.get('rows')); location.href = '/live?' + n; };
      table.append(tr);
    }
    out.push(table);
  }
  box.replaceChildren(...out);
  gotTables = true;
  if (view && !document.body.dataset.ready) LS.ready();
  if (!sel) tablesTimer = setTimeout(tables, 2000);
}

// The threads view (`latscope timeline --threads` of the last seconds), redrawn every 2 s: the
// server draws the SVG (its text escaped); it is parsed as SVG, with no script, and put in place.
async function threadsView() {
  let t;
  try { t = await LS.post('/api/live/threads', Object.assign({ seconds: 5, rows: 30 }, base)); }
  catch (e) { document.getElementById('threadsinfo').textContent = e.message; threadsTimer = setTimeout(threadsView, 3000); return; }
  const box = document.getElementById('threadsvg');
  document.getElementById('threads').hidden = false;
  if (t.svg) {
    const doc = new DOMParser().parseFromString(t.svg, 'image/svg+xml');
    const svg = document.importNode(doc.documentElement, true);
    svg.setAttribute('data-threads', t.threads); svg.setAttribute('data-wakeups', t.wakeups); svg.setAttribute('data-calls', t.calls);
    box.replaceChildren(svg);
  } else if (t.error) box.replaceChildren(LS.el('p', { class: 'error', text: t.error }));
  threadsTimer = setTimeout(threadsView, 2000);
}

poll();
