// dlqdump console: the error groups page and the transform preview of
// "Restore this selection…". Loaded after app.js, whose helpers ($, el,
// api, fmtNum, fmtTime, show, newJob, searchParams, readOnly) it uses.
// Everything the server sends is shown with textContent.
'use strict';

const R = window.repairState = {groups: null, gen: 0, preview: null};

// ---------- error groups ----------
function errParams() {
  const p = new URLSearchParams();
  p.set('header', $('err-header').value.trim() || 'error');
  p.set('area', $('err-area').value);
  const sel = $('err-select').value.trim();
  if (sel) p.set('select', sel);
  return p;
}
// loadErrors asks for the groups until every segment is counted: each
// request reads for at most the server's budget.
async function loadErrors() {
  const gen = ++R.gen;
  const p = errParams();
  for (let i = 0; i < 60; i++) {
    let r;
    try {
      r = await api('errors', p);
    } catch (e) { $('err-status').textContent = 'Error groups: ' + e.message; return; }
    if (gen !== R.gen) return;
    R.groups = r;
    renderErrors(r);
    if (r.complete) return;
    await new Promise(res => setTimeout(res, 300));
  }
}
function renderErrors(r) {
  const body = $('err-body');
  clear(body);
  for (const g of r.shown) {
    const c = el('canvas', {class: 'spark', width: 160, height: 28});
    spark(c, g.counts);
    const acts = el('td', {class: 'acts'},
      el('button', {class: 'link', text: 'records', onclick: () => browseGroup(g)}));
    if (!readOnly() && g.select) {
      acts.append(' ', el('button', {class: 'control', 'data-sig': g.signature, text: 'Replay this group…', onclick: () => replayGroup(g)}));
    }
    body.append(el('tr', {'data-sig': g.signature},
      el('td', {class: 'num', text: fmtNum(g.count)}),
      el('td', null, c),
      el('td', {class: 'sig', text: g.signature}),
      el('td', {class: 'when', text: fmtTime(g.first)}),
      el('td', {class: 'when', text: fmtTime(g.last)}),
      el('td', {class: 'sample', title: g.sample.value, text: g.sample.id}),
      acts));
  }
  if (!r.shown.length) body.append(el('tr', null, el('td', {colspan: 7, class: 'note', text: 'No record has a "' + r.header + '" header here.'})));
  let t = fmtNum(r.records) + ' records in ' + fmtNum(r.groups) + ' groups by the signature of "' + r.header + '"';
  if (r.without) t += ' · ' + fmtNum(r.without) + ' without it';
  if (r.groups > r.shown.length) t += ' · the largest ' + r.shown.length + ' shown';
  if (r.bars) t += ' · a bar is ' + fmtAge(r.step_s) + ', from ' + fmtTime(r.from);
  t += r.complete ? '' : ' · counted ' + fmtNum(r.scanned) + ' of ' + fmtNum(r.of) + ' segments so far…';
  if (r.errors) t += ' · ' + r.errors.join('; ');
  $('err-status').textContent = t;
}
// spark draws counts as bars, the largest full height.
function spark(canvas, counts) {
  const g = canvas.getContext('2d'), W = canvas.width, H = canvas.height;
  g.clearRect(0, 0, W, H);
  const max = Math.max(1, ...counts), bw = W / Math.max(1, counts.length);
  g.fillStyle = '#e8ebf1';
  g.fillRect(0, H - 1, W, 1);
  g.fillStyle = '#2f6fde';
  counts.forEach((n, i) => {
    if (!n) return;
    const h = Math.max(1, Math.round((H - 2) * n / max));
    g.fillRect(i * bw + 0.5, H - 1 - h, Math.max(1, bw - 1), h);
  });
}
// groupSearch fills the record search with the group's selection.
function groupSearch(g) {
  const f = $('search');
  f.reset();
  const extra = $('err-select').value.trim();
  f.elements.select.value = extra ? '(' + extra + ') and ' + g.select : g.select;
  f.elements.area.value = $('err-area').value;
}
function browseGroup(g) {
  groupSearch(g);
  show('records');
  startSearch();
}
// replayGroup opens "Restore this selection…" on the group: a job that
// selects it, with a transform if one is given there.
function replayGroup(g) {
  if ($('err-area').value === 'all') {
    flash('A restore job takes records from the ready area or the quarantine: choose one of them above.', true);
    return;
  }
  groupSearch(g);
  newJob();
}

// ---------- the transform's preview ----------
function previewReset(p) {
  R.preview = p;
  const box = $('job-preview');
  clear(box);
  box.hidden = true;
}
async function preview() {
  const box = $('job-preview');
  clear(box);
  box.hidden = false;
  const jq = $('job-jq').value.trim();
  if (!jq) { box.append(el('p', {class: 'note', text: 'Give a jq program to preview, e.g. .payload.order.email |= ascii_downcase'})); return; }
  const p = new URLSearchParams(R.preview || searchParams());
  p.set('jq', jq);
  if ($('job-jq-keep').checked) p.set('keep', '1');
  p.set('n', '3');
  box.append(el('p', {class: 'note', text: 'Running the program on the first records of the selection…'}));
  let r;
  try {
    const resp = await fetch('api/preview?' + p.toString(), {headers: {'Accept': 'application/json'}});
    r = await resp.json();
    if (!resp.ok) {
      clear(box);
      box.append(el('p', {class: 'refused', text: r.error || resp.statusText}));
      if (r.caret) box.append(el('div', {class: 'caret', text: r.caret}));
      return;
    }
  } catch (e) { clear(box); box.append(el('p', {class: 'refused', text: 'Preview: ' + e.message})); return; }
  clear(box);
  let t = 'The program ran on ' + fmtNum(r.looked) + ' record' + (r.looked === 1 ? '' : 's') + ' of the selection';
  if (r.unchanged) t += ', ' + fmtNum(r.unchanged) + ' unchanged';
  t += ': ' + (r.changes.length ? 'the first it changes or refuses, stored (−) and delivered (+).' : 'it changed none.');
  box.append(el('p', {class: 'note', text: t}));
  for (const c of r.changes) {
    if (c.error) {
      box.append(el('p', {class: 'refused', text: c.id + ' would be quarantined: ' + c.error}));
      continue;
    }
    const pre = el('pre', {'data-id': c.id});
    for (const line of c.diff.replace(/\n$/, '').split('\n')) {
      const cls = line.startsWith('+++') || line.startsWith('---') ? 'hunk' : line.startsWith('@@') ? 'hunk' : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : null;
      pre.append(cls ? el('span', {class: cls, text: line}) : line + '\n');
    }
    box.append(pre);
  }
  if (r.errors) box.append(el('p', {class: 'note', text: r.errors.join('; ')}));
}

// The page and its URL (#errors?header=…&area=…&select=…), as app.js's
// pages: a link reproduces the groups shown.
page('errors', {
  load: p => {
    if (p.get('header')) $('err-header').value = p.get('header');
    if (p.get('area')) $('err-area').value = p.get('area');
    if (p.has('select')) $('err-select').value = p.get('select');
    loadErrors();
  },
  params: () => errParams(),
});

document.addEventListener('DOMContentLoaded', () => {
  $('err-form').addEventListener('submit', ev => { ev.preventDefault(); setURL('errors', errParams(), true); loadErrors(); });
  const b = $('job-preview-go');
  if (b) b.addEventListener('click', () => preview());
});
