//! `tacho experiment`: resolve the change and the measure (bad input exits 2 before anything
//! changes), ask (or take `--yes`), run, report; `--recover`, and the restore every tacho start
//! does of journals a killed experiment left.

use super::interrupt::{self, EXIT_INTERRUPTED};
use crate::cli::ExperimentArgs;
use crate::experiment::{self, Observer, Plan, journal, measure::Measure, report};
use crate::kernel::SysRoot;
use crate::text::Escaped;
use crate::tune::Change;
use anyhow::{Result, bail};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

struct Stderr;

impl Observer for Stderr {
    fn line(&mut self, text: &str) {
        let _ = writeln!(std::io::stderr(), "{text}");
    }
}

/// Every tacho start (but `experiment --recover`, which says more) restores what a killed
/// experiment left changed, with a note; nothing for anyone but root.
pub fn recover_at_start() {
    match experiment::recover(&SysRoot::real(), &journal::dir()) {
        Ok(restored) => {
            for r in restored {
                let _ = writeln!(std::io::stderr(), "tacho: note: {}", describe(&r));
            }
        }
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "tacho: note: experiment journals not restored: {e}"
            );
        }
    }
}

fn describe(r: &journal::Restored) -> String {
    let settings = r
        .settings
        .iter()
        .map(|(name, result)| match result {
            Ok(value) => format!("{name} back to {value}"),
            Err(e) => format!("{name} NOT restored ({e})"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "an interrupted experiment's changes were {}: {settings} (journal {}{})",
        if r.complete() {
            "reverted"
        } else {
            "not all reverted"
        },
        r.path.display(),
        if r.complete() { ", removed" } else { ", kept" }
    )
}

/// Runs `tacho experiment`.
pub fn run(args: &ExperimentArgs) -> Result<ExitCode> {
    let root = SysRoot::real();
    if args.recover {
        if !rustix::process::geteuid().is_root() {
            bail!("experiment --recover restores kernel settings: run it as root");
        }
        let restored = experiment::recover(&root, &journal::dir())?;
        if restored.is_empty() {
            println!("nothing to recover: no journal of a stopped experiment");
        }
        let mut complete = true;
        for r in &restored {
            println!("{}", describe(r));
            complete &= r.complete();
        }
        return Ok(if complete {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let plan = resolve(args, root)?;
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!(
                "experiment changes kernel settings; add --yes to allow it (stdin is not a \
                 terminal to ask on)"
            );
        }
        let what = plan
            .changes
            .iter()
            .map(Change::describe)
            .collect::<Vec<_>>()
            .join(" + ");
        eprint!(
            "apply {what} in turns with the current value ({} rounds each), and revert it at \
             the end? [y/N] ",
            plan.rounds
        );
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            bail!("not confirmed; nothing was changed");
        }
    }
    let stop = interrupt::stop_flag()?;
    let outcome = experiment::run(&plan, &stop, &mut Stderr)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &outcome)?;
        writeln!(out)?;
    } else {
        report::text(&outcome, &mut out)?;
    }
    Ok(if outcome.interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Checks everything before anything changes; each error is one line with the fix.
fn resolve(args: &ExperimentArgs, root: SysRoot) -> Result<Plan> {
    match args.change.len() {
        0 => bail!("nothing to try: give --change SETTING=VALUE (e.g. thp.enabled=never)"),
        1 => {}
        n if !args.together => bail!(
            "one change at a time: {n} --change given ({}); add --together to judge them as one \
             change, or run one experiment each",
            args.change
                .iter()
                .map(|c| Escaped(c).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => {}
    }
    let changes = args
        .change
        .iter()
        .map(|c| Change::parse(c))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, c) in changes.iter().enumerate() {
        if changes[..i].iter().any(|d| d.setting == c.setting) {
            bail!(
                "{} is given twice; give each setting once",
                c.setting.name()
            );
        }
    }
    let Some(measure) = &args.measure else {
        bail!(
            "nothing measures the change: give --measure 'bench disk|cpu|mem …', 'time CMD' or \
             top with --workload CMD"
        );
    };
    let measure = Measure::parse(measure, args.workload.as_deref(), args.figure.as_deref())
        .map_err(anyhow::Error::msg)?;
    if !rustix::process::geteuid().is_root() {
        bail!("experiment changes kernel settings: run it as root");
    }
    // Every setting must exist here before anything changes.
    for c in &changes {
        c.setting.read(&root)?;
    }
    Ok(Plan {
        changes,
        measure,
        rounds: args.rounds,
        root,
        exe: std::env::current_exe()?,
        journal_dir: journal::dir(),
    })
}
