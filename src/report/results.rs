//! Stored runs for people and programs: `runs list`, `runs show` and `compare` as a terminal
//! table, Markdown, CSV and JSON (HTML is in [`super::html`]).

use super::grid::{Grid, markdown_escape};
use super::sheet::spreadsheet_text;
use crate::compare::{Comparison, Metric, Row, RunHead, Significance, format_p};
use crate::store::{RunKind, RunSource};
use crate::store::{RunSummary, StoredRun};
use crate::text::Escaped;
use crate::units::plural;
use serde_json::{Value, json};
use std::io::{self, Write};

/// The `schema` of the `tacho runs list --json` document.
pub const LIST_SCHEMA: &str = "tacho.runs.v1";
/// The `schema` of the `tacho compare --json` document.
pub const COMPARE_SCHEMA: &str = "tacho.compare.v1";

/// Metrics of the `runs show` table, in column order.
const SHOW_METRICS: [Metric; 8] = [
    Metric::Iops,
    Metric::Bandwidth,
    Metric::OpsPerS,
    Metric::LatMean,
    Metric::LatP50,
    Metric::LatP99,
    Metric::LatP99_9,
    Metric::LatMax,
];

/// Terminal or Markdown: the same content, escaped for Markdown in the latter.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Text {
    /// Plain text for a terminal (as wide as given, when it is one), escaped for it.
    Terminal(Option<usize>),
    /// GitHub-flavoured Markdown, escaped for it.
    Markdown,
}

impl Text {
    fn esc(self, s: &str) -> String {
        match self {
            Text::Terminal(_) => Escaped(s).to_string(),
            Text::Markdown => markdown_escape(s),
        }
    }

    fn grid(self, g: &Grid, out: &mut impl Write) -> io::Result<()> {
        match self {
            Text::Terminal(width) => g.write_text(out, width),
            Text::Markdown => g.write_markdown(out),
        }
    }

    /// A list item: indented under a heading in terminals, a bullet in Markdown.
    fn item(self, s: &str) -> String {
        match self {
            Text::Terminal(_) => format!("  {}", Escaped(s)),
            Text::Markdown => format!("- {}", markdown_escape(s)),
        }
    }

    fn heading(self, s: &str) -> String {
        match self {
            Text::Terminal(_) => format!("{}:", Escaped(s)),
            Text::Markdown => format!("### {}", markdown_escape(s)),
        }
    }
}

/// Writes the stored runs as a table for the terminal (a hint when there are none).
pub fn list_text(runs: &[RunSummary], out: &mut impl Write) -> io::Result<()> {
    if runs.is_empty() {
        return writeln!(
            out,
            "no runs stored yet (tacho bench, bench cpu, bench mem and time save every run)"
        );
    }
    writeln!(out, "{} stored", plural(runs.len() as u64, "run"))?;
    writeln!(out)?;
    let grid = Grid {
        header: [
            "id", "date", "kind", "label", "status", "source", "suite", "tests", "host", "target",
        ]
        .map(String::from)
        .to_vec(),
        rows: runs
            .iter()
            .map(|r| {
                vec![
                    r.id.to_string(),
                    r.created_at.to_string(),
                    r.kind.to_string(),
                    r.label.as_deref().unwrap_or_default().to_owned(),
                    r.status.to_string(),
                    crate::compare::source_text(r.source, r.kind),
                    r.suite
                        .as_ref()
                        .map(|s| {
                            crate::compare::suite_text(
                                s,
                                r.suite_version.unwrap_or(0),
                                r.standard,
                                &r.changed,
                            )
                        })
                        .unwrap_or_default(),
                    r.tests.to_string(),
                    r.hostname.as_deref().unwrap_or_default().to_owned(),
                    r.target.as_deref().unwrap_or_default().to_owned(),
                ]
            })
            .collect(),
        right: vec![
            true, false, false, false, false, false, false, true, false, false,
        ],
    };
    grid.write_text(out, None)
}

