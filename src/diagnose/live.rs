//! The live pipeline, written once: sample on a fixed schedule → `model::between` → totals
//! (`model::accumulate`) → `findings::Judge`, each finished interval handed to whoever shows
//! or stores it — batch text, JSON lines, the screen (on its own thread, through a [`Feed`]),
//! `/metrics`, the latency verdict. The history uses the same [`Pipeline::step`] over
//! recorded samples (`tacho top --replay` and `--from`), and `tacho record` the same schedule
//! ([`Session::samples`]) for the raw samples it stores.
//!
//! Nothing here writes output: what to say about a skipped sample is the caller's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::diagnose::findings::Judge;
use crate::diagnose::model::accumulate::Accumulator;
use crate::diagnose::model::conns::Conns;
use crate::diagnose::model::{self, ModelOptions, SortKey, TopSample};
use crate::diagnose::sample::devices::Devices;
use crate::diagnose::sample::{Sample, Sampler};
use crate::kernel::KernelError;

/// Where an interval's TCP traffic comes from.
#[derive(Debug, Clone, Copy)]
pub enum Connections<'a> {
    /// From the two samples' connections (live).
    Sampled,
    /// As the recorder kept it in place of the raw connections (replay); `None` when that
    /// record kept none.
    Recorded(Option<&'a Conns>),
}

/// The state an interval is judged with: each device's recent await (the judge's baseline)
/// and, in accumulated mode, the totals since it was switched on.
#[derive(Debug, Default)]
pub struct Pipeline {
    judge: Judge,
    accumulator: Option<Accumulator>,
}

impl Pipeline {
    /// A pipeline with no history; `accumulate` starts totals with the first interval.
    pub fn new(accumulate: bool) -> Pipeline {
        Pipeline {
            judge: Judge::new(),
            accumulator: accumulate.then(Accumulator::new),
        }
    }

    /// Switches accumulated mode on (totals start afresh) or off.
    pub fn accumulate(&mut self, on: bool) {
        self.accumulator = on.then(Accumulator::new);
    }

    /// Forgets the baselines: after a gap in a recording, counters and awaits start over.
    pub fn forget(&mut self) {
        self.judge = Judge::new();
    }

    /// The one place an interval is made: rates and culprits from `a` to `b`, the totals,
    /// then the findings and the verdict.
    pub fn step(
        &mut self,
        (a, b): (&Sample, &Sample),
        devices: &Devices,
        opts: &ModelOptions,
        connections: Connections<'_>,
    ) -> TopSample {
        let mut s = model::between(a, b, devices, opts);
        if let Connections::Recorded(kept) = connections {
            s.connections = kept.cloned();
        }
        if let Some(acc) = &mut self.accumulator {
            acc.apply(a, b, opts, &mut s);
        }
        self.judge.judge(&mut s);
        s
    }
}

/// A moment of the schedule.
pub enum Tick<'a> {
    /// A finished interval, judged.
    Interval(&'a TopSample),
    /// This moment's sample could not be taken for want of file descriptors (clients of
    /// `--listen` can hold many); the next moment tries again.
    Skipped(&'a KernelError),
}

/// A change the screen asks of a running [`Feed`], applied from the next interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Keep the top processes by this key.
    Sort(SortKey),
    /// Accumulated mode on (totals start afresh) or off.
    Accumulate(bool),
}

/// Live sampling: a sampler, the model's options and a schedule.
pub struct Session {
    sampler: Sampler,
    opts: ModelOptions,
    pipeline: Pipeline,
    every: Duration,
    /// Intervals to run, `None` until stopped.
    count: Option<u64>,
}

impl Session {
    /// A session of `count` intervals (`None`: until stopped) of `every`.
    pub fn new(
        sampler: Sampler,
        opts: ModelOptions,
        every: Duration,
        count: Option<u64>,
        accumulate: bool,
    ) -> Session {
        Session {
            sampler,
            opts,
            pipeline: Pipeline::new(accumulate),
            every,
            count,
        }
    }

