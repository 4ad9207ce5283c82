// A tiny line chart on canvas: time on x (a fixed window ending at the
// newest sample), one or more series on y, grid lines with labels, optional
// fill under the first series. No dependencies.
(function () {
  'use strict';

  // niceMax rounds v up to 1, 2, 4 or 8 times a power of ten, so that the
  // four grid steps are round too. With unit (e.g. 1024 for bytes) it rounds
  // in that unit's powers.
  function niceMax(v, unit) {
    if (!(v > 0)) return 1;
    let scale = 1;
    if (unit > 1) {
      while (v / scale >= unit) scale *= unit;
    }
    const x = v / scale;
    const p = Math.pow(10, Math.floor(Math.log10(x)));
    for (const m of [1, 2, 4, 8, 10]) {
      if (m * p >= x * 1.0001) return m * p * scale;
    }
    return 10 * p * scale;
  }

  class LineChart {
    // opts: series [{key, label, color, scale, dash}], format(v), yMax
    // (fixed), minMax (smallest automatic max), unit (for niceMax), windowMs
    // (the longest window; a shorter history fills the width, at least
    // minWindowMs), fill, integer.
    constructor(canvas, opts) {
      this.canvas = canvas;
      this.opts = Object.assign({ windowMs: 120000, minWindowMs: 10000, format: (v) => String(v), minMax: 1 }, opts);
      this.points = 0; // samples drawn in the last draw
      this.max = 0; // largest value drawn
      this.latest = {}; // newest value of each series
    }

    draw(samples) {
      const c = this.canvas;
      const o = this.opts;
      const dpr = window.devicePixelRatio || 1;
      const w = c.clientWidth || 600;
      const h = c.clientHeight || 180;
      if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
        c.width = Math.round(w * dpr);
        c.height = Math.round(h * dpr);
      }
      const g = c.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      g.clearRect(0, 0, w, h);
      const pad = { l: 58, r: 10, t: 8, b: 20 };
      const pw = Math.max(10, w - pad.l - pad.r);
      const ph = Math.max(10, h - pad.t - pad.b);

      const end = samples.length ? samples[samples.length - 1].t : Date.now();
      const span = samples.length ? end - samples[0].t : 0;
      const win = Math.min(o.windowMs, Math.max(o.minWindowMs, span));
      const start = end - win;
      const vis = samples.filter((s) => s.t >= start);
      const value = (s, se) => (Number(s[se.key]) || 0) * (se.scale || 1);

      let dataMax = 0;
      for (const s of vis) for (const se of o.series) dataMax = Math.max(dataMax, value(s, se));
      let yMax = o.yMax || niceMax(Math.max(dataMax, o.minMax), o.unit);
      if (o.integer && !o.yMax) yMax = Math.max(4, Math.ceil(yMax / 4) * 4);
      this.points = vis.length;
      this.max = dataMax;
      this.latest = {};
      if (vis.length) for (const se of o.series) this.latest[se.key] = value(vis[vis.length - 1], se);

      const x = (t) => pad.l + ((t - start) / win) * pw;
      const y = (v) => pad.t + ph - (Math.min(v, yMax) / yMax) * ph;

      // grid and labels
      g.font = '11px system-ui, sans-serif';
      g.textBaseline = 'middle';
      g.strokeStyle = '#eceef2';
      g.fillStyle = '#6b7385';
      g.lineWidth = 1;
      for (let i = 0; i <= 4; i++) {
        const v = (yMax * i) / 4;
        const yy = Math.round(y(v)) + 0.5;
        g.beginPath();
        g.moveTo(pad.l, yy);
        g.lineTo(pad.l + pw, yy);
        g.stroke();
        g.textAlign = 'right';
        g.fillText(o.format(o.integer ? Math.round(v) : v), pad.l - 6, yy);
      }
      g.textAlign = 'center';
      g.textBaseline = 'top';
      const secs = win / 1000;
      for (let i = 0; i <= 4; i++) {
        const ago = secs - (secs * i) / 4;
        const xx = pad.l + (pw * i) / 4;
        g.textAlign = i === 0 ? 'left' : i === 4 ? 'right' : 'center';
        g.fillText(ago === 0 ? 'now' : '-' + (ago >= 10 ? Math.round(ago) : ago.toFixed(1)) + 's', xx, pad.t + ph + 5);
      }

      if (vis.length < 2) {
        g.textAlign = 'center';
        g.textBaseline = 'middle';
        g.fillText('waiting for data…', pad.l + pw / 2, pad.t + ph / 2);
        return;
      }
      o.series.forEach((se, i) => {
        g.beginPath();
        vis.forEach((s, j) => {
          const px = x(s.t);
          const py = y(value(s, se));
          if (j === 0) g.moveTo(px, py);
          else g.lineTo(px, py);
        });
        g.strokeStyle = se.color;
        g.lineWidth = se.width || 1.8;
        g.lineJoin = 'round';
        g.setLineDash(se.dash || []);
        g.stroke();
        g.setLineDash([]);
        if (o.fill && i === 0) {
          g.lineTo(x(vis[vis.length - 1].t), y(0));
          g.lineTo(x(vis[0].t), y(0));
          g.closePath();
          g.globalAlpha = 0.15;
          g.fillStyle = se.color;
          g.fill();
          g.globalAlpha = 1;
        }
      });
    }
  }

  window.MiniChart = { LineChart: LineChart, niceMax: niceMax };
})();
