//! Time charts of a [`Timeline`] for a browser: the figures as one JSON document (time axis,
//! charts, finding marks) that `web/charts.js` draws with uPlot, both embedded in the page.
//! The incident report (`report::incident`) and the live page of `top --listen`
//! (`report::top::live`) share the document and the script.
//!
//! uPlot (<https://github.com/leeoniya/uPlot>, MIT, v1.6.32, 51 KB minified) draws on canvas,
//! fast enough for a refresh every second; its licence is embedded with it.

use serde::Serialize;

use crate::diagnose::findings::{Code, Severity};
use crate::history::timeline::{Point, Timeline};

/// uPlot's script, its licence first (MIT asks that the notice travel with the copy).
pub const UPLOT_JS: &str = concat!(
    "/*\n",
    include_str!("web/uPlot.LICENSE"),
    "*/\n",
    include_str!("web/uPlot.iife.min.js")
);
/// uPlot's style sheet.
pub const UPLOT_CSS: &str = include_str!("web/uPlot.min.css");
/// tacho's drawing of a document: `tacho.render(doc, container)`, `tacho.findings(list, ul)`.
pub const CHARTS_JS: &str = include_str!("web/charts.js");
/// Styles of both pages.
pub const PAGE_CSS: &str = include_str!("web/page.css");
/// The start of a chart page, up to and including its heading: `title` (escaped here) in the
/// tab and as the heading, with uPlot's and the pages' styles inline.
pub fn page_head(title: &str) -> String {
    let title = super::html::esc(title);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{title}</title><style>{UPLOT_CSS}{PAGE_CSS}</style></head><body>\n\
         <h1>{title}</h1>\n"
    )
}

/// Points a chart holds at most: a longer window is averaged into this many buckets.
pub const MAX_POINTS: usize = 1200;

/// What the charts draw.
#[derive(Debug, Serialize)]
pub struct Doc {
    /// End of each point's interval, seconds since the Unix epoch.
    pub t: Vec<f64>,
    /// The charts, system-wide first, then each disk, then each interface.
    pub charts: Vec<Chart>,
    /// Findings over time, to mark on the charts of their subject.
    pub marks: Vec<Mark>,
    /// Settings that changed, to mark on every chart.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<SettingMark>,
}

/// Settings that changed at one time.
#[derive(Debug, Clone, Serialize)]
pub struct SettingMark {
    /// When, seconds since the Unix epoch.
    pub t: f64,
    /// What changed: `vm.swappiness 60 → 10`, one per line.
    pub text: String,
}

/// One chart.
#[derive(Debug, Serialize)]
pub struct Chart {
    /// Stable name in the page (`cpu`, `disk-util-sda`).
    pub id: String,
    /// Its heading.
    pub title: String,
    /// How its values read: `pct`, `bytes`, `bytes_s`, `ms`.
    pub unit: &'static str,
    /// What findings it shows: a device's kernel name, an interface, or `system`.
    pub subject: String,
    /// Its lines, each as long as `t`.
    pub series: Vec<Series>,
}

/// One line of a chart.
#[derive(Debug, Serialize)]
pub struct Series {
    /// Its name in the legend.
    pub label: String,
    /// One value per point; `null` where it was not known.
    pub values: Vec<Option<f64>>,
}

/// A finding over consecutive intervals.
#[derive(Debug, Clone, Serialize)]
pub struct Mark {
    /// Its stable code.
    pub code: Code,
    /// Its worst severity.
    pub severity: Severity,
    /// What it is about.
    pub subject: String,
    /// Start of its first interval, seconds since the Unix epoch.
    pub from: f64,
    /// End of its last interval.
    pub to: f64,
    /// Its sentence (of the worst interval).
    pub message: String,
}

