//! `tacho profile`: samples every CPU for the duration (or until Ctrl-C), names the functions
//! and prints the verdict and table, the JSON document, folded stacks or a flame graph.

use crate::cli::ProfileArgs;
use crate::profile::sampler::{self, Sampler, Stacks};
use crate::profile::symbols::{self, Frames};
use crate::profile::{self, Filter, quick};
use crate::report::profile as show;
use anyhow::{Context, Result, anyhow};
use blazesym::symbolize::Symbolizer;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub fn run(args: &ProfileArgs) -> Result<ExitCode> {
    if let Some(pid) = args.pid
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        return Err(anyhow!(
            "--pid {pid}: no such process; check the id with ps -e"
        ));
    }
    if let Some(path) = &args.svg {
        crate::report::outfile::check(path, crate::report::outfile::Existing::Replace)
            .with_context(|| format!("cannot write --svg {}", path.display()))?;
    }
    let mut sampler = Sampler::start(args.frequency).map_err(|e| anyhow!(e))?;
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    eprintln!(
        "tacho: sampling every CPU at {} Hz for {:.0?}; Ctrl-C to stop early",
        args.frequency, args.duration
    );
    // On a terminal the table refreshes every second, as perf top's does.
    let live = !args.json && !args.folded && !args.batch && std::io::stdout().is_terminal();
    let start = Instant::now();
    let mut stacks = Stacks::new();
    let mut comms: HashMap<u32, String> = HashMap::new();
    let mut batch = Vec::new();
    let symbolizer = Symbolizer::new();
    let mut frames = Frames::new();
    let mut drawn = Instant::now();
    let filter = Filter { pid: args.pid };
    while start.elapsed() < args.duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100).min(args.duration));
        sampler.drain(&mut batch);
        // Names are read while the processes live; one that exits keeps the name it had.
        for s in &batch {
            comms.entry(s.pid).or_insert_with(|| quick::comm(s.pid));
        }
        sampler::count(std::mem::take(&mut batch), &mut stacks);
        if live && drawn.elapsed() >= Duration::from_secs(1) {
            symbols::symbolize_new(&symbolizer, &stacks, &mut frames);
            let p = profile::build(
                &stacks,
                &frames,
                &comms,
                &filter,
                start.elapsed().as_secs_f64(),
                args.frequency,
                sampler.lost,
            );
            let mut out = std::io::stdout().lock();
            // Home and clear, then the table so far.
            write!(out, "\x1b[H\x1b[2J")?;
            show::write_text(&p, &mut out)?;
            out.flush()?;
            drawn = Instant::now();
        }
    }
    sampler.drain(&mut batch);
    sampler::count(batch, &mut stacks);
    let seconds = start.elapsed().as_secs_f64();
    symbols::symbolize_new(&symbolizer, &stacks, &mut frames);
    let p = profile::build(
        &stacks,
        &frames,
        &comms,
        &filter,
        seconds,
        args.frequency,
        sampler.lost,
    );
    let mut out = std::io::stdout().lock();
    if live {
        write!(out, "\x1b[H\x1b[2J")?;
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
        show::write_text(&p, &mut out)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
