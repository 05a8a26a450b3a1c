//! The live page of `tacho top --listen` at `/`: the verdict, the findings with their culprits
//! and charts of the last 15 minutes, refreshed every interval from `/live.json`. The page is
//! fixed (uPlot and tacho's chart script inline, no external script or font); the JSON is
//! rendered once per sample from a ring of at most [`MAX_POINTS`] intervals, whatever clients
//! ask. Each interval has a sequence number: the page, once it has the window, asks only for
//! the intervals after its last (`/live.json?after=SEQ`), with the latest findings and the
//! window's finding marks: ~6 KB a refresh against the window's ~117 KB (docs/benchmarks.md).

use std::sync::Arc;

use serde::Serialize;

use crate::diagnose::findings::{Code, Severity};
use crate::diagnose::model::TopSample;
use crate::history::timeline::Timeline;
use crate::report::charts::{self, Doc, shown};

/// The time the charts cover, seconds.
const WINDOW_S: f64 = 900.0;
/// Intervals kept at most (15 minutes at 1 s; fewer at longer intervals).
pub const MAX_POINTS: usize = 900;

/// The intervals of the last 15 minutes, and their JSON document.
#[derive(Default)]
pub struct Live {
    timeline: Option<Timeline>,
    json: Option<Arc<[u8]>>,
    /// The window's document, for answers after a sequence number.
    doc: Option<LiveDoc>,
    /// The answer after the interval before the latest: what a page that keeps up asks for.
    next: Option<Arc<[u8]>>,
}

/// What `/live.json` answers.
#[derive(Serialize)]
struct LiveDoc {
    #[serde(flatten)]
    doc: Doc,
    /// Sequence number of the latest interval (the first is 1).
    seq: u64,
    /// Seconds between refreshes.
    interval_s: f64,
    /// End of the latest interval.
    time_unix_s: f64,
    /// Its one-line verdict.
    verdict: String,
    /// Its findings, most severe first.
    findings: Vec<LiveFinding>,
}

/// What `/live.json?after=SEQ` answers: the intervals after `after`, to append to the window
/// the page has (keeping its last `points`), and the latest verdict, findings and marks.
#[derive(Serialize)]
struct Delta<'a> {
    after: u64,
    seq: u64,
    /// Intervals in the window now.
    points: usize,
    t: &'a [f64],
    /// Each chart's id, its lines' labels (a page whose charts differ asks for the window) and
    /// their new values.
    charts: Vec<DeltaChart<'a>>,
    marks: &'a [charts::Mark],
    interval_s: f64,
    time_unix_s: f64,
    verdict: &'a str,
    findings: &'a [LiveFinding],
}

#[derive(Serialize)]
struct DeltaChart<'a> {
    id: &'a str,
    labels: Vec<&'a str>,
    values: Vec<&'a [Option<f64>]>,
}

#[derive(Serialize)]
struct LiveFinding {
    code: Code,
    severity: Severity,
    subject: String,
    message: String,
    /// `comm (unit) share%`, most first.
    culprits: Vec<String>,
}

impl Live {
    /// The JSON document of the window, once an interval has been added.
    pub fn json(&self) -> Option<Arc<[u8]>> {
        self.json.clone()
    }

    /// The intervals after sequence number `after`, or the whole window when the page has
    /// missed intervals no longer in it (or names one not yet made: a restarted tacho).
    pub fn json_after(&self, after: u64) -> Option<Arc<[u8]>> {
        let d = self.doc.as_ref()?;
        let n = d.doc.t.len();
        let new = d.seq.checked_sub(after).map(|k| k as usize);
        match new {
            Some(1) => self.next.clone(),
            Some(k) if k <= n => Some(Arc::from(delta(d, after, k))),
            _ => self.json.clone(),
        }
    }

    /// Adds the interval `s` and renders the window's JSON document (once, for every client
    /// until the next).
    pub fn push(&mut self, s: &TopSample) {
        let timeline = self.timeline.get_or_insert_with(|| {
            let cap = (WINDOW_S / s.interval_s.max(0.001)).ceil();
            Timeline::new((cap as usize).clamp(2, MAX_POINTS))
        });
        timeline.push(s);
        let findings = s
            .findings
            .iter()
            .map(|f| LiveFinding {
                code: f.code,
                severity: f.severity,
                subject: shown(&f.subject),
                message: shown(&f.message),
                culprits: f
                    .culprits
                    .iter()
                    .take(3)
                    .map(|c| {
                        let unit = c
                            .unit
                            .as_deref()
                            .map_or(String::new(), |u| format!(" ({u})"));
                        shown(&format!("{}{unit} {:.0}%", c.comm, c.share_pct))
                    })
                    .collect(),
            })
            .collect();
        let seq = self.doc.as_ref().map_or(0, |d| d.seq) + 1;
        let doc = LiveDoc {
            seq,
            doc: charts::doc(timeline, charts::spans(timeline)),
            interval_s: s.interval_s,
            time_unix_s: s.time_unix_s,
            verdict: shown(&s.verdict),
            findings,
        };
        let json = serde_json::to_vec(&doc).unwrap_or_else(|_| b"null".to_vec());
        self.json = Some(Arc::from(json));
        self.next = Some(Arc::from(delta(&doc, seq - 1, 1)));
        self.doc = Some(doc);
    }
}

