//! `tacho profile`: samples every CPU for the duration (or until Ctrl-C), names the functions
//! and prints the verdict and table (refreshed every second on a terminal), the JSON document,
//! folded stacks or a flame graph.

use crate::cli::ProfileArgs;
use crate::kernel::SysRoot;
use crate::profile::Filter;
use crate::profile::quick::{STEP, Session};
use crate::report::profile as show;
use anyhow::{Context, Result, anyhow};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Clears a terminal and puts the cursor home, before each redraw.
const CLEAR: &str = "\x1b[H\x1b[2J";

pub fn run(args: &ProfileArgs) -> Result<ExitCode> {
    let root = SysRoot::real();
    if let Some(pid) = args.pid
        && !root.proc.join(pid.to_string()).exists()
    {
        return Err(anyhow!(
            "--pid {pid}: no such process; check the id with ps -e"
        ));
    }
    if let Some(path) = &args.svg {
        crate::report::outfile::check(path, crate::report::outfile::Existing::Replace)
            .with_context(|| format!("cannot write --svg {}", path.display()))?;
    }
    if args.off_cpu || args.wall {
        return super::profile_waits::run(args);
    }
    let mut session =
        Session::start(args.frequency, Filter { pid: args.pid }, root).map_err(|e| anyhow!(e))?;
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    eprintln!(
        "tacho: sampling every CPU at {} Hz for {:.0?}; Ctrl-C to stop early",
        args.frequency, args.duration
    );
    // On a terminal the table refreshes every second, as perf top's does.
    let live = !args.json && !args.folded && !args.batch && std::io::stdout().is_terminal();
    let mut drawn = Instant::now();
    while session.elapsed() < args.duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(STEP.min(args.duration));
        session.step();
        if live && drawn.elapsed() >= Duration::from_secs(1) {
            let Some(p) = session.profile(&stop) else {
                break;
            };
            let mut out = std::io::stdout().lock();
            write!(out, "{CLEAR}")?;
            let width = crate::fit::stdout_width();
            let mut fitted = crate::fit::Fit::new(&mut out, width);
            show::write_text(&p, &mut fitted, width)?;
            fitted.flush()?;
            drawn = Instant::now();
        }
    }
    session.step();
    // After a Ctrl-C that ended the sampling, the next one stops the naming; otherwise the
    // first one does.
    let again = Arc::new(AtomicBool::new(false));
    let naming_stop = if stop.load(Ordering::Relaxed) {
        super::stop_on_signals(&again)?;
        &*again
    } else {
        &*stop
    };
    let Some(p) = session.profile(naming_stop) else {
        // Naming was stalled by a file that does not answer (a user's FUSE binary, say).
        eprintln!("tacho: stopped while naming functions; nothing printed");
        return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
    };
    let mut out = std::io::stdout().lock();
    if live {
        write!(out, "{CLEAR}")?;
    }
    if let Some(path) = &args.svg {
        let mut svg = Vec::new();
        show::write_svg(&p, &format!("tacho profile: {}", p.verdict), &mut svg)?;
        crate::report::outfile::write_atomically(
            path,
            &svg,
            crate::report::outfile::Existing::Replace,
        )
        .with_context(|| format!("cannot write --svg {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if args.json {
        show::write_json(&p, &mut out)?;
    } else if args.folded {
        show::write_folded(&p, &mut out)?;
    } else {
        let width = crate::fit::stdout_width();
        let mut fitted = crate::fit::Fit::new(&mut out, width);
        show::write_text(&p, &mut fitted, width)?;
        fitted.flush()?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
