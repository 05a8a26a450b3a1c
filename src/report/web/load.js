// tacho load's curve: latency percentiles against achieved throughput, the knee marked, drawn
// with uPlot from the page's JSON (report::load_html::Curve). No text from the data is parsed
// as markup: uPlot sets labels as text, and the knee's label is drawn on the canvas.
(function () {
  'use strict';
  var COLORS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7'];
  var KNEE = '#D55E00';
  var doc = JSON.parse(document.getElementById('tacho-data').textContent);
  var el = document.getElementById('curve');
  var knee = doc.knee_rps;
  var series = [{ label: 'achieved req/s', value: function (u, v) { return v == null ? '-' : v.toFixed(1); } }];
  doc.series.forEach(function (s, i) {
    series.push({
      label: s.label,
      stroke: COLORS[i % COLORS.length],
      width: 2,
      points: { show: true, size: 6 },
      value: function (u, v) { return v == null ? '-' : v.toFixed(v < 10 ? 2 : 0) + ' ms'; }
    });
  });
  function markKnee(u) {
    if (knee == null) return;
    var x = u.valToPos(knee, 'x', true);
    var ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = KNEE;
    ctx.fillStyle = KNEE;
    ctx.lineWidth = 2 * devicePixelRatio;
    ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
    ctx.beginPath();
    ctx.moveTo(x, u.bbox.top);
    ctx.lineTo(x, u.bbox.top + u.bbox.height);
    ctx.stroke();
    ctx.font = (12 * devicePixelRatio) + 'px sans-serif';
    var label = 'knee ' + Math.round(knee) + ' req/s';
    var w = ctx.measureText(label).width;
    var lx = x + 4 * devicePixelRatio + w > u.bbox.left + u.bbox.width ? x - w - 4 * devicePixelRatio : x + 4 * devicePixelRatio;
    ctx.fillText(label, lx, u.bbox.top + 14 * devicePixelRatio);
    ctx.restore();
  }
  var width = Math.max(300, Math.min(el.clientWidth || 900, 1100));
  new uPlot({
    width: width,
    height: 420,
    scales: { x: { time: false }, y: { distr: 3 } },
    axes: [
      { label: 'achieved requests a second' },
      { label: 'latency (ms, log scale)', size: 70 }
    ],
    series: series,
    hooks: { draw: [markKnee] }
  }, [doc.achieved_rps].concat(doc.series.map(function (s) { return s.ms; })), el);
  el.dataset.drawn = '1';
})();
