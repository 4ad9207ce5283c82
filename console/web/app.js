// dlqdump console. Everything the server sends is shown with textContent,
// never as markup: a payload holding <script> reads as text; control and
// bidi characters show escaped (vis), so a header cannot reverse the text
// around it.
//
// Pages. Each page is a <section class="panel" id="NAME"> in index.html, a
// nav button with data-tab="NAME" (for the pages in the nav), and an entry
// page('NAME', {load(params), params()}) below: load shows it for the
// parameters of its URL (#NAME?k=v&...), params returns the parameters of
// what it shows now, so that a link reproduces it (the search, the record
// open, the job). go(name, params) shows a page and records it in the
// history; a reload or a pasted link calls load with the URL's parameters.
//
// Times. Every time on the page is UTC, and so is every time typed into a
// form (labelled "UTC", with the local time beside it).
'use strict';

const S = window.consoleState = {
  meta: null, overview: null, tab: 'overview', job: null, log: [],
  records: [], search: null, next: '', scanned: 0, segmentsScanned: 0, searching: false, searchDone: false, pages: 0,
  detail: null, segments: [], segArea: 'ready', segNext: '', selected: new Set(),
  jobs: [], runners: [], actions: [], lastRates: null, rates: {dump: null, restore: null}, errors: [],
};

// ---------- helpers ----------
function $(id) { return document.getElementById(id); }
function el(tag, props, ...kids) {
  const e = document.createElement(tag);
  if (props) for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
// invisible matches the characters shown escaped: C0 and C1 controls,
// bidi embeddings, overrides, isolates and marks, zero-width and line
// separators, the BOM; with oneLine also tabs and line breaks.
const invisible = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/g;
const invisibleLine = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/g;
function escCode(c) { return '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'); }
// vis returns s as nodes: text, and each invisible character as a marked
// escape (\u202e); n, when set, cuts s to n characters first (…).
function vis(s, n, oneLine) {
  s = s === undefined || s === null ? '' : String(s);
  const f = document.createDocumentFragment();
  let cut = false;
  if (n && s.length > n) { s = s.slice(0, n); cut = true; }
  const re = oneLine ? invisibleLine : invisible;
  re.lastIndex = 0;
  let last = 0, m;
  while ((m = re.exec(s)) !== null) {
    if (m.index > last) f.append(s.slice(last, m.index));
    f.append(el('span', {class: 'esc', text: escCode(m[0])}));
    last = m.index + 1;
  }
  if (last < s.length) f.append(s.slice(last));
  if (cut) f.append(el('span', {class: 'cut', text: ' …'}));
  return f;
}
// visText is vis as a string, for places that take text only.
function visText(s, n) {
  s = String(s || '');
  const cut = n && s.length > n;
  return (cut ? s.slice(0, n) : s).replace(invisibleLine, escCode) + (cut ? ' …' : '');
}
// td returns a cell showing s (cut to n characters, on one line).
function td(s, cls, n) { const c = el('td', cls ? {class: cls} : null); c.append(vis(s, n || 200, true)); return c; }
// toUTC reads a datetime-local field as UTC; fromUTC fills one.
function toUTC(v) { return v ? new Date(v + (v.length === 16 ? ':00' : '') + 'Z').toISOString() : ''; }
function fromUTC(iso) { return iso ? new Date(iso).toISOString().slice(0, 19) : ''; }
// tzHint says beside a UTC field what its time is here.
function tzHint(input) {
  const h = input.parentElement.querySelector('.tzhint');
  if (!h) return;
  if (!input.value) { h.textContent = ''; return; }
  const d = new Date(toUTC(input.value));
  const off = -d.getTimezoneOffset(), sign = off < 0 ? '-' : '+', a = Math.abs(off);
  h.textContent = '= ' + d.toLocaleString('sv-SE').slice(0, 19) + ' your time (UTC' + sign + String(Math.floor(a / 60)).padStart(2, '0') + ':' + String(a % 60).padStart(2, '0') + ')';
}
function fmtBytes(n) {
  if (n < 1024) return n + ' B';
  const u = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n, i = -1;
  do { v /= 1024; i++; } while (v >= 1024 && i < u.length - 1);
  return v.toFixed(1) + ' ' + u[i];
}
function fmtNum(n) { return (n || 0).toLocaleString('en-US'); }
function fmtTime(s) { return s ? s.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '–'; }
function fmtAge(sec) {
  if (!sec || sec < 0) return '–';
  if (sec < 90) return Math.round(sec) + ' s';
  if (sec < 5400) return Math.round(sec / 60) + ' min';
  if (sec < 172800) return (sec / 3600).toFixed(1) + ' h';
  return (sec / 86400).toFixed(1) + ' d';
}
function flash(msg, bad) {
  if (bad) S.errors.push(msg);
  const f = $('flash');
  f.textContent = msg;
  f.className = 'flash' + (bad ? ' bad' : '');
  f.hidden = false;
  clearTimeout(flash.t);
  flash.t = setTimeout(() => { f.hidden = true; }, bad ? 12000 : 5000);
}
async function api(path, params) {
  const q = params ? '?' + params.toString() : '';
  const r = await fetch('api/' + path + q, {headers: {'Accept': 'application/json'}});
  const body = await r.json().catch(() => ({error: r.statusText}));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
async function post(path, body) {
  const r = await fetch('api/' + path, {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Dlqdump-Token': S.meta.token || ''},
    body: JSON.stringify(body || {})});
  const out = await r.json().catch(() => ({error: r.statusText}));
  if (!r.ok) throw Object.assign(new Error(out.error || r.statusText), {body: out, status: r.status});
  return out;
}
function can(what) { return !!S.meta && (S.meta.can || []).includes(what); }
function readOnly() { return !can('jobs'); }

// confirmAction shows what a change will do and resolves, once confirmed,
// to {reason} (what the person typed for the change log), else to null.
function confirmAction(title, lines) {
  const d = $('confirm');
  $('confirm-title').textContent = title;
  const body = $('confirm-body');
  clear(body);
  for (const l of lines) body.append(typeof l === 'string' ? el('p', {text: l}) : l);
  $('confirm-reason').value = '';
  return new Promise(resolve => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok' ? {reason: $('confirm-reason').value.trim()} : null), {once: true});
    d.returnValue = '';
    d.showModal();
  });
}

