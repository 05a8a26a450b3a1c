//! `tacho experiment`: change one thing, measure, put it back (SEEDS §4: change one thing at
//! a time, plan the rollback before changing anything, don't call noise a win).
//!
//! The order is fixed: read the current values, record them in the revert journal
//! ([`journal`]), apply the change once and read it back (a change that does not take is
//! named and nothing is measured), then a warm-up round that is discarded, then rounds in
//! turns, baseline and changed (A B A B …), each change read back when applied and when
//! reverted, and the revert at the end, on an error or on Ctrl-C, verified by reading back.
//! The journal is removed only once every value is back.

pub mod command;
pub mod journal;
pub mod measure;
pub mod report;
pub mod runs;
pub mod series;
pub mod verdict;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::check::cmds;
use crate::kernel::SysRoot;
use crate::text::Escaped;
use crate::tune::{Change, Saved, TuneError};
use command::{CommandError, Commands};
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
    /// `--change-cmd` and `--revert-cmd`: applied after the settings, reverted before them.
    pub commands: Option<Commands>,
    /// How each round is measured.
    pub measure: Measure,
    /// How many rounds of each side (baseline and changed).
    pub rounds: Rounds,
    /// Where the settings live.
    pub root: SysRoot,
    /// tacho itself, which runs the measuring commands.
    pub exe: PathBuf,
    /// The journal directory.
    pub journal_dir: PathBuf,
}

/// How many rounds of each side an experiment runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rounds {
    /// Rounds always run.
    pub min: u32,
    /// Rounds at most.
    pub max: u32,
    /// Past `min`, rounds are added until the effect's 95% interval is this many percent of
    /// the baseline either side. The rule looks at the interval's width only, never at the
    /// effect or its p-value: stopping at the first significant round would call noise a win
    /// far more often than 5% of the time.
    pub precision_pct: Option<f64>,
}

impl Rounds {
    /// Exactly `n` rounds a side (`--rounds`).
    pub fn fixed(n: u32) -> Rounds {
        Rounds {
            min: n,
            max: n,
            precision_pct: None,
        }
    }

    /// Whether `baseline` and `changed` (the same length) are enough.
    fn enough(&self, baseline: &[f64], changed: &[f64]) -> bool {
        let n = baseline.len() as u32;
        if n < self.min {
            return false;
        }
        if n >= self.max {
            return true;
        }
        self.precision_pct
            .is_none_or(|want| half_width_pct(baseline, changed).is_some_and(|w| w <= want))
    }
}

/// Half the width of the 95% interval of the difference of the means, in percent of the
/// baseline's mean; `None` without two rounds a side or a positive baseline.
fn half_width_pct(baseline: &[f64], changed: &[f64]) -> Option<f64> {
    let base = crate::stats::mean(baseline).filter(|m| *m > 0.0)?;
    let d = crate::stats::difference_of_means(baseline, changed)?;
    Some((d.ci95_high - d.ci95_low) / 2.0 / base * 100.0)
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
    /// `--change-cmd` or `--revert-cmd` failed.
    #[error(transparent)]
    Command(#[from] CommandError),
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
        revert: Box<ExperimentError>,
        /// The journal left in place.
        journal: PathBuf,
    },
}

/// The [`Changed::setting`] of a `--change-cmd`/`--revert-cmd` pair.
pub const COMMAND: &str = "change-cmd";

/// One changed setting in the report.
#[derive(Debug, Clone, Serialize)]
pub struct Changed {
    /// The setting's name; [`COMMAND`] for a `--change-cmd` pair.
    pub setting: String,
    /// Its value before (the baseline's); the `--revert-cmd` of a command pair.
    pub from: String,
    /// The value tried; the `--change-cmd` of a command pair.
    pub to: String,
    /// Restores `from` by hand (the journal does it by itself).
    pub revert_command: Option<String>,
    /// Makes `to` survive a reboot, if it is kept.
    pub persist_command: Option<String>,
}

