//! `tacho experiment`: resolve the change and the measure (bad input exits 2 before anything
//! changes), ask (or take `--yes`), run, report; `--recover`, and the restore every tacho start
//! does of journals a killed experiment left.

use super::interrupt::{self, EXIT_INTERRUPTED};
use super::output;
use super::record::RunSaver;
use super::runs::compared;
use crate::cli::ExperimentArgs;
use crate::experiment::command::{self, Commands};
use crate::experiment::{
    self, Observer, Plan, Rounds, journal, measure::Measure, report, runs, series,
};
use crate::kernel::SysRoot;
use crate::kernel::host::Host;
use crate::report::outfile;
use crate::text::Escaped;
use crate::tune::Change;
use anyhow::{Context, Result, bail};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// Rounds of each side always run when `--rounds` is not given (the "at least 5").
const DEFAULT_ROUNDS: u32 = 5;

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
        .map(|r| match r {
            Ok(s) | Err(s) => s.as_str(),
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
    let (plan, then) = resolve(args, root)?;
    // A store that cannot be used, or a page that cannot be written, stops the experiment
    // before anything changes.
    let saver = RunSaver::open(&args.save)?;
    if let Some(path) = &args.html {
        outfile::check(path, outfile::Existing::Replace)
            .with_context(|| format!("cannot write --html {}", path.display()))?;
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!(
                "experiment changes kernel settings; add --yes to allow it (stdin is not a \
                 terminal to ask on)"
            );
        }
        let what = std::iter::once(experiment::describe(&plan))
            .chain(then.iter().map(|c| c.describe()))
            .collect::<Vec<_>>()
            .join(", then ");
        let rounds = if plan.rounds.min == plan.rounds.max {
            plan.rounds.min.to_string()
        } else {
            format!("{} to {}", plan.rounds.min, plan.rounds.max)
        };
        eprint!(
            "apply {what} in turns with the current value ({rounds} rounds each), and revert it \
             at the end? [y/N] "
        );
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            bail!("not confirmed; nothing was changed");
        }
    }
    let host = serde_json::to_value(Host::read(&SysRoot::real()))?;
    let stop = interrupt::stop_flag()?;
    let mut out = std::io::stdout().lock();
    let sides = |o: &experiment::Outcome| {
        if o.stored.is_none() && !o.baseline.is_empty() && !args.save.no_save {
            eprintln!(
                "tacho: not saved as runs: the store has no column for {}; the JSON keeps \
                 the rounds",
                Escaped(o.figure.as_deref().unwrap_or("the figure"))
            );
        }
        runs::sides(o, &host, saver.label())
    };
    let (interrupted, pairs): (bool, Vec<_>) = if then.is_empty() {
        let outcome = experiment::run(&plan, &stop, &mut Stderr)?;
        if args.json {
            serde_json::to_writer_pretty(&mut out, &outcome)?;
        } else {
            report::text(&outcome, &mut out)?;
        }
        (outcome.interrupted, sides(&outcome).into_iter().collect())
    } else {
        let outcome = series::run(&plan, &then, &stop, &mut Stderr)?;
        if args.json {
            serde_json::to_writer_pretty(&mut out, &outcome)?;
        } else {
            report::series_text(&outcome, &mut out)?;
        }
        let pairs = outcome.steps.iter().filter_map(|s| sides(&s.outcome));
        (outcome.interrupted, pairs.collect())
    };
    if args.json {
        writeln!(out)?;
    }
    drop(out);
    let saved = saver.save_pairs(&pairs)?;
    if let Some(path) = &args.html {
        let Some(ids) = saved.first() else {
            bail!(
                "no report written to {}: no side was saved (see above)",
                path.display()
            );
        };
        let c = compared(&args.save.db, ids, |_| Ok(()))?;
        let titles: Vec<String> = c.runs.iter().map(|r| r.name()).collect();
        output::html(path, &c, &format!("tacho: {}", titles.join(" vs ")), &[])?;
    }
    Ok(if interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Checks everything before anything changes; each error is one line with the fix. Returns
/// the plan and the steps of a series after it (`--then`).
fn resolve(args: &ExperimentArgs, root: SysRoot) -> Result<(Plan, Vec<Change>)> {
    let commands = match (&args.change_cmd, &args.revert_cmd) {
        (Some(apply), Some(revert)) => {
            command::check("--change-cmd", apply)?;
            command::check("--revert-cmd", revert)?;
            Some(Commands {
                apply: apply.clone(),
                revert: revert.clone(),
            })
        }
        (None, None) => None,
        (Some(_), None) => bail!(
            "--change-cmd needs --revert-cmd: give the command that undoes it, which tacho \
             runs after each changed round and records for a recovery"
        ),
        (None, Some(_)) => bail!("--revert-cmd without --change-cmd: give the change too"),
    };
    let given = args
        .change
        .iter()
        .map(|c| Escaped(c).to_string())
        .chain(commands.iter().map(|_| "--change-cmd".to_string()))
        .collect::<Vec<_>>();
    match given.len() {
        0 => bail!(
            "nothing to try: give --change SETTING=VALUE (e.g. thp.enabled=never) or \
             --change-cmd APPLY --revert-cmd REVERT"
        ),
        1 => {}
        n if !args.together => bail!(
            "one change at a time: {n} changes given ({}); add --together to judge them as \
             one change, or run one experiment each",
            given.join(", ")
        ),
        _ => {}
    }
    let changes = args
        .change
        .iter()
        .map(|c| Change::parse(c))
        .collect::<Result<Vec<_>, _>>()?;
    let then = args
        .then
        .iter()
        .map(|c| Change::parse(c))
        .collect::<Result<Vec<_>, _>>()?;
    let all: Vec<&Change> = changes.iter().chain(&then).collect();
    for (i, c) in all.iter().enumerate() {
        if all[..i].iter().any(|d| d.setting == c.setting) {
            bail!(
                "{} is given twice; give each setting once (a series tries each setting in \
                 one step)",
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
    for c in &all {
        c.setting.read(&root)?;
    }
    let plan = Plan {
        changes,
        commands,
        measure,
        rounds: match args.rounds {
            Some(n) => Rounds::fixed(n),
            None => Rounds {
                min: DEFAULT_ROUNDS.min(args.max_rounds),
                max: args.max_rounds,
                precision_pct: Some(args.precision),
            },
        },
        root,
        exe: std::env::current_exe()?,
        journal_dir: journal::dir(),
    };
    Ok((plan, then))
}
