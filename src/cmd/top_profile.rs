//! `tacho top --batch --profile`: when a sample's verdict is about the CPU (saturated, system
//! time above user time, one CPU's softirqs, compaction stalls), a 2-second profile of every
//! CPU says which functions take the time. At most once a minute: a profile pauses sampling.

use crate::diagnose::model::TopSample;
use crate::diagnose::model::finding::Code;
use crate::kernel::SysRoot;
use crate::profile::quick::profile_for;
use crate::text::Escaped;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Verdicts a profile explains.
const CPU_CODES: [Code; 4] = [
    Code::CpuSaturated,
    Code::CpuSystemHigh,
    Code::SoftirqOneCpu,
    Code::CompactionStalls,
];
const PROFILE_TIME: Duration = Duration::from_secs(2);
const AT_MOST_EVERY: Duration = Duration::from_secs(60);
/// Functions printed under the verdict.
const SHOWN: usize = 5;

/// When the last profile was taken, and whether sampling was refused (said once).
#[derive(Default)]
pub struct OnCpuVerdict {
    last: Option<Instant>,
    refused: bool,
}

impl OnCpuVerdict {
    /// Profiles and prints after a sample with a CPU verdict, unless one was taken within the
    /// minute or sampling is refused; nothing is printed once `stop` is raised.
    pub fn after(
        &mut self,
        s: &TopSample,
        out: &mut impl Write,
        stop: &AtomicBool,
    ) -> anyhow::Result<()> {
        let Some(finding) = s.findings.iter().find(|f| CPU_CODES.contains(&f.code)) else {
            return Ok(());
        };
        if self.refused || self.last.is_some_and(|t| t.elapsed() < AT_MOST_EVERY) {
            return Ok(());
        }
        self.last = Some(Instant::now());
        match profile_for(PROFILE_TIME, 99, SysRoot::real(), stop) {
            Ok(None) => {}
            Ok(Some(p)) => {
                writeln!(
                    out,
                    "\nprofile of every CPU for 2 s ({}): {}",
                    finding.code,
                    Escaped(&p.verdict)
                )?;
                for f in p
                    .functions
                    .iter()
                    .filter(|f| f.self_samples > 0)
                    .take(SHOWN)
                {
                    writeln!(
                        out,
                        "  {:>5.1}%  {}  ({}, {})",
                        f.self_pct,
                        Escaped(&f.name),
                        Escaped(&f.process),
                        Escaped(&f.module)
                    )?;
                }
            }
            Err(e) => {
                self.refused = true;
                writeln!(out, "\nnote: no profile: {}", Escaped(&e.to_string()))?;
            }
        }
        Ok(())
    }
}