/// The `tacho.runs.v1` JSON document of `runs list`, written run by run as the store hands
/// them over, laid out as `serde_json`'s pretty printer lays out the whole document.
pub struct ListJson<W: Write> {
    out: W,
    runs: usize,
}

impl<W: Write> ListJson<W> {
    /// Writes the document's head.
    pub fn begin(mut out: W) -> io::Result<ListJson<W>> {
        write!(
            out,
            "{{\n  \"schema\": {},\n  \"runs\": [",
            json!(LIST_SCHEMA)
        )?;
        Ok(ListJson { out, runs: 0 })
    }

    /// Writes one run, indented as an element of `runs`.
    pub fn run(&mut self, run: &RunSummary) -> io::Result<()> {
        let sep = if self.runs == 0 { "" } else { "," };
        write!(self.out, "{sep}\n    ")?;
        // JSON text has a newline only between tokens (strings escape theirs): each is
        // followed by the run's own indentation.
        serde_json::to_writer_pretty(Indented(&mut self.out), run)?;
        self.runs += 1;
        Ok(())
    }

    /// Closes the document.
    pub fn end(mut self) -> io::Result<()> {
        if self.runs > 0 {
            write!(self.out, "\n  ")?;
        }
        writeln!(self.out, "]\n}}")?;
        self.out.flush()
    }
}

/// A writer that indents each new line by four spaces.
struct Indented<W: Write>(W);

impl<W: Write> Write for Indented<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for (i, line) in buf.split(|&b| b == b'\n').enumerate() {
            if i > 0 {
                self.0.write_all(b"\n    ")?;
            }
            self.0.write_all(line)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// `runs show`: verdict, the run's facts, warnings, one row per test and direction, and the
/// whole fingerprint.
pub fn show_text(
    run: &StoredRun,
    c: &Comparison,
    text: Text,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "{}", text.esc(&c.verdict()))?;
    for w in run_warnings(run) {
        writeln!(out, "{}", text.esc(&format!("warning {w}")))?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        text.esc(&format!(
            "{} · {} · {}",
            run.created_at,
            tool(run),
            method(&c.runs[0])
        ))
    )?;
    writeln!(out)?;
    // Only the columns this kind of run has (a CPU run has ops/s and no latency).
    let metrics: Vec<Metric> = SHOW_METRICS
        .into_iter()
        .filter(|m| c.rows().any(|r| r.metric == *m))
        .collect();
    let mut header = vec!["test".to_string()];
    header.extend(
        metrics
            .iter()
            .map(|m| short_label(*m, c.runs[0].kind).to_string()),
    );
    header.push("repeats".into());
    let mut rows = Vec::new();
    for (title, group) in groups(c) {
        let group: Vec<&Row> = group.iter().collect();
        let flushes = group
            .first()
            .filter(|r| r.direction == "sync")
            .and_then(|r| c.tests[r.test].sync_counts[0]);
        let title = match flushes {
            Some(n) => format!("{title}: {n} flushes"),
            None => title,
        };
        let mut row = vec![title];
        let mut repeats = 1;
        for &metric in &metrics {
            let cell = group
                .iter()
                .find(|r| r.metric == metric)
                .and_then(|r| r.cells[0].as_ref());
            // Summary figures (a command's max time) have no repeats of their own.
            if let Some(cell) = cell {
                repeats = repeats.max(cell.samples.len());
            }
            row.push(cell.map_or("-".into(), |c| metric.format(c.value)));
        }
        row.push(repeats.to_string());
        rows.push(row);
    }
    let mut right = vec![true; header.len()];
    right[0] = false;
    text.grid(
        &Grid {
            header,
            rows,
            right,
        },
        out,
    )?;
    writeln!(out)?;
    writeln!(out, "{}", text.heading("fingerprint"))?;
    for row in &c.fingerprint {
        if let Some(v) = &row.values[0] {
            writeln!(out, "{}", text.item(&format!("{}: {v}", row.key)))?;
        }
    }
    Ok(())
}

