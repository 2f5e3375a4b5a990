// Shared helpers of the latscope pages: the JSON API, number formats with units, small SVG charts.
'use strict';
const LS = {};
// GET /api/... (or POST, for the live requests, which start probes): JSON, or an exception with
// the server's message (and its JSON as .body).
LS.api = async (path, params, method) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const r = method === 'POST'
    ? await fetch(path, { method: 'POST', body: q, credentials: 'same-origin' })
    : await fetch(path + (q.toString() ? '?' + q : ''), { credentials: 'same-origin' });
  if (r.status === 401) { location.href = '/login?next=' + encodeURIComponent(location.pathname + location.search); throw new Error('login needed'); }
  const body = await r.json().catch(() => ({ error: 'bad reply (HTTP ' + r.status + ')' }));
  if (!r.ok || body.error) { const e = new Error(body.error || ('HTTP ' + r.status)); e.body = body; throw e; }
  return body;
};
LS.post = (path, params) => LS.api(path, params, 'POST');
// Three significant digits, as latscope's text output prints them.
LS.sig3 = v => v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
LS.ns = ns => ns === null || ns === undefined ? '-' : ns < 1e3 ? Math.round(ns) + 'ns' : ns < 1e6 ? LS.sig3(ns / 1e3) + 'us' : ns < 1e9 ? LS.sig3(ns / 1e6) + 'ms' : LS.sig3(ns / 1e9) + 's';
LS.bytes = b => { const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']; let i = 0; while (b >= 1024 && i < 4) { b /= 1024; i++; } return i ? LS.sig3(b) + u[i] : Math.round(b) + 'B'; };
// A value in a series' unit: ns, ps (loops, around a nanosecond), bytes, or a bare number.
LS.val = (v, unit) => v === null || v === undefined ? '-' : unit === 'ns' ? LS.ns(v) : unit === 'ps' ? (v < 10000 && v > 0 ? (v / 1000).toFixed(2) + 'ns' : LS.ns(v / 1000)) : unit === 'bytes' ? LS.bytes(v) : String(v);
// A label without trailing zeros: 1.00us -> 1us, 2.50ms -> 2.5ms, 10.0k -> 10k (axis ticks).
LS.trimZeros = s => s.replace(/(\.\d*?)0+(?=[^\d]*$)/, '$1').replace(/\.(?=[^\d]*$)/, '');
// `s` shortened to `n` characters in the middle, a path keeping its file name: rows of files in
// one directory stay apart.
LS.shortMiddle = (s, n) => {
  if (s.length <= n) return s;
  const slash = s.lastIndexOf('/');
  const tail = slash > 0 && s.length - slash <= n - 8 ? s.slice(slash) : s.slice(s.length - Math.floor((n - 1) / 2));
  return s.slice(0, n - 1 - tail.length) + '…' + tail;
};
LS.count = n => n < 1e3 ? String(Math.round(n * 10) / 10) : n < 1e6 ? LS.sig3(n / 1e3) + 'k' : n < 1e9 ? LS.sig3(n / 1e6) + 'M' : LS.sig3(n / 1e9) + 'G';
// The width in pixels of `text` drawn in `font` (a CSS font), measured by the browser.
LS.textWidth = (text, font) => {
  const c = LS.textWidth.ctx || (LS.textWidth.ctx = document.createElement('canvas').getContext('2d'));
  c.font = font;
  return c.measureText(text).width;
};
// Rows and sides for labels of vertical lines at `xs` (labels `widths` wide, within left..right)
// such that no label crosses another's line, the lines starting just below their own labels: a
// label may only extend over the lines of labels in lower rows. Returns [row, goes left] per
// label (the command line's histograms place theirs the same way).
LS.placeLabels = (xs, widths, left, right) => {
  const n = xs.length;
  const extent = (k, end) => end ? [xs[k] - 3 - widths[k], xs[k]] : [xs[k], xs[k] + 3 + widths[k]];
  const fits = (k, end) => { const [a, b] = extent(k, end); return a >= left && b <= right; };
  const rowsFor = end => {
    for (let k = 0; k < n; k++) if (!fits(k, end(k))) return null;
    const over = xs.map((_, a) => { const [x1, x2] = extent(a, end(a)); return xs.map((x, b) => b !== a && x >= x1 - 2 && x <= x2 + 2 ? b : -1).filter(b => b >= 0); });
    const indeg = new Array(n).fill(0);
    over.flat().forEach(v => indeg[v]++);
    const ready = [...Array(n).keys()].filter(k => indeg[k] === 0), order = [];
    while (ready.length) { const k = ready.pop(); order.push(k); for (const v of over[k]) if (--indeg[v] === 0) ready.push(v); }
    if (order.length < n) return null;
    const out = new Array(n); order.forEach((k, row) => { out[k] = [row, end(k)]; });
    return out;
  };
  if (n <= 10) { for (let mask = 0; mask < (1 << n); mask++) { const r = rowsFor(k => (mask & (1 << k)) !== 0); if (r) return r; } }
  else { const r = rowsFor(k => !fits(k, false)); if (r) return r; }
  const byX = [...Array(n).keys()].sort((a, b) => xs[a] - xs[b]), out = new Array(n);
  byX.forEach((k, row) => { out[k] = [row, !fits(k, false)]; });
  return out;
};
LS.hour = secs => new Date(secs * 1000).toISOString().slice(0, 13).replace('T', ' ') + ':00';
// A share as a percentage: tiny ones with two significant digits (0.00024 %), never a bare 0.000.
// Nearly all is not all: 99.99976 %, not 100.0 %.
LS.pct = s => {
  const p = s * 100;
  if (p > 0 && p < 0.1) return LS.trimZeros(p.toPrecision(2)) + ' %';
  if (p >= 99.95 && p < 100) return p.toFixed(Math.min(8, Math.ceil(-Math.log10(100 - p)) + 1)) + ' %';
  return p.toFixed(1) + ' %';
};
LS.el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) { if (k === 'text') e.textContent = v; else e.setAttribute(k, v); }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
};
LS.svg = (tag, attrs, ...kids) => {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) { if (k === 'text') e.textContent = v; else e.setAttribute(k, v); }
  for (const k of kids) if (k) e.append(k);
  return e;
};
// Marks the page rendered (tests and the load benchmark wait for it).
LS.ready = () => {
  document.body.dataset.ready = '1';
  document.body.dataset.renderMs = performance.now().toFixed(1);
  // The frame after next: the rendered page has been laid out and painted.
  requestAnimationFrame(() => requestAnimationFrame(() => { document.body.dataset.paintMs = performance.now().toFixed(1); }));
};
LS.fail = (e) => { const p = document.getElementById('error'); if (p) { p.hidden = false; p.textContent = e.message; } LS.ready(); };
// The login form returns to the page that sent us there.
if (document.body.dataset.page === 'login') {
  const q = new URLSearchParams(location.search);
  document.getElementById('next').value = q.get('next') || '/';
  document.getElementById('failed').hidden = !q.get('failed');
}