    /// The loop itself, raw: takes a sample at once and then one every interval after the
    /// start (a fixed schedule: a slow sample does not shift the next), until `samples`
    /// moments have passed or `stop` is set. Each sample goes to `on_sample` with the
    /// devices known when it was taken; a moment short of descriptors goes as `Err`.
    pub fn samples(
        sampler: &mut Sampler,
        every: Duration,
        samples: Option<u64>,
        stop: &AtomicBool,
        mut on_sample: impl FnMut(Result<Sample, &KernelError>, &Devices) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let start = Instant::now();
        let mut n: u64 = 0;
        while samples.is_none_or(|max| n < max) {
            let due = start + every.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX));
            if !sleep_until(due, stop) {
                break;
            }
            match sampler.sample() {
                Ok(sample) => on_sample(Ok(sample), sampler.devices())?,
                Err(e) if out_of_descriptors(&e) => on_sample(Err(&e), sampler.devices())?,
                Err(e) => return Err(e.into()),
            }
            n += 1;
        }
        Ok(())
    }

    /// Runs the pipeline until the intervals are done or `stop` is set, handing each tick to
    /// `on_tick`.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        on_tick: impl FnMut(Tick<'_>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.run_with(stop, |_, _| {}, on_tick)
    }

    /// [`Session::run`] on a thread of its own, for the screen: intervals arrive on the
    /// feed while the screen answers keys; the thread stops when the feed is dropped.
    pub fn spawn(self) -> Feed {
        let (intervals, received) = mpsc::channel();
        let (control, controls) = mpsc::channel::<Control>();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut session = self;
            let result = session.run_with(
                &stopped,
                |pipeline, opts| {
                    for c in controls.try_iter() {
                        match c {
                            Control::Sort(sort) => opts.sort = sort,
                            Control::Accumulate(on) => pipeline.accumulate(on),
                        }
                    }
                },
                |tick| {
                    if let Tick::Interval(s) = tick {
                        // The screen has gone: nothing more to do.
                        intervals
                            .send(Ok(Box::new(s.clone())))
                            .map_err(|_| anyhow::anyhow!("the screen has closed"))?;
                    }
                    Ok(())
                },
            );
            if let Err(e) = result
                && !stopped.load(Ordering::Relaxed)
            {
                let _ = intervals.send(Err(e));
            }
        });
        Feed {
            intervals: received,
            control,
            stop,
            thread: Some(thread),
        }
    }

    /// The loop, with `before` applied to the pipeline and options before each interval.
    fn run_with(
        &mut self,
        stop: &AtomicBool,
        mut before: impl FnMut(&mut Pipeline, &mut ModelOptions),
        mut on_tick: impl FnMut(Tick<'_>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let Session {
            sampler,
            opts,
            pipeline,
            every,
            count,
        } = self;
        let mut prev: Option<Sample> = None;
        // The first sample is the baseline: `count` intervals need one more.
        let samples = count.map(|c| c.saturating_add(1));
        Session::samples(sampler, *every, samples, stop, |sample, devices| {
            let cur = match sample {
                Ok(cur) => cur,
                Err(e) => return on_tick(Tick::Skipped(e)),
            };
            if let Some(a) = prev.take() {
                before(pipeline, opts);
                let s = pipeline.step((&a, &cur), devices, opts, Connections::Sampled);
                on_tick(Tick::Interval(&s))?;
            }
            prev = Some(cur);
            Ok(())
        })
    }
}

/// Intervals of a session running on its own thread ([`Session::spawn`]).
pub struct Feed {
    /// Each finished interval, or the error that ended the session; closed when the
    /// session has run its intervals.
    pub intervals: Receiver<anyhow::Result<Box<TopSample>>>,
    control: Sender<Control>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Feed {
    /// Applies `c` from the next interval on.
    pub fn control(&self, c: Control) {
        // A session that has ended takes no more changes; nothing is lost.
        let _ = self.control.send(c);
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // A panic there has already been printed; the screen is being closed anyway.
            let _ = t.join();
        }
    }
}

/// Whether `e` is the process or the system running out of file descriptors.
fn out_of_descriptors(e: &KernelError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(io.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
        {
            return true;
        }
        source = err.source();
    }
    false
}

/// Sleeps until `due` in short steps so Ctrl-C or a signal is honoured promptly; false when
/// stopped.
pub fn sleep_until(due: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::SysRoot;

    const FIX: &str = "tests/fixtures/top/firecracker";

    fn session(count: Option<u64>) -> Session {
        let root = SysRoot::new(format!("{FIX}/a/proc"), format!("{FIX}/sys"));
        let sampler = Sampler::new(root).unwrap();
        let opts = ModelOptions::for_this_host(5, SortKey::Io, sampler.delayacct);
        Session::new(sampler, opts, Duration::from_millis(1), count, false)
    }

    #[test]
    fn a_session_hands_on_count_intervals_then_ends() {
        let mut n = 0;
        session(Some(3))
            .run(&AtomicBool::new(false), |tick| {
                assert!(matches!(tick, Tick::Interval(s) if !s.verdict.is_empty()));
                n += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(n, 3);
    }

    #[test]
    fn a_stopped_session_takes_no_sample() {
        let mut n = 0;
        session(None)
            .run(&AtomicBool::new(true), |_| {
                n += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn a_feed_delivers_its_intervals_and_closes() {
        let feed = session(Some(2)).spawn();
        let got: Vec<_> = feed.intervals.iter().collect();
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|s| s.is_ok()));
    }

    /// Two samples of the fixture, its devices and the options to model them with.
    fn pair() -> (Sample, Sample, Devices, ModelOptions) {
        let root = SysRoot::new(format!("{FIX}/a/proc"), format!("{FIX}/sys"));
        let mut sampler = Sampler::new(root).unwrap();
        let opts = ModelOptions::for_this_host(5, SortKey::Io, None);
        let a = sampler.sample().unwrap();
        let b = sampler.sample().unwrap();
        (a, b, sampler.devices().clone(), opts)
    }

    #[test]
    fn totals_start_when_accumulation_is_switched_on_and_stop_when_off() {
        let (a, b, devices, opts) = pair();
        let mut p = Pipeline::new(false);
        let step = |p: &mut Pipeline| p.step((&a, &b), &devices, &opts, Connections::Sampled);
        assert!(step(&mut p).accumulated.is_none());
        p.accumulate(true);
        assert!(step(&mut p).accumulated.is_some());
        p.accumulate(false);
        assert!(step(&mut p).accumulated.is_none());
    }

    #[test]
    fn recorded_connections_replace_the_sampled_ones() {
        let (a, b, devices, opts) = pair();
        let kept = Conns::default();
        let mut p = Pipeline::new(false);
        let s = p.step(
            (&a, &b),
            &devices,
            &opts,
            Connections::Recorded(Some(&kept)),
        );
        assert_eq!(s.connections, Some(kept));
        let s = p.step((&a, &b), &devices, &opts, Connections::Recorded(None));
        assert_eq!(s.connections, None);
    }
}
