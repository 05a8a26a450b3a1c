//! `tacho bench cpu`: throughput of fixed kernels on one thread and on all threads, each
//! measurement repeated, reported as the median with the spread between repeats.
//!
//! The summary figure (`ops_per_s` of a pass) is the geometric mean of the kernels' ops/s, so
//! no single kernel dominates it; compare it only between runs of the same suite version.

pub mod kernels;

use crate::form::{Form, Written};
use crate::kernel::SysRoot;
use crate::kernel::cpusplit::CpuSplit;
use crate::kernel::host::Host;
use crate::kernel::stat::{CpuTicks, read_stat};
use crate::kernel::tunables::SystemTunables;
use crate::parallel::run_together;
use crate::stats;
use crate::warning::{Code, Warning};
use kernels::Kernel;
pub use kernels::KernelName;
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The `schema` of the `tacho bench cpu --json` document.
pub const SCHEMA: &str = "tacho.cpu.v1";
/// Bumped whenever a kernel's work changes, so stored results are never compared across.
pub const SUITE_VERSION: u32 = 1;

/// Spread between repeats above which a figure is flagged.
pub const SPREAD_WARN_PCT: f64 = 5.0;

/// What to run, resolved from the command line by `cmd::cpu`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Threads of the all-threads pass.
    pub threads: usize,
    /// How long each kernel runs per measurement.
    pub runtime: Duration,
    /// Measurements per kernel and pass; the median is reported.
    pub repeat: u32,
    /// The kernels to measure, in this order.
    pub kernels: Vec<KernelName>,
}

/// The result of `tacho bench cpu` (the `tacho.cpu.v1` document).
#[derive(Debug, Serialize)]
pub struct CpuReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The tacho version that ran it (Cargo package version).
    pub tool_version: &'static str,
    /// [`SUITE_VERSION`] at the time of the run; figures compare only within one.
    pub suite_version: u32,
    /// The machine it ran on.
    pub host: Host,
    /// THP, CPU governor and mitigations: the settings that move CPU figures between runs.
    pub tunables: SystemTunables,
    /// Seconds each kernel ran per measurement.
    pub runtime_s: f64,
    /// Measurements per kernel and pass.
    pub repeat: u32,
    /// Every kernel on one thread.
    pub single_thread: Pass,
    /// Every kernel on all threads at once (ops/s summed over threads).
    pub all_threads: Pass,
    /// all_threads.ops_per_s / single_thread.ops_per_s.
    pub scaling: f64,
    /// `scaling` as a share of the thread count (100 = perfect).
    pub scaling_pct_of_ideal: f64,
    /// Share of CPU time the hypervisor took from this VM during the run (/proc/stat steal).
    pub steal_pct: Option<f64>,
    /// Figures to distrust and why (a spread above [`SPREAD_WARN_PCT`], steal, …).
    pub warnings: Vec<Warning>,
    /// True when Ctrl-C cut the run short; the figures cover what finished.
    pub interrupted: bool,
}

/// One pass over the kernels at one thread count (in either [`Form`]: the store reads it back
/// as `Pass<Read>`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, bound = "")]
pub struct Pass<F: Form = Written> {
    /// Threads that ran each kernel at once.
    pub threads: F::Of<usize>,
    /// Geometric mean of the kernels' `ops_per_s`.
    pub ops_per_s: F::Of<f64>,
    /// One entry per kernel, in [`Config::kernels`] order.
    pub kernels: F::Of<Vec<F::Of<KernelResult<F>>>>,
}

/// One kernel's figures in one pass.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, bound = "")]
pub struct KernelResult<F: Form = Written> {
    /// The kernel's id (`primes`, `integer`, `float`, `hash`).
    pub name: F::Of<String>,
    /// What one op is, in words.
    pub op: F::Of<String>,
    /// Median over the repeats (sum over threads in the all-threads pass).
    pub ops_per_s: F::Of<f64>,
    /// (max − min) / median of the repeats, in percent; 0 when the median is 0.
    pub spread_pct: F::Of<f64>,
    /// Each repeat's ops per second, in run order.
    pub repeats_ops_per_s: F::Of<Vec<F::Of<f64>>>,
}

/// Runs the suite. `progress` is told what is about to run; `stop` ends it early.
pub fn run(cfg: &Config, root: &SysRoot, stop: &AtomicBool, progress: &dyn Fn(&str)) -> CpuReport {
    let ticks_before = read_stat(root).ok().map(|s| s.total);
    // Wake every core to its running clock before the first figure counts.
    progress("warm-up");
    run_together(cfg.threads, |_| {
        measure(KernelName::Integer, Duration::from_millis(100))
    });

    let mut single: Vec<Vec<f64>> = vec![Vec::new(); cfg.kernels.len()];
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); cfg.kernels.len()];
    let mut interrupted = false;
    'repeats: for r in 0..cfg.repeat {
        for (i, &k) in cfg.kernels.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break 'repeats;
            }
            progress(&format!("{} (repeat {}/{})", k.id(), r + 1, cfg.repeat));
            single[i].push(measure(k, cfg.runtime));
            let rates = run_together(cfg.threads, |_| measure(k, cfg.runtime));
            all[i].push(rates.iter().sum());
        }
    }
    let steal_pct = ticks_before
        .zip(read_stat(root).ok().map(|s| s.total))
        .and_then(|(before, after)| steal_share(&before, &after));
    let single_thread = pass(1, &cfg.kernels, &single);
    let all_threads = pass(cfg.threads, &cfg.kernels, &all);
    let scaling = if single_thread.ops_per_s > 0.0 {
        all_threads.ops_per_s / single_thread.ops_per_s
    } else {
        0.0
    };
    let mut report = CpuReport {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION"),
        suite_version: SUITE_VERSION,
        host: Host::read(root),
        tunables: SystemTunables::read(root),
        runtime_s: cfg.runtime.as_secs_f64(),
        repeat: cfg.repeat,
        scaling,
        scaling_pct_of_ideal: scaling / cfg.threads as f64 * 100.0,
        single_thread,
        all_threads,
        steal_pct,
        warnings: Vec::new(),
        interrupted,
    };
    report.warnings = warnings(&report);
    report
}

