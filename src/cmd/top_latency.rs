//! `tacho top --latency`: the eBPF block tracer's figures every interval (batch text or JSON).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::bpf::block::{BlockTracer, Dev};
use crate::diagnose::live::sleep_until;
use crate::kernel::SysRoot;
use crate::report::top::latency;

/// Runs the tracer until `count` intervals or a signal; `Err(reason)` when eBPF is unavailable,
/// so the caller falls back to the /proc figures with a note. `verdict` judges the interval
/// just ended as top does (passed in: this module is top's helper, not its dependency);
/// every interval leads with it. `keep_tracer`: see [`BlockTracer::start`].
pub(crate) fn run(
    json: bool,
    interval: Duration,
    count: Option<u64>,
    top: usize,
    keep_tracer: bool,
    verdict: &mut dyn FnMut() -> Result<String>,
) -> Result<std::result::Result<ExitCode, String>> {
    let mut tracer = match BlockTracer::start(keep_tracer) {
        Ok(t) => t,
        Err(reason) => return Ok(Err(reason.to_string())),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let width = crate::fit::stdout_width().filter(|_| !json);
    let mut stdout = crate::fit::Fit::new(std::io::stdout().lock(), width);
    let root = SysRoot::real();
    let device_name = |dev| device_name(&root, dev);
    let mut due = Instant::now();
    let mut done = 0u64;
    while count.is_none_or(|c| done < c) {
        due += interval;
        if !sleep_until(due, &stop) {
            break;
        }
        let sample = tracer.sample();
        let said = verdict()?;
        if json {
            let seconds = interval.as_secs_f64();
            latency::write_json(&mut stdout, seconds, &said, &sample, &device_name)?;
        } else {
            writeln!(stdout, "{}", crate::text::Escaped(&said))?;
            latency::write_text(&mut stdout, &sample, top, &device_name)?;
        }
        stdout.flush()?;
        done += 1;
    }
    Ok(Ok(ExitCode::SUCCESS))
}

/// The kernel's name of a block device (`/sys/dev/block/M:m` links to it), else "M:m".
fn device_name(root: &SysRoot, dev: Dev) -> String {
    std::fs::read_link(root.sys.join(format!("dev/block/{}:{}", dev.0, dev.1)))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("{}:{}", dev.0, dev.1))
}
