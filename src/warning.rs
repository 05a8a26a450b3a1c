//! A reason to doubt a figure: the one vocabulary every measurement shares (the disk
//! benchmark's plans and honesty checks, the CPU and memory benchmarks, `tacho time`), so it
//! sits below all of them.

use serde::Serialize;

/// A reason to doubt a figure, with a stable code for scripts and a sentence for people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Warning {
    /// Stable identifier for scripts (`vm-detected`, `cow-fs`, `interrupted`).
    pub code: &'static str,
    /// What to doubt and what to do about it, in one or two sentences.
    pub message: String,
}