/// The JSON of the last `k` intervals of `d`, those after `after`.
fn delta(d: &LiveDoc, after: u64, k: usize) -> Vec<u8> {
    let n = d.doc.t.len();
    let from = n.saturating_sub(k);
    let delta = Delta {
        after,
        seq: d.seq,
        points: n,
        t: &d.doc.t[from..],
        charts: d
            .doc
            .charts
            .iter()
            .map(|c| DeltaChart {
                id: &c.id,
                labels: c.series.iter().map(|s| s.label.as_str()).collect(),
                values: c
                    .series
                    .iter()
                    .map(|s| &s.values[from.min(s.values.len())..])
                    .collect(),
            })
            .collect(),
        marks: &d.doc.marks,
        interval_s: d.interval_s,
        time_unix_s: d.time_unix_s,
        verdict: &d.verdict,
        findings: &d.findings,
    };
    serde_json::to_vec(&delta).unwrap_or_else(|_| b"null".to_vec())
}

/// The page: fixed text (nothing from the system; that comes as JSON and is set as text).
pub fn page() -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>tacho</title>\
         <style>{}{}</style></head><body>\n<h1>tacho</h1>\n\
         <p class=\"verdict\" id=\"verdict\">waiting for the first interval…</p>\n\
         <p class=\"muted\" id=\"status\"></p>\n<h2>Findings</h2>\n\
         <ul class=\"findings\" id=\"findings\"></ul>\n<h2>Last 15 minutes</h2>\n\
         <div id=\"charts\"></div>\n<p class=\"muted\"><a href=\"/metrics\">Metrics</a> \
         (Prometheus text) · charts drawn by uPlot (MIT)</p>\n<script>{}</script>\n<script>{}\n{}\
         </script>\n</body></html>\n",
        charts::UPLOT_CSS,
        charts::PAGE_CSS,
        charts::UPLOT_JS,
        charts::CHARTS_JS,
        LOADER
    )
}

/// Fetches `/live.json` every interval and draws it.
const LOADER: &str = r"(function () {
  'use strict';
  var verdict = document.getElementById('verdict'), status = document.getElementById('status');
  var list = document.getElementById('findings'), box = document.getElementById('charts');
  function show(doc) {
    verdict.textContent = doc.verdict;
    verdict.className = 'verdict' + (doc.findings.length ? ' warning' : '');
    list.textContent = '';
    if (!doc.findings.length) list.appendChild(tacho.el('li', 'muted', 'none now'));
    doc.findings.forEach(function (f) { list.appendChild(tacho.finding(f, doc.verdict)); });
    status.textContent = 'updated ' + new Date(doc.time_unix_s * 1000).toLocaleTimeString() +
      ', every ' + Math.round(doc.interval_s * 10) / 10 + ' s';
    tacho.render(doc, box);
  }
  // The window the page has; then only what came after its last interval, appended.
  var have = null;
  function same(a, b) {
    return a.length === b.length && a.every(function (c, i) {
      return c.id === b[i].id && c.series.length === b[i].labels.length &&
        c.series.every(function (s, j) { return s.label === b[i].labels[j]; });
    });
  }
  function merge(d) {
    if (d.after === undefined) { have = d; return true; }
    if (!have || d.after !== have.seq || !same(have.charts, d.charts)) return false;
    var cut = Math.max(0, have.t.length + d.t.length - d.points);
    have.t = have.t.concat(d.t).slice(cut);
    have.charts.forEach(function (c, i) {
      c.series.forEach(function (s, j) { s.values = s.values.concat(d.charts[i].values[j]).slice(cut); });
    });
    ['seq', 'marks', 'interval_s', 'time_unix_s', 'verdict', 'findings'].forEach(function (k) {
      have[k] = d[k];
    });
    return true;
  }
  function load() {
    var url = have ? 'live.json?after=' + have.seq : 'live.json';
    fetch(url, { cache: 'no-store' }).then(function (r) {
      if (!r.ok) throw new Error(r.status + ' ' + r.statusText);
      return r.json();
    }).then(function (d) {
      // Charts that changed (a disk came or went): the whole window again, at once.
      if (!merge(d)) { have = null; load(); return; }
      show(have);
      setTimeout(load, Math.max(1, have.interval_s) * 1000);
    }).catch(function (e) {
      have = null;
      status.textContent = 'cannot reach tacho: ' + e.message + '; trying again';
      setTimeout(load, 5000);
    });
  }
  load();
})();";
