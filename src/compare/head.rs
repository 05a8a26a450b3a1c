//! The runs of a comparison as their columns: names, suite and method, the etcd judgement
//! and the warnings each run recorded, read from the stored document.

use crate::store::StoredRun;
use crate::store::stored::{ExtraView, Field, TargetView, WarningView, view};
use crate::store::{RunKind, RunSource, RunStatus};
use crate::text::{SHOWN_CHARS, cut};
use crate::units::format_latency_ns;
use serde_json::Value;

/// A run as a column of the comparison.
#[derive(Debug, Clone)]
pub struct RunHead {
    /// The run's id in the store.
    pub id: i64,
    /// The label, or `run N`.
    pub title: String,
    /// The run's `--label`, if given.
    pub label: Option<String>,
    /// When the run happened, as RFC 3339 UTC.
    pub created_at: String,
    /// Measured here, or imported from a tacho document or from fio.
    pub source: RunSource,
    /// Running, finished, interrupted, failed or abandoned.
    pub status: RunStatus,
    /// What was benchmarked.
    pub kind: RunKind,
    /// The suite's name and version; `None` for a custom test or a non-disk run.
    pub suite: Option<(String, i64)>,
    /// False when options changed the suite's method (`None`: no suite, or not recorded).
    pub standard: Option<bool>,
    /// What changed the method, when recorded (`runtime 1s`).
    pub changed: Vec<String>,
    /// The version that wrote the run, when it says.
    pub tool_version: Option<String>,
    /// The etcd suite's pass/fail judgement.
    pub judgement: Option<Judgement>,
    /// `[code]: message` of the run's warnings and its tests'.
    pub warnings: Vec<String>,
    /// What was benchmarked (the target's path), when recorded.
    pub target: Option<String>,
}

impl RunHead {
    /// `run 3`, or `run 3 (label)`: each run named once (a long label cut).
    pub fn name(&self) -> String {
        match &self.label {
            Some(l) => format!("run {} ({})", self.id, cut(l, SHOWN_CHARS)),
            None => format!("run {}", self.id),
        }
    }

    /// Where the run came from, by command: `bench disk`, `time`, `fio`, `import`.
    pub fn source_text(&self) -> String {
        source_text(self.source, self.kind)
    }

    /// A column header: `#3 label`, or `run 3` when unlabelled.
    pub fn column(&self) -> String {
        match &self.label {
            Some(l) => format!("#{} {}", self.id, cut(l, SHOWN_CHARS)),
            None => format!("run {}", self.id),
        }
    }

    /// The suite and its version, marked when its method was changed:
    /// `quick v2 (non-standard: runtime 1s)`.
    pub fn suite_text(&self) -> Option<String> {
        let (name, version) = self.suite.as_ref()?;
        Some(suite_text(name, *version, self.standard, &self.changed))
    }
}

/// Where a run came from, by command: `bench disk`, `time`, `fio`, `import`.
pub fn source_text(source: RunSource, kind: RunKind) -> String {
    match (source, kind) {
        (
            RunSource::Bench,
            RunKind::Time
            | RunKind::Check
            | RunKind::Snapshot
            | RunKind::Experiment
            | RunKind::Load,
        ) => kind.to_string(),
        (RunSource::Bench, kind) => format!("bench {kind}"),
        (source, _) => source.to_string(),
    }
}

/// `quick v2`, or `quick v2 (non-standard: runtime 1s)` when options changed its method.
pub fn suite_text(name: &str, version: i64, standard: Option<bool>, changed: &[String]) -> String {
    match (standard, changed) {
        (Some(false), []) => format!("{name} v{version} (non-standard)"),
        (Some(false), c) => format!("{name} v{version} (non-standard: {})", c.join(", ")),
        _ => format!("{name} v{version}"),
    }
}

/// A pass/fail judgement against a threshold, as the run recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// `pass`, `marginal` or `fail`.
    pub status: String,
    /// What was judged (`fdatasync p99`).
    pub metric: String,
    /// The measured value, in nanoseconds.
    pub value_ns: f64,
    /// The threshold, in nanoseconds.
    pub threshold_ns: f64,
    /// Judged by the comparison against another run's limit: the run recorded no judgement
    /// (fio's, say) but measured the same figure.
    pub by_compare: bool,
}

impl Judgement {
    fn of(extra: &ExtraView) -> Option<Judgement> {
        let j = extra.judgement.get()?;
        Some(Judgement {
            status: j.status.get()?.clone(),
            metric: j.metric.get()?.clone(),
            value_ns: *j.value_ns.get()?,
            threshold_ns: *j.threshold_ns.get()?,
            by_compare: false,
        })
    }

