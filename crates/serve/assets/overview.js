// The overview: every series with its latest hour and its p50/p99 trend.
'use strict';
(async () => {
  let d;
  try { d = await LS.api('/api/overview'); } catch (e) { return LS.fail(e); }
  document.getElementById('store').textContent = d.store + ' — ' + d.series.length + ' series';
  const tbody = document.querySelector('#series tbody');
  const rows = [];
  for (const s of d.series) {
    const l = s.latest, u = s.unit;
    const tr = LS.el('tr', { class: 'series', 'data-id': s.id, 'data-name': s.name, 'data-host': s.host });
    const link = LS.el('a', { href: '/series?id=' + s.id, text: s.name });
    tr.append(LS.el('td', null, link, LS.el('div', { class: 'desc', text: [s.host, s.kind, s.unit, s.description].filter(x => x).join(' · ') })));
    const cell = (cls, v, text) => LS.el('td', { class: 'num ' + cls, 'data-v': v === null || v === undefined ? '' : v, text });
    if (l) {
      tr.append(LS.el('td', { class: 'latest', 'data-v': l.hour, text: LS.hour(l.hour) }),
        cell('count', l.count, String(l.count)), cell('p50', l.p50, LS.val(l.p50, u)),
        cell('p99', l.p99, LS.val(l.p99, u)), cell('max', l.max, LS.val(l.max, u)),
        LS.el('td', null, spark(l.bins, u)));
    } else {
      tr.append(LS.el('td', { colspan: 6, class: 'desc', text: 'no hour stored yet' }));
    }
    tr.append(LS.el('td', null, trend(s.trend, u)), cell('hours', s.hours, String(s.hours)));
    rows.push(tr);
  }
  tbody.append(...rows);
  LS.ready();
})();

// The latest hour's histogram, 10 bins per decade, as bars.
function spark(bins, unit) {
  const w = 160, h = 32, n = Math.max(bins.length, 1), max = Math.max(1, ...bins.map(b => b[2]));
  const bw = w / n, g = LS.svg('svg', { class: 'spark', width: w, height: h, viewBox: `0 0 ${w} ${h}` });
  let path = '';
  bins.forEach((b, i) => { if (b[2] > 0) { const bh = Math.max(1, (h - 2) * b[2] / max); path += `M${(i * bw).toFixed(1)} ${h}h${Math.max(bw - 0.5, 0.5).toFixed(1)}v${(-bh).toFixed(1)}h${(-Math.max(bw - 0.5, 0.5)).toFixed(1)}z`; } });
  g.append(LS.svg('path', { d: path, fill: '#3b7dd8' }));
  if (bins.length) g.append(LS.svg('title', { text: LS.val(bins[0][0], unit) + ' … ' + LS.val(bins[bins.length - 1][1], unit) + ', 10 bins per decade' }));
  return g;
}

// p50 and p99 by hour, log scale; gaps where hours are missing.
function trend(t, unit) {
  const w = 220, h = 40, g = LS.svg('svg', { class: 'trend', width: w, height: h, viewBox: `0 0 ${w} ${h}`, 'data-n': t.length });
  if (t.length) { g.dataset.lastP50 = t[t.length - 1][2] ?? ''; g.dataset.lastP99 = t[t.length - 1][3] ?? ''; }
  const pts = t.filter(r => r[2] !== null);
  if (!pts.length) return g;
  const h0 = t[0][0], h1 = t[t.length - 1][0], span = Math.max(h1 - h0, 3600);
  const vals = pts.flatMap(r => [r[2], r[3]]).filter(v => v > 0);
  const lo = Math.log10(Math.max(1, Math.min(...vals))), hi = Math.log10(Math.max(...vals, 2));
  const y = v => (h - 3 - (h - 6) * (Math.log10(Math.max(v, 1)) - lo) / Math.max(hi - lo, 1e-9)).toFixed(1);
  const x = hr => (2 + (w - 4) * (hr - h0) / span).toFixed(1);
  for (const [k, cls] of [[2, 'p50'], [3, 'p99']]) {
    let d = '', prev = null;
    for (const r of pts) { d += (prev !== null && r[0] - prev === 3600 ? 'L' : 'M') + x(r[0]) + ' ' + y(r[k]); prev = r[0]; }
    if (pts.length === 1) d += 'h2';
    g.append(LS.svg('path', { class: cls, d, 'stroke-width': 1.5 }));
  }
  const last = pts[pts.length - 1];
  g.append(LS.svg('title', { text: `${pts.length} hours; latest ${LS.hour(last[0])}: p50 ${LS.val(last[2], unit)}, p99 ${LS.val(last[3], unit)}` }));
  return g;
}
