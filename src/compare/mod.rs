//! Side-by-side comparison of stored runs: tests matched across runs, each figure's change
//! against the baseline and whether the repeats make it significant, and the fingerprint
//! entries that differ (usually the explanation).
//!
//! Tests are matched by what they do (pattern, block size, queue depth, jobs, mix, flushes),
//! not by name, so a fio job and a tacho test of the same work line up.

pub mod drift;
pub mod fingerprint;
pub mod fleet;
pub mod group;
mod head;

use head::head;
pub use head::{Judgement, RunHead, run_warnings, source_text, suite_text};

use crate::store::StoredRun;
use crate::store::figures::Figures;
use crate::store::stored::{Field, WorkView, view};
use crate::units::{format_bandwidth, format_count, format_latency_ns};
use fingerprint::FingerprintRow;
use serde_json::Value;
use std::collections::HashMap;

/// A figure that can be compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Metric {
    /// I/Os per second.
    #[default]
    Iops,
    /// Bytes per second.
    Bandwidth,
    /// A CPU kernel's operations per second.
    OpsPerS,
    /// Mean latency (for timed commands: mean run time).
    LatMean,
    /// Median latency.
    LatP50,
    /// 90th-percentile latency.
    LatP90,
    /// 99th-percentile latency.
    LatP99,
    /// 99.9th-percentile latency.
    LatP99_9,
    /// 99.99th-percentile latency.
    LatP99_99,
    /// Highest latency.
    LatMax,
}

impl Metric {
    /// Every metric, in the order rows are shown.
    pub const ALL: [Metric; 10] = [
        Metric::Iops,
        Metric::Bandwidth,
        Metric::OpsPerS,
        Metric::LatMean,
        Metric::LatP50,
        Metric::LatP90,
        Metric::LatP99,
        Metric::LatP99_9,
        Metric::LatP99_99,
        Metric::LatMax,
    ];

    /// The latency percentiles drawn in percentile charts, with their axis labels.
    pub const PERCENTILES: [(Metric, &'static str); 5] = [
        (Metric::LatP50, "p50"),
        (Metric::LatP90, "p90"),
        (Metric::LatP99, "p99"),
        (Metric::LatP99_9, "p99.9"),
        (Metric::LatP99_99, "p99.99"),
    ];

    /// Name in JSON and CSV, with its unit (as the store's columns).
    pub fn key(self) -> &'static str {
        match self {
            Metric::Iops => "iops",
            Metric::Bandwidth => "bw_bytes_per_s",
            Metric::OpsPerS => "ops_per_s",
            Metric::LatMean => "lat_mean_ns",
            Metric::LatP50 => "lat_p50_ns",
            Metric::LatP90 => "lat_p90_ns",
            Metric::LatP99 => "lat_p99_ns",
            Metric::LatP99_9 => "lat_p99_9_ns",
            Metric::LatP99_99 => "lat_p99_99_ns",
            Metric::LatMax => "lat_max_ns",
        }
    }

    /// Name for people.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Iops => "IOPS",
            Metric::Bandwidth => "bandwidth",
            Metric::OpsPerS => "ops/s",
            Metric::LatMean => "mean latency",
            Metric::LatP50 => "p50 latency",
            Metric::LatP90 => "p90 latency",
            Metric::LatP99 => "p99 latency",
            Metric::LatP99_9 => "p99.9 latency",
            Metric::LatP99_99 => "p99.99 latency",
            Metric::LatMax => "max latency",
        }
    }

    /// True for throughput figures; false for latencies, where lower is better.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::Iops | Metric::Bandwidth | Metric::OpsPerS)
    }

    /// This metric's value in stored figures; `None` when the test did not record it.
    pub fn of(self, f: &Figures) -> Option<f64> {
        match self {
            Metric::Iops => f.iops,
            Metric::Bandwidth => f.bw_bytes_per_s,
            Metric::OpsPerS => f.ops_per_s,
            Metric::LatMean => f.lat_ns[0],
            Metric::LatP50 => f.lat_ns[1],
            Metric::LatP90 => f.lat_ns[2],
            Metric::LatP99 => f.lat_ns[3],
            Metric::LatP99_9 => f.lat_ns[4],
            Metric::LatP99_99 => f.lat_ns[5],
            Metric::LatMax => f.lat_ns[6],
        }
    }

    /// The value with its unit, for tables (a count, MiB/s or GiB/s, or a latency).
    pub fn format(self, v: f64) -> String {
        match self {
            Metric::Iops | Metric::OpsPerS => format_count(v),
            Metric::Bandwidth => format_bandwidth(v),
            _ => format_latency_ns(v),
        }
    }
}

/// What a matched test does.
#[derive(Debug, Clone)]
pub struct TestInfo {
    /// The test's name; different names in different runs are joined with ` = `.
    pub name: String,
    /// Access pattern (`randread`, …), when recorded.
    pub rw: Option<String>,
    /// Block size in bytes, when recorded.
    pub bs_bytes: Option<u64>,
    /// I/Os in flight per job, when recorded.
    pub iodepth: Option<u64>,
    /// Parallel jobs, when recorded.
    pub numjobs: Option<u64>,
    /// `fsync` or `fdatasync` when the test flushed.
    pub sync_kind: Option<String>,
    /// Flushes each run's test made, in [`Comparison::runs`] order.
    pub sync_counts: Vec<Option<u64>>,
    /// Each run's bandwidth second by second (its first repeat) and where it fell (the
    /// sustained suite's cliff), in [`Comparison::runs`] order.
    pub per_second: Vec<Option<PerSecond>>,
}

