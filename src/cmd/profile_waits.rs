//! `tacho profile --off-cpu` and `--wall`: traces the time threads spend off the CPU (and with
//! `--wall` samples the CPUs beside it) for the duration or until Ctrl-C, then prints the
//! verdict and tables (refreshed every second on a terminal), the JSON document, folded stacks
//! or a flame graph.

use crate::cli::ProfileArgs;
use crate::kernel::SysRoot;
use crate::profile::offcpu::{Mode, Scope, WaitSession};
use crate::profile::quick::STEP;
use crate::report::profile_waits as show;
use anyhow::{Context, Result, anyhow};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Clears a terminal and puts the cursor home, before each redraw.
const CLEAR: &str = "\x1b[H\x1b[2J";

pub(super) fn run(args: &ProfileArgs) -> Result<ExitCode> {
    let root = SysRoot::real();
    let cgroup = match &args.unit {
        Some(unit) => {
            let found = crate::kernel::cgunit::find_unit(&root, unit).map_err(|e| {
                anyhow!("--unit {unit}: {e}; check the name with systemctl status {unit}")
            })?;
            Some((found.path, found.id, found.level))
        }
        None => None,
    };
    let mode = if args.wall {
        Mode::Wall(args.frequency)
    } else {
        Mode::OffCpu
    };
    let what = if args.wall { "--wall" } else { "--off-cpu" };
    let mut session = WaitSession::start(
        mode,
        Scope {
            pid: args.pid,
            cgroup,
        },
        root,
    )
    .map_err(|e| anyhow!("{what} cannot run: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    let whom = match (&args.pid, &args.unit) {
        (Some(pid), _) => format!("process {pid}"),
        (_, Some(unit)) => crate::text::Escaped(unit).to_string(),
        _ => "every process".into(),
    };
    eprintln!(
        "tacho: tracing {whom} {} for {:.0?}; Ctrl-C to stop early",
        if args.wall {
            "on and off the CPU"
        } else {
            "off the CPU"
        },
        args.duration
    );
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
    let again = Arc::new(AtomicBool::new(false));
    let naming_stop = if stop.load(Ordering::Relaxed) {
        super::stop_on_signals(&again)?;
        &*again
    } else {
        &*stop
    };
    let Some(p) = session.profile(naming_stop) else {
        eprintln!("tacho: stopped while naming functions; nothing printed");
        return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
    };
    let mut out = std::io::stdout().lock();
    if live {
        write!(out, "{CLEAR}")?;
    }
    if let Some(path) = &args.svg {
        let mut svg = Vec::new();
        show::write_svg(
            &p,
            &format!("tacho profile {what}: {}", p.verdict),
            &mut svg,
        )?;
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
