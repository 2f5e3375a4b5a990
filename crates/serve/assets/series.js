// One series hour by hour, on one axis, with the peaks of the window explained.
'use strict';
(async () => {
  const q = new URLSearchParams(location.search);
  const form = document.getElementById('controls');
  for (const k of ['id', 'op', 'host', 'end', 'hoursAgo', 'hours', 'buckets', 'scale']) if (q.get(k) !== null && form.elements[k]) form.elements[k].value = q.get(k);
  if (!q.get('hoursAgo')) form.elements.hoursAgo.value = 24;
  if (!q.get('buckets')) form.elements.buckets.value = 100;
  for (const k of ['id', 'op', 'host', 'end']) if (!form.elements[k].value) form.elements[k].disabled = true;
  let d;
  try { d = await LS.api('/api/series/detail', Object.fromEntries(q)); } catch (e) { return LS.fail(e); }
  const s = d.series, u = s.unit;
  document.title = 'latscope: ' + s.name;
  document.getElementById('title').textContent = s.name;
  const params = Object.entries(s.params).map(([k, v]) => k + '=' + (k === 'file_size' || k === 'region' || k === 'block_size' ? LS.bytes(v) : v)).join(', ');
  document.getElementById('about').textContent = [s.host, s.kind, 'values in ' + u, s.description, params].filter(x => x).join(' · ') +
    ` — ${d.window.hours} hours from ${LS.hour(d.window.from)} to ${LS.hour(d.window.to)} UTC, ${d.hours.length} with data`;
  const m = d.merged;
  const box = document.getElementById('merged');
  box.dataset.count = m.count; box.dataset.p50 = m.p50 ?? ''; box.dataset.p99 = m.p99 ?? '';
  if (!d.hours.length && s.last_hour !== null) {
    const p = new URLSearchParams(q); p.set('end', s.last_hour + 3600);
    const e = document.getElementById('error'); e.hidden = false;
    e.append('No values in this window; the latest stored hour is ' + LS.hour(s.last_hour) + ' UTC: ', LS.el('a', { href: '/series?' + p, text: 'show the hours up to it' }));
  }
  // As wide as the page allows (a narrow window gets a narrower chart, not a cut one).
  const room = document.getElementById('mergedchart').clientWidth || 1100;
  document.getElementById('mergedchart').append(chart(m, d, Math.max(420, Math.min(1100, room)), 220, true));
  const notes = document.getElementById('notes');
  notes.append(LS.el('li', { text: `${m.count} values: p50 ${LS.val(m.p50, u)}, p90 ${LS.val(m.p90, u)}, p99 ${LS.val(m.p99, u)}, max ${LS.val(m.max, u)}` }));
  for (const n of m.notes) notes.append(LS.el('li', { class: 'note', text: n }));
  const peaks = document.getElementById('peaks');
  if (m.peaks.length) {
    // Numbers right-aligned, their headers too: each header sits over its values.
    peaks.append(LS.el('tr', null, ...['peak', 'mode', 'share', 'values', 'from', 'to', 'tier'].map((t, i) => LS.el('th', { class: i >= 1 && i <= 5 ? 'num' : null, text: t }))));
    m.peaks.forEach((p, i) => peaks.append(LS.el('tr', { class: 'peak', 'data-mode-low': p.mode_low, 'data-mode-high': p.mode_high, 'data-share': p.share, 'data-count': p.count },
      LS.el('td', { text: '#' + (i + 1) }), LS.el('td', { class: 'num', text: LS.val(p.mode_low, u) + '…' + LS.val(p.mode_high, u) }),
      LS.el('td', { class: 'num', text: LS.pct(p.share) }), LS.el('td', { class: 'num', text: String(p.count) }),
      LS.el('td', { class: 'num', text: LS.val(p.low, u) }), LS.el('td', { class: 'num', text: LS.val(p.high, u) }),
      LS.el('td', { text: p.tier ? p.tier.replace('_', ' ') : '' }))));
  }
  const hours = document.getElementById('hours');
  const rows = [];
  for (const h of d.hours.slice().reverse()) {
    const peaksText = h.peaks.map(p => '▲ ' + LS.val(p.mode_high, u) + ' (' + LS.pct(p.share) + ')').join('  ');
    rows.push(LS.el('div', { class: 'hour', 'data-hour': h.hour, 'data-count': h.count, 'data-p50': h.p50 ?? '', 'data-p99': h.p99 ?? '' },
      LS.el('div', { text: LS.hour(h.hour) }),
      LS.el('div', { class: 'stats', title: h.notes.join('\n'), text: `${h.count} values · p50 ${LS.val(h.p50, u)} · p99 ${LS.val(h.p99, u)}` + (peaksText ? '\n' : '') }, peaksText ? LS.el('div', { class: 'desc', text: peaksText }) : null),
      chart(h, d, 900, 44, false)));
  }
  hours.append(...rows);
  LS.ready();
})();

