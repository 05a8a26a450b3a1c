//! `tacho bench mem`: read, write and copy bandwidth and random-access latency at working sets
//! that fit each cache level (sizes from sysfs) and one far larger than the last cache (DRAM),
//! on one thread and on all threads, each measurement repeated.
//!
//! Working sets are half of L1 and of L2 and an eighth of L3 (see [`plan_levels`]), so a
//! level's figure is not polluted by misses to the next one. In the all-threads pass each thread has its own buffer, allocated and first
//! touched by that thread; a shared cache (L3) and DRAM are split between the threads.

pub mod kernels;

use crate::choice::Choice;
use crate::form::{Form, Written};
use crate::kernel::cache::CacheLevel;
use crate::kernel::host::Host;
use crate::kernel::tunables::SystemTunables;
use crate::stats;
use crate::warning::{Code, Warning};
use serde::{Deserialize, Serialize};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The `schema` of the `tacho bench mem --json` document.
pub const SCHEMA: &str = "tacho.mem.v1";
/// Bumped whenever a kernel or working-set rule changes, so stored results are never compared
/// across.
pub const SUITE_VERSION: u32 = 1;
/// Spread between repeats, in percent, above which a figure is flagged.
pub const SPREAD_WARN_PCT: f64 = 5.0;
/// Smallest DRAM working set, whatever the caches say.
pub const MIN_DRAM_BYTES: u64 = 256 << 20;

/// What to run, resolved from the command line by `cmd::mem`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Threads of the all-threads pass (1: no such pass).
    pub threads: usize,
    /// How long each kernel runs per measurement.
    pub runtime: Duration,
    /// Measurements per level and pass; the median is reported.
    pub repeat: u32,
    /// The levels to measure, from [`plan_levels`].
    pub levels: Vec<LevelPlan>,
}

/// One level to measure and its working sets.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelPlan {
    /// Which level this is.
    pub name: LevelName,
    /// The whole working set on one thread.
    pub size_bytes: u64,
    /// Whether all threads share it (L3, DRAM): then each thread gets size / threads.
    pub shared: bool,
}

impl LevelPlan {
    /// Bytes each of `threads` threads works on: the set split between them when shared, whole
    /// otherwise.
    pub fn per_thread_bytes(&self, threads: usize) -> u64 {
        if self.shared {
            self.size_bytes / threads.max(1) as u64
        } else {
            self.size_bytes
        }
    }
}

/// Chooses the levels: half of L1 and of L2; for L3 an eighth of it but at least twice L2 (and
/// at most half of L3); DRAM at `dram_bytes` or else eight times the last cache (at least
/// [`MIN_DRAM_BYTES`]). `only` filters (empty: all the machine has).
///
/// Why L3 differs: an L3 is shared by many cores (and, in a VM, with other guests), so one
/// core effectively gets a slice of it; on this project's EPYC VM a random chase over half of
/// the 32 MiB L3 already ran at DRAM latency, over 4 MiB at a sixth of it. Twice L2 keeps
/// the set out of L2 whatever the L3 size.
pub fn plan_levels(
    caches: &[CacheLevel],
    dram_bytes: Option<u64>,
    only: &[LevelName],
) -> Vec<LevelPlan> {
    let l2 = caches.iter().find(|c| c.level == 2).map(|c| c.size_bytes);
    let mut levels = Vec::new();
    for c in caches {
        let (name, size_bytes) = match c.level {
            1 => (LevelName::L1, c.size_bytes / 2),
            2 => (LevelName::L2, c.size_bytes / 2),
            3 => {
                let floor = l2.map_or(c.size_bytes / 4, |l2| l2 * 2);
                (
                    LevelName::L3,
                    (c.size_bytes / 8).max(floor).min(c.size_bytes / 2),
                )
            }
            _ => continue,
        };
        levels.push(LevelPlan {
            name,
            size_bytes,
            shared: c.shared_cpus.unwrap_or(1) > 1,
        });
    }
    let last = caches.iter().map(|c| c.size_bytes).max().unwrap_or(0);
    levels.push(LevelPlan {
        name: LevelName::Dram,
        size_bytes: dram_bytes.unwrap_or_else(|| (last.saturating_mul(8)).max(MIN_DRAM_BYTES)),
        shared: true,
    });
    levels.retain(|l| only.is_empty() || only.contains(&l.name));
    levels
}