/// `compare`: verdict, warnings, the runs, one row per headline figure with one column per
/// run, and the fingerprint differences.
pub fn compare_text(c: &Comparison, text: Text, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "{}", text.esc(&c.verdict()))?;
    for w in &c.warnings {
        writeln!(out, "{}", text.esc(&format!("warning: {w}")))?;
    }
    for w in c.run_warnings() {
        writeln!(out, "{}", text.esc(&format!("warning {w}")))?;
    }
    writeln!(out)?;
    writeln!(out, "{}", text.heading("runs"))?;
    for (i, r) in c.runs.iter().enumerate() {
        let role = if i == 0 { " (baseline)" } else { "" };
        let mut line = format!(
            "{}{role}: {} · {} · {}",
            r.name(),
            r.created_at,
            r.source_text(),
            method(r)
        );
        if let Some(target) = &r.target {
            line.push_str(&format!(" · {target}"));
        }
        if let Some(j) = &r.judgement {
            line.push_str(&format!(" · {}", j.describe()));
        }
        writeln!(out, "{}", text.item(&line))?;
    }
    writeln!(out)?;
    let mut header = vec!["test".to_string(), "figure".to_string()];
    header.extend(c.runs.iter().map(|r| r.column()));
    // Made as they are written (twice for a terminal: once to measure the columns), so a
    // comparison of many tests never holds its table.
    let rows = || {
        c.headline_rows().map(|row| {
            let mut cells = vec![c.row_title(&row), row.metric_label().to_string()];
            cells.extend(row.cells.iter().map(|cell| match cell {
                None => "-".to_string(),
                Some(cell) => {
                    use std::fmt::Write as _;
                    let mut text = row.metric.format(cell.value);
                    if let Some(ch) = cell.change_pct {
                        // Writing to a String cannot fail.
                        let _ = write!(text, " {ch:+.1}% ");
                        let _ = write_short_significance(cell.significance, &mut text);
                    }
                    text
                }
            }));
            cells
        })
    };
    let mut right = vec![true; header.len()];
    right[0] = false;
    right[1] = false;
    match text {
        Text::Terminal(width) => {
            super::grid::write_text_rows(&header, &right, rows, out, width)?;
        }
        Text::Markdown => super::grid::write_markdown_rows(&header, &right, rows(), out)?,
    }
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        text.esc(
            "worse/better: significant change (Welch's t-test over the repeats, p < 0.05); \
             n.s.: no significant difference; ?: no repeats, significance unknown"
        )
    )?;
    writeln!(out)?;
    let diffs: Vec<String> = c
        .fingerprint
        .iter()
        .filter(|r| r.differs())
        .map(|r| r.describe())
        .collect();
    if diffs.is_empty() {
        writeln!(out, "{}", text.esc("no configuration differences recorded"))?;
    } else {
        writeln!(out, "{}", text.heading("configuration differences"))?;
        for d in diffs {
            writeln!(out, "{}", text.item(&d))?;
        }
    }
    Ok(())
}