/// A test's bandwidth second by second (its first repeat) and its cliff, when it fell.
#[derive(Debug, Clone, PartialEq)]
pub struct PerSecond {
    /// Bytes per second in each second, from the first; a second not recorded is `None`.
    pub bytes_per_s: Vec<Option<f64>>,
    /// Where the rate fell.
    pub cliff: Option<CliffMark>,
}

/// A recorded cliff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CliffMark {
    /// Seconds from the start of the test to the fall.
    pub at_s: f64,
    /// Bytes written before it.
    pub bytes_before: u64,
    /// Mean rates before and after, bytes per second.
    pub before_bytes_per_s: f64,
    pub after_bytes_per_s: f64,
    /// After as a share of before, in percent.
    pub after_pct: f64,
}

/// Seconds of a timeline drawn at most: a longer one is cut (a sustained test stops within an
/// hour).
const PER_SECOND_MAX: usize = 4 * 3600;

/// The per-second figures of a stored test and its cliff, when it recorded them.
fn per_second(json: &Value) -> Option<PerSecond> {
    let v: crate::store::stored::PerSecondView = view(json);
    let cliff = match &v.cliff {
        Field::Absent | Field::Null => None,
        // A cliff recorded in part is not drawn; the timeline still is.
        Field::Set(c) => (|| {
            Some(CliffMark {
                at_s: *c.at_s.get()?,
                bytes_before: *c.bytes_before.get()?,
                before_bytes_per_s: *c.before_bytes_per_s.get()?,
                after_bytes_per_s: *c.after_bytes_per_s.get()?,
                after_pct: *c.after_pct.get()?,
            })
        })(),
    };
    let mut bytes_per_s: Vec<Option<f64>> = Vec::new();
    for p in v.timeline.get()? {
        if p.repeat.get() != Some(&1) {
            continue;
        }
        let Some(&t) = p.t_s.get() else { continue };
        let t = t as usize;
        if t == 0 || t > PER_SECOND_MAX {
            continue;
        }
        if bytes_per_s.len() < t {
            bytes_per_s.resize(t, None);
        }
        bytes_per_s[t - 1] = p.bw_bytes_per_s.get().copied().filter(|b| b.is_finite());
    }
    (!bytes_per_s.is_empty()).then_some(PerSecond { bytes_per_s, cliff })
}

/// What Welch's t-test says about one cell against the baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Significance {
    /// This is the baseline's own cell.
    Baseline,
    /// The baseline lacks this figure.
    NoBaseline,
    /// One side has a single sample: Welch's test needs two.
    NoRepeats,
    /// Different (p below `stats::ALPHA`), in the better direction.
    Better {
        /// The test's p-value.
        p: f64,
    },
    /// Different (p below `stats::ALPHA`), in the worse direction.
    Worse {
        /// The test's p-value.
        p: f64,
    },
    /// Not distinguishable from the baseline (p at or above `stats::ALPHA`).
    NoDifference {
        /// The test's p-value.
        p: f64,
    },
}

impl Significance {
    /// Stable word for JSON and CSV.
    pub fn code(self) -> &'static str {
        match self {
            Significance::Baseline => "baseline",
            Significance::NoBaseline => "no-baseline",
            Significance::NoRepeats => "unknown",
            Significance::Better { .. } => "better",
            Significance::Worse { .. } => "worse",
            Significance::NoDifference { .. } => "no-difference",
        }
    }

    /// The p-value of a cell that was tested; `None` for the other kinds.
    pub fn p_value(self) -> Option<f64> {
        match self {
            Significance::Better { p }
            | Significance::Worse { p }
            | Significance::NoDifference { p } => Some(p),
            _ => None,
        }
    }

    /// Words for people.
    pub fn describe(self) -> String {
        match self {
            Significance::Baseline => "baseline".into(),
            Significance::NoBaseline => "not in baseline".into(),
            Significance::NoRepeats => "no repeats: significance unknown".into(),
            Significance::Better { p } => format!("significantly better ({})", format_p(p)),
            Significance::Worse { p } => format!("significantly worse ({})", format_p(p)),
            Significance::NoDifference { p } => {
                format!("no significant difference ({})", format_p(p))
            }
        }
    }
}

/// `p=0.012`, or `p<0.001` rather than a misleading `p=0.000`.
pub fn format_p(p: f64) -> String {
    if p < 0.001 {
        "p<0.001".into()
    } else {
        format!("p={p:.3}")
    }
}

/// One run's figure in a row.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The figure the test reported.
    pub value: f64,
    /// The repeats' figures (the reported figure alone when the test was not repeated).
    pub samples: Vec<f64>,
    /// Change against the baseline in percent; `None` in the baseline's own column.
    pub change_pct: Option<f64>,
    /// Whether the change is beyond noise, and in which direction.
    pub significance: Significance,
}

impl Row {
    /// The metric's name for people; a timed command's latencies are its run times, a load
    /// step's throughput its requests a second.
    pub fn metric_label(&self) -> &'static str {
        match (self.direction, self.metric) {
            // Load runs alone store a rate under `run` (achieved requests a second, kept in the
            // IOPS column: store::kinds::load_tests); CPU runs' `run` is ops/s.
            ("run", Metric::Iops) => "req/s",
            ("wall", Metric::LatMean) => "mean time",
            ("wall", Metric::LatP50) => "median time",
            ("wall", Metric::LatMax) => "max time",
            ("cpu_time", Metric::LatMean) => "mean CPU time",
            ("sync", Metric::LatMean) => "mean flush latency",
            ("sync", Metric::LatP50) => "p50 flush latency",
            ("sync", Metric::LatP90) => "p90 flush latency",
            ("sync", Metric::LatP99) => "p99 flush latency",
            ("sync", Metric::LatP99_9) => "p99.9 flush latency",
            ("sync", Metric::LatP99_99) => "p99.99 flush latency",
            ("sync", Metric::LatMax) => "max flush latency",
            _ => self.metric.label(),
        }
    }
}

