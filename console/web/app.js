// dlqdump console. Everything the server sends is shown with textContent,
// never as markup: a payload holding <script> reads as text.
'use strict';

const S = window.consoleState = {
  meta: null, overview: null, tab: 'overview',
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
function readOnly() { return !S.meta || S.meta.read_only; }

// confirmAction shows what a change will do and resolves true once confirmed.
function confirmAction(title, lines) {
  const d = $('confirm');
  $('confirm-title').textContent = title;
  const body = $('confirm-body');
  clear(body);
  for (const l of lines) body.append(typeof l === 'string' ? el('p', {text: l}) : l);
  return new Promise(resolve => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), {once: true});
    d.returnValue = '';
    d.showModal();
  });
}

// ---------- tabs ----------
function show(tab) {
  S.tab = tab;
  for (const b of document.querySelectorAll('.tab')) b.classList.toggle('active', b.dataset.tab === tab);
  for (const p of document.querySelectorAll('.panel')) p.hidden = p.id !== tab;
  if (tab === 'overview') loadOverview();
  if (tab === 'segments') loadSegments(true);
  if (tab === 'jobs') loadJobs();
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
      el('td', {class: 'state ' + s.state, text: state}),
      el('td', {class: 'num', text: fmtNum(s.records)}),
      el('td', {class: 'num', text: fmtBytes(s.size)}),
      el('td', {text: fmtTime(s.first)}),
      el('td', {text: fmtTime(s.last)}),
      el('td', {text: s.encrypted}),
      el('td', {class: 'reason', text: note}),
      el('td', null, el('button', {class: 'link', text: 'records', onclick: () => browseSegment(s)}))));
  }
  $('seg-more').hidden = !S.segNext;
  if ($('seg-release')) $('seg-release').disabled = S.selected.size === 0;
  for (const e of document.querySelectorAll('#segments .control')) e.hidden = !quar || readOnly();
}
function browseSegment(s) {
  const f = $('search');
  f.reset();
  f.elements.area.value = s.area;
  f.elements.segment.value = s.name;
  show('records');
  startSearch();
}
async function release(names) {
  const all = names === null;
  const rows = all ? [] : S.segments.filter(s => names.includes(s.name));
  const lines = [all ? 'Every quarantined segment moves back to the ready area, where the next restore delivers its records.'
    : 'These ' + names.length + ' quarantined segments move back to the ready area, where the next restore delivers their records:'];
  if (!all) {
    const ul = el('ul');
    for (const s of rows) ul.append(el('li', null, el('span', {class: 'mono', text: s.name}), ' — ' + fmtNum(s.records) + ' records' + (s.reason ? ' — ' + s.reason : '')));
    lines.push(ul);
  }
  lines.push('Release a segment once what made it fail is fixed: a restorer that still refuses it quarantines it again. A segment of the same name already ready is never replaced.');
  if (!await confirmAction(all ? 'Release all quarantined segments?' : 'Release ' + names.length + ' segment' + (names.length > 1 ? 's' : '') + '?', lines)) return;
  try {
    const r = await post('release', all ? {all: true} : {segments: names});
    flash('Released ' + r.released.length + ' segment' + (r.released.length === 1 ? '' : 's') + '.');
  } catch (e) {
    flash('Release: ' + e.message + (e.body && e.body.failed ? ': ' + e.body.failed.join('; ') : ''), true);
  }
  loadSegments(true);
}

