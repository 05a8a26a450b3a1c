//! An off-CPU (or wall-clock) profile being taken: the sched_switch tracer
//! ([`crate::bpf::offcpu`]) sums the time off the CPU in the kernel; with `--wall` the CPU
//! sampler runs beside it, its samples counted per thread here every [`super::quick::STEP`].
//! [`WaitSession::profile`] names the stacks, looks up what the descriptors waited on were and
//! builds the [`WaitProfile`].

use super::sampler::Sampler;
use super::symbols::{Frames, NAMING_LIMIT, Namer, Naming};
use super::waiton::Resolver;
use super::waits::{self, Input, OnCpu, WaitProfile};
use crate::bpf::offcpu::{OffCpuTracer, Target};
use crate::kernel::SysRoot;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Off the CPU only, or on and off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `--off-cpu`.
    OffCpu,
    /// `--wall`, sampling the CPUs at this rate.
    Wall(u64),
}

/// Who is traced: a process, a cgroup (a unit's), or everyone.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// `--pid`.
    pub pid: Option<u32>,
    /// `--unit`: the cgroup v2 path below the mount (for the CPU samples), its id and depth
    /// (for the tracer).
    pub cgroup: Option<(String, u64, u32)>,
}

/// The tracer, the sampler, and what has been counted and named.
pub struct WaitSession {
    tracer: OffCpuTracer,
    sampler: Option<(Sampler, u64)>,
    on_cpu: OnCpu,
    scope: Scope,
    /// Processes' cgroup v2 paths, read once each (for `--unit` with `--wall`).
    in_scope: HashMap<u32, bool>,
    names: HashMap<u32, String>,
    start: Instant,
    namer: Namer,
    frames: Frames,
    root: SysRoot,
}

impl WaitSession {
    /// Starts tracing (and sampling, for `--wall`); the error is one line.
    pub fn start(mode: Mode, scope: Scope, root: SysRoot) -> Result<WaitSession, String> {
        let target = Target {
            tgid: scope.pid,
            cgroup: scope.cgroup.as_ref().map(|(_, id, level)| (*id, *level)),
            no_stacks: false,
        };
        let tracer = OffCpuTracer::start(target).map_err(|e| e.to_string())?;
        let sampler = match mode {
            Mode::OffCpu => None,
            Mode::Wall(hz) => Some((Sampler::start(hz, &root).map_err(|e| e.to_string())?, hz)),
        };
        Ok(WaitSession {
            tracer,
            sampler,
            on_cpu: HashMap::new(),
            scope,
            in_scope: HashMap::new(),
            names: HashMap::new(),
            start: Instant::now(),
            namer: Namer::start(root.clone()),
            frames: Frames::new(),
            root,
        })
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Counts the CPU samples the rings hold now (naming their threads while they live).
    pub fn step(&mut self) {
        let Some((sampler, _)) = &mut self.sampler else {
            return;
        };
        let mut batch = Vec::new();
        sampler.drain(&mut batch);
        for s in batch {
            // As the tracer leaves them out: the idle task, tacho itself, and kernel threads
            // (a sample with no user frame: a user thread in a system call has its caller's).
            let own = s.pid == std::process::id();
            let kernel_thread = s.stack.iter().all(|&a| super::symbols::is_kernel(a));
            if s.pid == 0
                || own
                || kernel_thread
                || self.scope.pid.is_some_and(|p| p != s.pid)
                || !self.wanted(s.pid)
            {
                continue;
            }
            self.name(s.pid, s.pid);
            self.name(s.pid, s.tid);
            *self.on_cpu.entry((s.pid, s.tid, s.stack)).or_default() += 1;
        }
    }

    /// Whether process `pid` is in `--unit`'s cgroup (always, without `--unit`).
    fn wanted(&mut self, pid: u32) -> bool {
        let Some((path, _, _)) = &self.scope.cgroup else {
            return true;
        };
        let root = &self.root;
        *self.in_scope.entry(pid).or_insert_with(|| {
            let text = std::fs::read_to_string(root.proc.join(format!("{pid}/cgroup")))
                .unwrap_or_default();
            text.lines()
                .filter_map(|l| l.strip_prefix("0::"))
                .any(|p| p == path || p.starts_with(&format!("{path}/")))
        })
    }

    fn name(&mut self, pid: u32, tid: u32) {
        let root = &self.root;
        self.names.entry(tid).or_insert_with(|| {
            std::fs::read_to_string(root.proc.join(format!("{pid}/task/{tid}/comm")))
                .map(|c| c.trim_end_matches('\n').to_owned())
                .unwrap_or_else(|_| format!("pid {tid}"))
        });
    }

    /// The profile of everything so far; `None` when `stop` was raised while naming.
    pub fn profile(&mut self, stop: &AtomicBool) -> Option<WaitProfile> {
        let read = self.tracer.read();
        // The time the sums cover (naming below can take seconds).
        let seconds = self.elapsed().as_secs_f64();
        // Names of threads whose intervals are still open (the kernel names the others).
        for w in &read.waits {
            if w.thread.is_none() {
                self.name(w.tgid, w.tgid);
                self.name(w.tgid, w.tid);
            }
        }
        let mut stacks: super::sampler::Stacks = HashMap::new();
        for w in &read.waits {
            let mut all = w.kernel.clone();
            all.extend(&w.user);
            stacks.insert((w.tgid, all), 1);
        }
        for (pid, _, stack) in self.on_cpu.keys() {
            stacks.insert((*pid, stack.clone()), 1);
        }
        let naming = self.namer.name_new(&stacks, &mut self.frames, stop);
        if naming == Naming::Stopped {
            return None;
        }
        let mut resolver = Resolver::new(self.root.clone());
        let input = Input {
            waits: &read.waits,
            on_cpu: self.sampler.as_ref().map(|(_, hz)| (&self.on_cpu, *hz)),
            frames: &self.frames,
            names: &self.names,
            seconds,
            lost: (read.lost_waits, read.lost_stacks),
        };
        let mut p = waits::build(&input, &mut |pid, fd| resolver.target(pid, fd));
        if let Some((sampler, _)) = &self.sampler
            && sampler.lost > 0
        {
            p.notes.push(format!(
                "{} lost (the kernel's rings filled); lower --frequency",
                crate::units::plural(sampler.lost, "CPU sample")
            ));
        }
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