/// One metric of one direction of one test, across runs.
#[derive(Debug, Clone)]
pub struct Row {
    /// Index into [`Comparison::tests`]; [`Comparison::rows`] are in this order.
    pub test: usize,
    /// The direction (`read`, `write`, `sync`, `copy`, `run`, `wall`).
    pub direction: &'static str,
    /// Which figure.
    pub metric: Metric,
    /// Shown in tables and checked by `--fail-on-regression`: the test's throughput figure
    /// and its p99 latency (the mean where no p99 exists: memory latency, timed commands).
    pub headline: bool,
    /// One per run, in [`Comparison::runs`] order; `None` where the run lacks the figure.
    pub cells: Vec<Option<Cell>>,
}

/// Stored runs matched test by test, each figure against the baseline's.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The baseline first.
    pub runs: Vec<RunHead>,
    /// The tests every row refers to, matched across runs.
    pub tests: Vec<TestInfo>,
    /// The configuration of each run side by side (host, kernel, tunables, …).
    pub fingerprint: Vec<FingerprintRow>,
    /// Reasons to doubt the comparison (different suite versions, missing tests, ...).
    pub warnings: Vec<String>,
    /// Tests the baseline shares with another run; 0 means nothing was compared.
    pub common: usize,
    /// Per test, what its rows are judged by.
    meta: Vec<TestMeta>,
    /// Each test's figures in each run: the rows are made from them as they are written
    /// ([`Comparison::rows`]), so no more than a test's rows are held at a time.
    held: Held,
    /// The verdict's counts.
    tally: Tally,
    /// The p-values of the headline rows' cells, in the order [`Comparison::headline_rows`]
    /// judges them, and where each test's begin: the verdict and the table's two passes
    /// take the headline rows, and Welch's test is worked out once a cell, not three times.
    headline_p: Vec<Option<f64>>,
    headline_p_at: Vec<usize>,
}

/// At most this many (test, run) cells are compared: a comparison keeps each test's figures
/// in each run (about 0.6 KB a cell; its rows are made as they are written), so a run of
/// millions of tests (or a thousand hosts of unlike tests) would otherwise take gigabytes.
/// Two runs of 250,000 tests fit; a real suite is tens of tests. `compare --by host` keeps
/// its own, lower bound ([`FLEET_CELLS`]).
pub const COMPARED_CELLS: usize = 500_000;

/// Missing-test warnings listed by name; more are counted.
const MISSING_LISTED: usize = 20;

/// How many tests of each of `runs` runs are compared (see [`COMPARED_CELLS`]); the loaders
/// read no more than this.
pub fn tests_per_run(runs: usize) -> usize {
    tests_per_run_of(compared_cells(), runs)
}

/// How many tests of each of `runs` runs fit in `cells` (test, run) cells.
pub fn tests_per_run_of(cells: usize, runs: usize) -> usize {
    (cells / runs.max(1)).max(1)
}

/// `compare --by host` holds its rows (it ranks each host's figures against its peers'), so it
/// keeps the bound every comparison had before rows were made as they are written.
pub const FLEET_CELLS: usize = 100_000;

/// The bound in force for `compare --by host`: [`FLEET_CELLS`], or less where
/// [`compared_cells`] is less.
pub fn fleet_cells() -> usize {
    compared_cells().min(FLEET_CELLS)
}