    /// `FAIL: fdatasync p99 189µs, limit 1.00µs`, as the live run judged (or the comparison,
    /// which says so).
    pub fn describe(&self) -> String {
        format!(
            "{}: {} {}, limit {}{}",
            self.status.to_uppercase(),
            self.metric,
            format_latency_ns(self.value_ns),
            format_latency_ns(self.threshold_ns),
            if self.by_compare {
                " (judged here: the run recorded no judgement)"
            } else {
                ""
            }
        )
    }
}

/// Gives a run that recorded no judgement the first judged run's, on the same figure (the
/// fdatasync p99 of the test the judged run was judged on), so an etcd check compares with
/// fio's run of the same job: `PASS → FAIL`, not `PASS → none`.
/// The first run with a judgement.
pub(super) fn judged(runs: &[RunHead]) -> Option<usize> {
    runs.iter().position(|r| r.judgement.is_some())
}

/// Judges the runs without a judgement by `row` (the first flush p99 of the judged run) at
/// the judged run's limit.
pub(super) fn judge_unjudged(runs: &mut [RunHead], row: &super::Row) {
    let Some(limit) = runs
        .iter()
        .find_map(|r| Some(r.judgement.as_ref()?.threshold_ns))
    else {
        return;
    };
    for (run, cell) in runs.iter_mut().zip(&row.cells) {
        if let (None, Some(cell)) = (&run.judgement, cell) {
            run.judgement = Some(Judgement {
                status: crate::bench::verdict::etcd_status(cell.value, limit)
                    .as_str()
                    .to_string(),
                metric: "fdatasync p99".to_string(),
                value_ns: cell.value,
                threshold_ns: limit,
                by_compare: true,
            });
        }
    }
}

/// The kinds of warning a run's tests recorded, each with its first sentence and the other
/// tests it concerns, gathered test by test so no test is held to read them.
#[derive(Debug, Default)]
pub struct TestWarnings(Vec<(String, String, Vec<String>)>);

impl TestWarnings {
    /// What the tests of a loaded run recorded.
    pub fn of(run: &StoredRun) -> TestWarnings {
        let mut out = TestWarnings::default();
        for t in &run.tests {
            let test: crate::store::stored::TestWarningsView = view(&t.json);
            out.add(&t.name, &test.warnings);
        }
        out
    }

    /// One more test's warnings.
    pub(crate) fn add(&mut self, name: &str, warnings: &Field<Vec<Field<WarningView>>>) {
        for (code, message) in of(warnings) {
            match self.0.iter_mut().find(|(c, _, _)| *c == code) {
                Some((_, _, others)) => {
                    if !others.iter().any(|o| o == name) {
                        others.push(name.to_string());
                    }
                }
                None => self.0.push((code, message, Vec::new())),
            }
        }
    }
}

/// (code, message) of each warning in a list (`?` for a code not recorded).
fn of(ws: &Field<Vec<Field<WarningView>>>) -> Vec<(String, String)> {
    let none = WarningView::default();
    ws.get()
        .map(|ws| {
            ws.iter()
                .map(|w| {
                    let w = w.get().unwrap_or(&none);
                    (
                        w.code.get().map_or("?", String::as_str).to_string(),
                        w.message.get().map_or("", String::as_str).to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn head(run: &StoredRun, tests: &TestWarnings) -> RunHead {
    let extra: ExtraView = view(&Value::Object(run.extra.clone()));
    let target: TargetView = view(&run.target);
    RunHead {
        id: run.id,
        title: run.title(),
        label: run.label.clone(),
        created_at: run.created_at.clone(),
        source: run.source,
        status: run.status,
        kind: run.kind,
        suite: run.suite.clone(),
        standard: run.standard(),
        changed: crate::store::suite_changes(&run.extra),
        tool_version: run.tool_version.clone(),
        judgement: Judgement::of(&extra),
        warnings: warnings_of(run, tests),
        target: target
            .path
            .get()
            .map(|p| p.0.clone())
            .filter(|p| !p.is_empty()),
    }
}

/// `[code]: message` of the run's warnings, then one line per kind of its tests' warnings:
/// the first test's sentence and the other tests it concerns (thirteen noisy tests make one
/// line, not thirteen above the figures).
pub fn run_warnings(run: &StoredRun) -> Vec<String> {
    warnings_of(run, &TestWarnings::of(run))
}

/// As [`run_warnings`], with the tests' warnings gathered as they were read.
fn warnings_of(run: &StoredRun, tests: &TestWarnings) -> Vec<String> {
    let extra: ExtraView = view(&Value::Object(run.extra.clone()));
    let mut out: Vec<String> = Vec::new();
    for (code, message) in of(&extra.warnings) {
        let line = format!("[{code}]: {message}");
        if !out.contains(&line) {
            out.push(line);
        }
    }
    // Per kind, in the order first seen: the first sentence and the other tests' names.
    for (code, message, others) in &tests.0 {
        let mut line = format!("[{code}]: {message}");
        if !others.is_empty() {
            line.push_str(&format!(" (also: {})", others.join(", ")));
        }
        out.push(line);
    }
    out
}
