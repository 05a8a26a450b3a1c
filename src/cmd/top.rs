//! `tacho top`: sample every interval, compute rates, judge, and show (screen, text, JSON,
//! Prometheus).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cli::TopArgs;
use crate::config::Settings;
use crate::diagnose::findings::any_warning;
use crate::diagnose::live::{Connections, Pipeline, Session, Tick};
use crate::diagnose::model::ModelOptions;
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
pub fn run(args: &TopArgs, settings: &Settings) -> Result<ExitCode> {
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
    let keep_tracer = crate::bpf::keep_tracer()?;
    if args.latency {
        if mode == Mode::Screen {
            bail!("--latency shows text or JSON: add --batch or --json");
        }
        let top = usize::from(args.top);
        // The verdict as top gives it; no second block tracer beside the latency one, so
        // disk culprits come from the cgroup counters and /proc.
        let mut sampler = Sampler::new(SysRoot::real()).context("cannot start sampling")?;
        let opts = ModelOptions::for_this_host(top, args.sort, sampler.delayacct);
        let mut pipeline = Pipeline::new(false);
        let mut prev = sampler.sample()?;
        let mut verdict = move || -> Result<String> {
            let cur = sampler.sample()?;
            let ends = (&prev, &cur);
            let s = pipeline.step(ends, sampler.devices(), &opts, Connections::Sampled);
            prev = cur;
            Ok(s.verdict)
        };
        let json = mode == Mode::Json;
        let count = args.count;
        match super::top_latency::run(json, interval, count, top, keep_tracer, &mut verdict)? {
            Ok(code) => return Ok(code),
            Err(reason) => eprintln!("note: {reason}; showing the /proc figures instead"),
        }
    }
    // `--listen ADDR`, or `--listen` alone with the config file's address.
    let listen = match args.listen {
        None => None,
        Some(Some(addr)) => Some(addr),
        Some(None) => Some(settings.listen.value.ok_or_else(|| {
            anyhow::anyhow!(
                "--listen needs an address: give --listen 127.0.0.1:9101, or set listen under \
                 [top] in the config file (tacho config show says which file)"
            )
        })?),
    };
    // A flag's web config, else the config file's (settings resolved them in that order).
    let web_config = listen.and(settings.web_config.value.as_deref());
    let web = web_config
        .map(crate::report::top::webconfig::WebConfig::load)
        .transpose()?
        .unwrap_or_default();
    let tls = web.tls.is_some();
    let metrics = listen
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
    if let Some(addr) = listen.filter(|a| !a.ip().is_loopback()) {
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
        sampler.trace_block_io(keep_tracer);
    }
    // Asked for: each sample says why not where it cannot run (no root, no BPF).
    if args.waits && !args.no_ebpf {
        sampler.trace_waits();
    }
    let mut opts = ModelOptions::for_this_host(usize::from(args.top), args.sort, sampler.delayacct);
    if mode == Mode::Screen {
        // Many processes are listed so the table can scroll; the screen shows what fits.
        opts.top = opts.top.max(200);
        let sort = opts.sort;
        let session = Session::new(sampler, opts, interval, args.count, args.accumulate);
        crate::tui::run(session.spawn(), sort, metrics, args.accumulate)?;
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
    let mut short_of_descriptors = false;
    let mut profiler = super::top_profile::OnCpuVerdict::default();
    let mut exporter = prometheus::Exporter::default();
    let mut session = Session::new(sampler, opts, interval, args.count, args.accumulate);
    session.run(&stop, |tick| {
        let s = match tick {
            Tick::Interval(s) => s,
            // Said once per shortage, not once per sample.
            Tick::Skipped(e) => {
                if !short_of_descriptors {
                    eprintln!("warning: {e}; skipping samples until descriptors are free");
                    short_of_descriptors = true;
                }
                return Ok(());
            }
        };
        short_of_descriptors = false;
        if let Some(m) = &metrics {
            m.set(exporter.render(s));
            m.record(s);
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
    })?;
    Ok(if warned {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