/// The bound in force: [`COMPARED_CELLS`]. A debug build (the one the integration tests run)
/// reads `TACHO_TEST_COMPARED_CELLS` instead when it is set, so the test of the bound need
/// not store hundreds of thousands of tests; a release build never reads it.
pub fn compared_cells() -> usize {
    #[cfg(debug_assertions)]
    if let Some(n) = std::env::var("TACHO_TEST_COMPARED_CELLS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    COMPARED_CELLS
}

/// Compares `runs`; the first is the baseline. Only the first [`tests_per_run`] matched
/// tests are compared (a warning says so when there were more).
/// Why `runs` must not be compared unasked: some preconditioned their region to steady state
/// first (`bench disk --precondition`) and others ran on it as they found it, and a used SSD
/// and a fresh one differ by multiples. `None` when they all did the same.
pub fn precondition_mix(runs: &[StoredRun]) -> Option<String> {
    use crate::store::stored::{ExtraView, view};
    let preconditioned = |run: &StoredRun| {
        let extra: ExtraView = view(&serde_json::Value::Object(run.extra.clone()));
        extra.precondition.get().is_some()
    };
    let with = runs.iter().find(|r| preconditioned(r))?;
    let without = runs.iter().find(|r| !preconditioned(r))?;
    Some(format!(
        "run {} was preconditioned to steady state (--precondition) and run {} was not: a used \
         SSD and a fresh one differ by multiples, so their figures do not compare; precondition \
         both, or add --force to compare them anyway",
        with.id, without.id
    ))
}

pub fn compare(runs: &[StoredRun]) -> Comparison {
    compare_within(runs, compared_cells())
}

/// As [`compare`], comparing at most `cells` (test, run) cells.
pub fn compare_within(runs: &[StoredRun], cells: usize) -> Comparison {
    let mut b = Builder::within(runs.len(), cells);
    for (r, run) in runs.iter().enumerate() {
        for t in &run.tests {
            b.add(
                r,
                t.name.clone(),
                Viewed {
                    work: view(&t.json),
                    method: view(&t.json),
                    warnings: view(&t.json),
                    per_second: per_second(&t.json),
                },
                &t.figures,
            );
        }
    }
    b.finish(runs)
}

/// What a comparison reads of one stored test besides its figures.
pub(crate) struct Viewed {
    work: WorkView,
    method: crate::store::stored::TestView,
    warnings: crate::store::stored::TestWarningsView,
    per_second: Option<PerSecond>,
}

/// A comparison built test by test as the stores read them (each run in turn, the baseline
/// first), keeping of each test only what its rows are made from: its figures, compact.
pub struct Builder {
    /// How many runs are compared.
    runs: usize,
    /// At most this many (test, run) cells ([`compared_cells`]) …
    cells: usize,
    /// … so at most this many matched tests ([`tests_per_run`]).
    cap: usize,
    /// Matched tests by what they do ([`match_key`]: `randread bs=4096 …`).
    index: HashMap<String, Work>,
    /// The key of the test being added, written here so that only a new key is allocated.
    key: String,
    tests: Vec<TestInfo>,
    meta: Vec<TestMeta>,
    /// The other names a test has in later runs, joined into its name at the end.
    names: Vec<Vec<String>>,
    /// Each test's figures in each run.
    held: Held,
    /// Some tests were left out ([`COMPARED_CELLS`]).
    cut: bool,
    methods: Vec<fingerprint::TestsSeen>,
    test_warnings: Vec<head::TestWarnings>,
}

impl Builder {
    /// A comparison of `runs` runs, their tests to come.
    pub fn new(runs: usize) -> Builder {
        Builder::within(runs, compared_cells())
    }

    /// As [`Builder::new`], comparing at most `cells` (test, run) cells.
    pub fn within(runs: usize, cells: usize) -> Builder {
        Builder {
            runs,
            cells,
            cap: tests_per_run_of(cells, runs),
            index: HashMap::new(),
            key: String::new(),
            tests: Vec::new(),
            meta: Vec::new(),
            names: Vec::new(),
            held: Held::new(runs),
            cut: false,
            methods: (0..runs).map(|_| Default::default()).collect(),
            test_warnings: (0..runs).map(|_| Default::default()).collect(),
        }
    }

    /// A test of run number `run` (in the order given to [`Builder::finish`]) as the store
    /// holds it: its name, its JSON text and its figures. A run's tests come in their order,
    /// and the runs one after another.
    pub fn add_text(&mut self, run: usize, name: String, json: &str, figures: &[Figures]) {
        let (work, method, warnings) =
            crate::store::stored::view_text::<crate::store::stored::CompareTestView>(json).split();
        let viewed = Viewed {
            work,
            method,
            warnings,
            per_second: None,
        };
        self.add(run, name, viewed, figures);
    }

    fn add(&mut self, run: usize, name: String, viewed: Viewed, figures: &[Figures]) {
        if run >= self.runs {
            return;
        }
        self.methods[run].add(&viewed.method, figures);
        self.test_warnings[run].add(&name, &viewed.warnings.warnings);
        let w = &viewed.work;
        match_key(&mut self.key, w, &name);
        // One look-up for a work seen before; a new one is kept under a copy of its key.
        let work = match self.index.get_mut(self.key.as_str()) {
            Some(work) => work,
            None => self.index.entry(self.key.clone()).or_insert(Work {
                tests: Vec::new(),
                run,
                seen: 0,
            }),
        };
        // The same work twice in one run pairs with the same occurrence in the others.
        if work.run != run {
            work.run = run;
            work.seen = 0;
        }
        let n = work.seen;
        work.seen += 1;
        let i = match work.tests.get(n) {
            Some(&i) => i,
            None if self.tests.len() >= self.cap => {
                self.cut = true;
                return;
            }
            None => {
                let i = self.tests.len();
                work.tests.push(i);
                self.tests.push(TestInfo {
                    name: String::new(),
                    rw: w.rw.get().cloned(),
                    bs_bytes: w.bs_bytes.get().copied(),
                    iodepth: w.iodepth.get().copied(),
                    numjobs: w.numjobs.get().copied(),
                    sync_kind: w.sync_every.get().and_then(|s| s.kind.get().cloned()),
                    sync_counts: vec![None; self.runs],
                    per_second: vec![None; self.runs],
                });
                self.meta.push(TestMeta::default());
                self.names.push(Vec::new());
                self.held.add_test();
                i
            }
        };
        let info = &mut self.tests[i];
        info.sync_counts[run] = w.sync.get().and_then(|s| s.count.get().copied());
        info.per_second[run] = viewed.per_second;
        let meta = &mut self.meta[i];
        if meta.bs_bytes.is_none() {
            meta.bs_bytes = w.bs_bytes.get().copied();
        }
        meta.ops |= figures.iter().any(|f| f.ops_per_s.is_some());
        meta.iops |= figures.iter().any(|f| f.iops.is_some());
        if !self.names[i].contains(&name) {
            self.names[i].push(name);
        }
        self.held.set(i, run, figures.iter().filter_map(Fig::of));
    }

    /// The comparison of `runs` (the baseline first, their tests added), judged.
    pub fn finish(mut self, runs: &[StoredRun]) -> Comparison {
        for (info, names) in self.tests.iter_mut().zip(std::mem::take(&mut self.names)) {
            info.name = names.join(" = ");
        }
        for (t, meta) in self.meta.iter_mut().enumerate() {
            meta.throughput = if meta.ops {
                Metric::OpsPerS
            } else if meta.bs_bytes.is_some_and(|b| b >= 128 << 10) || !meta.iops {
                Metric::Bandwidth
            } else {
                Metric::Iops
            };
            // Mixed: rows (reported figures, sample 0) of more than one direction, so each
            // row's title names its own.
            let mut shown =
                crate::store::figures::DIRECTIONS
                    .iter()
                    .enumerate()
                    .filter(|(d, _)| {
                        self.held
                            .of(t)
                            .flatten()
                            .flat_map(|figs| figs.iter())
                            .any(|f| usize::from(f.direction) == *d && f.sample == 0 && f.set != 0)
                    });
            meta.mixed = shown.next().is_some() && shown.next().is_some();
        }
        let heads: Vec<RunHead> = runs
            .iter()
            .zip(&self.test_warnings)
            .map(|(r, w)| head(r, w))
            .collect();
        let mut c = Comparison {
            runs: heads,
            tests: self.tests,
            fingerprint: fingerprint::table(runs, &self.methods),
            warnings: Vec::new(),
            common: 0,
            meta: self.meta,
            held: self.held,
            tally: Tally::default(),
            headline_p: Vec::new(),
            headline_p_at: Vec::new(),
        };
        c.common = (0..c.tests.len())
            .filter(|&t| {
                let mut per_run = c.held.of(t);
                per_run.next().flatten().is_some() && per_run.any(|f| f.is_some())
            })
            .count();
        c.warnings = warnings(runs, &c, self.cut.then_some((self.cap, self.cells)));
        // The first flush p99 the judged run has, for the runs without a judgement.
        let judged = head::judged(&c.runs).and_then(|j| {
            c.rows().find(|r| {
                r.direction == "sync"
                    && r.metric == Metric::LatP99
                    && r.cells.get(j).is_some_and(Option::is_some)
            })
        });
        if let Some(row) = judged {
            head::judge_unjudged(&mut c.runs, &row);
        }
        let (mut p, mut at) = (Vec::new(), Vec::with_capacity(c.tests.len() + 1));
        for t in 0..c.tests.len() {
            at.push(p.len());
            c.rows_with(t, true, &mut |_, a, b| {
                let found = crate::stats::welch_p(a, b);
                p.push(found);
                found
            });
        }
        at.push(p.len());
        (c.headline_p, c.headline_p_at) = (p, at);
        c.tally = Tally::of(&c);
        c
    }
}

/// The warnings of a comparison: suite versions, tests left out or missing, nothing in
/// common, unfinished runs and runs without a fingerprint.
/// `cut`: tests were left out, with how many tests of each run and cells in all were kept.
fn warnings(runs: &[StoredRun], c: &Comparison, cut: Option<(usize, usize)>) -> Vec<String> {
    let mut warnings = suite_warnings(runs);
    if let Some((cap, cells)) = cut {
        warnings.push(format!(
            "compared only the first {cap} tests: a comparison of {} runs holds at most \
             {} tests in all (compare fewer runs, or see every test of a run with \
             tacho runs show ID)",
            runs.len(),
            cells
        ));
    }
    let mut missing_tests = 0;
    for (t, info) in c.tests.iter().enumerate() {
        let missing: Vec<String> = runs
            .iter()
            .zip(c.held.of(t))
            .filter(|(_, t)| t.is_none())
            .map(|(r, _)| format!("run {}", r.id))
            .collect();
        if !missing.is_empty() && runs.len() > 1 {
            missing_tests += 1;
            if missing_tests <= MISSING_LISTED {
                warnings.push(format!(
                    "test {} is not in {}",
                    info.name,
                    missing.join(", ")
                ));
            }
        }
    }
    if missing_tests > MISSING_LISTED {
        warnings.push(format!(
            "{} more tests are not in every run",
            missing_tests - MISSING_LISTED
        ));
    }
    if runs.len() > 1 && c.common == 0 {
        let others: Vec<String> = runs[1..].iter().map(|r| r.id.to_string()).collect();
        warnings.push(format!(
            "no tests in common: run{} {} share{} no test with the baseline (tests are matched \
             by what they do: pattern, block size, queue depth, jobs, mix, flushes)",
            if others.len() > 1 { "s" } else { "" },
            others.join(", "),
            if others.len() > 1 { "" } else { "s" },
        ));
    }
    for r in runs {
        if r.status != crate::store::RunStatus::Finished {
            warnings.push(format!(
                "run {} is {}: it holds only the tests that finished",
                r.id, r.status
            ));
        }
        if r.host.as_object().is_none_or(|h| h.is_empty()) {
            warnings.push(format!(
                "run {} has no machine fingerprint (imported from {})",
                r.id, r.source
            ));
        }
    }
    warnings
}

/// What a comparison keeps of a test besides its [`TestInfo`].
#[derive(Debug, Clone, Default)]
struct TestMeta {
    /// The first block size recorded, in run order.
    bs_bytes: Option<u64>,
    /// Some run recorded operations a second (a CPU kernel) or IOPS.
    ops: bool,
    iops: bool,
    /// The figure its throughput is judged by (see [`Builder::finish`]).
    throughput: Metric,
    /// Its rows are of more than one direction.
    mixed: bool,
}

/// Each test's figures in each run, tests × runs, in one block: a comparison of 200,000 tests
/// holds 1.6 million, and a block of its own for each (test, run) cost a malloc and a free
/// apiece.
#[derive(Debug, Clone)]
struct Held {
    runs: usize,
    figs: Vec<Fig>,
    /// Per test and run, where its figures are in `figs`; `None` where the run lacks the test.
    cells: Vec<Option<(usize, usize)>>,
}

impl Held {
    fn new(runs: usize) -> Held {
        Held {
            runs,
            figs: Vec::new(),
            cells: Vec::new(),
        }
    }

    /// One more test, in no run yet.
    fn add_test(&mut self) {
        self.cells.extend((0..self.runs).map(|_| None));
    }

    /// Test `t`'s figures in run `run`.
    fn set(&mut self, t: usize, run: usize, figs: impl Iterator<Item = Fig>) {
        let start = self.figs.len();
        self.figs.extend(figs);
        self.cells[t * self.runs + run] = Some((start, self.figs.len()));
    }

    /// Test `t`'s figures in each run, in run order.
    fn of(&self, t: usize) -> impl Iterator<Item = Option<&[Fig]>> + Clone {
        self.cells[t * self.runs..(t + 1) * self.runs]
            .iter()
            .map(|c| c.map(|(start, end)| &self.figs[start..end]))
    }
}

/// A sample's figures of one direction as a comparison keeps them: 88 bytes (the store's
/// [`Figures`] takes 184), as a comparison of 200,000 tests holds 1.6 million.
#[derive(Debug, Clone)]
struct Fig {
    /// 0 for the figure the test reported, 1..N for each repeat.
    sample: u32,
    /// Index into `DIRECTIONS`.
    direction: u8,
    /// Bit `m` set when metric number `m` (in [`Metric::ALL`] order) was recorded.
    set: u16,
    values: [f64; 10],
}

impl Fig {
    fn of(f: &Figures) -> Option<Fig> {
        let direction = crate::store::figures::DIRECTIONS
            .iter()
            .position(|d| *d == f.direction)?;
        let mut fig = Fig {
            sample: f.sample,
            direction: u8::try_from(direction).ok()?,
            set: 0,
            values: [0.0; 10],
        };
        for (i, m) in Metric::ALL.into_iter().enumerate() {
            if let Some(v) = m.of(f) {
                fig.set |= 1 << i;
                fig.values[i] = v;
            }
        }
        Some(fig)
    }

    fn get(&self, m: Metric) -> Option<f64> {
        let i = m as usize;
        (self.set >> i & 1 == 1).then_some(self.values[i])
    }
}

/// The verdict's counts of headline cells and its largest change, gathered in one pass.
#[derive(Debug, Clone, Default)]
struct Tally {
    worse: usize,
    better: usize,
    same: usize,
    unknown: usize,
    /// Row title, figure, change and run index of the largest change.
    largest: Option<(String, &'static str, f64, usize)>,
}

impl Tally {
    fn of(c: &Comparison) -> Tally {
        let mut t = Tally::default();
        for row in c.headline_rows() {
            for (i, cell) in row.cells.iter().enumerate().skip(1) {
                let Some(cell) = cell else { continue };
                match cell.significance {
                    Significance::Worse { .. } => t.worse += 1,
                    Significance::Better { .. } => t.better += 1,
                    Significance::NoDifference { .. } => t.same += 1,
                    Significance::NoRepeats => t.unknown += 1,
                    _ => {}
                }
                let Some(ch) = cell.change_pct else { continue };
                // As `max_by`: the last of equal changes.
                if t.largest
                    .as_ref()
                    .is_none_or(|l| ch.abs().total_cmp(&l.2.abs()).is_ge())
                {
                    t.largest = Some((c.row_title(&row), row.metric_label(), ch, i));
                }
            }
        }
        t
    }
}

impl Comparison {
    /// One row per metric of each direction of each test, in test order, each made and
    /// judged as it is taken.
    pub fn rows(&self) -> impl Iterator<Item = Row> + Clone + '_ {
        (0..self.tests.len()).flat_map(move |t| self.test_rows(t))
    }

    /// The headline rows alone ([`Row::headline`]), made as they are taken: the others are
    /// not judged.
    pub fn headline_rows(&self) -> impl Iterator<Item = Row> + Clone + '_ {
        (0..self.tests.len()).flat_map(move |t| self.rows_of(t, true))
    }

    /// Test `t`'s rows.
    pub fn test_rows(&self, t: usize) -> Vec<Row> {
        self.rows_of(t, false)
    }

    /// Test `t`'s rows, or its headline rows alone.
    fn rows_of(&self, t: usize, headline_only: bool) -> Vec<Row> {
        // Before the p-values are kept (while the comparison is finished), each is worked out.
        let (mut next, end) = match self.headline_p_at.get(t..t + 2) {
            Some(&[first, end]) => (first, end),
            _ => (0, 0),
        };
        self.rows_with(t, headline_only, &mut |headline, a, b| {
            if !headline || next >= end {
                return crate::stats::welch_p(a, b);
            }
            next += 1;
            self.headline_p[next - 1]
        })
    }

    /// [`Comparison::rows_of`], each cell's p-value against the baseline's from `p` (told
    /// whether the row is a headline one, given the baseline's samples and the cell's).
    fn rows_with(&self, t: usize, headline_only: bool, p: &mut RowPValue<'_>) -> Vec<Row> {
        let per_run = self.held.of(t);
        let throughput = self.meta[t].throughput;
        let mut rows = Vec::new();
        for (d, direction) in crate::store::figures::DIRECTIONS.into_iter().enumerate() {
            let d = d as u8;
            let has = |m: Metric| {
                per_run
                    .clone()
                    .flatten()
                    .any(|figs| figs.iter().any(|f| f.direction == d && f.get(m).is_some()))
            };
            if !per_run
                .clone()
                .flatten()
                .any(|figs| figs.iter().any(|f| f.direction == d))
            {
                continue;
            }
            let latency = if has(Metric::LatP99) {
                Metric::LatP99
            } else {
                Metric::LatMean
            };
            for metric in Metric::ALL {
                // A flush's latency is what a database waits for: its mean and p99 both
                // count (the etcd check judges the p99).
                let flush = direction == "sync" && metric == Metric::LatMean;
                let headline = metric == throughput || metric == latency || flush;
                if headline_only && !headline {
                    continue;
                }
                let cells: Vec<Option<Cell>> = per_run
                    .clone()
                    .map(|figs| figs.and_then(|f| raw_cell(f, d, metric)))
                    .collect();
                if cells.iter().all(Option::is_none) {
                    continue;
                }
                rows.push(Row {
                    test: t,
                    direction,
                    metric,
                    headline,
                    cells: judge(cells, metric, &mut |a, b| p(headline, a, b)),
                });
            }
        }
        rows
    }

    /// Headline cells that got significantly worse than the baseline by more than `pct`.
    pub fn regressions(&self, pct: f64) -> Vec<Regression> {
        self.headline_rows()
            .flat_map(|row| {
                let found: Vec<Regression> = row
                    .cells
                    .iter()
                    .enumerate()
                    .skip(1)
                    .filter_map(|(i, c)| Some((i, c.as_ref()?)))
                    .filter(|(_, c)| {
                        matches!(c.significance, Significance::Worse { .. })
                            && c.change_pct.is_some_and(|ch| ch.abs() > pct)
                    })
                    .map(|(i, c)| Regression {
                        title: self.row_title(&row),
                        label: row.metric_label(),
                        key: row.metric.key(),
                        run: i,
                        change_pct: c.change_pct,
                        significance: c.significance,
                    })
                    .collect();
                found
            })
            .collect()
    }

    /// Runs judged worse than the baseline (pass → marginal → fail) against the same limit:
    /// the disk, not the threshold, changed.
    pub fn judgement_regressions(&self) -> Vec<(usize, &Judgement)> {
        let rank = |j: &Judgement| match j.status.as_str() {
            "pass" => 0,
            "marginal" => 1,
            _ => 2,
        };
        let Some(base) = &self.runs[0].judgement else {
            return Vec::new();
        };
        self.runs
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(|(i, r)| Some((i, r.judgement.as_ref()?)))
            .filter(|(_, j)| j.threshold_ns == base.threshold_ns && rank(j) > rank(base))
            .collect()
    }

    /// Each run's warnings, naming the run (`run 2 [spread-high]: …`); one that every run
    /// carries is said once, for all runs.
    pub fn run_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let shared =
            |w: &String| self.runs.len() > 1 && self.runs.iter().all(|r| r.warnings.contains(w));
        for (i, r) in self.runs.iter().enumerate() {
            for w in &r.warnings {
                if !shared(w) {
                    out.push(format!("run {} {w}", r.id));
                } else if i == 0 {
                    out.push(format!("all runs {w}"));
                }
            }
        }
        out
    }

    /// Headline cells worse by more than `pct` whose significance is unknown (no repeats).
    pub fn untestable_regressions(&self, pct: f64) -> usize {
        self.headline_rows()
            .map(|r| {
                r.cells[1..]
                    .iter()
                    .flatten()
                    .filter(|c| {
                        c.significance == Significance::NoRepeats
                            && c.change_pct.is_some_and(|ch| {
                                ch.abs() > pct && (ch < 0.0) == r.metric.higher_is_better()
                            })
                    })
                    .count()
            })
            .sum()
    }

    /// `RND4K Q1T1 (read)`: a row's test and direction, the direction only for mixed tests.
    pub fn row_title(&self, row: &Row) -> String {
        let test = &self.tests[row.test];
        let mixed = self.meta[row.test].mixed;
        if mixed {
            let direction = match (row.direction, &test.sync_kind) {
                ("sync", Some(kind)) => kind.as_str(),
                (direction, _) => direction,
            };
            format!("{} ({direction})", test.name)
        } else {
            test.name.clone()
        }
    }

    /// The one-line answer: how the runs differ from the baseline.
    pub fn verdict(&self) -> String {
        let base = &self.runs[0];
        if self.runs.len() == 1 {
            let judged = base
                .judgement
                .as_ref()
                .map_or(String::new(), |j| format!("; {}", j.describe()));
            return format!(
                "{}: {}, {}{judged}",
                base.name(),
                crate::units::plural(self.tests.len() as u64, "test"),
                base.status
            );
        }
        if self.common == 0 {
            return format!(
                "no tests in common with baseline {}: nothing was compared",
                base.name()
            );
        }
        match self.judgement_change() {
            Some(judged) => format!("{judged}; figures: {}", self.figures_verdict()),
            None => self.figures_verdict(),
        }
    }

    /// `judgement PASS → FAIL (limit 10.0ms → 1.00µs)` when the runs' judgements differ.
    fn judgement_change(&self) -> Option<String> {
        let judgements: Vec<Option<&Judgement>> =
            self.runs.iter().map(|r| r.judgement.as_ref()).collect();
        let first = judgements[0];
        if judgements
            .iter()
            .all(|j| j.map(|j| &j.status) == first.map(|j| &j.status))
        {
            return None;
        }
        let words = |f: &dyn Fn(&Judgement) -> String| {
            judgements
                .iter()
                .map(|j| j.map_or("none".to_string(), f))
                .collect::<Vec<_>>()
                .join(" → ")
        };
        let mut line = format!("judgement {}", words(&|j| j.status.to_uppercase()));
        let limits: Vec<Option<f64>> = judgements
            .iter()
            .map(|j| j.map(|j| j.threshold_ns))
            .collect();
        if limits.iter().any(|l| *l != limits[0]) {
            line.push_str(&format!(
                " (limit {})",
                words(&|j| format_latency_ns(j.threshold_ns))
            ));
        }
        Some(line)
    }

    /// The figures' part of the verdict.
    fn figures_verdict(&self) -> String {
        let base = &self.runs[0];
        let Tally {
            worse,
            better,
            same,
            unknown,
            ..
        } = self.tally;
        let largest = self
            .tally
            .largest
            .as_ref()
            .map_or(String::new(), |(title, label, ch, i)| {
                format!(
                    "; largest change {title} {label} {ch:+.1}% in run {}",
                    self.runs[*i].id
                )
            });
        let against = format!("against baseline {}", base.name());
        if worse + better + same == 0 && unknown > 0 {
            return format!("no repeats: significance unknown {against}{largest}");
        }
        if worse == 0 && better == 0 {
            let mut line = format!("no significant difference {against}");
            if unknown > 0 {
                line.push_str(&format!(" ({unknown} figures without repeats)"));
            }
            return line + &largest;
        }
        let mut parts = vec![
            format!("{worse} figures significantly worse"),
            format!("{better} better"),
        ];
        if same > 0 {
            parts.push(format!("{same} without significant difference"));
        }
        if unknown > 0 {
            parts.push(format!("{unknown} without repeats"));
        }
        format!("{} {against}{largest}", parts.join(", "))
    }
}

