// The flight recorders' dumps (/dumps) and one dump's views (/dump?d=N&f=NAME).
'use strict';
const wallTime = ns => ns === null || ns === undefined ? '-' : new Date(ns / 1e6).toISOString().replace('T', ' ').replace('Z', '');

async function list() {
  let d;
  try { d = await LS.api('/api/dumps'); } catch (e) { return LS.fail(e); }
  document.getElementById('dirs').textContent = d.dirs.join(', ') + ' — ' + d.dumps.length + ' dumps';
  const tbody = document.querySelector('#dumps tbody');
  const rows = [];
  for (const x of d.dumps) {
    const href = '/dump?' + new URLSearchParams({ d: x.d, f: x.file });
    const tr = LS.el('tr', { class: 'dump', 'data-file': x.file });
    tr.append(LS.el('td', null, LS.el('a', { href, text: x.file })),
      LS.el('td', { class: 'trigger', text: x.trigger || '-' }, LS.el('div', { class: 'desc', text: x.condition || '' })),
      LS.el('td', { text: x.reason || '' }),
      LS.el('td', { text: wallTime(x.at_wall_ns) }),
      LS.el('td', { class: 'num', text: x.before_ns === undefined ? '-' : LS.ns(x.before_ns) + ' + ' + LS.ns(x.after_ns) }),
      LS.el('td', { class: 'num events', 'data-v': x.events, text: x.events === undefined ? '-' : String(x.events) }),
      LS.el('td', { class: 'num', text: x.lost === null || x.lost === undefined ? (x.complete ? '0' : '?') : String(x.lost) }),
      LS.el('td', { class: 'num', text: LS.bytes(x.bytes) }));
    rows.push(tr);
  }
  if (!rows.length) tbody.append(LS.el('tr', null, LS.el('td', { colspan: 8, class: 'desc', text: 'no dump yet: a flight recorder writes one when a trigger fires' })));
  tbody.append(...rows);
  LS.ready();
}

async function one() {
  const q = new URLSearchParams(location.search);
  const params = { d: q.get('d') || '0', f: q.get('f') || '' };
  let v;
  try { v = await LS.api('/api/dump', params); } catch (e) { return LS.fail(e); }
  const qs = '?' + new URLSearchParams(params);
  document.getElementById('title').textContent = v.file;
  document.getElementById('fired').textContent = v.trigger
    ? `trigger ${v.trigger} (${v.condition}) fired at ${wallTime(v.at_wall_ns)} UTC: ${v.reason}`
    : 'not a flight recorder\'s dump';
  const facts = document.getElementById('facts');
  facts.append(`${v.events} events from ${wallTime(v.from_wall_ns)} to ${wallTime(v.to_wall_ns)} UTC, ${v.lost ?? '?'} lost${v.complete ? '' : ' (not closed: cut short)'} · `,
    LS.el('a', { href: '/api/dump/file' + qs, text: 'the trace file' }),
    ' (latscope events -r, why -r, heatmap -r ... read it)');
  document.getElementById('heatmap').src = '/api/dump/heatmap.svg' + qs;
  document.getElementById('why').src = '/api/dump/why.svg' + qs;
  if (v.on_cpu) {
    // On-CPU samples (record --profile): the functions the CPU time was spent in, and its flame graph.
    document.getElementById('oncpu').hidden = false;
    document.getElementById('oncpufacts').textContent =
      `${v.on_cpu.samples} samples, ${LS.ns(v.on_cpu.cpu_ns)} of CPU time (latscope why -r FILE --on-cpu shows the stacks)`;
    const fns = document.querySelector('#oncpufns tbody');
    for (const f of v.on_cpu.functions) {
      fns.append(LS.el('tr', { class: 'fn' },
        LS.el('td', { text: f.function }), LS.el('td', { class: 'num', text: LS.ns(f.cpu_ns) }),
        LS.el('td', { class: 'num', text: (100 * f.cpu_ns / Math.max(1, v.on_cpu.cpu_ns)).toFixed(1) + ' %' })));
    }
    document.getElementById('flame').src = '/api/dump/flame.svg' + qs;
  }
  const slow = document.querySelector('#slowest tbody');
  for (const s of v.slowest) {
    slow.append(LS.el('tr', { class: 'call' },
      LS.el('td', { text: wallTime(s.wall_ns) }),
      LS.el('td', { class: 'num', text: LS.ns(s.lat_ns) }),
      LS.el('td', { text: `${s.proc} (${s.pid})` }),
      LS.el('td', { text: s.op + (s.res < 0 ? ' = ' + s.res : '') }),
      LS.el('td', { text: LS.shortMiddle(s.path || '', 48) }),
      LS.el('td', { class: 'desc', text: s.why || '' })));
  }
  const top = document.querySelector('#top tbody');
  for (const r of v.top.rows) {
    top.append(LS.el('tr', { class: 'proc' },
      LS.el('td', { text: r.name }), LS.el('td', { class: 'num', text: String(r.count) }),
      LS.el('td', { class: 'num', text: LS.ns(r.total_ns) }), LS.el('td', { class: 'num', text: LS.ns(r.max_ns) }),
      LS.el('td', { class: 'num', text: String(r.errors) })));
  }
  LS.ready();
}

if (document.body.dataset.page === 'dumps') list(); else one();