impl Changed {
    /// One side for people: `thp.enabled=never`, or `change-cmd 'APPLY'` (`revert-cmd
    /// 'REVERT'` for the baseline).
    pub fn side(&self, changed: bool) -> String {
        let value = if changed { &self.to } else { &self.from };
        if self.setting == COMMAND {
            let what = if changed { "change-cmd" } else { "revert-cmd" };
            format!("{what} '{}'", Escaped(value))
        } else {
            format!("{}={value}", self.setting)
        }
    }
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
    /// Where the store keeps the figure, for the rounds saved as runs (not in the JSON: the
    /// runs are).
    #[serde(skip)]
    pub stored: Option<measure::Stored>,
    /// The rounds planned: at least, at most, and the precision that adds rounds between.
    pub rounds: Rounds,
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
    fn apply(&self) -> Result<(), ExperimentError> {
        for (c, s) in self.plan.changes.iter().zip(&self.saved) {
            c.setting.apply(&self.plan.root, &c.value, s)?;
        }
        if let Some(c) = &self.plan.commands {
            command::run("--change-cmd", &c.apply)?;
        }
        Ok(())
    }

    fn revert(&self) -> Result<(), ExperimentError> {
        // In the reverse order of applying, so settings that interact are unwound as wound.
        if let Some(c) = &self.plan.commands {
            command::run("--revert-cmd", &c.revert)?;
        }
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
    if let Some(c) = &plan.commands {
        changes.push(Changed {
            setting: COMMAND.into(),
            from: c.revert.clone(),
            to: c.apply.clone(),
            revert_command: Some(c.revert.clone()),
            persist_command: None,
        });
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
        plan.commands.as_ref().map(|c| c.revert.clone()),
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
        observer.line(&format!("  {}", Escaped(&how)));
    }
    let applied = Applied { plan, saved };
    let result = rounds(plan, &applied, stop, observer);
    let revert = applied.revert();
    let (baseline, changed, figure, interrupted) = settle(held, result, revert, "experiment")?;
    observer.line(&format!(
        "reverted: {} (read back)",
        changes
            .iter()
            .map(|c| if c.setting == COMMAND {
                format!("{} exited 0", c.side(false))
            } else {
                format!("{} back to {}", c.setting, c.from)
            })
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let higher = figure.as_ref().map(|f| f.higher_is_better);
    Ok(Outcome {
        schema: SCHEMA,
        effect: higher.and_then(|h| verdict::judge(&baseline, &changed, h)),
        changes,
        measure: plan.measure.describe(),
        stored: figure.as_ref().and_then(|f| f.stored),
        figure: figure.map(|f| f.name),
        higher_is_better: higher,
        rounds: plan.rounds,
        baseline,
        changed,
        reverted: true,
        interrupted,
    })
}

/// Ends an experiment (or a series, `what`) once its revert ran: the journal is removed when
/// everything is back, whether the rounds finished or failed; a failed revert keeps it for
/// `--recover` and says so, with what stopped the rounds.
fn settle<T>(
    held: journal::Held,
    result: Result<T, ExperimentError>,
    revert: Result<(), ExperimentError>,
    what: &str,
) -> Result<T, ExperimentError> {
    match (result, revert) {
        (result, Ok(())) => {
            held.remove()?;
            result
        }
        (result, Err(revert)) => Err(ExperimentError::RevertFailed {
            // A revert that failed in a round fails again at the end: named once.
            cause: match result {
                Ok(_) => format!("the {what} finished"),
                Err(e) if e.to_string() == revert.to_string() => format!("the {what} stopped"),
                Err(e) => e.to_string(),
            },
            revert: Box::new(revert),
            journal: held.path().to_path_buf(),
        }),
    }
}

type Measured = (Vec<f64>, Vec<f64>, Option<measure::Figure>, bool);

fn rounds(
    plan: &Plan,
    applied: &Applied,
    stop: &AtomicBool,
    observer: &mut dyn Observer,
) -> Result<Measured, ExperimentError> {
    let names = describe(plan);
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
    let planned = &plan.rounds;
    for round in 1.. {
        if planned.enough(&baseline, &changed) {
            break;
        }
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
        baseline.push(a.value);
        changed.push(b.value);
        // Past the rounds always run, the line says how wide the interval is against the
        // precision that adds rounds.
        let of = match (planned.precision_pct, round >= planned.min) {
            (Some(want), true) => format!(
                "{round} (of {}-{}; interval \u{b1}{}%, wanted \u{b1}{want}%)",
                planned.min,
                planned.max,
                half_width_pct(&baseline, &changed).map_or("-".into(), |w| format!("{w:.1}"))
            ),
            (Some(_), false) => format!("{round}/{}-{}", planned.min, planned.max),
            (None, _) => format!("{round}/{}", planned.max),
        };
        observer.line(&format!(
            "round {of}: baseline {} {}, changed {}",
            a.name,
            short(a.value),
            short(b.value)
        ));
        figure = Some(b);
    }
    Ok((baseline, changed, figure, stop.load(Ordering::Relaxed)))
}

/// The change for people: `thp.enabled=never + change-cmd '…'`.
pub fn describe(plan: &Plan) -> String {
    plan.changes
        .iter()
        .map(Change::describe)
        .chain(
            plan.commands
                .iter()
                .map(|c| format!("change-cmd '{}'", Escaped(&c.apply))),
        )
        .collect::<Vec<_>>()
        .join(" + ")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rounds_stop_at_their_number() {
        let r = Rounds::fixed(3);
        assert!(!r.enough(&[1.0, 2.0], &[1.0, 2.0]));
        assert!(r.enough(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]));
    }

    #[test]
    fn adaptive_rounds_stop_when_the_interval_is_narrow_or_at_the_most() {
        let r = Rounds {
            min: 3,
            max: 6,
            precision_pct: Some(5.0),
        };
        let steady = [100.0, 101.0, 99.0];
        assert!(!r.enough(&steady[..2], &steady[..2]), "fewer than min");
        assert!(r.enough(&steady, &[100.0, 100.5, 99.5]), "±1%: narrow");
        let wild = [100.0, 150.0, 60.0, 130.0, 70.0];
        assert!(!r.enough(&wild[..3], &wild[..3]), "wide: more rounds");
        assert!(!r.enough(&wild, &wild));
        let six = [100.0, 150.0, 60.0, 130.0, 70.0, 120.0];
        assert!(r.enough(&six, &six), "the most");
        // A baseline with no positive mean has no percentage: the most rounds run.
        assert!(!r.enough(&[0.0; 3], &[0.0; 3]));
    }

    /// Rounds added for a narrower interval must not turn noise into wins: the stop looks at
    /// the width only. 400 experiments of a change with no effect, 5% noise, 5 to 20 rounds
    /// until ±2%: at most one in 20 judged a win or a loss (the 19 of 20).
    #[test]
    fn adding_rounds_for_precision_does_not_call_noise_an_effect() {
        let mut rng = fastrand::Rng::with_seed(32);
        let mut noise = || {
            let (u1, u2) = (rng.f64().max(1e-12), rng.f64());
            100.0 * (1.0 + 0.05 * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos())
        };
        let r = Rounds {
            min: 5,
            max: 20,
            precision_pct: Some(2.0),
        };
        let (mut judged, mut longer) = (0, 0);
        for _ in 0..400 {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            while !r.enough(&a, &b) {
                a.push(noise());
                b.push(noise());
            }
            longer += usize::from(a.len() > 5);
            let e = verdict::judge(&a, &b, true).unwrap();
            judged += usize::from(e.verdict != verdict::Verdict::NoEffect);
        }
        assert!(
            longer > 200,
            "5% noise needs more than 5 rounds for ±2%: {longer}"
        );
        assert!(judged <= 20, "{judged} of 400 judged an effect");
    }
}