/// A headline figure significantly worse than the baseline's.
#[derive(Debug, Clone)]
pub struct Regression {
    /// The row's title ([`Comparison::row_title`]).
    pub title: String,
    /// The figure's name for people ([`Row::metric_label`]).
    pub label: &'static str,
    /// The figure's key in JSON ([`Metric::key`]).
    pub key: &'static str,
    /// Index of the run in [`Comparison::runs`].
    pub run: usize,
    /// Change against the baseline, percent.
    pub change_pct: Option<f64>,
    /// How sure.
    pub significance: Significance,
}

/// What a test does, as a string written into `key`: equal strings mean the same work.
fn match_key(key: &mut String, w: &WorkView, name: &str) {
    use std::fmt::Write as _;
    key.clear();
    let Some(rw) = w.rw.get() else {
        let _ = write!(key, "name:{name}");
        return;
    };
    let num = |f: &Field<u64>| f.get().copied().unwrap_or(1);
    let mix = match rw.as_str() {
        "rw" | "randrw" => w.rwmixread.get().copied().unwrap_or(50),
        _ => 100,
    };
    // Writing to a String cannot fail.
    let _ = write!(
        key,
        "{rw} bs={} qd={} jobs={} mix={mix} sync=",
        num(&w.bs_bytes),
        num(&w.iodepth),
        num(&w.numjobs)
    );
    if let Some(s) = w.sync_every.get()
        && let (Some(kind), Some(every)) = (s.kind.get(), s.every.get())
    {
        let _ = write!(key, "{kind}/{every}");
    }
}

