//! The host's own figures beside every `tacho top --listen` sample: the latest stored
//! benchmark of each suite this host ran (from the results store `TACHO_DB` or the default
//! file names), the `tacho check` verdicts and the THP mode. Gathered at most once a minute:
//! they change when someone benchmarks or tunes, not between samples.

use crate::check::{self, Options};
use crate::kernel::SysRoot;
use crate::report::prom::host::{HostFigures, render};
use crate::store::{ListText, Place, Results, RunKind, RunStatus, StoredRun};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long gathered figures are served before they are gathered again.
const REFRESH: Duration = Duration::from_secs(60);

/// Tests of one stored run exported: the text is kept and copied into every scrape, so a run
/// of 200,000 tests (imported under this host's name) would make each answer hundreds of MB.
/// A real suite has tens.
const TESTS_PER_RUN: usize = 1_000;

/// The cached text and when it was made.
#[derive(Default)]
pub struct HostMetrics {
    made: Option<Instant>,
    text: String,
    /// Why the store could not be read, said once on stderr.
    warned: bool,
}

impl HostMetrics {
    /// The text to append to a sample's, gathered again when older than a minute.
    pub fn text(&mut self) -> String {
        if self.made.is_none_or(|t| t.elapsed() >= REFRESH) {
            self.text = self.gather();
            self.made = Some(Instant::now());
        }
        self.text.clone()
    }

    fn gather(&mut self) -> String {
        let (facts, findings) = check::check(&SysRoot::real(), Options::default());
        let runs = match latest_runs(facts.host.hostname.as_deref()) {
            Ok(runs) => runs,
            Err(e) => {
                if !self.warned {
                    eprintln!(
                        "note: /metrics leaves out stored benchmarks: {}",
                        crate::text::Escaped(&format!("{e:#}"))
                    );
                    self.warned = true;
                }
                Vec::new()
            }
        };
        render(&HostFigures {
            runs: &runs,
            findings: &findings,
            thp_enabled: facts.tunables.thp_enabled.as_deref(),
        })
    }
}

/// The latest finished disk, cpu and mem run of each suite saved by this host, each with at
/// most [`TESTS_PER_RUN`] tests.
fn latest_runs(host: Option<&str>) -> anyhow::Result<Vec<StoredRun>> {
    let Some(host) = host else {
        return Ok(Vec::new());
    };
    let Some(mut store) = Results::open_existing(&Place::resolve(None)?, &SysRoot::real())? else {
        return Ok(Vec::new());
    };
    let mut latest: BTreeMap<(&str, Option<String>), i64> = BTreeMap::new();
    // Row by row, labels and targets cut as read: only kinds, suites and ids are kept.
    store.list_each(ListText::Cut(0), |r| {
        let wanted = matches!(r.kind, RunKind::Disk | RunKind::Cpu | RunKind::Mem)
            && r.status == RunStatus::Finished
            && r.hostname.as_deref() == Some(host);
        if wanted {
            // Listed oldest first: the last one of each suite stays.
            latest.insert(
                (r.kind.as_str(), r.suite.as_deref().map(str::to_owned)),
                r.id,
            );
        }
        Ok(())
    })?;
    latest
        .into_values()
        .map(|id| store.load_summary(id, TESTS_PER_RUN))
        .collect()
}
