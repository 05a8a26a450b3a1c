//! The bookkeeping every engine shares, whatever issues its I/O: the measuring window (ramp
//! then runtime), what was issued and what completed inside the window, CPU time from the
//! window's start, the stamp that makes each written buffer unique, and progress published
//! in batches. An engine only submits and reaps; it tells the meter what happened and when.

use super::buffer::AlignedBuf;
use super::spec::JobSpec;
use super::stats::{CpuTime, Measured};
use super::worker::{Control, Dir, Window};
use std::time::Instant;

/// Completions between two progress publications: an atomic add per I/O would cost more
/// than the I/O bookkeeping itself at hundreds of thousands of IOPS.
const PROGRESS_BATCH: u64 = 64;
/// ... or this long after the last one, so a slow device's progress (and a sustained test's
/// per-second rate, read from it) is not held back for seconds.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

pub(super) struct Meter<'a> {
    pub window: Window,
    measured: Measured,
    ctl: &'a Control,
    io_limit: Option<u64>,
    bs: u64,
    cpu_start: Option<CpuTime>,
    last_completion: Instant,
    stamp: u64,
    pending: (u64, u64),
    published: Instant,
}

impl<'a> Meter<'a> {
    /// Starts the window now; `stream` keeps this job's buffer stamps apart from the others'.
    pub fn start(spec: &JobSpec, stream: u64, ctl: &'a Control) -> Meter<'a> {
        let window = Window::starting_now(spec.ramp(), spec.runtime());
        Meter {
            last_completion: window.measure_from,
            window,
            measured: Measured::default(),
            ctl,
            io_limit: spec.io_limit(),
            bs: spec.bs(),
            cpu_start: None,
            stamp: stream << 48,
            pending: (0, 0),
            published: Instant::now(),
        }
    }

    /// Called before each round of submissions: starts the CPU clock once the window opens,
    /// and says whether the job is over (window closed, stopped, or its I/O limit reached).
    pub fn over(&mut self, now: Instant) -> bool {
        if self.cpu_start.is_none() && now >= self.window.measure_from {
            self.cpu_start = Some(CpuTime::of_this_thread());
        }
        now >= self.window.end || self.ctl.stopped() || self.ctl.ended() || self.limit_reached()
    }

    /// True when one more I/O would pass the job's I/O limit.
    pub fn limit_reached(&self) -> bool {
        self.measured.reached(self.io_limit, self.bs)
    }

    /// An I/O about to be issued: counted, and a write's buffer made unlike any before it, so
    /// deduplicating or compressing storage cannot flatter the result.
    pub fn issue(&mut self, dir: Dir, len: u64, buf: &mut AlignedBuf) {
        if dir == Dir::Write {
            self.stamp += 1;
            buf.scramble(self.stamp);
        }
        self.measured.issued(dir, len);
    }

    /// An I/O issued at `submitted` completed at `done`: its latency counts when it was
    /// submitted inside the window.
    pub fn completed(&mut self, dir: Dir, len: u64, submitted: Instant, done: Instant) {
        if submitted >= self.window.measure_from {
            let second = done
                .saturating_duration_since(self.window.measure_from)
                .as_secs() as usize;
            let ns = done.saturating_duration_since(submitted).as_nanos() as u64;
            self.measured.completed(dir, len, ns, second);
            self.last_completion = done;
        }
        self.pending.0 += 1;
        self.pending.1 += len;
        if self.pending.0 >= PROGRESS_BATCH
            || done.saturating_duration_since(self.published) >= PROGRESS_EVERY
        {
            self.published = done;
            self.publish();
        }
    }

    /// A flush that started at `started` returned at `done`.
    pub fn flushed(&mut self, started: Instant, done: Instant) {
        if started >= self.window.measure_from {
            let ns = done.saturating_duration_since(started).as_nanos() as u64;
            self.measured.sync.record(0, ns);
            self.last_completion = done;
        }
    }

    fn publish(&mut self) {
        self.ctl.progress(self.pending.0, self.pending.1);
        self.pending = (0, 0);
    }

    /// What the job measured: CPU time since the window opened, and the time from the window's
    /// start to the last completion inside it.
    pub fn finish(mut self) -> Measured {
        self.publish();
        if let Some(start) = self.cpu_start {
            self.measured.cpu = CpuTime::of_this_thread().since(start);
        }
        self.measured.elapsed = self
            .last_completion
            .saturating_duration_since(self.window.measure_from);
        self.measured
    }
}