/// `compare --json` (and the figures of `runs show` as a comparison of one run).
pub fn compare_json(c: &Comparison, fail_pct: Option<f64>, out: &mut impl Write) -> io::Result<()> {
    let runs: Vec<Value> = c
        .runs
        .iter()
        .map(|r| {
            json!({
                "id": r.id, "label": r.label, "created_at": r.created_at, "source": r.source,
                "status": r.status, "kind": r.kind, "tool_version": r.tool_version,
                "suite": r.suite.as_ref().map(|s| &s.0),
                "suite_version": r.suite.as_ref().map(|s| s.1),
                "suite_standard": r.standard, "suite_changed": r.changed,
                "target": r.target,
                "judgement": r.judgement.as_ref().map(|j| json!({
                    "status": j.status, "metric": j.metric, "value_ns": j.value_ns,
                    "threshold_ns": j.threshold_ns, "judged_by_compare": j.by_compare,
                })),
                "warnings": r.warnings,
            })
        })
        .collect();
    // Made into JSON one at a time as they are written: all rows as one tree took gigabytes
    // for a run of many tests.
    let row_json = |row: crate::compare::Row| {
        let t = &c.tests[row.test];
        json!({
            "test": t.name, "rw": t.rw, "bs_bytes": t.bs_bytes, "iodepth": t.iodepth,
            "numjobs": t.numjobs, "sync": t.sync_kind, "direction": row.direction, "metric": row.metric.key(),
            "higher_is_better": row.metric.higher_is_better(), "headline": row.headline,
            "cells": row.cells.iter().zip(&c.runs).map(|(cell, run)| cell.as_ref().map(|cell| json!({
                "run": run.id,
                "value": cell.value,
                "samples": cell.samples,
                "change_pct": cell.change_pct,
                "p_value": cell.significance.p_value(),
                "significance": cell.significance.code(),
            }))).collect::<Vec<_>>(),
        })
    };
    let fingerprint: Vec<Value> = c
        .fingerprint
        .iter()
        .map(|r| json!({"key": r.key, "values": r.values, "differs": r.differs()}))
        .collect();
    let mut doc = json!({
        "schema": COMPARE_SCHEMA,
        "verdict": c.verdict(),
        "baseline": c.runs[0].id,
        "tests_in_common": c.common,
        "runs": runs,
        "rows": [],
        "fingerprint": fingerprint,
        "warnings": c.warnings,
    });
    if let Some(pct) = fail_pct {
        let regressions: Vec<Value> = c
            .regressions(pct)
            .iter()
            .map(|r| {
                json!({"test": r.title, "metric": r.key, "run": c.runs[r.run].id,
                       "change_pct": r.change_pct})
            })
            .collect();
        let judged: Vec<Value> = c
            .judgement_regressions()
            .iter()
            .map(|(i, j)| json!({"run": c.runs[*i].id, "judgement": j.status}))
            .collect();
        doc["fail_on_regression_pct"] = json!(pct);
        doc["regressions"] = Value::Array(regressions);
        doc["judgement_regressions"] = Value::Array(judged);
    }
    let doc = doc.as_object().expect("an object");
    super::json::write_streaming(doc, "rows", c.rows(), row_json, out)
}

/// Every figure, one row per test, direction and metric; per run its value, and for the
/// others the change, p-value and significance.
pub fn csv(c: &Comparison, out: &mut impl Write) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    let mut header: Vec<String> = [
        "test",
        "rw",
        "bs_bytes",
        "iodepth",
        "numjobs",
        "direction",
        "metric",
    ]
    .map(String::from)
    .to_vec();
    for (i, r) in c.runs.iter().enumerate() {
        header.push(format!("run{}", r.id));
        if i > 0 {
            for suffix in ["change_pct", "p_value", "significance"] {
                header.push(format!("run{}_{suffix}", r.id));
            }
        }
    }
    w.write_record(&header)?;
    let opt = |v: Option<u64>| v.map(|n| n.to_string()).unwrap_or_default();
    for row in c.rows() {
        let t = &c.tests[row.test];
        let mut rec = vec![
            spreadsheet_text(&t.name),
            spreadsheet_text(t.rw.as_deref().unwrap_or_default()),
            opt(t.bs_bytes),
            opt(t.iodepth),
            opt(t.numjobs),
            row.direction.to_string(),
            row.metric.key().to_string(),
        ];
        for (i, cell) in row.cells.iter().enumerate() {
            rec.push(
                cell.as_ref()
                    .map(|c| c.value.to_string())
                    .unwrap_or_default(),
            );
            if i > 0 {
                let cell = cell.as_ref();
                rec.push(
                    cell.and_then(|c| c.change_pct)
                        .map(|p| format!("{p:.3}"))
                        .unwrap_or_default(),
                );
                rec.push(
                    cell.and_then(|c| c.significance.p_value())
                        .map(|p| format!("{p:.5}"))
                        .unwrap_or_default(),
                );
                rec.push(
                    cell.map(|c| c.significance.code().to_string())
                        .unwrap_or_default(),
                );
            }
        }
        w.write_record(&rec)?;
    }
    judgement_csv(c, &mut w)?;
    w.flush()?;
    Ok(())
}