/// The result of `tacho bench mem` (the `tacho.mem.v1` document).
#[derive(Debug, Serialize)]
pub struct MemReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The tacho version that ran it (Cargo package version).
    pub tool_version: &'static str,
    /// [`SUITE_VERSION`] at the time of the run; figures compare only within one.
    pub suite_version: u32,
    /// The machine it ran on.
    pub host: Host,
    /// THP (the buffers ask for huge pages), CPU governor and mitigations.
    pub tunables: SystemTunables,
    /// Data caches of CPU 0 as sysfs describes them.
    pub caches: Vec<CacheLevel>,
    /// Seconds each kernel ran per measurement.
    pub runtime_s: f64,
    /// Measurements per level and pass.
    pub repeat: u32,
    /// One entry per level measured, smallest first.
    pub levels: Vec<LevelResult>,
    /// Figures to distrust and why (a spread above [`SPREAD_WARN_PCT`], …).
    pub warnings: Vec<Warning>,
    /// True when Ctrl-C cut the run short; the figures cover what finished.
    pub interrupted: bool,
}

/// One level: the single-thread figures at the top (the headline), all threads beneath (in
/// either [`Form`]: the store reads it back as `LevelResult<Read>`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, bound = "")]
pub struct LevelResult<F: Form = Written> {
    /// `L1`, `L2`, `L3` or `DRAM`.
    pub name: F::Of<String>,
    /// Working set of the single-thread pass, in bytes.
    pub size_bytes: F::Of<u64>,
    /// Read bandwidth on one thread, bytes per second.
    pub read_bytes_per_s: F::Of<f64>,
    /// Write bandwidth on one thread, bytes per second.
    pub write_bytes_per_s: F::Of<f64>,
    /// Bytes copied per second (each read once and written once).
    pub copy_bytes_per_s: F::Of<f64>,
    /// Nanoseconds per dependent load of a random pointer chase through the set, one thread.
    pub latency_ns: F::Of<f64>,
    /// (max − min) / median of the repeats of each figure, in percent.
    pub spread_pct: F::Of<Spread>,
    /// Each repeat's figures, in the order they ran (the figures above are their medians).
    pub repeats: F::Of<Vec<F::Of<Figures<F>>>>,
    /// The same level on all threads at once; `None` with one thread or after Ctrl-C.
    pub all_threads: F::Of<Option<ThreadsResult<F>>>,
}

/// One level measured on all threads at once, each with its own buffer.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, bound = "")]
pub struct ThreadsResult<F: Form = Written> {
    /// Threads that ran at once.
    pub threads: F::Of<usize>,
    /// Working set of each thread.
    pub size_bytes: F::Of<u64>,
    /// Sums over the threads.
    pub read_bytes_per_s: F::Of<f64>,
    /// Write bandwidth summed over the threads, bytes per second.
    pub write_bytes_per_s: F::Of<f64>,
    /// Copy bandwidth summed over the threads, bytes per second.
    pub copy_bytes_per_s: F::Of<f64>,
    /// Mean over the threads (latency under load).
    pub latency_ns: F::Of<f64>,
    /// (max − min) / median of the repeats of each figure, in percent.
    pub spread_pct: F::Of<Spread>,
    /// Each repeat's figures, in the order they ran.
    pub repeats: F::Of<Vec<F::Of<Figures<F>>>>,
}

/// Spread between repeats of each figure, in percent ((max − min) / median; 0 when the median is
/// 0).
///
/// Read back whole or not at all: it describes the figures, which are read one by one.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default)]
pub struct Spread {
    /// Of the read bandwidth.
    pub read: f64,
    /// Of the write bandwidth.
    pub write: f64,
    /// Of the copy bandwidth.
    pub copy: f64,
    /// Of the latency.
    pub latency: f64,
}

/// A memory level to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LevelName {
    /// Level 1 data cache.
    L1,
    /// Level 2 cache.
    L2,
    /// Level 3 (last-level) cache.
    L3,
    /// Main memory: a set far larger than the last cache.
    Dram,
}

impl Choice for LevelName {
    const ALL: &'static [Self] = &[LevelName::L1, LevelName::L2, LevelName::L3, LevelName::Dram];

    fn word(self) -> &'static str {
        match self {
            LevelName::L1 => "l1",
            LevelName::L2 => "l2",
            LevelName::L3 => "l3",
            LevelName::Dram => "dram",
        }
    }
}

impl LevelName {
    /// The level's name in reports (`L1`, `L2`, `L3`, `DRAM`).
    pub fn label(self) -> &'static str {
        match self {
            LevelName::L1 => "L1",
            LevelName::L2 => "L2",
            LevelName::L3 => "L3",
            LevelName::Dram => "DRAM",
        }
    }
}

/// The four figures of one measurement, in kernel order: one repeat in `repeats[]`.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
#[serde(default, bound = "")]
pub struct Figures<F: Form = Written> {
    /// Read bandwidth, bytes per second.
    #[serde(rename = "read_bytes_per_s")]
    pub read: F::Of<f64>,
    /// Write bandwidth, bytes per second.
    #[serde(rename = "write_bytes_per_s")]
    pub write: F::Of<f64>,
    /// Copy bandwidth (each byte read once and written once), bytes per second.
    #[serde(rename = "copy_bytes_per_s")]
    pub copy: F::Of<f64>,
    /// Nanoseconds per dependent load of the random chase.
    pub latency_ns: F::Of<f64>,
}

