//! Verdicts: what is wrong, in one line each, judged from one [`TopSample`] and the recent
//! history of each device (a parallel device's await is judged against its own baseline).
//!
//! Thresholds are constants with the reason beside them; they are deliberately few and
//! conservative, so that a finding is worth acting on.

mod conns;
mod disk;
mod dns;
mod limits;
mod net;
mod system;
mod waits;

use std::collections::{HashMap, VecDeque};

use crate::diagnose::model::TopSample;

pub use crate::diagnose::model::finding::{Code, Finding, Severity};

/// Samples of a device's await kept as its baseline (about a minute at 1 s intervals).
const BASELINE_SAMPLES: usize = 60;

/// Judges samples one after another, remembering each device's recent await.
#[derive(Debug, Default)]
pub struct Judge {
    await_history: HashMap<String, VecDeque<f64>>,
}

impl Judge {
    /// A judge with no history yet.
    pub fn new() -> Judge {
        Judge::default()
    }

    /// Fills `sample.findings` (most severe first) and `sample.verdict`.
    pub fn judge(&mut self, sample: &mut TopSample) {
        let mut findings = Vec::new();
        disk::saturation(sample, &self.await_history, &mut findings);
        disk::hot_disks(sample, &mut findings);
        disk::busy(sample, &mut findings);
        disk::blame(sample, &mut findings);
        system::cpu(sample, &mut findings);
        system::memory(sample, &mut findings);
        limits::throttling(sample, &mut findings);
        net::saturated(sample, &mut findings);
        net::errors(sample, &mut findings);
        dns::failures(sample, &mut findings);
        conns::retransmits(sample, &mut findings);
        // Last: a saturated disk or link found above explains its waiters.
        waits::waiting(sample, &mut findings);
        self.remember(sample);
        // Stable: equal severities keep the order above (disks, then CPU, then memory).
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        sample.verdict = match findings.first() {
            Some(f) => f.message.clone(),
            None => system::all_clear(sample),
        };
        sample.findings = findings;
    }

    fn remember(&mut self, sample: &TopSample) {
        for d in &sample.disks {
            if let Some((_, a)) = crate::diagnose::model::disk::worst_await(d) {
                let h = self.await_history.entry(d.device.name.clone()).or_default();
                if h.len() == BASELINE_SAMPLES {
                    h.pop_front();
                }
                h.push_back(a);
            }
        }
        self.await_history
            .retain(|name, _| sample.disks.iter().any(|d| &d.device.name == name));
    }
}

/// Whether any finding calls for action (exit code 1 in batch mode).
pub fn any_warning(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity >= Severity::Warning)
}

#[cfg(test)]
pub(crate) mod tests;