// ---------- pages and their URLs ----------
const pages = {};
function page(name, def) { pages[name] = def; }
// urlOf returns the URL of a page with its parameters.
function urlOf(name, params) {
  const q = params ? new URLSearchParams(params).toString() : '';
  return '#' + name + (q ? '?' + q : '');
}
// setURL records where the page is, adding to the history (push) or not.
function setURL(name, params, push) {
  const u = urlOf(name, params);
  if (location.hash === u) return;
  if (push) history.pushState(null, '', u); else history.replaceState(null, '', u);
}
// show shows a page's section and marks its nav button.
function show(name, params) {
  const def = pages[name] || pages.overview;
  name = pages[name] ? name : 'overview';
  S.tab = name;
  const nav = def.nav || name;
  for (const b of document.querySelectorAll('.tab')) b.classList.toggle('active', b.dataset.tab === nav);
  for (const p of document.querySelectorAll('.panel')) p.hidden = p.id !== name;
  def.load(params || new URLSearchParams());
}
// go shows a page and records it in the history.
function go(name, params) {
  setURL(name, params, true);
  show(name, params ? new URLSearchParams(params) : null);
}
// route shows what the URL says (on load, back and forward, a pasted link).
function route() {
  const h = location.hash.replace(/^#/, '');
  const i = h.indexOf('?');
  const name = decodeURIComponent(i < 0 ? h : h.slice(0, i)) || 'overview';
  show(name, new URLSearchParams(i < 0 ? '' : h.slice(i + 1)));
}
// updateURL records the current page's state without a history entry.
function updateURL() {
  const def = pages[S.tab];
  setURL(S.tab, def && def.params ? def.params() : null, false);
}

// ---------- overview ----------
const palette = ['#2f6fde', '#e0533d', '#2aa876', '#e8a33d', '#8e5bd6', '#1fa2b8', '#9aa1ab'];
async function loadOverview() {
  try {
    const o = await api('overview');
    S.overview = o;
    renderOverview(o);
  } catch (e) { S.errors.push(String(e)); }
}
function card(title, main, sub, cls) {
  return el('div', {class: 'card ' + (cls || '')}, el('h3', {text: title}), el('div', {class: 'big', text: main}), el('div', {class: 'sub', text: sub}));
}
function renderOverview(o) {
  const c = $('cards');
  clear(c);
  const a = o.areas;
  const sub = x => fmtNum(x.segments) + ' segments · ' + fmtBytes(x.bytes);
  c.append(card('Ready', fmtNum(a.ready.records) + ' records', sub(a.ready), 'ready'),
    card('Claimed', fmtNum(a.claimed.records) + ' records', sub(a.claimed), 'claimed'),
    card('Quarantined', fmtNum(a.quarantine.records) + ' records', sub(a.quarantine), 'quar'),
    card('Archived', fmtNum(a.archive.segments) + ' segments', fmtBytes(a.archive.bytes) + ' (restored, kept by Config.Archive)', 'arch'),
    card('Oldest ready record', fmtAge(o.oldest_age_s), o.oldest ? 'since ' + fmtTime(o.oldest) : 'nothing ready', o.oldest_age_s > 3600 ? 'warn' : ''));
  if (o.damaged) c.append(card('Damaged', fmtNum(o.damaged) + ' segments', 'dlqdump verify tells more', 'warn'));
  const live = $('live');
  clear(live);
  const now = Date.parse(o.now);
  if (o.queue || o.restorer) {
    const prev = S.lastRates;
    const cur = {t: now, dumped: o.queue ? o.queue.records : 0, restored: o.restorer ? o.restorer.restored : 0};
    if (prev && cur.t > prev.t) {
      const dt = (cur.t - prev.t) / 1000;
      S.rates = {dump: Math.max(0, (cur.dumped - prev.dumped) / dt), restore: Math.max(0, (cur.restored - prev.restored) / dt)};
    }
    S.lastRates = cur;
    const r = v => v === null ? '…' : v.toFixed(1) + '/s';
    if (o.queue) {
      const q = o.queue, refused = Object.values(q.refused).reduce((x, y) => x + y, 0);
      live.append(card('Dump rate', r(S.rates.dump), fmtNum(q.records) + ' records dumped · ' + fmtBytes(q.pending_bytes) + ' pending' +
        (refused ? ' · ' + fmtNum(refused) + ' refused' : ''), refused ? 'warn' : ''));
      if (q.last_error) live.append(card('Dump error', 'last error', q.last_error, 'warn'));
    }
    if (o.restorer) {
      const x = o.restorer;
      live.append(card('Restore rate', r(S.rates.restore), fmtNum(x.restored) + ' restored · ' + fmtNum(x.retried) + ' retried · ' +
        fmtNum(x.quarantined_records) + ' quarantined'));
      if (x.last_error) live.append(card('Restore error', 'last error', x.last_error, 'warn'));
    }
  }
  drawChart($('chart-reason'), $('legend-reason'), o.by_reason);
  drawChart($('chart-error'), $('legend-error'), o.by_error);
  const ch = o.charts;
  $('charts-note').textContent = (ch.complete ? 'Charts count the records of all ' + fmtNum(ch.of) + ' ready and quarantined segments.'
    : 'Charts count ' + fmtNum(ch.scanned) + ' of ' + fmtNum(ch.of) + ' segments so far (read in slices; refreshing).') + (o.error ? ' Error: ' + o.error : '');
}
function drawChart(canvas, legend, ch) {
  const g = canvas.getContext('2d');
  const W = canvas.width, H = canvas.height, L = 48, B = 22, T = 8;
  g.clearRect(0, 0, W, H);
  clear(legend);
  if (!ch || !ch.bars) { g.fillStyle = '#888'; g.font = '13px sans-serif'; g.fillText('no records', L, H / 2); return; }
  const sums = new Array(ch.bars).fill(0);
  for (const s of ch.series) s.counts.forEach((n, i) => { sums[i] += n; });
  const max = Math.max(1, ...sums);
  const bw = (W - L - 4) / ch.bars;
  g.strokeStyle = '#ccd'; g.fillStyle = '#667'; g.font = '11px sans-serif';
  for (let i = 0; i <= 4; i++) {
    const y = T + (H - T - B) * (1 - i / 4);
    g.beginPath(); g.moveTo(L, y); g.lineTo(W, y); g.stroke();
    g.fillText(fmtNum(Math.round(max * i / 4)), 2, y + 4);
  }
  const base = new Array(ch.bars).fill(0);
  ch.series.forEach((s, si) => {
    g.fillStyle = palette[si % palette.length];
    s.counts.forEach((n, i) => {
      if (!n) return;
      const h = (H - T - B) * n / max, y = T + (H - T - B) * (1 - base[i] / max) - h;
      g.fillRect(L + i * bw + 1, y, Math.max(1, bw - 2), h);
      base[i] += n;
    });
    legend.append(el('span', {class: 'key'}, el('i', {class: 'swatch c' + (si % palette.length)}), s.name + ' (' + fmtNum(s.total) + ')'));
  });
  g.fillStyle = '#667';
  const from = Date.parse(ch.from);
  g.fillText(fmtTime(new Date(from).toISOString()), L, H - 6);
  const end = new Date(from + ch.bars * ch.step_s * 1000).toISOString();
  const tw = g.measureText(fmtTime(end)).width;
  g.fillText(fmtTime(end), W - tw - 2, H - 6);
}

// ---------- segments ----------
async function loadSegments(reset) {
  if (reset) { S.segments = []; S.segNext = ''; S.selected.clear(); S.segGen = (S.segGen || 0) + 1; }
  const gen = S.segGen;
  const p = new URLSearchParams({area: S.segArea});
  if (S.segNext) p.set('after', S.segNext);
  try {
    const r = await api('segments', p);
    if (gen !== S.segGen) return;
    S.segments = S.segments.concat(r.segments);
    S.segNext = r.next || '';
    renderSegments();
  } catch (e) { flash('Segments: ' + e.message, true); }
}
function renderSegments() {
  const body = $('seg-body');
  clear(body);
  const quar = S.segArea === 'quarantine';
  for (const s of S.segments) {
    let state = s.state;
    if (s.claim && s.claim.state === 'held') state = 'claimed by ' + s.claim.owner + (s.claim.until ? ' until ' + fmtTime(s.claim.until) : '');
    let note = s.reason || '';
    if (!note && s.record_reasons) note = Object.entries(s.record_reasons).sort((x, y) => y[1] - x[1]).map(([k, n]) => n + '× ' + k).join('; ');
    if (s.note) note = (note ? note + ' — ' : '') + s.note;
    if (s.damage) note = (note ? note + ' — ' : '') + 'damage: ' + s.damage.join('; ');
    if (s.error) note = (note ? note + ' — ' : '') + 'error: ' + s.error;
    const box = quar && !readOnly() ? el('input', {type: 'checkbox', 'data-name': s.name, onchange: ev => {
      if (ev.target.checked) S.selected.add(s.name); else S.selected.delete(s.name);
      if ($('seg-release')) $('seg-release').disabled = S.selected.size === 0;
    }}) : null;
    if (box && S.selected.has(s.name)) box.checked = true;
    body.append(el('tr', {'data-name': s.name},
      readOnly() ? null : el('td', {class: 'control'}, box),
      el('td', {class: 'mono', text: s.name}),
      td(state, 'state ' + s.state),
      el('td', {class: 'num', text: fmtNum(s.records)}),
      el('td', {class: 'num', text: fmtBytes(s.size)}),
      el('td', {text: fmtTime(s.first)}),
      el('td', {text: fmtTime(s.last)}),
      el('td', {text: s.encrypted}),
      td(note, 'reason', 300),
      el('td', null, el('button', {class: 'link', text: 'records', onclick: () => browseSegment(s)}))));
  }
  $('seg-more').hidden = !S.segNext;
  if ($('seg-release')) $('seg-release').disabled = S.selected.size === 0;
  for (const e of document.querySelectorAll('#segments .control')) e.hidden = !quar || readOnly();
  const all = $('seg-release-all');
  if (all) all.hidden = !quar || !can('release_all');
}
function browseSegment(s) {
  go('records', {area: s.area, segment: s.name});
}
async function release(names) {
  const all = names === null;
  const rows = all ? [] : S.segments.filter(s => names.includes(s.name));
  const lines = [all ? 'Every quarantined segment moves back to the ready area, where the next restore delivers its records.'
    : 'These ' + names.length + ' quarantined segments move back to the ready area, where the next restore delivers their records:'];
  if (!all) {
    const ul = el('ul');
    for (const s of rows) ul.append(el('li', null, el('span', {class: 'mono', text: s.name}), ' — ' + fmtNum(s.records) + ' records' + (s.reason ? ' — ' + visText(s.reason, 200) : '')));
    lines.push(ul);
  }
  lines.push('Release a segment once what made it fail is fixed: a restorer that still refuses it quarantines it again. A segment of the same name already ready is never replaced.');
  const ok = await confirmAction(all ? 'Release all quarantined segments?' : 'Release ' + names.length + ' segment' + (names.length > 1 ? 's' : '') + '?', lines);
  if (!ok) return;
  try {
    const r = await post('release', all ? {all: true, reason: ok.reason} : {segments: names, reason: ok.reason});
    flash('Released ' + r.released.length + ' segment' + (r.released.length === 1 ? '' : 's') + '.');
  } catch (e) {
    flash('Release: ' + e.message + (e.body && e.body.failed ? ': ' + e.body.failed.join('; ') : ''), true);
  }
  loadSegments(true);
}

// ---------- records ----------
const searchFields = ['select', 'area', 'since', 'until', 'reason', 'error', 'source', 'where', 'q', 'path', 'value', 'segment'];
// formParams returns the search form as the URL keeps it: its fields, the
// times as UTC instants.
function formParams() {
  const f = $('search').elements, p = new URLSearchParams();
  for (const k of searchFields) {
    let v = f[k].value;
    if (k === 'since' || k === 'until') v = toUTC(v);
    if (k === 'area' && v === 'ready') continue;
    if (v && v.trim()) p.set(k, v.trim());
  }
  return p;
}
function fillForm(p) {
  const f = $('search').elements;
  for (const k of searchFields) {
    let v = p.get(k) || '';
    if (k === 'area') v = v || 'ready';
    if (k === 'since' || k === 'until') v = fromUTC(v);
    f[k].value = v;
  }
  for (const i of document.querySelectorAll('#search input.utc')) tzHint(i);
}
// searchParams returns the API's parameters of the search form.
function searchParams() {
  const f = $('search').elements, p = new URLSearchParams();
  if (f.select.value.trim()) p.set('select', f.select.value.trim());
  p.set('area', f.area.value);
  for (const k of ['since', 'until']) if (f[k].value) p.set(k, toUTC(f[k].value));
  for (const k of ['reason', 'error', 'source']) if (f[k].value) p.append('where', k + '=' + f[k].value);
  for (const kv of f.where.value.split(',')) if (kv.trim()) p.append('where', kv.trim());
  if (f.q.value) p.set('q', f.q.value);
  if (f.path.value) { p.set('path', f.path.value); if (f.value.value) p.set('value', f.value.value); }
  if (f.segment.value.trim()) p.set('segment', f.segment.value.trim());
  return p;
}
// recordRef names a record in a URL: AREA/SEGMENT/SEQ.
function recordRef(r) { return r.area + '/' + r.segment + '/' + r.seq; }
function parseRef(s) {
  const m = /^(ready|quarantine|archive)\/(.+)\/(\d+)$/.exec(s || '');
  return m ? {area: m[1], segment: m[2], seq: Number(m[3])} : null;
}
page('records', {
  load(p) {
    const ref = parseRef(p.get('record'));
    const q = new URLSearchParams(p);
    q.delete('record');
    if (!S.search && ![...q.keys()].length) {
      if (ref) openRecord(ref);
      return; // an empty form: nothing searched yet
    }
    fillForm(q);
    if (!S.search || S.searchKey !== formParams().toString()) {
      startSearch().then(() => { if (ref) openRecord(ref); });
    } else if (ref && (!S.detail || recordRef(S.detail) !== recordRef(ref))) {
      openRecord(ref);
    }
  },
  params() {
    const p = S.searchKey !== undefined ? new URLSearchParams(S.searchKey) : new URLSearchParams();
    if (S.detail && !$('detail').hidden) p.set('record', recordRef(S.detail));
    return p;
  },
});
function startSearch() {
  S.gen = (S.gen || 0) + 1;
  S.search = searchParams();
  S.searchKey = formParams().toString();
  S.records = []; S.next = ''; S.scanned = 0; S.segmentsScanned = 0; S.skipped = 0; S.selection = undefined; S.unsearched = 0; S.searchDone = false; S.pages = 0;
  S.detail = null;
  clear($('rec-body'));
  $('detail').hidden = true;
  return nextPage();
}
// nextPage asks for pages until one is full or the search is done: each
// request reads for at most the server's budget and says where it stopped.
async function nextPage() {
  const gen = S.gen;
  if (S.searching === gen) return;
  S.searching = gen;
  const want = S.records.length + 50;
  try {
    while (S.records.length < want) {
      const p = new URLSearchParams(S.search);
      p.set('n', String(want - S.records.length));
      if (S.next) p.set('after', S.next);
      const r = await api('records', p);
      if (gen !== S.gen) return;
      S.pages++;
      S.scanned += r.scanned; S.segmentsScanned += r.segments; S.unsearched += r.unsearched || 0;
      S.skipped = (S.skipped || 0) + (r.skipped_segments || 0);
      S.selection = r.selection || '';
      for (const rec of r.records) { S.records.push(rec); $('rec-body').append(recordRow(rec)); }
      S.next = r.next || '';
      if (r.errors) flash(r.errors.join('; '), true);
      status();
      if (!S.next) { S.searchDone = true; break; }
    }
  } catch (e) {
    flash('Search: ' + e.message, true);
  } finally {
    if (S.searching === gen) { S.searching = false; status(); }
  }
}
function status() {
  let t = fmtNum(S.records.length) + ' record' + (S.records.length === 1 ? '' : 's') + ' shown · ' + fmtNum(S.scanned) + ' looked at in ' + fmtNum(S.segmentsScanned) + ' segment reads';
  if (S.skipped) t += ' · ' + fmtNum(S.skipped) + ' segments skipped (their summaries rule the selection out)';
  t += S.searchDone ? ' · end of the selection' : S.searching ? ' · searching…' : '';
  if (S.unsearched) t += ' · ' + fmtNum(S.unsearched) + ' records of encrypted segments not searched (no identity given)';
  $('search-status').textContent = t;
  $('rec-more').hidden = S.searchDone || !S.next;
}
function recordRow(r) {
  if (r.sealed) {
    return el('tr', {class: 'sealed'}, el('td', {text: fmtTime(r.time)}), el('td', {class: 'mono', text: short(r.segment) + ' #' + r.seq + '–' + (r.seq + r.count - 1)}),
      el('td', {colspan: 3, text: fmtNum(r.count) + ' encrypted records (' + r.encrypted + '): metadata only, until ' + fmtTime(r.last) + '; give the console an identity to read them'}));
  }
  const h = r.headers || {};
  // Long values are cut here and shown whole in the record's view.
  return el('tr', {class: 'rec', 'data-ref': recordRef(r), onclick: () => openRecord(r)},
    el('td', {text: fmtTime(r.time)}),
    el('td', {class: 'mono', text: short(r.segment) + ' #' + r.seq}),
    td(h.reason, '', 80),
    td(h.error || h.quarantine, 'err', 160),
    td(r.payload ? r.payload.text + (r.payload.truncated ? ' …' : '') : '', 'payload mono', 300));
}
function short(name) { return name.length > 30 ? name.slice(0, 19) + '…' + name.slice(-8) : name; }
async function openRecord(r) {
  const p = new URLSearchParams({area: r.area, segment: r.segment, seq: String(r.seq)});
  try {
    const d = await api('record', p);
    S.detail = d;
    $('detail').hidden = false;
    $('detail-title').textContent = d.segment + ' #' + d.seq;
    const t = $('detail-headers');
    clear(t);
    const row = (k, v, cls) => { const c = el('td', cls ? {class: cls} : null); c.append(vis(v)); t.append(el('tr', null, el('th', {text: k}), c)); };
    row('id', d.id || '', 'mono');
    row('time', d.time);
    row('area', d.area);
    for (const k of Object.keys(d.headers || {}).sort()) {
      const th = el('th');
      th.append(vis(k));
      const c = el('td');
      c.append(vis(d.headers[k]));
      t.append(el('tr', null, th, c));
    }
    const pl = d.payload || {kind: 'sealed', text: ''};
    $('detail-note').textContent = pl.kind + ', ' + fmtBytes(pl.size || 0) + (pl.truncated ? ', truncated' : '') + (pl.error ? ' — ' + pl.error : '');
    const pre = $('detail-payload');
    clear(pre);
    pre.append(vis(pl.text));
    for (const b of [$('rec-replay'), $('rec-discard')]) if (b) b.hidden = !d.id || d.area !== 'ready';
    for (const tr of document.querySelectorAll('#rec-body tr.open')) tr.classList.remove('open');
    const tr = document.querySelector('#rec-body tr[data-ref="' + CSS.escape(recordRef(d)) + '"]');
    if (tr) tr.classList.add('open');
    if (S.tab === 'records') updateURL();
  } catch (e) { flash('Record: ' + e.message, true); }
}
function closeRecord() {
  $('detail').hidden = true;
  S.detail = null;
  updateURL();
}

// ---------- acting on a record: replay, discard ----------
function destinations() {
  const dl = $('dests');
  clear(dl);
  const seen = new Set();
  for (const r of S.runners) for (const d of r.destinations || []) if (d && !seen.has(d)) { seen.add(d); dl.append(el('option', {value: d})); }
}
// actDialog asks for what an action needs; resolves to the form's values or
// null.
function actDialog(title, lines, withDest, note) {
  const d = $('act-dialog');
  $('act-title').textContent = title;
  const body = $('act-body');
  clear(body);
  for (const l of lines) body.append(typeof l === 'string' ? el('p', {text: l}) : l);
  $('act-dest-label').hidden = !withDest;
  $('act-reason').value = '';
  $('act-note').textContent = note || '';
  destinations();
  return new Promise(resolve => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok' ? {destination: $('act-dest').value.trim(), reason: $('act-reason').value.trim()} : null), {once: true});
    d.returnValue = '';
    d.showModal();
  });
}
function recordLines(d) {
  const h = d.headers || {};
  return [el('p', null, 'Record ', el('span', {class: 'mono', text: d.id}), ' of ' + fmtTime(d.time) + (h.reason ? ', reason ' + visText(h.reason, 80) : '') + (h.error ? ', error ' + visText(h.error, 120) : '') + '.')];
}
async function replayRecord() {
  const d = S.detail;
  if (!d || !d.id) return;
  const v = await actDialog('Replay this record now?', recordLines(d).concat(['It is delivered once to the destination, by a restore job due now that selects it alone (id = ' + d.id + '); ' +
    'the rest of its segment stays ready. A runner that serves the destination takes the job within its poll interval; the job\'s page follows it.']), true,
  'The replay is written to the change log with your name and the reason.');
  if (!v) return;
  try {
    const j = await post('replay', {ids: [d.id], destination: v.destination, reason: v.reason});
    flash('Replaying ' + d.id + ': job ' + j.id + '.');
    go('job', {id: j.id});
  } catch (e) { flash('Replay: ' + e.message, true); }
}
async function discardRecord() {
  const d = S.detail;
  if (!d || !d.id) return;
  const v = await actDialog('Discard this record?', recordLines(d).concat(['It leaves the ready area for the quarantine, never to be replayed by a restore, with your name and the reason in its "quarantine" header. ' +
    'Nothing is deleted: dlqdump quarantine release makes it ready again, and the quarantine\'s retention removes it in time.']), false,
  'A reason is required.');
  if (!v) return;
  if (!v.reason) { flash('Discard: say why (the reason is kept with the record).', true); return; }
  try {
    const r = await post('discard', {ids: [d.id], reason: v.reason});
    flash('Discarded ' + d.id + ' into the quarantine (' + r.reason + ').');
    closeRecord();
    startSearch();
  } catch (e) { flash('Discard: ' + e.message, true); }
}
function copyLink() {
  const u = location.href;
  if (navigator.clipboard) navigator.clipboard.writeText(u).catch(() => {});
  flash('Link: ' + u);
}