/// Share of all CPU time that was steal between two samples, in percent.
fn steal_share(before: &CpuTicks, after: &CpuTicks) -> Option<f64> {
    CpuSplit::between(before, after).map(|s| s.steal_pct)
}

/// Runs kernel `k` on this thread for `runtime`; returns ops per second.
pub fn measure(k: KernelName, runtime: Duration) -> f64 {
    let mut kernel = Kernel::new(k);
    let per_batch = k.batch_ops();
    let start = Instant::now();
    let mut ops = 0u64;
    let mut sink = 0u64;
    loop {
        sink ^= kernel.batch();
        ops += per_batch;
        if start.elapsed() >= runtime {
            break;
        }
    }
    black_box(sink);
    ops as f64 / start.elapsed().as_secs_f64()
}

fn pass(threads: usize, names: &[KernelName], repeats: &[Vec<f64>]) -> Pass {
    let kernels: Vec<KernelResult> = names
        .iter()
        .zip(repeats)
        .filter(|(_, r)| !r.is_empty())
        .map(|(k, r)| KernelResult {
            name: k.id().to_string(),
            op: k.op().to_string(),
            ops_per_s: stats::median(r).unwrap_or(0.0),
            spread_pct: stats::spread_pct(r).unwrap_or(0.0),
            repeats_ops_per_s: r.to_vec(),
        })
        .collect();
    Pass {
        threads,
        ops_per_s: stats::geometric_mean(kernels.iter().map(|k| k.ops_per_s)).unwrap_or(0.0),
        kernels,
    }
}

fn warnings(r: &CpuReport) -> Vec<Warning> {
    let mut w = Vec::new();
    let spread: Vec<String> = [(&r.single_thread, "1 thread"), (&r.all_threads, "all")]
        .iter()
        .flat_map(|(pass, label)| {
            pass.kernels
                .iter()
                .filter(|k| k.spread_pct > SPREAD_WARN_PCT)
                .map(move |k| format!("{} {label} {:.0}%", k.name, k.spread_pct))
        })
        .collect();
    if !spread.is_empty() {
        w.push(Warning {
            code: Code::Spread,
            message: format!(
                "figures varied between repeats ({}): something else is using the CPU, or its \
                 clock is changing; re-run on an idle machine",
                spread.join(", ")
            ),
        });
    }
    if r.all_threads.threads > 1 && r.scaling_pct_of_ideal < 80.0 && !r.interrupted {
        w.push(Warning {
            code: Code::PoorScaling,
            message: format!(
                "{} threads ran only {:.2}× as fast as one ({:.0}% of ideal): other processes \
                 are busy, the threads share SMT cores, a CPU quota applies, or the clock drops \
                 with load",
                r.all_threads.threads, r.scaling, r.scaling_pct_of_ideal
            ),
        });
    }
    if let Some(steal) = r.steal_pct.filter(|s| *s >= 1.0) {
        w.push(Warning {
            code: Code::Steal,
            message: format!(
                "the hypervisor took {steal:.1}% of the CPU time during the run (steal): \
                 figures depend on the host's other guests"
            ),
        });
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_run_reports_every_kernel_with_repeats() {
        let cfg = Config {
            threads: 2,
            runtime: Duration::from_millis(5),
            repeat: 2,
            kernels: KernelName::all().to_vec(),
        };
        let r = run(&cfg, &SysRoot::real(), &AtomicBool::new(false), &|_| {});
        assert_eq!(r.single_thread.kernels.len(), 4);
        for k in r.single_thread.kernels.iter().chain(&r.all_threads.kernels) {
            assert_eq!(k.repeats_ops_per_s.len(), 2);
            assert!(k.ops_per_s > 0.0, "{k:?}");
        }
        assert!(r.scaling > 0.0);
        assert!(!r.interrupted);
    }

    #[test]
    fn stop_ends_the_run_early() {
        let cfg = Config {
            threads: 1,
            runtime: Duration::from_millis(5),
            repeat: 3,
            kernels: vec![KernelName::Integer],
        };
        let r = run(&cfg, &SysRoot::real(), &AtomicBool::new(true), &|_| {});
        assert!(r.interrupted);
        assert!(r.single_thread.kernels.is_empty());
    }
}
