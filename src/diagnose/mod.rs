//! Live diagnosis (`tacho top`), in data-flow order:
//!
//! 1. [`sample`]: raw cumulative counters of everything shown, read from `crate::kernel`
//!    (/proc, /sys) at one instant; nothing computed.
//! 2. [`model`]: rates and figures between two samples (`TopSample`, the `tacho.top.v1`
//!    object); no kernel reads, no history.
//! 3. [`findings`]: verdicts on a model, with the history a judgement needs (each device's
//!    recent await).
//!
//! Reporters (`crate::report::top`, `crate::report::prom::top`, `crate::tui`) and the future
//! history store take the judged sample; nothing here writes output.

pub mod findings;
pub mod model;
pub mod sample;