// A histogram's bins as bars on the page's axis (log or linear), zeros apart, peaks marked.
function chart(h, d, w, hgt, axis) {
  const u = d.series.unit, log = d.scale === 'log', e = d.edges, n = h.bins.length;
  const max = Math.max(1, h.zeros || 0, ...h.bins);
  // The count axis in SI units (55.4M, not 55440973), the margin as wide as its widest label.
  const font = '10px system-ui, sans-serif', maxLabel = LS.trimZeros(LS.count(max));
  const left = axis ? Math.ceil(Math.max(LS.textWidth(maxLabel, font), 10)) + 10 : 4;
  const zw = log && d.merged.zeros > 0 ? 14 : 0, bottom = axis ? 18 : 2;
  // Room above the bars for the peaks' labels, one row each as placed below.
  const labelled = axis ? h.peaks.length : 0, top = axis ? 8 + 11 * labelled : 2;
  if (axis) hgt = Math.max(hgt, top + 150 + bottom);
  const pw = w - left - zw - 6, ph = hgt - top - bottom;
  const g = LS.svg('svg', { class: 'chart', width: w, height: hgt, viewBox: `0 0 ${w} ${hgt}` });
  const x0 = left + zw, bw = pw / Math.max(n, 1);
  const lo = e[0], hi = e[e.length - 1];
  const xOf = v => x0 + pw * (log ? (Math.log(Math.max(v, lo)) - Math.log(lo)) / (Math.log(hi) - Math.log(lo)) : (v - lo) / (hi - lo || 1));
  let path = '';
  h.bins.forEach((c, i) => { if (c > 0) { const bh = Math.max(1, ph * c / max); path += `M${(x0 + i * bw).toFixed(1)} ${top + ph}h${Math.max(bw - 0.3, 0.4).toFixed(2)}v${(-bh).toFixed(1)}h${(-Math.max(bw - 0.3, 0.4)).toFixed(2)}z`; } });
  g.append(LS.svg('path', { class: 'bars', d: path }));
  if (zw && h.zeros > 0) {
    const bh = Math.max(1, ph * h.zeros / max);
    g.append(LS.svg('rect', { class: 'zero', x: left + 2, y: top + ph - bh, width: zw - 5, height: bh }, LS.svg('title', { text: h.zeros + ' values of 0' })));
  }
  if (axis) {
    g.append(LS.svg('line', { x1: x0, x2: x0 + pw, y1: top + ph + 0.5, y2: top + ph + 0.5, stroke: '#999' }));
    for (const t of ticks(lo, hi, log)) {
      const x = xOf(t).toFixed(1);
      g.append(LS.svg('line', { x1: x, x2: x, y1: top + ph, y2: top + ph + 4, stroke: '#999' }), LS.svg('text', { x, y: hgt - 4, 'text-anchor': 'middle', text: LS.trimZeros(LS.val(t, u)) }));
    }
    if (zw) g.append(LS.svg('text', { x: left + 6, y: hgt - 4, 'text-anchor': 'middle', text: '0' }));
    g.append(LS.svg('text', { class: 'count', x: left - 4, y: top + 8, 'text-anchor': 'end', text: maxLabel }, LS.svg('title', { text: max + ' values' })),
      LS.svg('text', { class: 'count', x: left - 4, y: top + ph, 'text-anchor': 'end', text: '0' }));
  }
  // Peaks: a dashed line at each mode, from just below its label down; labels placed in rows so
  // that none crosses another peak's line or runs off the chart.
  const xs = h.peaks.map(p => xOf((p.mode_low + p.mode_high) / 2));
  const labels = h.peaks.map(p => `${LS.val(p.mode_high, u)} ${LS.pct(p.share)}` + (p.tier ? ' ' + p.tier.replace('_', ' ') : ''));
  const place = axis ? LS.placeLabels(xs, labels.map(t => LS.textWidth(t, font) + 2), x0, w - 2) : [];
  h.peaks.forEach((p, i) => {
    const x = xs[i].toFixed(1), [row, goesLeft] = place[i] || [0, false], ty = 10 + 11 * row;
    g.append(LS.svg('line', { class: 'peak', x1: x, x2: x, y1: axis ? ty + 3 : top, y2: top + ph, 'stroke-dasharray': '3 2' }, LS.svg('title', { text: 'peak: mode ' + LS.val(p.mode_low, u) + '…' + LS.val(p.mode_high, u) + ', ' + LS.pct(p.share) + ' of values, ' + p.count + ' values' + (p.tier ? ', ' + p.tier : '') })));
    if (axis) g.append(LS.svg('text', { class: 'peak', x: goesLeft ? +x - 3 : +x + 3, 'text-anchor': goesLeft ? 'end' : 'start', y: ty, text: labels[i] }));
  });
  return g;
}

// Axis ticks: decades (and 2, 5 when few) on a log axis, round steps on a linear one.
function ticks(lo, hi, log) {
  const out = [];
  if (log) {
    for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p++) for (const m of [1, 2, 5]) { const v = m * 10 ** p; if (v >= lo && v <= hi) out.push(v); }
    return out.length > 12 ? out.filter(v => String(v)[0] === '1') : out;
  }
  const step = 10 ** Math.floor(Math.log10((hi - lo) / 5 || 1)), k = [1, 2, 5, 10].find(k => (hi - lo) / (k * step) <= 8) * step;
  for (let v = Math.ceil(lo / k) * k; v <= hi; v += k) out.push(v);
  return out;
}