// ---------- records ----------
function searchParams() {
  const f = $('search').elements, p = new URLSearchParams();
  if (f.select.value.trim()) p.set('select', f.select.value.trim());
  p.set('area', f.area.value);
  for (const k of ['since', 'until']) if (f[k].value) p.set(k, new Date(f[k].value + (f[k].value.length === 16 ? ':00' : '') + 'Z').toISOString());
  for (const k of ['reason', 'error', 'source']) if (f[k].value) p.append('where', k + '=' + f[k].value);
  for (const kv of f.where.value.split(',')) if (kv.trim()) p.append('where', kv.trim());
  if (f.q.value) p.set('q', f.q.value);
  if (f.path.value) { p.set('path', f.path.value); if (f.value.value) p.set('value', f.value.value); }
  if (f.segment.value.trim()) p.set('segment', f.segment.value.trim());
  return p;
}
async function startSearch() {
  S.gen = (S.gen || 0) + 1;
  S.search = searchParams();
  S.records = []; S.next = ''; S.scanned = 0; S.segmentsScanned = 0; S.skipped = 0; S.selection = undefined; S.unsearched = 0; S.searchDone = false; S.pages = 0;
  clear($('rec-body'));
  $('detail').hidden = true;
  await nextPage();
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
  const tr = el('tr', {class: 'rec', onclick: () => openRecord(r)},
    el('td', {text: fmtTime(r.time)}),
    el('td', {class: 'mono', text: short(r.segment) + ' #' + r.seq}),
    el('td', {text: h.reason || ''}),
    el('td', {class: 'err', text: h.error || h.quarantine || ''}),
    el('td', {class: 'payload mono', text: r.payload ? r.payload.text + (r.payload.truncated ? ' …' : '') : ''}));
  return tr;
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
    t.append(el('tr', null, el('th', {text: 'id'}), el('td', {class: 'mono', text: d.id || ''})),
      el('tr', null, el('th', {text: 'time'}), el('td', {text: d.time})), el('tr', null, el('th', {text: 'area'}), el('td', {text: d.area})));
    for (const k of Object.keys(d.headers || {}).sort()) t.append(el('tr', null, el('th', {text: k}), el('td', {text: d.headers[k]})));
    const pl = d.payload || {kind: 'sealed', text: ''};
    $('detail-note').textContent = pl.kind + ', ' + fmtBytes(pl.size || 0) + (pl.truncated ? ', truncated' : '') + (pl.error ? ' — ' + pl.error : '');
    $('detail-payload').textContent = pl.text;
  } catch (e) { flash('Record: ' + e.message, true); }
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
  const dl = $('dests');
  clear(dl);
  const seen = new Set();
  for (const r of S.runners) for (const d of r.destinations || []) if (d && !seen.has(d)) { seen.add(d); dl.append(el('option', {value: d})); }
  $('job-count').textContent = 'Counting the records it selects…';
  countSelection(p);
  const d = $('job-dialog');
  d.returnValue = '';
  d.showModal();
  d.addEventListener('close', async () => {
    if (d.returnValue !== 'ok') return;
    const spec = {area: p.get('area'), rate: Number($('job-rate').value) || 0, limit: Number($('job-limit').value) || 0, destination: $('job-dest').value.trim()};
    if (sel) spec.select = sel;
    const at = $('job-at').value;
    if (at) spec.at = new Date(at).toISOString();
    const lines = ['The job restores ' + selectionText(spec.area, sel) + (spec.limit ? ' (at most ' + fmtNum(spec.limit) + ')' : '') + '.',
      'Velocity: ' + (spec.rate ? spec.rate + ' records per second' : "the runner's own pace") + '. Destination: ' + (spec.destination || "the runner's default") + '.',
      'Starts: ' + (spec.at ? fmtTime(spec.at) : 'now') + ', on a runner that serves the destination (dlqdump job run, or a program\'s jobs.Runner).',
      $('job-count').textContent];
    if (!await confirmAction('Start a restore job?', lines)) return;
    try {
      const j = await post('jobs', spec);
      flash('Job ' + j.id + ' created.');
      show('jobs');
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
async function loadJobs() {
  if (!S.meta || !S.meta.jobs) { $('jobs-note').textContent = 'This store keeps no restore jobs.'; return; }
  try {
    const r = await api('jobs');
    S.jobs = r.jobs; S.runners = r.runners; S.actions = r.actions;
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
function renderJobs(r) {
  const body = $('job-body');
  clear(body);
  for (const j of r.jobs) {
    const done = j.delivered + j.quarantined, total = done + (j.left || 0);
    const pct = total ? Math.round(100 * done / total) : (j.state === 'completed' ? 100 : 0);
    const bar = el('div', {class: 'bar'}, el('div', {class: 'fill', style: null}));
    bar.firstChild.style.width = pct + '%';
    const acts = readOnly() ? null : el('td', {class: 'control'});
    const act = (verb, label) => acts.append(el('button', {'data-verb': verb, 'data-job': j.id, text: label, onclick: () => controlJob(j, verb)}), ' ');
    if (acts) {
      if (j.state === 'pending' || j.state === 'running') act('pause', 'Pause');
      if (j.state === 'paused' || j.state === 'failed') act('resume', 'Resume');
      if (!['completed', 'failed', 'cancelled'].includes(j.state)) act('cancel', 'Cancel');
    }
    let note = j.error || j.waiting || '';
    if (j.request) note = (note ? note + ' · ' : '') + j.request + ' asked';
    if (j.refused) note = (note ? note + ' · ' : '') + 'refused ' + j.refused;
    if (j.next && (j.state === 'pending' || j.state === 'running')) note = (note ? note + ' · ' : '') + 'next ' + fmtTime(j.next);
    body.append(el('tr', {'data-job': j.id},
      el('td', {class: 'mono', text: j.id}),
      el('td', {class: 'state ' + j.state, text: j.state}),
      el('td', {text: jobSelection(j)}),
      el('td', null, bar, el('span', {class: 'sub', text: fmtNum(j.delivered) + ' delivered' + (j.quarantined ? ', ' + fmtNum(j.quarantined) + ' quarantined' : '') + (j.left ? ', ' + fmtNum(j.left) + ' left' : '')})),
      el('td', {class: 'num', text: j.rate ? j.rate.toFixed(1) + '/s' : '–'}),
      el('td', {text: j.eta ? fmtAge(j.eta_s) + ' (' + fmtTime(j.eta) + ')' : '–'}),
      el('td', {text: j.runner || '–'}),
      el('td', {class: 'reason', text: note}),
      acts));
  }
  if (!r.jobs.length) body.append(el('tr', null, el('td', {colspan: 9, class: 'note', text: 'No restore jobs yet: search the records, then "Restore this selection…".'})));
  const ru = $('runners');
  clear(ru);
  for (const x of r.runners) ru.append(el('li', {text: x.owner + ' — serves ' + (x.destinations || []).map(d => d || '(default)').join(', ') + ' — seen ' + fmtTime(x.seen) + (x.live ? '' : ' (not lately)')}));
  if (!r.runners.length) ru.append(el('li', {class: 'note', text: 'No runner has written a heartbeat: jobs wait until one runs (dlqdump job run, or a program\'s jobs.Runner).'}));
  const ac = $('actions');
  clear(ac);
  for (const a of r.actions) ac.append(el('li', {class: a.error ? 'bad' : ''}, fmtTime(a.time) + ' ' + a.who + ': ' + a.what + (a.error ? ' — failed: ' + a.error : '')));
  if (!r.actions.length) ac.append(el('li', {class: 'note', text: 'None yet.'}));
  $('jobs-note').textContent = r.error || '';
}
async function controlJob(j, verb) {
  const what = {pause: 'Pause', resume: 'Resume', cancel: 'Cancel'}[verb];
  const lines = [{pause: 'A running job stops at its next record, within about a second, and waits; nothing is lost, resume it later.',
    resume: 'The job becomes due again at once and a runner takes it on where it stopped.',
    cancel: 'The job ends for good at its next record, within about a second; the records it did not deliver stay where they are.'}[verb],
    'Job ' + j.id + ': ' + jobSelection(j) + ' — ' + fmtNum(j.delivered) + ' delivered so far.'];
  if (!await confirmAction(what + ' job ' + j.id + '?', lines)) return;
  try {
    await post('jobs/' + encodeURIComponent(j.id) + '/' + verb);
    flash(what + ' asked of job ' + j.id + '.');
  } catch (e) { flash(what + ': ' + e.message, true); }
  loadJobs();
}

// ---------- start ----------
async function start() {
  try {
    S.meta = await api('meta');
  } catch (e) { flash('Cannot reach the console API: ' + e.message, true); return; }
  $('store-name').textContent = S.meta.name;
  const mode = $('mode');
  mode.textContent = S.meta.read_only ? 'read-only' : (S.meta.keys ? 'records decrypted' : '');
  mode.hidden = !mode.textContent;
  if (S.meta.read_only) {
    document.body.classList.add('read-only');
    for (const e of document.querySelectorAll('.control')) e.remove();
  }
  for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => show(b.dataset.tab));
  $('seg-area').addEventListener('change', ev => { S.segArea = ev.target.value; loadSegments(true); });
  $('seg-refresh').addEventListener('click', () => loadSegments(true));
  $('seg-more').addEventListener('click', () => loadSegments(false));
  $('search').addEventListener('submit', ev => { ev.preventDefault(); startSearch(); });
  $('search-clear').addEventListener('click', () => { $('search').reset(); startSearch(); });
  $('rec-more').addEventListener('click', () => nextPage());
  if (!S.meta.read_only) {
    $('seg-release').addEventListener('click', () => release([...S.selected]));
    $('seg-release-all').addEventListener('click', () => release(null));
    $('job-new').addEventListener('click', () => newJob());
  }
  show('overview');
  setInterval(() => { if (S.tab === 'overview' && !document.hidden) loadOverview(); }, 3000);
  setInterval(() => { if (S.tab === 'jobs' && !document.hidden) loadJobs(); }, 1500);
  if (S.meta.jobs) api('jobs').then(r => { S.runners = r.runners; }).catch(() => {});
  S.ready = true;
}
document.addEventListener('DOMContentLoaded', start);
