// The dashboard: polls /api/v1/stats and /api/v1/segments, draws the charts,
// drives the buttons. Its state is window.dashboard (read by the tests).
(function () {
  'use strict';

  const $ = (id) => document.getElementById(id);
  const WINDOW_MS = 120000;
  const state = (window.dashboard = {
    samples: [], // newest last, at most WINDOW_MS
    last: null, // the newest sample
    stats: null, // the last /api/v1/stats response
    segments: [],
    polls: 0,
    pollErrors: 0,
    actions: [], // [{name, status, body}]
    producers: null, // shown producer count
    charts: {},
  });
  let producerHold = null; // {n, until}: a count from a button, newer than the samples

  const fmtInt = (v) => Math.round(v).toLocaleString('en-US');
  const fmtRate = (v) => (v === 0 ? '0' : v >= 100 ? fmtInt(v) : v >= 10 ? v.toFixed(0) : v.toFixed(1));
  function fmtBytes(v) {
    const u = ['B', 'KiB', 'MiB', 'GiB'];
    let i = 0;
    while (v >= 1024 && i < u.length - 1) {
      v /= 1024;
      i++;
    }
    return (i === 0 ? Math.round(v) : v.toFixed(v >= 10 ? 0 : 1)) + ' ' + u[i];
  }
  function fmtAge(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
    return Math.floor(s / 3600) + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
  }

  const RATE_SERIES = [
    { key: 'produced_ps', label: 'produced', color: '#2f6fde' },
    { key: 'processed_ps', label: 'processed', color: '#1f9d55' },
    { key: 'leaked_ps', label: 'leaked', color: '#e3342f', width: 3 },
    { key: 'dumped_ps', label: 'dumped', color: '#f6993f', dash: [5, 4] },
    { key: 'restored_ps', label: 'restored', color: '#9561e2' },
  ];
  const SEG_SERIES = [
    { key: 'segments_ready', label: 'ready', color: '#2f6fde' },
    { key: 'segments_quarantined', label: 'quarantined', color: '#e3342f' },
  ];
  const LineChart = window.MiniChart.LineChart;
  const charts = (state.charts = {
    fill: new LineChart($('chart-fill'), {
      series: [{ key: 'fill', label: 'fill', color: '#2f6fde', scale: 100 }],
      yMax: 100, format: (v) => v.toFixed(0) + '%', fill: true, windowMs: WINDOW_MS,
    }),
    rates: new LineChart($('chart-rates'), { series: RATE_SERIES, format: fmtRate, minMax: 10, windowMs: WINDOW_MS }),
    pending: new LineChart($('chart-pending'), {
      series: [{ key: 'pending_bytes', label: 'pending', color: '#f6993f' }],
      format: fmtBytes, minMax: 1024, unit: 1024, fill: true, windowMs: WINDOW_MS,
    }),
    segments: new LineChart($('chart-segments'), { series: SEG_SERIES, format: fmtInt, minMax: 4, integer: true, windowMs: WINDOW_MS }),
  });

  function legend(el, series) {
    el.textContent = '';
    for (const se of series) {
      const span = document.createElement('span');
      const i = document.createElement('i');
      i.style.background = se.color;
      span.appendChild(i);
      span.appendChild(document.createTextNode(se.label));
      el.appendChild(span);
    }
  }
  legend($('legend-rates'), RATE_SERIES);
  legend($('legend-segs'), SEG_SERIES);

  async function api(method, path) {
    const r = await fetch(path, { method: method, headers: { Accept: 'application/json' }, cache: 'no-store' });
    let body = null;
    try {
      body = await r.json();
    } catch (e) {
      body = null;
    }
    return { ok: r.ok, status: r.status, body: body };
  }

  function message(text, isErr) {
    const el = $('message');
    el.textContent = text;
    el.className = 'message' + (isErr ? ' err' : '');
  }

  function setText(id, v) {
    const el = $(id);
    if (el.textContent !== v) el.textContent = v;
  }

  function render() {
    const st = state.stats;
    const last = state.last;
    if (!st) return;
    const running = !!st.running;
    const pill = $('scene-state');
    pill.textContent = running ? 'running' : 'idle';
    pill.className = 'pill ' + (running ? 'running' : 'idle');
    setText('sink', st.sink || '');
    const c = st.counters || {};
    setText('c-produced', fmtInt(c.produced || 0));
    setText('c-processed', fmtInt(c.processed || 0));
    setText('c-leaked', fmtInt(c.leaked || 0));
    const dl = st.dead_letters || {};
    setText('c-reasons', Object.keys(dl).filter((k) => dl[k] > 0).map((k) => k + ' ' + fmtInt(dl[k])).join(' · '));
    setText('c-dumped', fmtInt(c.dumped || 0));
    setText('c-segments', fmtInt(c.segments_published || 0) + ' segments published');
    setText('c-restored', fmtInt(c.restored || 0));
    setText('c-quarantined', fmtInt(c.quarantined || 0));
    const tasks = st.tasks || {};
    const inflight = (tasks.queued || 0) + (tasks.running || 0) + (tasks.restored || 0);
    setText('c-inflight', fmtInt(inflight));
    setText('c-indump', fmtInt(tasks.dumped || 0) + ' tasks in the dump');
    const lost = (tasks.failed || 0);
    setText('c-lost', fmtInt(lost));
    $('c-lost').parentElement.className = 'card lost' + (lost > 0 ? ' bad' : '');

    let producers = last && running ? last.producers : null;
    if (producerHold && Date.now() < producerHold.until) producers = producerHold.n;
    state.producers = producers;
    setText('producers', producers === null ? '–' : String(producers));
    const cfg = st.config || {};
    setText('producer-rate', running && cfg.rate ? '× ' + fmtInt(cfg.rate) + ' tasks/s' : '');
    $('producer-up').disabled = !running;
    $('producer-down').disabled = !running;
    $('restore').disabled = !running;
    $('flush').disabled = !running;
    $('stop').disabled = !running;
    $('start').disabled = running;

    if (last) {
      setText('n-fill', last.queue_size + ' / ' + last.queue_capacity + ' (' + (last.fill * 100).toFixed(0) + '%) · ' + last.busy + '/' + last.workers + ' workers busy');
      setText('n-pending', fmtBytes(last.pending_bytes || 0));
      setText('n-ready', String(last.segments_ready || 0));
    }
    charts.fill.draw(state.samples);
    charts.rates.draw(state.samples);
    charts.pending.draw(state.samples);
    charts.segments.draw(state.samples);

    const rr = st.restore;
    if (rr) {
      const rep = rr.report || {};
      setText('restore-result', rr.running ? 'restore pass running…' :
        'last restore pass: ' + (rep.Delivered || 0) + ' delivered, ' + (rep.Quarantined || 0) + ' quarantined, ' +
        (rep.Segments || 0) + ' segments' + (rr.took ? ' in ' + rr.took : '') + (rr.error ? ' — ' + rr.error : ''));
    }
    setText('last-error', st.last_error || '');
  }

  function renderSegments() {
    const tb = $('segments');
    tb.textContent = '';
    if (!state.segments.length) {
      const tr = document.createElement('tr');
      const td = document.createElement('td');
      td.colSpan = 6;
      td.className = 'empty';
      td.textContent = 'none: every dumped record was restored';
      tr.appendChild(td);
      tb.appendChild(tr);
      return;
    }
    const now = Date.now();
    for (const s of state.segments) {
      const tr = document.createElement('tr');
      const cells = [
        [s.name, 'name'],
        [null, ''],
        [fmtInt(s.records || 0), 'num'],
        [fmtBytes(s.size || 0), 'num'],
        [fmtAge(now - new Date(s.modified).getTime()), 'num'],
        [null, ''],
      ];
      cells.forEach(([text, cls], i) => {
        const td = document.createElement('td');
        if (cls) td.className = cls;
        if (i === 1 || i === 5) {
          const tag = document.createElement('span');
          if (i === 1) {
            tag.className = 'tag ' + s.area;
            tag.textContent = s.area;
          } else if (s.claimed) {
            tag.className = 'tag claimed';
            tag.textContent = 'restoring';
          } else {
            tag.textContent = s.reason || '';
            tag.title = s.reason || '';
          }
          td.appendChild(tag);
        } else {
          td.textContent = text;
        }
        tr.appendChild(td);
      });
      tb.appendChild(tr);
    }
  }

  function applyStats(st) {
    state.stats = st;
    if (st.samples && st.samples.length) {
      for (const s of st.samples) state.samples.push(s);
      const cut = state.samples[state.samples.length - 1].t - WINDOW_MS - 1000;
      while (state.samples.length && state.samples[0].t < cut) state.samples.shift();
    }
    state.last = st.last || state.last;
    render();
  }

  let pollTimer = null;
  async function poll() {
    clearTimeout(pollTimer);
    try {
      const since = state.samples.length ? state.samples[state.samples.length - 1].t : 0;
      const r = await api('GET', '/api/v1/stats?since=' + since);
      if (!r.ok || !r.body) throw new Error('stats: HTTP ' + r.status);
      applyStats(r.body);
      state.polls++;
    } catch (e) {
      state.pollErrors++;
      const pill = $('scene-state');
      pill.textContent = 'disconnected';
      pill.className = 'pill down';
    }
    pollTimer = setTimeout(poll, 1000);
  }

  async function pollSegments() {
    try {
      const r = await api('GET', '/api/v1/segments?n=10');
      if (r.ok && r.body) {
        state.segments = r.body.segments || [];
        renderSegments();
      }
    } catch (e) {
      // the stats poll reports the connection
    }
    setTimeout(pollSegments, 2000);
  }

  async function action(name, method, path, done) {
    try {
      const r = await api(method, path);
      state.actions.push({ name: name, status: r.status, body: r.body });
      if (r.ok || r.status === 202) {
        if (done) done(r.body);
      } else {
        message(name + ': ' + ((r.body && r.body.error) || 'HTTP ' + r.status), true);
      }
      poll();
    } catch (e) {
      message(name + ': ' + e.message, true);
    }
  }

  function producersDone(body) {
    if (body && typeof body.producers === 'number') {
      producerHold = { n: body.producers, until: Date.now() + 1500 };
      message(body.producers + ' producers running', false);
      render();
    }
  }
  $('producer-up').addEventListener('click', () => action('add producer', 'POST', '/api/v1/producer-up', producersDone));
  $('producer-down').addEventListener('click', () => action('remove producer', 'POST', '/api/v1/producer-down', producersDone));
  $('restore').addEventListener('click', () => action('restore', 'POST', '/api/v1/restore', () => message('restore pass started', false)));
  $('flush').addEventListener('click', () => action('flush', 'POST', '/api/v1/flush', () => message('dump flushed', false)));
  $('stop').addEventListener('click', () => {
    message('stopping: workers finish, the dump is flushed…', false);
    action('stop', 'POST', '/api/v1/stop', (b) => message((b && b.segments) || 'stopped', false));
  });
  $('start').addEventListener('click', () => action('start', 'POST', '/api/v1/init', () => message('scene started', false)));
  window.addEventListener('resize', render);

  poll();
  pollSegments();
})();
