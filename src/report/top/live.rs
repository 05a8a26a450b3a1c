//! The live page of `tacho top --listen` at `/`: the verdict, the findings with their culprits
//! and charts of the last 15 minutes, refreshed every interval from `/live.json`. The page is
//! fixed (uPlot and tacho's chart script inline, no external script or font); the JSON is
//! rendered once per sample from a ring of at most [`MAX_POINTS`] intervals, whatever clients
//! ask.

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
}

/// What `/live.json` answers.
#[derive(Serialize)]
struct LiveDoc {
    #[serde(flatten)]
    doc: Doc,
    /// Seconds between refreshes.
    interval_s: f64,
    /// End of the latest interval.
    time_unix_s: f64,
    /// Its one-line verdict.
    verdict: String,
    /// Its findings, most severe first.
    findings: Vec<LiveFinding>,
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
        let doc = LiveDoc {
            doc: charts::doc(timeline, charts::spans(timeline)),
            interval_s: s.interval_s,
            time_unix_s: s.time_unix_s,
            verdict: shown(&s.verdict),
            findings,
        };
        let json = serde_json::to_vec(&doc).unwrap_or_else(|_| b"null".to_vec());
        self.json = Some(Arc::from(json));
    }
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
  function load() {
    fetch('live.json', { cache: 'no-store' }).then(function (r) {
      if (!r.ok) throw new Error(r.status + ' ' + r.statusText);
      return r.json();
    }).then(function (doc) {
      show(doc);
      setTimeout(load, Math.max(1, doc.interval_s) * 1000);
    }).catch(function (e) {
      status.textContent = 'cannot reach tacho: ' + e.message + '; trying again';
      setTimeout(load, 5000);
    });
  }
  load();
})();";