// ---------- restore jobs ----------
function selectionText(area, sel) {
  return 'records of the ' + (area || 'ready') + ' area' + (sel ? ' that match: ' + sel : ' (all of them)');
}
async function newJob() {
  const p = searchParams();
  if (p.get('area') === 'archive' || p.get('area') === 'all') {
    flash('A restore job takes records from the ready area or the quarantine: choose one of them.', true);
    return;
  }
  // The server says what the form selects, as one expression (the same
  // language as dlqdump job create --select): the job keeps that.
  let sel = S.selection;
  if (!S.search || S.search.toString() !== p.toString() || sel === undefined) {
    // The form changed since the last search: ask what it selects.
    try {
      const q = new URLSearchParams(p);
      q.set('n', '1');
      sel = (await api('records', q)).selection || '';
    } catch (e) { flash('Restore this selection: ' + e.message, true); return; }
  }
  $('job-selection').textContent = 'Restores ' + selectionText(p.get('area'), sel) + '.';
  destinations();
  $('job-count').textContent = 'Counting the records it selects…';
  $('job-reason').value = '';
  countSelection(p);
  if (typeof previewReset === 'function') previewReset(p); // repair.js
  const d = $('job-dialog');
  d.returnValue = '';
  d.showModal();
  d.addEventListener('close', async () => {
    if (d.returnValue !== 'ok') return;
    const spec = {area: p.get('area'), rate: Number($('job-rate').value) || 0, limit: Number($('job-limit').value) || 0, destination: $('job-dest').value.trim(),
      reason: $('job-reason').value.trim()};
    if (sel) spec.select = sel;
    const jq = $('job-jq').value.trim();
    if (jq) spec.jq = jq;
    if (jq && $('job-jq-keep').checked) spec.jq_keep_layout = true;
    const at = $('job-at').value;
    if (at) spec.at = toUTC(at);
    const lines = ['The job restores ' + selectionText(spec.area, sel) + (spec.limit ? ' (at most ' + fmtNum(spec.limit) + ')' : '') + '.',
      'Velocity: ' + (spec.rate ? spec.rate + ' records per second' : "the runner's own pace") + '. Destination: ' + (spec.destination || "the runner's default") + '.',
      'Starts: ' + (spec.at ? fmtTime(spec.at) + ' (UTC)' : 'now') + ', on a runner that serves the destination (dlqdump job run, or a program\'s jobs.Runner).',
      spec.jq ? 'Each record goes through the jq program ' + spec.jq + ' on its way' + (spec.jq_keep_layout ? ', keeping each payload\'s layout' : '') + '; a record it fails on is quarantined with the error. The stored records do not change.' : 'Records are delivered as stored.',
      $('job-count').textContent];
    const ok = await confirmAction('Start a restore job?', lines);
    if (!ok) return;
    if (ok.reason) spec.reason = ok.reason;
    try {
      const j = await post('jobs', spec);
      flash('Job ' + j.id + ' created.');
      go('jobs');
    } catch (e) { flash('Create job: ' + e.message, true); }
  }, {once: true});
}
async function countSelection(p) {
  let n = 0, after = '', scanned = 0;
  try {
    for (let i = 0; i < 20; i++) {
      const q = new URLSearchParams(p);
      if (after) q.set('after', after);
      const r = await api('count', q);
      n += r.count; scanned += r.scanned;
      after = r.next || '';
      $('job-count').textContent = (after ? 'At least ' : 'It selects ') + fmtNum(n) + ' records' + (after ? ' (counted ' + fmtNum(scanned) + ' so far)' : ' not yet delivered') + '.';
      if (!after) return;
    }
  } catch (e) { $('job-count').textContent = 'Could not count: ' + e.message; }
}
page('jobs', {load: () => loadJobs()});
async function loadJobs() {
  if (!S.meta || !S.meta.jobs) { $('jobs-note').textContent = 'This store keeps no restore jobs.'; return; }
  try {
    const r = await api('jobs');
    S.jobs = r.jobs; S.runners = r.runners;
    renderJobs(r);
  } catch (e) { S.errors.push(String(e)); }
}
function jobSelection(j) {
  const s = j.spec, parts = [(s.area || 'ready')];
  if (s.select) parts.push(s.select);
  if (s.where) parts.push(Object.entries(s.where).map(([k, v]) => k + '=' + v).join(', '));
  if (s.since) parts.push('since ' + fmtTime(s.since));
  if (s.until) parts.push('until ' + fmtTime(s.until));
  if (s.segments) parts.push(s.segments.length + ' segment(s)');
  if (s.rate) parts.push('at ' + s.rate + '/s');
  if (s.dest) parts.push('→ ' + s.dest);
  return parts.join(' · ');
}
// fmtDue says when a job not ended is taken next: "in 3.0 h (…Z)", "now".
function fmtDue(j) {
  if (!j.due) return '–';
  const s = (Date.parse(j.due) - Date.now()) / 1000;
  if (j.state === 'running') return 'running';
  if (s <= 1) return 'now (' + fmtTime(j.due) + ')';
  return 'in ' + fmtAge(s) + ' (' + fmtTime(j.due) + ')';
}
function jobControls(j, into) {
  if (readOnly()) return;
  const act = (verb, label) => into.append(el('button', {'data-verb': verb, 'data-job': j.id, text: label, onclick: ev => { ev.stopPropagation(); controlJob(j, verb); }}), ' ');
  if (j.state === 'pending' || j.state === 'running') act('pause', 'Pause');
  if (j.state === 'paused' || j.state === 'failed') act('resume', j.state === 'failed' ? 'Retry' : 'Resume');
  if (!['completed', 'failed', 'cancelled'].includes(j.state)) act('cancel', 'Cancel');
}
function progressCell(j) {
  const done = j.delivered + j.quarantined, total = done + (j.left || 0);
  const pct = total ? Math.round(100 * done / total) : (j.state === 'completed' ? 100 : 0);
  const bar = el('div', {class: 'bar'}, el('div', {class: 'fill'}));
  bar.firstChild.style.width = pct + '%';
  return el('td', null, bar, el('span', {class: 'sub', text: fmtNum(j.delivered) + ' delivered' + (j.quarantined ? ', ' + fmtNum(j.quarantined) + ' quarantined' : '') + (j.left ? ', ' + fmtNum(j.left) + ' left' : '')}));
}
function jobNote(j) {
  let note = j.error || j.waiting || '';
  if (j.request) note = (note ? note + ' · ' : '') + j.request + ' asked';
  if (j.refused) note = (note ? note + ' · ' : '') + 'refused ' + j.refused;
  return note;
}
function renderJobs(r) {
  const body = $('job-body');
  clear(body);
  for (const j of r.jobs) {
    const acts = readOnly() ? null : el('td', {class: 'control'});
    if (acts) jobControls(j, acts);
    const link = el('a', {href: urlOf('job', {id: j.id}), class: 'mono', text: j.id, onclick: ev => { ev.preventDefault(); go('job', {id: j.id}); }});
    body.append(el('tr', {'data-job': j.id},
      el('td', null, link),
      el('td', {class: 'state ' + j.state, text: j.state}),
      el('td', {class: 'due', text: fmtDue(j)}),
      td(jobSelection(j), '', 160),
      progressCell(j),
      el('td', {class: 'num', text: j.rate ? j.rate.toFixed(1) + '/s' : '–'}),
      el('td', {text: j.eta ? fmtAge(j.eta_s) + ' (' + fmtTime(j.eta) + ')' : '–'}),
      el('td', {text: j.runner || '–'}),
      td(jobNote(j), 'reason', 200),
      acts));
  }
  if (!r.jobs.length) body.append(el('tr', null, el('td', {colspan: 10, class: 'note', text: 'No restore jobs yet: search the records, then "Restore this selection…".'})));
  const ru = $('runners');
  clear(ru);
  for (const x of r.runners) ru.append(el('li', {text: x.owner + ' — serves ' + (x.destinations || []).map(d => d || '(default)').join(', ') + ' — seen ' + fmtTime(x.seen) + (x.live ? '' : ' (not lately)')}));
  if (!r.runners.length) ru.append(el('li', {class: 'note', text: 'No runner has written a heartbeat: jobs wait until one runs (dlqdump job run, or a program\'s jobs.Runner).'}));
  $('jobs-note').textContent = r.error || '';
}
async function controlJob(j, verb) {
  const what = {pause: 'Pause', resume: j.state === 'failed' ? 'Retry' : 'Resume', cancel: 'Cancel'}[verb];
  const lines = [{pause: 'A running job stops at its next record, within about a second, and waits; nothing is lost, resume it later.',
    resume: 'The job becomes due again at once and a runner takes it on where it stopped.',
    cancel: 'The job ends for good at its next record, within about a second; the records it did not deliver stay where they are.'}[verb],
    'Job ' + j.id + ': ' + jobSelection(j) + ' — ' + fmtNum(j.delivered) + ' delivered so far.'];
  const ok = await confirmAction(what + ' job ' + j.id + '?', lines);
  if (!ok) return;
  try {
    await post('jobs/' + encodeURIComponent(j.id) + '/' + verb, {reason: ok.reason});
    flash(what + ' asked of job ' + j.id + '.');
  } catch (e) { flash(what + ': ' + e.message, true); }
  if (S.tab === 'job') loadJob(j.id); else loadJobs();
}

