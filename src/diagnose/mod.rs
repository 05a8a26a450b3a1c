//! Live diagnosis (`tacho top`), in data-flow order:
//!
//! 1. [`sample`]: raw cumulative counters of everything shown, read from `crate::kernel`
//!    (/proc, /sys) at one instant; nothing computed.
//! 2. [`model`]: rates and figures between two samples (`TopSample`, the `tacho.top.v3`
//!    object); no kernel reads, no history.
//!    It also attributes use to processes and services (`model::culprits`: who drove each
//!    device, the CPUs, memory growth; exact from kernel per-cgroup counters, else likely
//!    from open files) and keeps totals since a start (`model::accumulate`).
//! 3. [`findings`]: verdicts on a model, with the history a judgement needs (each device's
//!    recent await); each verdict names its culprits.
//!
//! 4. [`live`]: the loop that runs 1–3 on a schedule and hands each judged interval on; the
//!    history replays recorded samples through its same step.
//!
//! Reporters (`crate::report::top`, `crate::report::prom::top`, `crate::tui`) take the judged
//! sample, `crate::history` stores the raw ones; nothing here writes output.

pub mod findings;
pub mod live;
pub mod model;
pub mod sample;
