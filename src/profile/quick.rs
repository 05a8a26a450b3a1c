//! A short profile taken in one call, for `tacho top --batch --profile` to add the top
//! functions to a CPU verdict.

use super::sampler::{self, Sampler, Stacks, StartError};
use super::symbols::{self, Frames};
use super::{Filter, Profile};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Samples every CPU at `hz` for `duration` and builds the profile.
pub fn profile_for(duration: Duration, hz: u64) -> Result<Profile, StartError> {
    let mut sampler = Sampler::start(hz)?;
    let start = Instant::now();
    let mut stacks = Stacks::new();
    let mut comms: HashMap<u32, String> = HashMap::new();
    let mut batch = Vec::new();
    while start.elapsed() < duration {
        std::thread::sleep(Duration::from_millis(100).min(duration));
        sampler.drain(&mut batch);
        for s in &batch {
            comms.entry(s.pid).or_insert_with(|| comm(s.pid));
        }
        sampler::count(std::mem::take(&mut batch), &mut stacks);
    }
    let mut frames = Frames::new();
    symbols::symbolize_new(
        &blazesym::symbolize::Symbolizer::new(),
        &stacks,
        &mut frames,
    );
    Ok(super::build(
        &stacks,
        &frames,
        &comms,
        &Filter { pid: None },
        start.elapsed().as_secs_f64(),
        hz,
        sampler.lost,
    ))
}

/// A process's command name, read while it lives.
pub fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end_matches('\n').to_owned())
        .unwrap_or_else(|_| format!("pid {pid}"))
}
