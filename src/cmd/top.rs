//! `tacho top`: sample every interval, compute rates, judge, and show (screen, text, JSON,
//! Prometheus).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cli::TopArgs;
use crate::diagnose::findings::{Judge, any_warning};
use crate::diagnose::model::accumulate::Accumulator;
use crate::diagnose::model::{self, ModelOptions, TopSample};
use crate::diagnose::sample::Sampler;
use crate::kernel::SysRoot;
use crate::report::prom::top as prometheus;
use crate::report::top::{server, text, write_json_line};

/// How samples are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The interactive screen (the default on a terminal).
    Screen,
    /// Plain text every interval (`--batch`).
    Text,
    /// One JSON object per sample per line (`--json`).
    Json,
    /// `--listen` alone: serve /metrics, print only where.
    ServeOnly,
}

/// Runs `tacho top` until `--count` samples, `q` or Ctrl-C; the exit status is 1 when a sample had
/// a warning.
pub fn run(args: &TopArgs) -> Result<ExitCode> {
    let mode = match (args.batch, args.json, args.listen.is_some()) {
        (_, true, _) => Mode::Json,
        (true, _, _) => Mode::Text,
        (false, false, true) => Mode::ServeOnly,
        (false, false, false) => Mode::Screen,
    };
    if mode == Mode::Screen && !std::io::stdout().is_terminal() {
        bail!("the interactive screen needs a terminal; use --batch or --json for a pipe or file");
    }
    let interval = args.interval.unwrap_or(Duration::from_secs(1));
    if args.latency {
        if mode == Mode::Screen {
            bail!("--latency shows text or JSON: add --batch or --json");
        }
        let top = usize::from(args.top);
        // The verdict as top gives it; no second block tracer beside the latency one, so
        // disk culprits come from the cgroup counters and /proc.
        let mut sampler = Sampler::new(SysRoot::real()).context("cannot start sampling")?;
        let opts = ModelOptions::for_this_host(top, args.sort, sampler.delayacct);
        let mut judge = Judge::new();
        let mut prev = sampler.sample()?;
        let mut verdict = move || -> Result<String> {
            let cur = sampler.sample()?;
            let mut s = model::between(&prev, &cur, sampler.devices(), &opts);
            judge.judge(&mut s);
            prev = cur;
            Ok(s.verdict)
        };
        let json = mode == Mode::Json;
        let count = args.count;
        match super::top_latency::run(json, interval, count, top, sleep_until, &mut verdict)? {
            Ok(code) => return Ok(code),
            Err(reason) => eprintln!("note: {reason}; showing the /proc figures instead"),
        }
    }
    let web = args
        .web_config
        .as_deref()
        .map(crate::report::top::webconfig::WebConfig::load)
        .transpose()?
        .unwrap_or_default();
    let tls = web.tls.is_some();
    let metrics = args
        .listen
        .map(|addr| server::serve(addr, web))
        .transpose()?
        .map(|(latest, bound)| {
            // As node_exporter logs its address: where to point Prometheus, or a browser.
            let scheme = if tls { "https" } else { "http" };
            eprintln!("serving {scheme}://{bound}/metrics");
            latest
        });
    if let Some(m) = &metrics {
        let mut host = super::top_metrics::HostMetrics::default();
        m.append_each(move || host.text());
    }
    if let Some(addr) = args.listen.filter(|a| !a.ip().is_loopback()) {
        eprintln!(
            "warning: serving on {addr}, beyond this machine: anyone who can reach it sees the \
             figures, including process names and paths; use 127.0.0.1:{} to keep them local",
            addr.port()
        );
    }
    let mut sampler = Sampler::new(SysRoot::real()).context("cannot start sampling")?;
    if args.dns {
        sampler.capture_dns();
    }
    // As root, disk verdicts name each request's submitter (eBPF); others keep the cgroup
    // counters and /proc, which say so in their attribution.
    if !args.no_ebpf && rustix::process::geteuid().is_root() {
        sampler.trace_block_io();
    }
    let opts = ModelOptions::for_this_host(usize::from(args.top), args.sort, sampler.delayacct);
    if mode == Mode::Screen {
        crate::tui::run(
            &mut sampler,
            opts,
            interval,
            args.count,
            metrics,
            args.accumulate,
        )?;
        return Ok(ExitCode::SUCCESS);
    }

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let width = crate::fit::stdout_width();
    let mut stdout = crate::fit::Fit::new(std::io::stdout().lock(), width);
    let mut batch = text::Batch::new(width, args.show_idle);
    let mut warned = false;
    let mut profiler = super::top_profile::OnCpuVerdict::default();
    let on_sample = |s: &TopSample| -> Result<()> {
        if let Some(m) = &metrics {
            m.set(prometheus::render(s));
        }
        match mode {
            Mode::Json => write_json_line(&mut stdout, s)?,
            Mode::Text if args.net => batch.write_network(&mut stdout, s)?,
            Mode::Text => {
                batch.write_sample(&mut stdout, s)?;
                if args.profile {
                    profiler.after(s, &mut stdout, &stop)?;
                }
            }
            Mode::Screen | Mode::ServeOnly => {}
        }
        stdout.flush()?;
        warned |= any_warning(&s.findings);
        Ok(())
    };
    let accumulator = args.accumulate.then(Accumulator::new);
    sample_loop(
        &mut sampler,
        &opts,
        interval,
        args.count,
        &stop,
        accumulator,
        on_sample,
    )?;
    Ok(if warned {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Takes a first sample, then one per interval on a fixed schedule (no drift), handing each
/// interval's judged sample to `on_sample`; stops after `count` or when `stop` is set.
pub fn sample_loop(
    sampler: &mut Sampler,
    opts: &ModelOptions,
    interval: Duration,
    count: Option<u64>,
    stop: &AtomicBool,
    mut accumulator: Option<Accumulator>,
    mut on_sample: impl FnMut(&TopSample) -> Result<()>,
) -> Result<()> {
    let mut judge = Judge::new();
    let start = Instant::now();
    let mut prev = sampler.sample()?;
    let mut n: u64 = 0;
    let mut short_of_descriptors = false;
    while count.is_none_or(|c| n < c) {
        let due = start + interval.saturating_mul(u32::try_from(n + 1).unwrap_or(u32::MAX));
        if !sleep_until(due, stop) {
            break;
        }
        let cur = match sampler.sample() {
            Ok(cur) => cur,
            // Out of descriptors for a moment (clients of --listen hold many): this interval
            // is skipped, said once, and the next one tried; anything else ends the run.
            Err(e) if out_of_descriptors(&e) => {
                if !short_of_descriptors {
                    eprintln!("warning: {e}; skipping samples until descriptors are free");
                    short_of_descriptors = true;
                }
                n += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        short_of_descriptors = false;
        let mut s = model::between(&prev, &cur, sampler.devices(), opts);
        if let Some(acc) = &mut accumulator {
            acc.apply(&prev, &cur, opts, &mut s);
        }
        judge.judge(&mut s);
        on_sample(&s)?;
        prev = cur;
        n += 1;
    }
    Ok(())
}

/// Whether `e` is the process or the system running out of file descriptors.
fn out_of_descriptors(e: &crate::kernel::KernelError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(io.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
        {
            return true;
        }
        source = err.source();
    }
    false
}

/// Sleeps until `due` in short steps so Ctrl-C or a signal is honoured promptly; false when
/// stopped.
pub(crate) fn sleep_until(due: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(50)));
    }
}
