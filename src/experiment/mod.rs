//! `tacho experiment`: change one thing, measure, put it back (SEEDS §4: change one thing at
//! a time, plan the rollback before changing anything, don't call noise a win).
//!
//! The order is fixed: read the current values, record them in the revert journal
//! ([`journal`]), apply the change once and read it back (a change that does not take is
//! named and nothing is measured), then a warm-up round that is discarded, then rounds in
//! turns, baseline and changed (A B A B …), each change read back when applied and when
//! reverted, and the revert at the end, on an error or on Ctrl-C, verified by reading back.
//! The journal is removed only once every value is back.

pub mod journal;
pub mod measure;
pub mod report;
pub mod verdict;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::check::cmds;
use crate::kernel::SysRoot;
use crate::tune::{Change, Saved, TuneError};
use journal::{Dir, Entry, JournalError, Record};
use measure::{Measure, MeasureError};
use verdict::Effect;

/// The `schema` of `tacho experiment --json`.
pub const SCHEMA: &str = "tacho.experiment.v1";

/// What to run, resolved by `cmd::experiment`.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The change (several only with `--together`, then judged as one).
    pub changes: Vec<Change>,
    /// How each round is measured.
    pub measure: Measure,
    /// Rounds of each side (baseline and changed).
    pub rounds: u32,
    /// Where the settings live.
    pub root: SysRoot,
    /// tacho itself, which runs the measuring commands.
    pub exe: PathBuf,
    /// The journal directory.
    pub journal_dir: PathBuf,
}

/// Why an experiment stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A setting could not be read, applied or reverted.
    #[error(transparent)]
    Tune(#[from] TuneError),
    /// The journal could not be written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A round could not be measured.
    #[error(transparent)]
    Measure(#[from] MeasureError),
    /// The setting already has the value: there is nothing to compare.
    #[error("{0} already; there is nothing to compare (change it to another value)")]
    Already(String),
    /// Reverting failed: what is left changed, and where the journal is.
    #[error(
        "{cause}; the revert failed too ({revert}): the journal {} keeps the values, run \
         `tacho experiment --recover`",
        journal.display()
    )]
    RevertFailed {
        /// What stopped the experiment (or "finished").
        cause: String,
        /// Why the revert failed.
        revert: Box<TuneError>,
        /// The journal left in place.
        journal: PathBuf,
    },
}

/// One changed setting in the report.
#[derive(Debug, Clone, Serialize)]
pub struct Changed {
    /// The setting's name.
    pub setting: String,
    /// Its value before (the baseline's).
    pub from: String,
    /// The value tried.
    pub to: String,
    /// Restores `from` by hand (the journal does it by itself).
    pub revert_command: Option<String>,
    /// Makes `to` survive a reboot, if it is kept.
    pub persist_command: Option<String>,
}

/// The result.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The settings changed, together.
    pub changes: Vec<Changed>,
    /// The measure as given.
    pub measure: String,
    /// What each round's figure is; `None` when no round finished.
    pub figure: Option<String>,
    /// True for throughput, false for times and CPU use; `None` when no round finished.
    pub higher_is_better: Option<bool>,
    /// The baseline's rounds, in order (the warm-up left out).
    pub baseline: Vec<f64>,
    /// The changed rounds, in order.
    pub changed: Vec<f64>,
    /// The effect with its significance; `None` when fewer than two rounds finished.
    pub effect: Option<Effect>,
    /// Every setting is back at its value before, read back.
    pub reverted: bool,
    /// Stopped by a signal before all rounds ran.
    pub interrupted: bool,
}

/// Progress for people, one line at a time (stderr); also the revert commands before any
/// change.
pub trait Observer {
    /// One line.
    fn line(&mut self, text: &str);
}

struct Applied<'a> {
    plan: &'a Plan,
    saved: Vec<Saved>,
}

impl Applied<'_> {
    fn apply(&self) -> Result<(), TuneError> {
        for (c, s) in self.plan.changes.iter().zip(&self.saved) {
            c.setting.apply(&self.plan.root, &c.value, s)?;
        }
        Ok(())
    }

    fn revert(&self) -> Result<(), TuneError> {
        // In the reverse order of applying, so settings that interact are unwound as wound.
        for (c, s) in self.plan.changes.iter().zip(&self.saved).rev() {
            c.setting.restore(&self.plan.root, s)?;
        }
        Ok(())
    }
}

