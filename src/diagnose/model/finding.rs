//! The shape of a verdict on a [`TopSample`](super::TopSample): the sample carries its findings
//! (the `tacho.top.v2` object has them), while `crate::diagnose::findings` decides them. Kept here so
//! the model does not depend on the stage that judges it.

use serde::Serialize;

/// How much a live finding matters; ordered, so the worst sorts last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; nothing is wrong yet.
    Info,
    /// Likely costing performance now.
    Warning,
    /// Costing a lot now; act first.
    #[allow(
        dead_code,
        reason = "no live finding is critical yet; the screen and JSON already show one"
    )]
    Critical,
}

/// One thing that stands out in an interval, with the sentence that says it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable identifier for scripts (`disk_saturated`, `hot_disk`, …).
    pub code: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// What it is about: a device, a CPU, `memory`, `io`.
    pub subject: String,
    /// The sentence an admin reads.
    pub message: String,
    /// Who is responsible, most first (empty when the verdict is about no process).
    pub culprits: Vec<super::culprits::Culprit>,
}

impl Finding {
    /// A warning about `subject` that names no process (culprits are added by the model).
    pub fn warning(code: &'static str, subject: impl Into<String>, message: String) -> Finding {
        Finding {
            code,
            severity: Severity::Warning,
            subject: subject.into(),
            message,
            culprits: Vec::new(),
        }
    }
}
