// tacho's charts: draws a chart document (report::charts::Doc) with uPlot. Every text from
// the system is set with textContent, never parsed as markup.
var tacho = (function () {
  'use strict';
  var COLORS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#000000'];
  var SEVERITY = { info: '#56B4E9', warning: '#E69F00', critical: '#D55E00' };
  var made = {};

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  function bytes(v) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(v < 10 ? 1 : 0)) + ' ' + units[i];
  }

  function fmt(unit, v) {
    if (v == null) return '-';
    if (unit === 'pct') return v.toFixed(v < 10 ? 1 : 0) + '%';
    if (unit === 'ms') return v.toFixed(v < 10 ? 2 : 0) + ' ms';
    if (unit === 'bytes') return bytes(v);
    if (unit === 'bytes_s') return bytes(v) + '/s';
    return String(v);
  }

  // Marks on a chart: its subject's findings, and on the system charts those whose subject
  // has no chart of its own.
  function marksFor(doc, chart) {
    var subjects = doc.charts.map(function (c) { return c.subject; });
    return doc.marks.filter(function (m) {
      return m.subject === chart.subject ||
        (chart.subject === 'system' && subjects.indexOf(m.subject) < 0);
    });
  }

  function placeMarks(u, marks, box, settings) {
    var old = u.over.querySelectorAll('.mark, .setting');
    for (var i = 0; i < old.length; i++) old[i].remove();
    var drawn = 0;
    // A setting that changed: a line across the chart at its time.
    (settings || []).forEach(function (s) {
      var x = u.valToPos(s.t, 'x');
      if (!isFinite(x) || x < 0 || x > (u.over.clientWidth || x)) return;
      var d = el('div', 'setting');
      d.style.left = (x - 1) + 'px';
      d.setAttribute('data-t', s.t);
      d.title = 'changed: ' + s.text;
      u.over.appendChild(d);
    });
    marks.forEach(function (m) {
      var a = u.valToPos(m.from, 'x'), b = u.valToPos(m.to, 'x');
      if (!isFinite(a) || !isFinite(b)) return;
      a = Math.max(0, a); b = Math.min(u.over.clientWidth || b, b);
      if (b < a) return;
      var d = el('div', 'mark');
      d.style.left = a + 'px';
      d.style.width = Math.max(2, b - a) + 'px';
      d.style.background = SEVERITY[m.severity] || SEVERITY.warning;
      d.setAttribute('data-code', m.code);
      d.setAttribute('data-from', m.from);
      d.setAttribute('data-to', m.to);
      d.title = m.code + ' ' + m.subject + ': ' + m.message;
      u.over.appendChild(d);
      drawn++;
    });
    box.setAttribute('data-marks', drawn);
  }

  function options(chart, width, box, state) {
    var series = [{}].concat(chart.series.map(function (s, i) {
      return {
        label: s.label,
        stroke: COLORS[i % COLORS.length],
        width: 1.5,
        value: function (u, v) { return fmt(chart.unit, v); }
      };
    }));
    return {
      width: width,
      height: 170,
      series: series,
      scales: { x: { time: true } },
      legend: { live: false },
      axes: [{}, { size: 84, values: function (u, vals) {
        return vals.map(function (v) { return fmt(chart.unit, v); });
      } }],
      hooks: { draw: [function (u) {
        placeMarks(u, state.marks, box, state.settings);
        // What was drawn: known values per line, and the time axis's ends (tests read them).
        var n = 0;
        for (var s = 1; s < u.data.length; s++) {
          for (var k = 0; k < u.data[s].length; k++) if (u.data[s][k] != null) n++;
        }
        box.setAttribute('data-drawn', n);
        box.setAttribute('data-x', u.scales.x.min + ' ' + u.scales.x.max);
      }] }
    };
  }

  function data(doc, chart) {
    return [doc.t].concat(chart.series.map(function (s) { return s.values; }));
  }

  function widthOf(box) {
    return Math.max(200, Math.floor(box.clientWidth));
  }

  // Draws (or redraws in place) every chart of `doc` into `container`.
  function render(doc, container) {
    var keep = {};
    doc.charts.forEach(function (chart) {
      var key = chart.id + ':' + chart.series.length;
      keep[key] = true;
      var have = made[key];
      if (have) {
        have.state.marks = marksFor(doc, chart);
        have.state.settings = doc.settings;
        have.plot.setData(data(doc, chart));
        container.appendChild(have.box);
        return;
      }
      var box = el('div', 'chart');
      box.setAttribute('data-id', chart.id);
      box.setAttribute('data-subject', chart.subject);
      box.appendChild(el('h3', null, chart.title));
      container.appendChild(box);
      var state = { marks: marksFor(doc, chart), settings: doc.settings };
      var plot = new uPlot(options(chart, widthOf(box), box, state), data(doc, chart), box);
      made[key] = { plot: plot, box: box, state: state };
    });
    Object.keys(made).forEach(function (key) {
      if (!keep[key]) { made[key].plot.destroy(); made[key].box.remove(); delete made[key]; }
    });
  }

  var resizing = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      Object.keys(made).forEach(function (key) {
        var m = made[key];
        m.plot.setSize({ width: widthOf(m.box), height: 170 });
      });
    }, 100);
  });

  // A finding list item: severity, code and subject, its sentence (unless `said` already
  // shows it), who it named.
  function finding(f, said) {
    var li = el('li', 'finding ' + f.severity);
    li.appendChild(el('b', null, f.severity + ' ' + f.code + ' (' + f.subject + ')'));
    if (f.message !== said) li.appendChild(document.createTextNode(' ' + f.message));
    if (f.culprits && f.culprits.length) {
      li.appendChild(el('div', 'culprits', 'culprits: ' + f.culprits.join(', ')));
    }
    return li;
  }

  return { render: render, finding: finding, el: el };
})();