/// Median figures and spreads over repeats.
fn summarise(repeats: &[Figures]) -> (Figures, Spread) {
    let pick = |f: fn(&Figures) -> f64| -> (f64, f64) {
        let v: Vec<f64> = repeats.iter().map(f).collect();
        (
            stats::median(&v).unwrap_or(0.0),
            stats::spread_pct(&v).unwrap_or(0.0),
        )
    };
    let (read, sr) = pick(|f| f.read);
    let (write, sw) = pick(|f| f.write);
    let (copy, sc) = pick(|f| f.copy);
    let (latency_ns, sl) = pick(|f| f.latency_ns);
    (
        Figures {
            read,
            write,
            copy,
            latency_ns,
        },
        Spread {
            read: sr,
            write: sw,
            copy: sc,
            latency: sl,
        },
    )
}

/// Runs the plan. `progress` is told what is about to run; `stop` is checked between passes.
pub fn run(
    cfg: &Config,
    (host, tunables): (Host, SystemTunables),
    caches: Vec<CacheLevel>,
    stop: &AtomicBool,
    progress: &dyn Fn(&str),
) -> MemReport {
    let mut levels = Vec::new();
    let mut interrupted = false;
    for plan in &cfg.levels {
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        progress(&format!("{} 1 thread", plan.name.label()));
        let single = measure_threads(1, plan.size_bytes, cfg);
        let (one, one_spread) = summarise(&single);
        let all_threads = if cfg.threads > 1 && !stop.load(Ordering::Relaxed) {
            progress(&format!("{} {} threads", plan.name.label(), cfg.threads));
            let per_thread = plan.per_thread_bytes(cfg.threads);
            let all = measure_threads(cfg.threads, per_thread, cfg);
            let (f, s) = summarise(&all);
            Some(ThreadsResult {
                threads: cfg.threads,
                size_bytes: per_thread,
                read_bytes_per_s: f.read,
                write_bytes_per_s: f.write,
                copy_bytes_per_s: f.copy,
                latency_ns: f.latency_ns,
                spread_pct: s,
                repeats: all,
            })
        } else {
            None
        };
        levels.push(LevelResult {
            name: plan.name.label().to_string(),
            size_bytes: plan.size_bytes,
            read_bytes_per_s: one.read,
            write_bytes_per_s: one.write,
            copy_bytes_per_s: one.copy,
            latency_ns: one.latency_ns,
            spread_pct: one_spread,
            repeats: single,
            all_threads,
        });
    }
    interrupted |= stop.load(Ordering::Relaxed);
    let mut report = MemReport {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION"),
        suite_version: SUITE_VERSION,
        host,
        tunables,
        caches,
        runtime_s: cfg.runtime.as_secs_f64(),
        repeat: cfg.repeat,
        levels,
        warnings: Vec::new(),
        interrupted,
    };
    report.warnings = warnings(&report);
    report
}

/// Each of `threads` threads allocates `bytes`, then all run each kernel at the same time
/// (a barrier before each), `repeat` times. Returns per-repeat figures: bandwidths summed
/// over threads, latency averaged.
fn measure_threads(threads: usize, bytes: u64, cfg: &Config) -> Vec<Figures> {
    use kernels::{chase, copy, link_random_cycle, read, write};
    let barrier = Barrier::new(threads);
    let per_thread = crate::parallel::run_together(threads, |t| {
        let mut buf = kernels::buffer(bytes);
        let mut out: Vec<Figures> = Vec::with_capacity(cfg.repeat as usize);
        for r in 0..cfg.repeat {
            barrier.wait();
            let read = read(&buf, cfg.runtime);
            barrier.wait();
            let write = write(&mut buf, cfg.runtime);
            barrier.wait();
            let copy = copy(&mut buf, cfg.runtime);
            link_random_cycle(&mut buf, (t as u64) << 32 | u64::from(r));
            barrier.wait();
            let latency_ns = chase(&buf, cfg.runtime);
            out.push(Figures {
                read,
                write,
                copy,
                latency_ns,
            });
        }
        out
    });
    (0..cfg.repeat as usize)
        .map(|r| {
            let rows = per_thread.iter().map(|t| t[r]);
            let n = threads as f64;
            rows.fold(<Figures>::default(), |acc, f| Figures {
                read: acc.read + f.read,
                write: acc.write + f.write,
                copy: acc.copy + f.copy,
                latency_ns: acc.latency_ns + f.latency_ns / n,
            })
        })
        .collect()
}

