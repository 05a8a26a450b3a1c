//! `tacho profile`: samples every CPU for the duration (or until Ctrl-C), names the functions
//! and prints the verdict and table, the JSON document, folded stacks or a flame graph.

use crate::cli::ProfileArgs;
use crate::profile::sampler::{self, Sampler, Stacks};
use crate::profile::{self, Filter, symbols};
use crate::report::profile as show;
use anyhow::{Context, Result, anyhow};
use std::collections::HashMap;
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
    let start = Instant::now();
    let mut stacks = Stacks::new();
    let mut comms: HashMap<u32, String> = HashMap::new();
    let mut batch = Vec::new();
    while start.elapsed() < args.duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100).min(args.duration));
        sampler.drain(&mut batch);
        // Names are read while the processes live; one that exits keeps the name it had.
        for s in &batch {
            comms.entry(s.pid).or_insert_with(|| comm(s.pid));
        }
        sampler::count(std::mem::take(&mut batch), &mut stacks);
    }
    sampler.drain(&mut batch);
    sampler::count(batch, &mut stacks);
    let seconds = start.elapsed().as_secs_f64();
    let frames = symbols::symbolize(&stacks);
    let p = profile::build(
        &stacks,
        &frames,
        &comms,
        &Filter { pid: args.pid },
        seconds,
        args.frequency,
        sampler.lost,
    );
    let mut out = std::io::stdout().lock();
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

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end_matches('\n').to_owned())
        .unwrap_or_else(|_| format!("pid {pid}"))
}