/// The charts of `timeline`, with `marks` on them.
pub fn doc(timeline: &Timeline, marks: Vec<Mark>) -> Doc {
    let points: Vec<&Point> = timeline.points().collect();
    let every = points.len().div_ceil(MAX_POINTS).max(1);
    let buckets: Vec<&[&Point]> = points.chunks(every).collect();
    let t = buckets
        .iter()
        .map(|b| b.last().map_or(0.0, |p| p.t))
        .collect();
    // A value per bucket: the mean of its points' known values.
    let line = |label: &str, f: &dyn Fn(&Point) -> Option<f64>| Series {
        label: shown(label),
        values: buckets
            .iter()
            .map(|b| {
                let known: Vec<f64> = b.iter().filter_map(|p| f(p)).collect();
                // Two decimals are more than a chart shows, and keep the JSON short.
                (!known.is_empty()).then(|| {
                    (known.iter().sum::<f64>() / known.len() as f64 * 100.0).round() / 100.0
                })
            })
            .collect(),
    };
    let mut charts = Vec::new();
    let mut add = |id: String, title: String, unit, subject: &str, series: Vec<Series>| {
        let series: Vec<Series> = series
            .into_iter()
            .filter(|s| s.values.iter().any(Option::is_some))
            .collect();
        if !series.is_empty() {
            charts.push(Chart {
                id,
                title: shown(&title),
                unit,
                subject: shown(subject),
                series,
            });
        }
    };
    add(
        "cpu".into(),
        "CPU, % of all CPUs".into(),
        "pct",
        "system",
        ["user", "system", "iowait", "steal", "busy"]
            .iter()
            .enumerate()
            .map(|(i, l)| line(l, &|p| p.cpu[i]))
            .collect(),
    );
    add(
        "memory".into(),
        "Memory".into(),
        "bytes",
        "system",
        ["used", "cache", "available"]
            .iter()
            .enumerate()
            .map(|(i, l)| line(l, &|p| p.memory[i].map(|b| b as f64)))
            .collect(),
    );
    add(
        "psi".into(),
        "Pressure stall (PSI some), % of time".into(),
        "pct",
        "system",
        ["cpu", "io", "memory"]
            .iter()
            .enumerate()
            .map(|(i, l)| line(l, &|p| p.psi[i]))
            .collect(),
    );
    for (name, display) in timeline.disk_names() {
        let disk = |p: &Point| p.disks.iter().find(|d| d.name == name).cloned();
        let title = |what: &str| {
            if display == name {
                format!("{name} {what}")
            } else {
                format!("{display} ({name}) {what}")
            }
        };
        let id = crate::text::escape(&name).replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        add(
            format!("disk-util-{id}"),
            title("utilisation, %"),
            "pct",
            &name,
            vec![line("util", &|p| disk(p).and_then(|d| d.util_pct))],
        );
        add(
            format!("disk-await-{id}"),
            title("latency (mean await)"),
            "ms",
            &name,
            ["read", "write"]
                .iter()
                .enumerate()
                .map(|(i, l)| line(l, &|p| disk(p).and_then(|d| d.await_ms[i])))
                .collect(),
        );
        add(
            format!("disk-bytes-{id}"),
            title("throughput"),
            "bytes_s",
            &name,
            ["read", "write"]
                .iter()
                .enumerate()
                .map(|(i, l)| line(l, &|p| disk(p).and_then(|d| d.bytes_per_s[i])))
                .collect(),
        );
    }
    for name in timeline.net_names() {
        let id = crate::text::escape(&name).replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        add(
            format!("net-{id}"),
            format!("{name} traffic"),
            "bytes_s",
            &name,
            ["received", "sent"]
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    line(l, &|p| {
                        p.nets
                            .iter()
                            .find(|n| n.name == name)
                            .map(|n| n.bytes_per_s[i])
                    })
                })
                .collect(),
        );
    }
    let marks = marks
        .into_iter()
        .map(|m| Mark {
            subject: shown(&m.subject),
            message: shown(&m.message),
            ..m
        })
        .collect();
    Doc {
        t,
        charts,
        marks,
        settings: Vec::new(),
    }
}

/// The findings of `timeline` as spans of consecutive intervals, in the order they fired.
pub fn spans(timeline: &Timeline) -> Vec<Mark> {
    let mut marks: Vec<Mark> = Vec::new();
    // Index in `marks` of each (code, subject) still open.
    let mut open: Vec<(Code, String, usize)> = Vec::new();
    for p in timeline.points() {
        let start = p.t - p.interval_s;
        let mut still = Vec::new();
        for f in &p.findings {
            let known = open
                .iter()
                .find(|(c, s, i)| *c == f.code && *s == f.subject && marks[*i].to >= start - 1e-3)
                .map(|(_, _, i)| *i);
            let i = match known {
                Some(i) => {
                    let m = &mut marks[i];
                    m.to = p.t;
                    if f.severity > m.severity {
                        m.severity = f.severity;
                        m.message = f.message.clone();
                    }
                    i
                }
                None => {
                    marks.push(Mark {
                        code: f.code,
                        severity: f.severity,
                        subject: f.subject.clone(),
                        from: start,
                        to: p.t,
                        message: f.message.clone(),
                    });
                    marks.len() - 1
                }
            };
            still.push((f.code, f.subject.clone(), i));
        }
        open = still;
    }
    marks
}

/// A severity's word, as JSON writes it.
pub fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Critical => "critical",
    }
}

/// Text from the system with its control and direction characters made visible, as the
/// terminal shows it (the page sets it as text, never as markup).
pub fn shown(text: &str) -> String {
    crate::text::escape(text).into_owned()
}

/// `value` as JSON to put inside `<script type="application/json">`: `<`, `>` and `&` as
/// `\u003c`, `\u003e`, `\u0026` (and the two line separators JavaScript once took for line
/// ends), so no text in it (`</script>`, `<!--`) can end or change the script element.
pub fn script_json(value: &impl Serialize) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Debian package's copyright file carries uPlot's licence, word for word.
    #[test]
    fn the_package_copyright_names_uplot_and_its_licence() {
        let copyright = include_str!("../../contrib/deb/copyright");
        let words = |text: &str| -> Vec<String> {
            text.split_whitespace()
                .filter(|w| *w != ".")
                .map(str::to_string)
                .collect()
        };
        let licence = include_str!("web/uPlot.LICENSE");
        let grant = &licence[licence.find("Permission").unwrap()..];
        let para = copyright
            .split("\n\n")
            .find(|p| p.contains("Files: src/report/web/uPlot"))
            .expect("a paragraph for uPlot");
        assert!(para.contains("License: MIT") && para.contains("Copyright: 2022 Leon Sorokin"));
        let text = &para[para.find("Permission").unwrap()..];
        assert_eq!(words(text), words(grant));
    }

    #[test]
    fn script_json_cannot_end_its_script() {
        let name = "</script><img src=x onerror=alert(1)><!--\u{2028}&";
        let text = script_json(&vec![name]);
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'));
        let back: Vec<String> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, [name]);
    }
}