/// Runs the experiment; `stop` is set by Ctrl-C or SIGTERM.
pub fn run(
    plan: &Plan,
    stop: &AtomicBool,
    observer: &mut dyn Observer,
) -> Result<Outcome, ExperimentError> {
    let mut saved = Vec::new();
    let mut changes = Vec::new();
    for c in &plan.changes {
        let s = c.setting.read(&plan.root)?;
        let from = c.setting.current(&s);
        if from == c.value {
            return Err(ExperimentError::Already(format!(
                "{} is {from}",
                c.setting.name()
            )));
        }
        let remedy = cmds::setting(&c.setting, &c.value, &from);
        let revert = cmds::setting(&c.setting, &from, &c.value).fix;
        changes.push(Changed {
            setting: c.setting.name(),
            from,
            to: c.value.clone(),
            revert_command: revert,
            persist_command: remedy.persist,
        });
        saved.push(s);
    }
    // The rollback is planned before anything changes: the values in the journal, the
    // commands on the screen.
    let dir = Dir::open(&plan.journal_dir, true)?.ok_or_else(|| {
        JournalError::Invalid(plan.journal_dir.clone(), "could not be made".into())
    })?;
    let record = Record::new(
        plan.changes
            .iter()
            .zip(&saved)
            .map(|(c, s)| Entry {
                setting: c.setting.name(),
                saved: s.clone(),
            })
            .collect(),
    );
    let held = dir.write(&record)?;
    observer.line(&format!(
        "journal {} records the values before; to revert by hand:",
        held.path().display()
    ));
    for c in &changes {
        let how = c
            .revert_command
            .clone()
            .unwrap_or_else(|| format!("set {} back to {}", c.setting, c.from));
        observer.line(&format!("  {how}"));
    }
    let applied = Applied { plan, saved };
    let result = rounds(plan, &applied, stop, observer);
    let revert = applied.revert();
    let journal = held.path().to_path_buf();
    match (result, revert) {
        (Ok((baseline, changed, figure, interrupted)), Ok(())) => {
            held.remove()?;
            observer.line(&format!(
                "reverted: {} (read back)",
                changes
                    .iter()
                    .map(|c| format!("{} back to {}", c.setting, c.from))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            let higher = figure.as_ref().map(|f| f.higher_is_better);
            Ok(Outcome {
                schema: SCHEMA,
                effect: higher.and_then(|h| verdict::judge(&baseline, &changed, h)),
                changes,
                measure: plan.measure.describe(),
                figure: figure.map(|f| f.name),
                higher_is_better: higher,
                baseline,
                changed,
                reverted: true,
                interrupted,
            })
        }
        (Err(e), Ok(())) => {
            held.remove()?;
            Err(e)
        }
        (result, Err(revert)) => Err(ExperimentError::RevertFailed {
            cause: result
                .err()
                .map_or("the experiment finished".into(), |e| e.to_string()),
            revert: Box::new(revert),
            journal,
        }),
    }
}

type Rounds = (Vec<f64>, Vec<f64>, Option<measure::Figure>, bool);

fn rounds(
    plan: &Plan,
    applied: &Applied,
    stop: &AtomicBool,
    observer: &mut dyn Observer,
) -> Result<Rounds, ExperimentError> {
    let names = plan
        .changes
        .iter()
        .map(Change::describe)
        .collect::<Vec<_>>()
        .join(" + ");
    let (mut baseline, mut changed, mut figure) = (Vec::new(), Vec::new(), None);
    // Ctrl-C reaches the measuring child too: its failure then is the interruption.
    let measure = || match plan.measure.run(&plan.exe, &plan.root) {
        Err(_) if stop.load(Ordering::Relaxed) => Ok(None),
        r => r.map(Some),
    };
    // A change that does not take is found before anything is measured.
    applied.apply()?;
    applied.revert()?;
    observer.line(&format!(
        "{names}: applies and reads back; warm-up round (discarded)"
    ));
    if measure()?.is_none() {
        return Ok((baseline, changed, figure, true));
    }
    for round in 1..=plan.rounds {
        if stop.load(Ordering::Relaxed) {
            return Ok((baseline, changed, figure, true));
        }
        let Some(a) = measure()? else {
            return Ok((baseline, changed, figure, true));
        };
        applied.apply()?;
        let b = measure();
        applied.revert()?;
        let Some(b) = b? else {
            return Ok((baseline, changed, figure, true));
        };
        observer.line(&format!(
            "round {round}/{}: baseline {} {}, changed {}",
            plan.rounds,
            a.name,
            short(a.value),
            short(b.value)
        ));
        baseline.push(a.value);
        changed.push(b.value);
        figure = Some(b);
    }
    Ok((baseline, changed, figure, stop.load(Ordering::Relaxed)))
}

/// A figure with four significant digits.
pub fn short(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

/// Restores every journal no running experiment holds; `Ok(empty)` when there is no journal
/// directory. Only root applies settings, so for anyone else there is nothing to do.
pub fn recover(root: &SysRoot, dir: &Path) -> Result<Vec<journal::Restored>, JournalError> {
    if !rustix::process::geteuid().is_root() {
        return Ok(Vec::new());
    }
    let Some(dir) = Dir::open(dir, false)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for stale in dir.stale()? {
        out.push(journal::restore(root, stale?));
    }
    Ok(out)
}