// ---------- a job's page ----------
page('job', {nav: 'jobs', load: p => { S.job = null; S.jobID = p.get('id') || ''; clear($('jp-kv')); loadJob(S.jobID); }, params: () => ({id: S.jobID})});
async function loadJob(id) {
  if (!id) { flash('No job given.', true); return; }
  try {
    const r = await api('jobs/' + encodeURIComponent(id));
    if (S.tab !== 'job' || S.jobID !== id) return;
    S.job = r; S.runners = r.runners;
    renderJob(r);
  } catch (e) { flash('Job ' + id + ': ' + e.message, true); }
}
function renderJob(r) {
  const j = r.job, s = j.spec;
  $('jp-id').textContent = j.id;
  const st = $('jp-state');
  st.textContent = j.state;
  st.className = 'state ' + j.state;
  const acts = $('jp-acts');
  clear(acts);
  jobControls(j, acts);
  const kv = $('jp-kv');
  clear(kv);
  const row = (k, v, cls) => { if (v === undefined || v === null || v === '') return; const c = el('td', cls ? {class: cls} : null); c.append(typeof v === 'string' ? vis(v) : v); kv.append(el('tr', null, el('th', {text: k}), c)); };
  row('selection', jobSelection(j));
  row('area', s.area || 'ready');
  if (s.select) row('select', s.select, 'mono');
  if (s.where) row('where', Object.entries(s.where).map(([k, v]) => k + '=' + v).join(', '));
  if (s.since) row('since', fmtTime(s.since));
  if (s.until) row('until', fmtTime(s.until));
  if (s.segments) row('segments', s.segments.join(', '), 'mono');
  row('destination', s.dest || "(the runner's default)");
  row('velocity', s.rate ? s.rate + ' records/s' : "the runner's pace");
  if (s.limit) row('at most', fmtNum(s.limit) + ' records');
  if (s.windows) row('windows', s.windows.join(', ') + (s.tz ? ' (' + s.tz + ')' : ' (UTC)'));
  row('due', j.due && j.state !== 'running' ? fmtDue(j) : fmtTime(j.at));
  row('created', fmtTime(j.created));
  row('started', j.started ? fmtTime(j.started) + (j.late_ms >= 1000 ? ' (' + fmtAge(j.late_ms / 1000) + ' after it was due)' : ' (when due)') : 'not yet');
  row('finished', j.finished ? fmtTime(j.finished) : (['completed', 'failed', 'cancelled'].includes(j.state) ? '' : 'not yet'));
  row('runner', j.runner || '–');
  row('passes', String(j.attempts || 0) + (j.failures ? ' (' + j.failures + ' failed in a row since ' + fmtTime(j.failing_since) + ')' : ''));
  const prog = el('div', null, progressCell(j).childNodes[0], ' ', progressCell(j).childNodes[1]);
  row('progress', prog);
  row('rate', j.rate ? j.rate.toFixed(1) + ' records/s' + (j.eta ? ', ends in about ' + fmtAge(j.eta_s) + ' (' + fmtTime(j.eta) + ')' : '') : '–');
  row('last error', j.error || '–', j.error ? 'err' : '');
  row('waiting', j.waiting);
  if (j.request) row('request', j.request + ' asked');
  if (j.refused) row('refused', j.refused);
  drawHistory($('jp-chart'), j, r.history);
  const ul = $('jp-log');
  clear(ul);
  for (const e of r.log) ul.append(logLine(e));
  if (!r.log.length) ul.append(el('li', {class: 'note', text: S.meta.change_log ? 'No entry of the change log names this job.' : 'This store keeps no change log.'}));
}
// drawHistory plots what the job delivered over time: the counts this
// console read while the job ran, from its start to its last count.
function drawHistory(canvas, j, hist) {
  const g = canvas.getContext('2d');
  const W = canvas.width, H = canvas.height, L = 56, B = 22, T = 10;
  g.clearRect(0, 0, W, H);
  const pts = [];
  if (j.started) pts.push({t: Date.parse(j.started), n: 0});
  for (const p of hist || []) pts.push({t: Date.parse(p.t), n: p.delivered + p.quarantined});
  const last = j.progressed || j.finished;
  if (last) pts.push({t: Date.parse(last), n: j.delivered + j.quarantined});
  pts.sort((a, b) => a.t - b.t);
  const note = $('jp-chart-note');
  if (pts.length < 2) {
    g.fillStyle = '#888'; g.font = '13px sans-serif'; g.fillText(j.started ? 'no counts yet' : 'not started', L, H / 2);
    note.textContent = '';
    return;
  }
  // A scale of whole records: four steps of a whole number each.
  const ended = ['completed', 'failed', 'cancelled'].includes(j.state);
  const t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1000, ended ? 0 : Date.now()), max = 4 * Math.max(1, Math.ceil(Math.max(...pts.map(p => p.n)) / 4));
  const x = t => L + (W - L - 6) * (t - t0) / (t1 - t0), y = n => T + (H - T - B) * (1 - n / max);
  g.strokeStyle = '#ccd'; g.fillStyle = '#667'; g.font = '11px sans-serif';
  for (let i = 0; i <= 4; i++) {
    const yy = T + (H - T - B) * (1 - i / 4);
    g.beginPath(); g.moveTo(L, yy); g.lineTo(W, yy); g.stroke();
    g.fillText(fmtNum(Math.round(max * i / 4)), 2, yy + 4);
  }
  g.strokeStyle = '#2aa876'; g.lineWidth = 2;
  g.beginPath();
  pts.forEach((p, i) => { if (i === 0) g.moveTo(x(p.t), y(p.n)); else g.lineTo(x(p.t), y(p.n)); });
  g.lineTo(x(t1), y(pts[pts.length - 1].n)); // unchanged since
  g.stroke();
  g.lineWidth = 1;
  g.fillStyle = '#667';
  g.fillText(fmtTime(new Date(t0).toISOString()), L, H - 6);
  const end = fmtTime(new Date(t1).toISOString());
  g.fillText(end, W - g.measureText(end).width - 2, H - 6);
  note.textContent = 'Records delivered or quarantined, from the job\'s start to its last count (the points between are what this console read while it ran).';
}