/// The tests that do one work: the matched test of each occurrence in a run (the first time
/// it is done, the second, …), and how many times the run being added has done it so far.
struct Work {
    tests: Vec<usize>,
    run: usize,
    seen: usize,
}

/// A cell before judging: the reported figure and the repeats.
fn raw_cell(figures: &[Fig], direction: u8, metric: Metric) -> Option<Cell> {
    let of_dir = |f: &&Fig| f.direction == direction;
    let value = figures
        .iter()
        .filter(of_dir)
        .find(|f| f.sample == 0)
        .and_then(|f| f.get(metric))?;
    let repeats: Vec<f64> = figures
        .iter()
        .filter(of_dir)
        .filter(|f| f.sample > 0)
        .filter_map(|f| f.get(metric))
        .collect();
    Some(Cell {
        value,
        samples: if repeats.is_empty() {
            vec![value]
        } else {
            repeats
        },
        change_pct: None,
        significance: Significance::NoRepeats,
    })
}

/// Welch's test's p-value of the baseline's samples against a cell's.
type PValue<'a> = dyn FnMut(&[f64], &[f64]) -> Option<f64> + 'a;

/// [`PValue`], told first whether the cell's row is a headline one.
type RowPValue<'a> = dyn FnMut(bool, &[f64], &[f64]) -> Option<f64> + 'a;