fn warnings(r: &MemReport) -> Vec<Warning> {
    let mut w = Vec::new();
    if r.caches.is_empty() {
        w.push(Warning {
            code: Code::NoCacheInfo,
            message: "sysfs does not describe the CPU caches (common in some VMs); only DRAM \
                      was measured"
                .into(),
        });
    }
    let spread: Vec<String> = r
        .levels
        .iter()
        .filter_map(|l| {
            let s = l.spread_pct;
            let worst = s.read.max(s.write).max(s.copy).max(s.latency);
            (worst > SPREAD_WARN_PCT).then(|| format!("{} {worst:.0}%", l.name))
        })
        .collect();
    if !spread.is_empty() {
        w.push(Warning {
            code: Code::Spread,
            message: format!(
                "figures varied between repeats (largest spread: {}): other processes are \
                 using memory or CPU; re-run on an idle machine",
                spread.join(", ")
            ),
        });
    }
    // Each level should be slower than the one above it; if not, the sizes did not separate
    // the caches (an exclusive or unusual hierarchy, or a hypervisor hiding the real one).
    for pair in r.levels.windows(2) {
        let (upper, lower) = (&pair[0], &pair[1]);
        if lower.latency_ns <= upper.latency_ns * 1.1 {
            w.push(Warning {
                code: Code::LevelsNotDistinct,
                message: format!(
                    "{} latency ({:.1} ns) is not clearly above {} ({:.1} ns): the working \
                     sets may not match this CPU's caches",
                    lower.name, lower.latency_ns, upper.name, upper.latency_ns
                ),
            });
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(level: u8, size: u64, shared: u64) -> CacheLevel {
        CacheLevel {
            level,
            size_bytes: size,
            shared_cpus: Some(shared),
        }
    }

    #[test]
    fn levels_from_caches() {
        let caches = [
            cache(1, 32 << 10, 1),
            cache(2, 1 << 20, 1),
            cache(3, 32 << 20, 2),
        ];
        let plans = plan_levels(&caches, None, &[]);
        let got: Vec<_> = plans
            .iter()
            .map(|p| (p.name, p.size_bytes, p.shared))
            .collect();
        assert_eq!(
            got,
            [
                (LevelName::L1, 16 << 10, false),
                (LevelName::L2, 512 << 10, false),
                (LevelName::L3, 4 << 20, true),
                (LevelName::Dram, 256 << 20, true),
            ]
        );
        assert_eq!(plans[2].per_thread_bytes(2), 2 << 20);
        // A small L3 above a large L2: twice L2, but never more than half the L3.
        let client = [cache(2, 2 << 20, 1), cache(3, 8 << 20, 4)];
        assert_eq!(plan_levels(&client, None, &[])[1].size_bytes, 4 << 20);
        let no_l2 = [cache(3, 32 << 20, 4)];
        assert_eq!(plan_levels(&no_l2, None, &[])[0].size_bytes, 8 << 20);
        assert_eq!(plans[0].per_thread_bytes(2), 16 << 10);
        let big = [cache(3, 64 << 20, 8)];
        assert_eq!(plan_levels(&big, None, &[])[1].size_bytes, 512 << 20);
        let only = plan_levels(&caches, Some(8 << 20), &[LevelName::Dram]);
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].size_bytes, 8 << 20);
        assert_eq!(plan_levels(&[], None, &[]).len(), 1);
    }

    #[test]
    fn a_tiny_run_fills_every_figure() {
        let cfg = Config {
            threads: 2,
            runtime: Duration::from_millis(2),
            repeat: 2,
            levels: plan_levels(&[cache(1, 32 << 10, 1)], Some(4 << 20), &[]),
        };
        let root = crate::kernel::SysRoot::real();
        let machine = (Host::read(&root), SystemTunables::read(&root));
        let r = run(&cfg, machine, Vec::new(), &AtomicBool::new(false), &|_| {});
        assert_eq!(r.levels.len(), 2);
        for l in &r.levels {
            assert!(
                l.read_bytes_per_s > 0.0 && l.write_bytes_per_s > 0.0,
                "{l:?}"
            );
            assert!(l.copy_bytes_per_s > 0.0 && l.latency_ns > 0.0, "{l:?}");
            let all = l.all_threads.as_ref().unwrap();
            assert_eq!(all.threads, 2);
            assert!(all.read_bytes_per_s > 0.0 && all.latency_ns > 0.0);
            // Every repeat is kept; the reported figure is their median.
            assert_eq!((l.repeats.len(), all.repeats.len()), (2, 2));
        }
        assert_eq!(
            r.levels[1].all_threads.as_ref().unwrap().size_bytes,
            2 << 20
        );
        assert!(r.warnings.iter().any(|w| w.code == Code::NoCacheInfo));
    }
}