// ---------- the change log ----------
const logFields = ['action', 'who', 'q'];
page('log', {
  load(p) {
    const f = $('log-form').elements;
    for (const k of logFields) f[k].value = p.get(k) || '';
    loadLog(true);
  },
  params() {
    const f = $('log-form').elements, p = new URLSearchParams();
    for (const k of logFields) if (f[k].value.trim()) p.set(k, f[k].value.trim());
    return p;
  },
});
async function loadLog(reset) {
  if (!S.meta.change_log) { $('log-status').textContent = 'This store keeps no change log (its Reader keeps no tables).'; return; }
  if (reset) { S.log = []; clear($('log-body')); }
  const p = pages.log.params();
  p.set('n', '100');
  if (!reset && S.log.length) p.set('before', String(S.log[S.log.length - 1].seq));
  try {
    const r = await api('log', p);
    for (const e of r.entries) { S.log.push(e); $('log-body').append(logRow(e)); }
    $('log-more').hidden = !r.more;
    $('log-status').className = 'note';
    $('log-status').textContent = fmtNum(S.log.length) + ' entr' + (S.log.length === 1 ? 'y' : 'ies') + ' shown, newest first' + (r.more ? ' (older ones below)' : '') +
      ': every change made to this store by the console, dlqdump and the programs that log theirs. Click an entry for all of it.' + (r.error ? ' Error: ' + r.error : '');
  } catch (e) { flash('Change log: ' + e.message, true); }
}
function logRow(e) {
  const who = e.actor + (e.role ? ' (' + e.role + ')' : '') + (e.via ? ' · ' + e.via : '');
  const result = (e.result || '') + (e.error ? (e.result ? ' — ' : '') + 'failed: ' + e.error : '');
  const tr = el('tr', {class: 'rec' + (e.error ? ' bad' : ''), 'data-seq': String(e.seq)},
    el('td', {class: 'num', text: String(e.seq)}), el('td', {text: fmtTime(e.time)}), td(who, '', 60), td(e.action, 'mono', 30),
    td(e.scope, 'mono', 120), td(result, '', 160), td(e.reason, '', 120));
  tr.addEventListener('click', () => {
    const next = tr.nextSibling;
    if (next && next.classList && next.classList.contains('whole')) { next.remove(); return; }
    const c = el('td', {colspan: 7});
    const kv = el('table', {class: 'kv'});
    for (const [k, v] of [['scope', e.scope], ['result', e.result], ['error', e.error], ['reason', e.reason], ['time', e.time], ['hash', e.hash], ['after', e.prev]]) {
      if (!v) continue;
      const d = el('td', {class: k === 'hash' || k === 'after' || k === 'scope' ? 'mono' : ''});
      d.append(vis(v));
      kv.append(el('tr', null, el('th', {text: k}), d));
    }
    c.append(kv);
    tr.after(el('tr', {class: 'whole'}, c));
  });
  return tr;
}
function logLine(e) {
  const li = el('li', {class: e.error ? 'bad' : ''});
  li.append(fmtTime(e.time) + ' · ' + e.actor + (e.role ? ' (' + e.role + ')' : '') + ' · ' + e.action + ': ');
  li.append(vis((e.result || '') + (e.error ? ' — failed: ' + e.error : '') + (e.reason ? ' — why: ' + e.reason : ''), 400, true));
  return li;
}
async function verifyLog() {
  $('log-status').textContent = 'Verifying every entry\'s hash…';
  try {
    const r = await api('log/verify');
    if (r.broken) {
      $('log-status').textContent = 'BROKEN at entry ' + r.broken.Seq + ' (page ' + r.broken.Page + '): ' + r.broken.Reason + '. ' + fmtNum(r.entries) + ' entries before it verified.';
      $('log-status').className = 'note bad';
      return;
    }
    $('log-status').className = 'note';
    $('log-status').textContent = r.error ? 'Could not verify: ' + r.error : fmtNum(r.entries) + ' entries in ' + r.pages + ' pages: the chain is intact' +
      (r.head ? '. Head ' + r.head + ' — keep it elsewhere, and verify later with dlqdump log LOCATION --verify --anchor ' + r.head : '') + '.';
  } catch (e) { flash('Verify: ' + e.message, true); }
}