/// Fills each cell's change and significance against the first (the baseline), with `p`
/// for Welch's test.
fn judge(mut cells: Vec<Option<Cell>>, metric: Metric, p: &mut PValue<'_>) -> Vec<Option<Cell>> {
    let Some((baseline, others)) = cells.split_first_mut() else {
        return cells;
    };
    if let Some(base) = baseline {
        base.significance = Significance::Baseline;
    }
    let baseline = baseline.as_ref();
    for cell in others {
        let Some(cell) = cell else { continue };
        let Some(base) = baseline else {
            cell.significance = Significance::NoBaseline;
            continue;
        };
        let change = (base.value != 0.0).then(|| (cell.value - base.value) / base.value * 100.0);
        cell.change_pct = change;
        cell.significance = match p(&base.samples, &cell.samples) {
            None => Significance::NoRepeats,
            Some(p) if p < crate::stats::ALPHA => {
                let up = cell.value > base.value;
                if up == metric.higher_is_better() {
                    Significance::Better { p }
                } else {
                    Significance::Worse { p }
                }
            }
            Some(p) => Significance::NoDifference { p },
        };
    }
    cells
}

/// Principle 6: results of different versions of one suite are not comparable; say so loudly.
fn suite_warnings(runs: &[StoredRun]) -> Vec<String> {
    let mut names: Vec<&str> = runs
        .iter()
        .filter_map(|r| r.suite.as_ref().map(|s| s.0.as_str()))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let versions: Vec<String> = runs
            .iter()
            .filter_map(|r| match &r.suite {
                Some((n, v)) if n == name => Some(format!("v{v} (run {})", r.id)),
                _ => None,
            })
            .collect();
        let distinct: std::collections::BTreeSet<&str> = versions
            .iter()
            .map(|v| v.split(' ').next().unwrap_or(""))
            .collect();
        if distinct.len() > 1 {
            out.push(format!(
                "DIFFERENT SUITE VERSIONS: {name} {}; the tests behind the same names changed, \
                 so these figures are not comparable",
                versions.join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
