//! A profile being taken: samples drained from the rings every call of [`Session::step`], and
//! a [`Profile`] of everything so far whenever asked (each address named once). `tacho
//! profile` steps it and redraws; `tacho top --batch --profile` takes a short one in one call.

use super::sampler::{self, Sampler, Stacks, StartError};
use super::symbols::{Frames, NAMING_LIMIT, Namer, Naming};
use super::{Filter, Profile};
use crate::kernel::SysRoot;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// How often the rings are drained.
pub const STEP: Duration = Duration::from_millis(100);

/// The sampler, what it has counted, and the names found so far.
pub struct Session {
    sampler: Sampler,
    start: Instant,
    hz: u64,
    filter: Filter,
    stacks: Stacks,
    comms: HashMap<u32, String>,
    namer: Namer,
    frames: Frames,
    root: SysRoot,
}

impl Session {
    /// Starts sampling every CPU at `hz`; processes are named and their files found under
    /// `root`.
    pub fn start(hz: u64, filter: Filter, root: SysRoot) -> Result<Session, StartError> {
        Ok(Session {
            sampler: Sampler::start(hz, &root)?,
            start: Instant::now(),
            hz,
            filter,
            stacks: Stacks::new(),
            comms: HashMap::new(),
            namer: Namer::start(root.clone()),
            frames: Frames::new(),
            root,
        })
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Counts what the rings hold now. Process names are read here, while the processes
    /// live: one that exits keeps the name it had.
    pub fn step(&mut self) {
        let mut batch = Vec::new();
        self.sampler.drain(&mut batch);
        for s in &batch {
            self.comms
                .entry(s.pid)
                .or_insert_with(|| comm(&self.root, s.pid));
        }
        sampler::count(batch, &mut self.stacks);
    }

    /// The profile of everything counted so far; `None` when `stop` was raised while its
    /// functions were being named.
    pub fn profile(&mut self, stop: &AtomicBool) -> Option<Profile> {
        let naming = self.namer.name_new(&self.stacks, &mut self.frames, stop);
        if naming == Naming::Stopped {
            return None;
        }
        let mut p = super::build(
            &self.stacks,
            &self.frames,
            &self.comms,
            &self.filter,
            self.elapsed().as_secs_f64(),
            self.hz,
            self.sampler.lost,
        );
        if naming == Naming::GaveUp {
            p.notes.push(format!(
                "function names: gave up after {} s waiting for a file that does not answer (a \
                 binary on a stalled filesystem?); functions not named by then are shown as ?",
                NAMING_LIMIT.as_secs()
            ));
        }
        Some(p)
    }
}

/// Samples every CPU at `hz` for `duration` and builds the profile; `Ok(None)` when `stop`
/// was raised first.
pub fn profile_for(
    duration: Duration,
    hz: u64,
    root: SysRoot,
    stop: &AtomicBool,
) -> Result<Option<Profile>, StartError> {
    let mut session = Session::start(hz, Filter { pid: None }, root)?;
    while session.elapsed() < duration {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(None);
        }
        std::thread::sleep(STEP.min(duration));
        session.step();
    }
    Ok(session.profile(stop))
}

fn comm(root: &SysRoot, pid: u32) -> String {
    std::fs::read_to_string(root.proc.join(format!("{pid}/comm")))
        .map(|c| c.trim_end_matches('\n').to_owned())
        .unwrap_or_else(|_| format!("pid {pid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_names_come_from_the_roots_proc() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::under(dir.path());
        crate::kernel::fixture::write(dir.path(), "proc/42/comm", "postgres\n");
        assert_eq!(comm(&root, 42), "postgres");
        assert_eq!(comm(&root, 43), "pid 43");
    }
}