/// The etcd judgement, the judged figure and the limit as rows of their own, so a
/// spreadsheet shows why one run passed and another failed.
fn judgement_csv<W: Write>(c: &Comparison, w: &mut csv::Writer<W>) -> anyhow::Result<()> {
    let Some(first) = c.runs.iter().find_map(|r| r.judgement.as_ref()) else {
        return Ok(());
    };
    type Field = fn(&crate::compare::Judgement) -> String;
    let fields: [(&str, Field); 3] = [
        ("judgement", |j| spreadsheet_text(&j.status)),
        ("judged_value_ns", |j| j.value_ns.to_string()),
        ("threshold_ns", |j| j.threshold_ns.to_string()),
    ];
    for (key, value) in fields {
        let mut rec = vec![spreadsheet_text(&first.metric)];
        rec.extend(["", "", "", "", "judgement", key].map(String::from));
        for (i, r) in c.runs.iter().enumerate() {
            rec.push(r.judgement.as_ref().map(value).unwrap_or_default());
            if i > 0 {
                rec.extend([String::new(), String::new(), String::new()]);
            }
        }
        w.write_record(&rec)?;
    }
    Ok(())
}

/// Rows grouped by test and direction, with their titles, in order.
pub fn groups(c: &Comparison) -> Vec<(String, Vec<Row>)> {
    let mut out: Vec<(String, Vec<Row>)> = Vec::new();
    for row in c.rows() {
        let title = c.row_title(&row);
        match out.last_mut() {
            Some((t, rows)) if *t == title => rows.push(row),
            _ => out.push((title, vec![row])),
        }
    }
    out
}

/// `[code]: message` of the run's warnings and its tests'.
pub fn run_warnings(run: &StoredRun) -> Vec<String> {
    crate::compare::run_warnings(run)
}

fn tool(run: &StoredRun) -> String {
    match (run.source, &run.tool_version) {
        (RunSource::Fio, Some(v)) => format!("imported from {v}"),
        (RunSource::Import, Some(v)) => format!("imported, tacho {v}"),
        (_, Some(v)) => format!("tacho {v}"),
        (source, None) => source.to_string(),
    }
}

/// What a run measured: its suite and version (marked when non-standard), else a disk run's
/// own test, else its kind.
fn method(r: &RunHead) -> String {
    match (r.suite_text(), r.kind) {
        (Some(suite), _) => format!("suite {suite}"),
        (None, RunKind::Disk) => "custom test".into(),
        (None, RunKind::Time) => "timed commands".into(),
        (None, kind) => kind.to_string(),
    }
}

fn short_label(m: Metric, kind: RunKind) -> &'static str {
    match m {
        // A load step's achieved rate is stored as its IOPS.
        Metric::Iops if kind == RunKind::Load => "req/s",
        Metric::Iops => "IOPS",
        Metric::Bandwidth => "bandwidth",
        Metric::OpsPerS => "ops/s",
        Metric::LatMean => "mean",
        Metric::LatP50 => "p50",
        Metric::LatP90 => "p90",
        Metric::LatP99 => "p99",
        Metric::LatP99_9 => "p99.9",
        Metric::LatP99_99 => "p99.99",
        Metric::LatMax => "max",
    }
}

/// A cell's significance in a few words, written after its change.
fn write_short_significance(s: Significance, out: &mut impl std::fmt::Write) -> std::fmt::Result {
    match s {
        Significance::Worse { p } => write!(out, "worse ({})", format_p(p)),
        Significance::Better { p } => write!(out, "better ({})", format_p(p)),
        Significance::NoDifference { .. } => out.write_str("n.s."),
        Significance::NoRepeats => out.write_str("?"),
        Significance::Baseline | Significance::NoBaseline => Ok(()),
    }
}