// ---------- start ----------
page('overview', {load: () => loadOverview()});
page('segments', {
  load(p) { S.segArea = p.get('area') || S.segArea || 'ready'; $('seg-area').value = S.segArea; loadSegments(true); },
  params: () => ({area: S.segArea}),
});
async function start() {
  try {
    S.meta = await api('meta');
  } catch (e) { flash('Cannot reach the console API: ' + e.message, true); return; }
  $('store-name').textContent = S.meta.name;
  $('user').textContent = S.meta.user + ' · ' + S.meta.role;
  const mode = $('mode');
  mode.textContent = S.meta.read_only ? 'read-only' : (S.meta.keys ? 'records decrypted' : '');
  mode.hidden = !mode.textContent;
  // What the role does not allow is not on the page (the server refuses it
  // all the same).
  if (!can('jobs')) {
    document.body.classList.add('read-only');
    for (const e of document.querySelectorAll('.control')) e.remove();
  } else if (!can('discard')) {
    for (const e of document.querySelectorAll('.admin')) e.remove();
  }
  for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => {
    const def = pages[b.dataset.tab];
    go(b.dataset.tab, def && def.params ? def.params() : null);
  });
  $('seg-area').addEventListener('change', ev => { S.segArea = ev.target.value; loadSegments(true); updateURL(); });
  $('seg-refresh').addEventListener('click', () => loadSegments(true));
  $('seg-more').addEventListener('click', () => loadSegments(false));
  $('search').addEventListener('submit', ev => { ev.preventDefault(); startSearch(); setURL('records', formParams(), true); });
  $('search-clear').addEventListener('click', () => { $('search').reset(); startSearch(); setURL('records', formParams(), true); });
  $('rec-more').addEventListener('click', () => nextPage());
  $('rec-link').addEventListener('click', copyLink);
  $('detail-close').addEventListener('click', closeRecord);
  $('job-back').addEventListener('click', () => go('jobs'));
  $('log-form').addEventListener('submit', ev => { ev.preventDefault(); setURL('log', pages.log.params(), true); loadLog(true); });
  $('log-more').addEventListener('click', () => loadLog(false));
  $('log-verify').addEventListener('click', verifyLog);
  for (const i of document.querySelectorAll('input.utc')) i.addEventListener('input', () => tzHint(i));
  if (can('jobs')) {
    $('seg-release').addEventListener('click', () => release([...S.selected]));
    $('job-new').addEventListener('click', () => newJob());
    $('rec-replay').addEventListener('click', replayRecord);
  }
  if (can('release_all')) $('seg-release-all').addEventListener('click', () => release(null));
  if (can('discard')) $('rec-discard').addEventListener('click', discardRecord);
  window.addEventListener('popstate', route);
  window.addEventListener('hashchange', route);
  route();
  setInterval(() => { if (S.tab === 'overview' && !document.hidden) loadOverview(); }, 3000);
  setInterval(() => { if (S.tab === 'jobs' && !document.hidden) loadJobs(); }, 1500);
  setInterval(() => { if (S.tab === 'job' && !document.hidden && S.jobID) loadJob(S.jobID); }, 1500);
  if (S.meta.jobs) api('jobs').then(r => { S.runners = r.runners; }).catch(() => {});
  S.ready = true;
}
document.addEventListener('DOMContentLoaded', start);
